package loadtest

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"
)

// meta2026 is the _meta every 2026-07-28 request of mcpload carries,
// spelt out here so that a change to it shows.
const meta2026 = `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"mcpload","version":"1"}}`

func TestModernParams(t *testing.T) {
	for tpl, want := range map[string]string{
		"":                            `{"_meta":` + meta2026 + `}`,
		"{}":                          `{"_meta":` + meta2026 + `}`,
		" { } ":                       `{"_meta":` + meta2026 + `}`,
		`{"uri":"mem://hello"}`:       `{"_meta":` + meta2026 + `,"uri":"mem://hello"}`,
		`{ "a":{{a}},"b":{{b}} }`:     `{"_meta":` + meta2026 + `,"a":{{a}},"b":{{b}} }`,
		`{"name":"x","arguments":{}}`: `{"_meta":` + meta2026 + `,"name":"x","arguments":{}}`,
	} {
		got, err := modernParams(tpl)
		require.NoError(t, err, tpl)
		assert.Equal(t, want, got, tpl)
	}
	_, err := modernParams(`[1]`)
	assert.ErrorIs(t, err, ErrConfig)
}

func TestModernizeRefuses(t *testing.T) {
	for _, steps := range [][]Step{
		{{Name: "ping", Method: "ping", Weight: 1}},
		{{Name: "init", Method: "initialize", Weight: 1}},
		{{Name: "sub", Method: "resources/subscribe", Params: `{"uri":"a"}`, Weight: 1}},
		{{Name: "own meta", Method: "tools/call", Params: `{"_meta":{"progressToken":1},"name":"echo"}`, Weight: 1}},
	} {
		m, err := newMix(steps)
		require.NoError(t, err)
		assert.ErrorIs(t, m.modernize(), ErrConfig, steps[0].Name)
	}
	_, err := Run(context.Background(), Config{Target: Target{Transport: "tcp", Addr: "127.0.0.1:1"}, Protocol: "2099-01-01"})
	assert.ErrorIs(t, err, ErrConfig)
	_, err = Run(context.Background(), Config{Target: Target{Transport: "tcp", Addr: "127.0.0.1:1"}, Protocol: ProtocolStateless, Client: true})
	assert.ErrorIs(t, err, ErrConfig, "the client library speaks the session revision")
}

// TestPipelineModernFrame pins the bytes of a 2026-07-28 request as the
// pipelined driver writes it.
func TestPipelineModernFrame(t *testing.T) {
	pb := newPipeBench(t, 1, ProtocolStateless)
	v := &pb.c.slots[0].vars
	want := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":` + meta2026 +
		`,"name":"echo","arguments":{"text":"mcpload ` + string(v.word[:]) + ` 1"}}}` + "\n"
	assert.Equal(t, want, string(pb.c.w.out))

	// The session revision's frame is what it was.
	pb = newPipeBench(t, 1, ProtocolSession)
	v = &pb.c.slots[0].vars
	assert.Equal(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"mcpload `+string(v.word[:])+` 1"}}}`+"\n", string(pb.c.w.out))
}

func TestMcpName(t *testing.T) {
	for _, tc := range []struct {
		method, params, want string
		ok                   bool
	}{
		{"tools/call", `{"_meta":{"name":"no"},"name":"echo","arguments":{"name":"no"}}`, "echo", true},
		{"prompts/get", `{"name":"greet","arguments":{"name":"x"}}`, "greet", true},
		{"resources/read", `{"uri":"mem://hello"}`, "mem://hello", true},
		{"tools/call", `{"name":"caf\u00e9"}`, "=?base64?Y2Fmw6k=?=", true},
		{"tools/call", `{"name":"a\"b"}`, `a"b`, true},
		{"tools/call", `{"name":" pad"}`, "=?base64?IHBhZA==?=", true},
		{"tools/call", `{"name":"=?base64?x?="}`, "=?base64?PT9iYXNlNjQ/eD89?=", true},
		{"tools/list", `{"cursor":"x"}`, "", false},
		{"tools/call", `{"arguments":{}}`, "", false},
		{"tools/call", `{"name":7}`, "", false},
	} {
		got, ok := mcpName(nil, tc.method, []byte(tc.params))
		assert.Equal(t, tc.ok, ok, tc.params)
		assert.Equal(t, tc.want, string(got), tc.params)
	}
}

// recordingDoer is an HTTP client that records each request and answers
// it as a 2026-07-28 server would, echoing tools/call's text.
type recordingDoer struct {
	mu     sync.Mutex
	wire   []string
	bodies []string
}

func (d *recordingDoer) DoTimeout(req *fasthttp.Request, resp *fasthttp.Response, _ time.Duration) error {
	d.mu.Lock()
	d.wire = append(d.wire, req.String()) // as written on the wire
	d.bodies = append(d.bodies, string(req.Body()))
	d.mu.Unlock()
	var msg codec.Message
	if err := codec.Decode(req.Body(), &msg); err != nil {
		resp.SetStatusCode(fasthttp.StatusBadRequest)
		return nil
	}
	var p struct {
		Arguments struct {
			Text string `json:"text"`
		} `json:"arguments"`
	}
	_ = codec.Unmarshal(msg.Params, &p)
	resp.Header.SetContentType("application/json")
	resp.SetBody(codec.AppendResult(nil, msg.ID, []byte(`{"content":[{"type":"text","text":`+strconv.Quote(p.Arguments.Text)+`}],"resultType":"complete"}`)))
	return nil
}

// TestHTTPModernRequest pins the headers and body of a 2026-07-28 POST:
// the revision's headers, no session, the _meta in the params, no
// initialize before it.
func TestHTTPModernRequest(t *testing.T) {
	d := &recordingDoer{}
	tg := &httpTarget{url: "http://127.0.0.1:7401/mcp", client: d, opts: &sessionOpts{timeout: time.Second, maxFrame: 1 << 20, stateless: true}}
	s, err := tg.dial(context.Background(), 1)
	require.NoError(t, err)
	assert.Empty(t, d.wire, "no initialize")
	params, err := modernParams(`{"name":"echo","arguments":{"text":"hi"}}`)
	require.NoError(t, err)
	res, err := s.Call(context.Background(), "tools/call", []byte(params), nil)
	require.NoError(t, err)
	assert.JSONEq(t, `{"content":[{"type":"text","text":"hi"}],"resultType":"complete"}`, string(res))
	require.NoError(t, s.Close())
	require.Len(t, d.wire, 1, "no DELETE: there is no session")
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":` + meta2026 + `,"name":"echo","arguments":{"text":"hi"}}}`
	assert.Equal(t, body, d.bodies[0])
	assert.Equal(t, "POST /mcp HTTP/1.1\r\n"+
		"Host: 127.0.0.1:7401\r\n"+
		"Content-Type: application/json\r\n"+
		"Content-Length: "+strconv.Itoa(len(body))+"\r\n"+
		"Accept: application/json, text/event-stream\r\n"+
		"Mcp-Protocol-Version: 2026-07-28\r\n"+
		"Mcp-Method: tools/call\r\n"+
		"Mcp-Name: echo\r\n\r\n"+body, d.wire[0])

	// A list has no name.
	params, _ = modernParams("")
	_, err = s.Call(context.Background(), "tools/list", []byte(params), nil)
	require.NoError(t, err)
	body = `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":` + meta2026 + `}}`
	assert.Equal(t, body, d.bodies[1])
	assert.Equal(t, "POST /mcp HTTP/1.1\r\n"+
		"Host: 127.0.0.1:7401\r\n"+
		"Content-Type: application/json\r\n"+
		"Content-Length: "+strconv.Itoa(len(body))+"\r\n"+
		"Accept: application/json, text/event-stream\r\n"+
		"Mcp-Protocol-Version: 2026-07-28\r\n"+
		"Mcp-Method: tools/list\r\n\r\n"+body, d.wire[1])
}

// TestHTTPModernRefusal reports what a 2026-07-28 server's refusal says.
func TestHTTPModernRefusal(t *testing.T) {
	var resp fasthttp.Response
	resp.SetStatusCode(fasthttp.StatusBadRequest)
	resp.Header.SetContentType("application/json")
	resp.SetBodyString(`{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"unsupported protocol version"}}`)
	s := &httpSession{t: &httpTarget{opts: &sessionOpts{}}, modern: true}
	_, err := s.answer(&resp, []byte("1"), nil)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, KindTransport, e.Kind)
	assert.Equal(t, 400, e.Code)
	assert.Contains(t, e.Msg, "-32022")
	assert.Contains(t, e.Msg, "unsupported protocol version")
}

// TestAgainstMcpedgeStateless runs short 2026-07-28 loads against mcpedge
// in process over TCP (pipelined, and open loop through the multiplexed
// stream) and stdio: every answer verified, complete, none failed.
func TestAgainstMcpedgeStateless(t *testing.T) {
	tcpSpec, _ := serveMcpedge(t)
	steps, err := ParseMix("echo=4,add=2,read=1,greet=1,tools/list=1,resources/list=1,prompts/list=1")
	require.NoError(t, err)
	target, err := ParseTarget(tcpSpec)
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"tcp pipelined", Config{Connections: 4, InFlight: 8, Requests: 4000}},
		{"tcp open loop", Config{Connections: 2, InFlight: 2, Rate: 2000, Requests: 600}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Target, cfg.Steps, cfg.Protocol, cfg.Timeout, cfg.PID = target, steps, ProtocolStateless, 5*time.Second, os.Getpid()
			res := runBounded(t, cfg, 30*time.Second)
			assert.Zero(t, res.Errors, "%v %v", res.ErrorsByKind, res.ErrorSamples)
			assert.Equal(t, cfg.Requests, res.OK)
			assert.Equal(t, ProtocolStateless, res.Protocol)
			for _, s := range res.Steps {
				assert.Positive(t, s.Requests, s.Name)
			}
		})
	}
	t.Run("stdio", func(t *testing.T) {
		exe, err := os.Executable()
		require.NoError(t, err)
		t.Setenv(stdioServerEnv, "1")
		res := runBounded(t, Config{Target: Target{Transport: "stdio", Command: []string{exe}}, Connections: 4, Requests: 500,
			Steps: echoStep(), Timeout: 5 * time.Second, Protocol: ProtocolStateless}, 30*time.Second)
		assert.Zero(t, res.Errors, "%v %v", res.ErrorsByKind, res.ErrorSamples)
		assert.Equal(t, int64(500), res.OK)
	})
	t.Run("the session revision still works", func(t *testing.T) {
		res := runBounded(t, Config{Target: target, Connections: 1, InFlight: 2, Requests: 50, Steps: echoStep(), Timeout: 5 * time.Second}, 30*time.Second)
		assert.Zero(t, res.Errors, "%v %v", res.ErrorsByKind, res.ErrorSamples)
		assert.Equal(t, ProtocolSession, res.Protocol)
	})
}

// TestStatelessIncomplete counts every answer without "resultType":"complete"
// as wrong in 2026-07-28: a server answering in the session revision's
// shape, or asking for input, does not pass.
func TestStatelessIncomplete(t *testing.T) {
	for name, result := range map[string]string{
		"no resultType":  `"}]}`,
		"input required": `"}],"resultType":"input_required"}`,
	} {
		t.Run(name, func(t *testing.T) {
			var sawInit sync.Once
			initialized := false
			target, err := ParseTarget(startFakeTCP(t, func(_ net.Conn, msg *codec.Message, _ []byte) fakeReply {
				if msg.Method == "initialize" {
					sawInit.Do(func() { initialized = true })
				}
				line := fakeAnswer(msg)
				return fakeReply{lines: [][]byte{bytes.Replace(line, []byte(`"}]}`), []byte(result), 1)}}
			}))
			require.NoError(t, err)
			res := runBounded(t, Config{Target: target, Connections: 1, InFlight: 4, Requests: 40, Timeout: 2 * time.Second,
				Steps: echoStep(), Protocol: ProtocolStateless}, 20*time.Second)
			assert.Zero(t, res.OK)
			assert.Equal(t, int64(40), res.ErrorsByKind[KindUnexpected.String()], "%v", res.ErrorSamples)
			assert.False(t, initialized, "no initialize in 2026-07-28")
		})
	}
}

// startStrict2026 serves Streamable HTTP at /mcp as a strict 2026-07-28
// server would: it refuses (400) a POST whose MCP-Protocol-Version,
// Mcp-Method or Mcp-Name disagrees with its body or whose _meta is not the
// revision's, one carrying a session id, any initialize and any other verb;
// it answers the bench workload's calls, in JSON or, every other one, as an
// SSE stream. refused counts the refusals.
func startStrict2026(t *testing.T, refused *atomic.Int64) string {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(r.Body)
		var msg codec.Message
		refuse := func(why string) {
			refused.Add(1)
			t.Log("refused:", why)
			http.Error(w, why, http.StatusBadRequest)
		}
		if r.Method != http.MethodPost || r.URL.Path != "/mcp" {
			refuse(r.Method + " " + r.URL.Path)
			return
		}
		if err := codec.Decode(buf.Bytes(), &msg); err != nil || msg.Kind != codec.KindRequest {
			refuse("not a request")
			return
		}
		var p struct {
			Meta      map[string]any `json:"_meta"`
			Name      string         `json:"name"`
			URI       string         `json:"uri"`
			Arguments struct {
				Text string `json:"text"`
			} `json:"arguments"`
		}
		_ = codec.Unmarshal(msg.Params, &p)
		name := map[string]string{"tools/call": p.Name, "prompts/get": p.Name, "resources/read": p.URI}[msg.Method]
		switch {
		case r.Header.Get("MCP-Protocol-Version") != "2026-07-28":
			refuse("version " + r.Header.Get("MCP-Protocol-Version"))
			return
		case r.Header.Get("Mcp-Method") != msg.Method:
			refuse("Mcp-Method " + r.Header.Get("Mcp-Method"))
			return
		case r.Header.Get("Mcp-Name") != name:
			refuse("Mcp-Name " + r.Header.Get("Mcp-Name"))
			return
		case r.Header.Get("Mcp-Session-Id") != "":
			refuse("a session id")
			return
		case msg.Method == "initialize":
			refuse("initialize")
			return
		case p.Meta["io.modelcontextprotocol/protocolVersion"] != "2026-07-28" || p.Meta["io.modelcontextprotocol/clientInfo"] == nil || p.Meta["io.modelcontextprotocol/clientCapabilities"] == nil:
			refuse("_meta " + string(msg.Params))
			return
		}
		var res string
		switch msg.Method {
		case "tools/call":
			res = `{"content":[{"type":"text","text":` + strconv.Quote(p.Arguments.Text) + `}],"resultType":"complete"}`
		case "resources/read":
			res = `{"contents":[{"uri":"mem://hello","text":"hello"}],"resultType":"complete","ttlMs":0}`
		case "tools/list":
			res = `{"tools":[{"name":"echo","inputSchema":{"type":"object"}}],"resultType":"complete"}`
		default:
			refuse("method " + msg.Method)
			return
		}
		body := codec.AppendResult(nil, msg.ID, []byte(res))
		if n.Add(1)%2 == 0 {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write(codec.AppendSSEEvent(nil, "", "message", body))
			return
		}
		writeJSON(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// TestHTTPStatelessLoad runs a 2026-07-28 load over Streamable HTTP, one
// request in flight per connection and pipelined, against a server that
// refuses any request not exactly as the revision says.
func TestHTTPStatelessLoad(t *testing.T) {
	var refused atomic.Int64
	target, err := ParseTarget(startStrict2026(t, &refused))
	require.NoError(t, err)
	steps, err := ParseMix("echo=4,read=1,tools/list=1")
	require.NoError(t, err)
	for _, inflight := range []int{1, 4} {
		t.Run(strconv.Itoa(inflight), func(t *testing.T) {
			res := runBounded(t, Config{Target: target, Connections: 2, InFlight: inflight, Requests: 600, Steps: steps,
				Timeout: 5 * time.Second, Protocol: ProtocolStateless}, 30*time.Second)
			assert.Zero(t, res.Errors, "%v %v", res.ErrorsByKind, res.ErrorSamples)
			assert.Equal(t, int64(600), res.OK)
			assert.Zero(t, refused.Load())
		})
	}
	// The fake does check: the session revision's initialize is refused.
	_, err = Run(context.Background(), Config{Target: target, Requests: 10, Steps: steps, Timeout: 5 * time.Second})
	assert.ErrorContains(t, err, "400")
	assert.Equal(t, int64(1), refused.Load())
}

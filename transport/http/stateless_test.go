package http

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"
)

const statelessMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`

// statelessBody is a 2026-07-28 request: params (an object's members, or
// "") with the stateless _meta added.
func statelessBody(id int, method, params string) string {
	if params != "" {
		params += ","
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{%s%s}}`, id, method, params, statelessMeta)
}

// statelessReq is a POST of body as a 2026-07-28 client sends it: version,
// Mcp-Method and, when name is not empty, Mcp-Name; hdrs override
// (an empty value deletes).
func statelessReq(method, name, body string, hdrs map[string]string) req {
	h := map[string]string{"Mcp-Protocol-Version": mcp.Version20260728, "Mcp-Method": method}
	if name != "" {
		h["Mcp-Name"] = name
	}
	for k, v := range hdrs {
		h[k] = v
	}
	return req{body: body, headers: h}
}

// rpcAnswer is a JSON-RPC answer as tests read it.
type rpcAnswer struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

func decodeAnswer(t *testing.T, b string) rpcAnswer {
	t.Helper()
	var a rpcAnswer
	require.NoError(t, json.Unmarshal([]byte(b), &a), b)
	return a
}

// installHeaderTool registers "hdr", whose arguments region, n, b and
// cfg.zone are mirrored into Mcp-Param-* headers.
func installHeaderTool(t *testing.T, r *handlers.Registry) {
	t.Helper()
	require.NoError(t, r.AddTool(&mcp.Tool{Name: "hdr", InputSchema: codec.RawJSON(`{"type":"object","properties":{
		"region":{"type":"string","x-mcp-header":"Region"},
		"n":{"type":"integer","x-mcp-header":"N"},
		"b":{"type":"boolean","x-mcp-header":"B"},
		"cfg":{"type":"object","properties":{"zone":{"type":"string","x-mcp-header":"Zone"}}},
		"plain":{"type":"string"}}}`)},
		func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.TextResult("ok"), nil
		}, handlers.ToolOptions{NonBlocking: true}))
}

// TestHeaderToolRegistration: a tool with an invalid x-mcp-header
// annotation is refused (handlers tests cover every rule).
func TestHeaderToolRegistration(t *testing.T) {
	r := handlers.NewRegistry(handlers.Options{})
	err := r.AddTool(&mcp.Tool{Name: "bad", InputSchema: codec.RawJSON(`{"type":"object","properties":{"a":{"type":"number","x-mcp-header":"A"}}}`)},
		func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) { return nil, nil })
	require.ErrorIs(t, err, handlers.ErrInvalidTool)
}

// TestStatelessHeaders covers SEP-2243's checks of a 2026-07-28 POST (the
// http-header-validation and http-custom-header-server-validation
// conformance scenarios) and the statuses of the revision's errors, in
// both modes: each answer carries the request's id.
func TestStatelessHeaders(t *testing.T) {
	call := func(id int, tool, args string) string {
		return statelessBody(id, "tools/call", fmt.Sprintf(`"name":%q,"arguments":%s`, tool, args))
	}
	hello := `{"region":"Hello"}`
	cases := []struct {
		name   string
		r      req
		status int
		code   int // JSON-RPC error code; 0: a result
	}{
		// http-header-validation
		{"method mismatch", statelessReq("prompts/list", "", statelessBody(100, "tools/list", ""), nil), 400, -32020},
		{"method missing", statelessReq("", "", statelessBody(101, "tools/list", ""), nil), 400, -32020},
		{"name mismatch", statelessReq("tools/call", "wrong_tool_name", call(102, "hdr", `{}`), nil), 400, -32020},
		{"name with spaces", statelessReq("tools/call", "  hdr  ", call(103, "hdr", `{}`), nil), 200, 0},
		{"name missing", statelessReq("tools/call", "", call(104, "hdr", `{}`), nil), 400, -32020},
		{"method value case", statelessReq("TOOLS/LIST", "", statelessBody(107, "tools/list", ""), nil), 400, -32020},
		{"method with spaces", statelessReq(" tools/list\t", "", statelessBody(108, "tools/list", ""), nil), 200, 0},
		{"name base64", statelessReq("tools/call", "=?base64?aGRy?=", call(109, "hdr", `{}`), nil), 200, 0},
		{"name bad base64", statelessReq("tools/call", "=?base64?aGRy?!?=", call(110, "hdr", `{}`), nil), 400, -32020},
		{"prompts/get name", statelessReq("prompts/get", "other", statelessBody(111, "prompts/get", `"name":"summarize","arguments":{"text":"x"}`), nil), 400, -32020},
		{"resources/read uri", statelessReq("resources/read", "demo://nope", statelessBody(112, "resources/read", `"uri":"demo://other"`), nil), 400, -32020},
		{"tasks/get taskId", statelessReq("tasks/get", "", statelessBody(113, "tasks/get", `"taskId":"t1"`), nil), 400, -32020},
		{"unknown method needs no name", statelessReq("tasks/result", "", statelessBody(114, "tasks/result", `"taskId":"t1"`), nil), 404, -32601},
		// versions and _meta
		{"version mismatch", statelessReq("server/discover", "", strings.Replace(statelessBody(120, "server/discover", ""), `"2026-07-28"`, `"v999.0.0"`, 1), nil), 400, -32020},
		{"version unsupported", statelessReq("server/discover", "", strings.Replace(statelessBody(121, "server/discover", ""), `"2026-07-28"`, `"v999.0.0"`, 1), map[string]string{"Mcp-Protocol-Version": "v999.0.0"}), 400, -32022},
		{"meta missing", statelessReq("server/discover", "", `{"jsonrpc":"2.0","id":122,"method":"server/discover","params":{}}`, nil), 400, -32602},
		{"meta without capabilities", statelessReq("server/discover", "", `{"jsonrpc":"2.0","id":123,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, nil), 400, -32602},
		{"version header missing", statelessReq("tools/list", "", statelessBody(124, "tools/list", ""), map[string]string{"Mcp-Protocol-Version": ""}), 400, -32020},
		{"session version header", statelessReq("tools/list", "", statelessBody(125, "tools/list", ""), map[string]string{"Mcp-Protocol-Version": testVersion}), 400, -32020},
		{"removed method", statelessReq("ping", "", statelessBody(126, "ping", ""), nil), 404, -32601},
		{"unknown method", statelessReq("unknown/method", "", statelessBody(127, "unknown/method", ""), nil), 404, -32601},
		{"discover", statelessReq("server/discover", "", statelessBody(128, "server/discover", ""), nil), 200, 0},
		{"session id ignored", statelessReq("tools/list", "", statelessBody(129, "tools/list", ""), map[string]string{"Mcp-Session-Id": "00000000000000000000000000000000"}), 200, 0},
		{"listen without filter", statelessReq("subscriptions/listen", "", statelessBody(130, "subscriptions/listen", `"notifications":7`), nil), 400, -32602},
		// http-custom-header-server-validation
		{"param base64", statelessReq("tools/call", "hdr", call(200, "hdr", hello), map[string]string{"Mcp-Param-Region": "=?base64?SGVsbG8=?="}), 200, 0},
		{"param bad padding", statelessReq("tools/call", "hdr", call(201, "hdr", hello), map[string]string{"Mcp-Param-Region": "=?base64?SGVsbG8?="}), 400, -32020},
		{"param bad chars", statelessReq("tools/call", "hdr", call(202, "hdr", hello), map[string]string{"Mcp-Param-Region": "=?base64?SGVs!!!bG8=?="}), 400, -32020},
		{"param literal", statelessReq("tools/call", "hdr", call(203, "hdr", `{"region":"SGVsbG8="}`), map[string]string{"Mcp-Param-Region": "SGVsbG8="}), 200, 0},
		{"param literal prefix", statelessReq("tools/call", "hdr", call(204, "hdr", `{"region":"=?base64?SGVsbG8="}`), map[string]string{"Mcp-Param-Region": "=?base64?SGVsbG8="}), 200, 0},
		{"param omitted", statelessReq("tools/call", "hdr", call(205, "hdr", `{"region":"test-value"}`), nil), 400, -32020},
		{"param mismatch", statelessReq("tools/call", "hdr", call(206, "hdr", hello), map[string]string{"Mcp-Param-Region": "Bye"}), 400, -32020},
		{"param header name case", statelessReq("tools/call", "hdr", call(207, "hdr", hello), map[string]string{"MCP-PARAM-REGION": "Hello"}), 200, 0},
		{"param null", statelessReq("tools/call", "hdr", call(208, "hdr", `{"region":null}`), nil), 200, 0},
		{"param absent, header ignored", statelessReq("tools/call", "hdr", call(209, "hdr", `{"plain":"x"}`), map[string]string{"Mcp-Param-Region": "anything"}), 200, 0},
		{"param integer", statelessReq("tools/call", "hdr", call(210, "hdr", `{"n":42}`), map[string]string{"Mcp-Param-N": "42.0"}), 200, 0},
		{"param integer mismatch", statelessReq("tools/call", "hdr", call(211, "hdr", `{"n":42}`), map[string]string{"Mcp-Param-N": "43"}), 400, -32020},
		{"param boolean", statelessReq("tools/call", "hdr", call(212, "hdr", `{"b":true}`), map[string]string{"Mcp-Param-B": "true"}), 200, 0},
		{"param boolean mismatch", statelessReq("tools/call", "hdr", call(213, "hdr", `{"b":false}`), map[string]string{"Mcp-Param-B": "0"}), 400, -32020},
		{"param nested", statelessReq("tools/call", "hdr", call(214, "hdr", `{"cfg":{"zone":"eu"}}`), map[string]string{"Mcp-Param-Zone": "eu"}), 200, 0},
		{"param nested omitted", statelessReq("tools/call", "hdr", call(215, "hdr", `{"cfg":{"zone":"eu"}}`), nil), 400, -32020},
		{"param non-ascii base64", statelessReq("tools/call", "hdr", call(216, "hdr", `{"region":"Hello, 世界"}`), map[string]string{"Mcp-Param-Region": "=?base64?SGVsbG8sIOS4lueVjA==?="}), 200, 0},
	}
	for _, mode := range []struct {
		name string
		opts Options
	}{{"stateful", Options{}}, {"stateless", Options{Stateless: true}}} {
		t.Run(mode.name, func(t *testing.T) {
			e := newEnv(t, envOpts{opts: mode.opts})
			installHeaderTool(t, e.eng.Registry())
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					resp := e.do(t, tc.r)
					b := body(t, resp)
					require.Equal(t, tc.status, resp.StatusCode, b)
					assert.Empty(t, resp.Header.Get("Mcp-Session-Id"))
					assert.Contains(t, resp.Header.Get("Content-Type"), "application/json")
					a := decodeAnswer(t, b)
					var want struct {
						ID json.RawMessage `json:"id"`
					}
					require.NoError(t, json.Unmarshal([]byte(tc.r.body), &want))
					assert.Equal(t, string(want.ID), string(a.ID), "the request's id is echoed")
					if tc.code == 0 {
						require.Nil(t, a.Error, b)
						assert.Contains(t, string(a.Result), `"resultType":"complete"`)
						return
					}
					require.NotNil(t, a.Error, b)
					assert.Equal(t, tc.code, a.Error.Code, b)
					if tc.code == -32022 {
						var d struct {
							Supported []string `json:"supported"`
							Requested string   `json:"requested"`
						}
						require.NoError(t, json.Unmarshal(a.Error.Data, &d), b)
						assert.Contains(t, d.Supported, mcp.Version20260728)
						assert.Equal(t, "v999.0.0", d.Requested)
					}
				})
			}
			assert.Equal(t, 0, e.eng.Sessions().Len(), "stateless requests leave no session")
		})
	}
}

// TestStatelessRawHeaderNames sends header names in lower and upper case on
// the wire (net/http would canonicalize them).
func TestStatelessRawHeaderNames(t *testing.T) {
	e := newEnv(t, envOpts{})
	for _, tc := range []struct{ name, hdr string }{{"lower", "mcp-method"}, {"upper", "MCP-METHOD"}} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := e.dial()
			require.NoError(t, err)
			defer conn.Close()
			require.NoError(t, conn.SetDeadline(time.Now().Add(5*time.Second)))
			b := statelessBody(7, "tools/list", "")
			fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\n%s: tools/list\r\nContent-Length: %d\r\n\r\n%s", tc.hdr, len(b), b)
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			require.NoError(t, err)
			out := body(t, resp)
			require.Equal(t, 200, resp.StatusCode, out)
			assert.Nil(t, decodeAnswer(t, out).Error)
		})
	}
}

// TestStatelessGetDelete: no GET stream and no DELETE in 2026-07-28; the
// session revisions keep theirs.
func TestStatelessGetDelete(t *testing.T) {
	e := newEnv(t, envOpts{})
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		t.Run(method, func(t *testing.T) {
			resp := e.do(t, req{method: method, headers: map[string]string{"Mcp-Protocol-Version": mcp.Version20260728}})
			b := body(t, resp)
			assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, b)
			assert.Equal(t, "POST", resp.Header.Get("Allow"))
			resp = e.do(t, req{method: method}) // a session revision, no session id
			b = body(t, resp)
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode, b)
		})
	}
	sid := e.initialize()
	resp := e.do(t, req{method: http.MethodDelete, sid: sid})
	assert.Equal(t, http.StatusNoContent, resp.StatusCode, body(t, resp))
}

// TestStatelessSessionVersions: a bad version header is still refused as
// before, and a request on a session is the session's.
func TestStatelessSessionVersions(t *testing.T) {
	e := newEnv(t, envOpts{})
	resp := e.do(t, req{body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`, headers: map[string]string{"Mcp-Protocol-Version": "1999-01-01"}})
	b := body(t, resp)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, b)
	assert.Contains(t, b, "MCP-Protocol-Version")

	// On a session (its id, a session revision's header) a request is the
	// session's, whatever its _meta says: an initialize scopes what
	// follows to the session revisions.
	sid := e.initialize()
	resp = e.do(t, req{sid: sid, body: statelessBody(2, "tools/list", "")})
	b = body(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, b)
	assert.NotContains(t, b, `"resultType"`)
	resp = e.do(t, req{sid: sid, body: statelessBody(3, "ping", "")})
	b = body(t, resp)
	assert.Equal(t, http.StatusOK, resp.StatusCode, b)
	assert.JSONEq(t, `{}`, string(decodeAnswer(t, b).Result))
}

// TestStatelessProgress: a 2026-07-28 request that sends progress first is
// answered on an SSE stream, its result last (tools-call-with-progress).
func TestStatelessProgress(t *testing.T) {
	for _, mode := range []Options{{}, {Stateless: true}} {
		t.Run(fmt.Sprint("stateless=", mode.Stateless), func(t *testing.T) {
			e := newEnv(t, envOpts{opts: mode})
			b := strings.Replace(statelessBody(9, "tools/call", `"name":"spam","arguments":{"n":2,"size":1}`), `"_meta":{`, `"_meta":{"progressToken":"p1",`, 1)
			resp := e.do(t, statelessReq("tools/call", "spam", b, nil))
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Contains(t, resp.Header.Get("Content-Type"), "text/event-stream")
			assert.Empty(t, resp.Header.Get("Mcp-Session-Id"))
			evs := newSSE(resp.Body).events(t)
			resp.Body.Close()
			var data []string
			for _, ev := range evs {
				if ev.Data != "" {
					data = append(data, ev.Data)
				}
			}
			require.Len(t, data, 3, evs)
			assert.Contains(t, data[0], `"notifications/progress"`)
			assert.Contains(t, data[1], `"notifications/progress"`)
			a := decodeAnswer(t, data[2])
			assert.Equal(t, "9", string(a.ID))
			assert.Contains(t, string(a.Result), `"resultType":"complete"`)
		})
	}
}

// listenReq opens a subscriptions/listen stream for tools list changes.
func listenReq(id int) req {
	return statelessReq("subscriptions/listen", "", statelessBody(id, "subscriptions/listen", `"notifications":{"toolsListChanged":true}`), nil)
}

// readEvent reads the next data event within d.
func readEvent(t *testing.T, s *sse, d time.Duration) sseEvent {
	t.Helper()
	type res struct {
		ev  sseEvent
		err error
	}
	ch := make(chan res, 1)
	go func() {
		for {
			ev, err := s.next()
			if err != nil || ev.Data != "" {
				ch <- res{ev, err}
				return
			}
		}
	}()
	select {
	case r := <-ch:
		require.NoError(t, r.err)
		return r.ev
	case <-time.After(d):
		t.Fatalf("no event within %v", d)
	}
	return sseEvent{}
}

func addTool(t *testing.T, r *handlers.Registry, name string) {
	t.Helper()
	require.NoError(t, r.AddTool(&mcp.Tool{Name: name}, func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.TextResult(name), nil
	}))
}

// TestStatelessListen: subscriptions/listen over HTTP is an SSE stream
// flushed at once (the acknowledgement first), kept alive with comments,
// carrying the notifications asked for; the client closing it cancels
// the request, and other requests are served meanwhile.
func TestStatelessListen(t *testing.T) {
	e := newEnv(t, envOpts{loopback: true, opts: Options{KeepAlive: 30 * time.Millisecond}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := e.try(ctx, listenReq(42))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/event-stream")
	s := newSSE(resp.Body)
	ack := readEvent(t, s, 800*time.Millisecond)
	assert.Contains(t, ack.Data, `"notifications/subscriptions/acknowledged"`)
	assert.Contains(t, ack.Data, `"io.modelcontextprotocol/subscriptionId":42`)

	// Other requests, on other connections, go on.
	r2 := e.do(t, statelessReq("tools/list", "", statelessBody(1, "tools/list", ""), nil))
	assert.Equal(t, http.StatusOK, r2.StatusCode, body(t, r2))

	addTool(t, e.eng.Registry(), "added")
	ev := readEvent(t, s, 2*time.Second)
	assert.Contains(t, ev.Data, `"notifications/tools/list_changed"`)
	assert.Contains(t, ev.Data, `"io.modelcontextprotocol/subscriptionId":42`)
	// Idle, the stream carries keep-alive comments.
	chunks := make(chan string, 64)
	go func() {
		defer close(chunks)
		var b [512]byte
		for {
			n, err := resp.Body.Read(b[:])
			if n > 0 {
				chunks <- string(b[:n])
			}
			if err != nil {
				return
			}
		}
	}()
	deadline := time.After(2 * time.Second)
	for seen := false; !seen; {
		select {
		case c := <-chunks:
			seen = strings.Contains(c, ": keep-alive")
		case <-deadline:
			t.Fatal("no keep-alive comment within 2s")
		}
	}

	// The client goes away: the request is cancelled, its session closed.
	cancel()
	resp.Body.Close()
	waitFor(t, 2*time.Second, "the listen stream to end", func() bool {
		e.srv.live.mu.Lock()
		defer e.srv.live.mu.Unlock()
		return len(e.srv.live.set) == 0
	})
}

// TestStatelessListenShutdown: the engine's Shutdown ends a listen stream
// with an empty result; the transport's Shutdown alone ends it at once
// rather than waiting for its context.
func TestStatelessListenShutdown(t *testing.T) {
	for _, engineFirst := range []bool{true, false} {
		t.Run(fmt.Sprint("engine first=", engineFirst), func(t *testing.T) {
			eng := engine.New(engine.Options{})
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			srv := New(eng, Options{})
			served := make(chan error, 1)
			go func() { served <- srv.Serve(context.Background(), ln) }()
			addTool(t, eng.Registry(), "t") // tools capability: listChanged
			hc := &http.Client{Transport: &http.Transport{DisableCompression: true}}
			defer hc.CloseIdleConnections()
			hr, err := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+"/mcp", strings.NewReader(statelessBody(5, "subscriptions/listen", `"notifications":{"toolsListChanged":true}`)))
			require.NoError(t, err)
			for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": mcp.Version20260728, "Mcp-Method": "subscriptions/listen"} {
				hr.Header.Set(k, v)
			}
			resp, err := hc.Do(hr)
			require.NoError(t, err)
			defer resp.Body.Close()
			s := newSSE(resp.Body)
			assert.Contains(t, readEvent(t, s, time.Second).Data, "acknowledged")

			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			start := time.Now()
			if engineFirst {
				require.NoError(t, eng.Shutdown(ctx))
				final := readEvent(t, s, time.Second)
				a := decodeAnswer(t, final.Data)
				assert.Equal(t, "5", string(a.ID))
				assert.Contains(t, string(a.Result), `"resultType":"complete"`)
				assert.Contains(t, string(a.Result), `"io.modelcontextprotocol/subscriptionId":5`)
				require.NoError(t, srv.Shutdown(ctx))
			} else {
				require.NoError(t, srv.Shutdown(ctx))
				require.NoError(t, eng.Shutdown(ctx))
			}
			assert.Less(t, time.Since(start), 3*time.Second)
			_, _ = io.Copy(io.Discard, resp.Body) // the stream has ended
			require.NoError(t, <-served)
		})
	}
}

// TestMcpNameFromTable: which methods' Mcp-Name is checked against their
// params, and which name a task for Options.Route, is the engine's method
// table's to say (engine.NameParam): a mismatched Mcp-Name is refused
// with -32020 for exactly the methods whose row names a params member,
// and ignored for every other, and routeID offers the Mcp-Name of exactly
// those naming a taskId.
func TestMcpNameFromTable(t *testing.T) {
	e := newEnv(t, envOpts{})
	methods := []string{"x/unknown"}
	for i := range engine.NumMethods {
		methods = append(methods, engine.MethodLabel(i))
	}
	named, tasks := 0, 0
	for _, m := range methods {
		t.Run(m, func(t *testing.T) {
			param := engine.NameParam(m)
			params := `"name":"a","uri":"a","taskId":"a","arguments":{}`
			resp := e.do(t, statelessReq(m, "b", statelessBody(1, m, params), nil))
			b := body(t, resp)
			a := decodeAnswer(t, b)
			if param != "" {
				named++
				require.NotNil(t, a.Error, b)
				assert.Equal(t, mcp.CodeHeaderMismatch, a.Error.Code, b)
				assert.Contains(t, a.Error.Message, "Mcp-Name", b)
			} else if a.Error != nil {
				assert.NotEqual(t, mcp.CodeHeaderMismatch, a.Error.Code, "%s: Mcp-Name is not %s's to check: %s", m, m, b)
			}

			var ctx fasthttp.RequestCtx
			ctx.Request.Header.SetMethod(fasthttp.MethodPost)
			ctx.Request.Header.Set("Mcp-Method", m)
			ctx.Request.Header.Set("Mcp-Name", "a.task")
			if param == "taskId" {
				tasks++
				assert.Equal(t, "a.task", string(e.srv.routeID(&ctx)))
			} else {
				assert.Nil(t, e.srv.routeID(&ctx))
			}
		})
	}
	assert.Equal(t, 6, named, "tools/call, prompts/get, resources/read, tasks/get|update|cancel")
	assert.Equal(t, 3, tasks, "tasks/get|update|cancel")
}

package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge"
	"github.com/mcpedge/mcpedge/client"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/gateway"
	"github.com/mcpedge/mcpedge/handlers/builtin"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// httpUpstream serves the conformance handlers over Streamable HTTP (and
// the legacy endpoints) on 127.0.0.1, and returns its base URL.
func httpUpstream(t *testing.T) string { return httpUpstreamWith(t, "conformance") }

// httpUpstreamWith serves the handler set over Streamable HTTP, offering
// only versions when some are given.
func httpUpstreamWith(t *testing.T, set string, versions ...string) string {
	t.Helper()
	srv := mcpedge.New(mcpedge.Options{EngineOptions: mcpedge.EngineOptions{MaxInflight: -1, Versions: versions}, HTTP: &mcpedge.HTTPOptions{Addr: "127.0.0.1:0"}})
	require.NoError(t, builtin.Install(set, srv.Registry(), builtin.Env{ResourceUpdated: srv.ResourceUpdated, Publish: srv.Engine().Bus().Publish, Subscribe: srv.Engine().Bus().Subscribe}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	a := srv.HTTPAddr(ctx)
	require.NotNil(t, a)
	t.Cleanup(func() { cancel(); <-done })
	return "http://" + a.String()
}

// TestHTTPUpstream: an upstream over Streamable HTTP, and one that
// speaks only the legacy HTTP+SSE transport, in both eras (over the
// legacy transport a 2026-07-28 client is translated).
func TestHTTPUpstream(t *testing.T) {
	base := httpUpstream(t)
	for _, tt := range []struct {
		name, path string
	}{{"streamable", "/mcp"}, {"legacy", "/sse"}} {
		t.Run(tt.name, func(t *testing.T) {
			u := gateway.Upstream{Name: "h", Transport: gateway.HTTP, URL: base + tt.path, Headers: map[string]string{"X-Upstream-Key": "k"}}
			f := startFront(t, gateway.Options{Upstreams: []gateway.Upstream{u}})
			c := f.dial(t, client.Options{
				OnElicitation: func(context.Context, *client.ServerRequest, *mcp.ElicitParams) (*mcp.ElicitResult, error) {
					return &mcp.ElicitResult{Action: "accept", Content: codec.RawJSON(`{"username":"ada","email":"a@b"}`)}, nil
				},
			})
			ctx := testCtx(t)
			r, err := c.CallTool(ctx, "test_simple_text", map[string]any{})
			require.NoError(t, err)
			assert.Equal(t, "This is a simple text response for testing.", text(t, r))
			r, err = c.CallTool(ctx, "test_elicitation", map[string]any{"message": "who?"})
			require.NoError(t, err)
			assert.Contains(t, text(t, r), "ada", "relayed from the POST's event stream")
			var steps int
			_, err = c.CallTool(ctx, "test_tool_with_progress", map[string]any{}, client.WithProgress(func(float64, float64, string) { steps++ }))
			require.NoError(t, err)
			assert.Equal(t, 3, steps)
			rr, err := c.ReadResource(ctx, "test://static-text")
			require.NoError(t, err)
			assert.NotEmpty(t, rr.Contents)

			m, err := client.Dial(ctx, &client.TCPTransport{Addr: f.addr}, client.Options{Era: client.EraModern})
			require.NoError(t, err)
			defer m.Close()
			// The legacy transport speaks the session revisions: a
			// 2026-07-28 client's calls are translated (down.go).
			r, err = m.CallTool(ctx, "test_simple_text", map[string]any{})
			require.NoError(t, err)
			assert.Equal(t, "This is a simple text response for testing.", text(t, r))
			r, err = m.CallTool(ctx, "test_x_mcp_header", map[string]any{"region": "eu-west"})
			require.NoError(t, err, "the Mcp-Param-Region header set upstream")
			assert.False(t, r.IsError)
		})
	}
}

// TestHTTPUpstreamPipelined: with pipeline = 8, calls of many sessions
// share a few connections, their answers in order, while calls whose
// answers are event streams (progress, an elicitation answered through
// another connection) run among them.
func TestHTTPUpstreamPipelined(t *testing.T) {
	base := httpUpstream(t)
	u := gateway.Upstream{Name: "h", Transport: gateway.HTTP, URL: base + "/mcp", Pipeline: 8}
	f := startFront(t, gateway.Options{Upstreams: []gateway.Upstream{u}})
	ctx := testCtx(t)
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for s := range 8 {
		c := f.dial(t, client.Options{
			OnElicitation: func(context.Context, *client.ServerRequest, *mcp.ElicitParams) (*mcp.ElicitResult, error) {
				return &mcp.ElicitResult{Action: "accept", Content: codec.RawJSON(`{"username":"ada","email":"a@b"}`)}, nil
			},
		})
		wg.Go(func() {
			for i := range 40 {
				var err error
				switch {
				case i%20 == 7:
					var r *mcp.CallToolResult
					if r, err = c.CallTool(ctx, "test_elicitation", map[string]any{"message": "who?"}); err == nil && !strings.Contains(text(t, r), "ada") {
						err = fmt.Errorf("session %d: elicitation answered %q", s, text(t, r))
					}
				case i%20 == 13:
					steps := 0
					_, err = c.CallTool(ctx, "test_tool_with_progress", map[string]any{}, client.WithProgress(func(float64, float64, string) { steps++ }))
					if err == nil && steps != 3 {
						err = fmt.Errorf("session %d: %d progress steps", s, steps)
					}
				default:
					var r *mcp.CallToolResult
					if r, err = c.CallTool(ctx, "test_simple_text", map[string]any{}); err == nil && text(t, r) != "This is a simple text response for testing." {
						err = fmt.Errorf("session %d: answered %q", s, text(t, r))
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st := f.gw.Status()[0]
	assert.Zero(t, st.Errors)
	assert.GreaterOrEqual(t, st.Calls, uint64(8*40))
}

// scriptedHTTP is an upstream that speaks just enough Streamable HTTP
// (initialize, tools/list, tools/call) and misbehaves on purpose, per
// tool:
//
//	ok        answers as JSON with Content-Length
//	chunked   answers as JSON in chunks
//	sse       answers as an event stream (chunked)
//	garbage   answers bytes that are not HTTP
//	cut       closes the connection in the middle of the answer's body
//	status    answers 500 with a text body
//	rpcerror  answers 400 with the JSON-RPC error of the request
//	big       answers a body over the gateway's message bound
//	accepted  answers 202, which a request must not get
//	close     answers, with Connection: close
func scriptedHTTP(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &m)
		if m.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		answer := func(result string) string {
			return `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":` + result + `}`
		}
		text := func(s string) string {
			return answer(`{"content":[{"type":"text","text":"` + s + `"}]}`)
		}
		w.Header().Set("Content-Type", "application/json")
		switch m.Method {
		case "initialize":
			w.Header().Set("Mcp-Session-Id", "s1")
			_, _ = io.WriteString(w, answer(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"scripted","version":"1"}}`))
			return
		case "tools/list":
			var tools []string
			for _, n := range []string{"ok", "chunked", "sse", "garbage", "cut", "status", "rpcerror", "big", "accepted", "close"} {
				tools = append(tools, `{"name":"`+n+`","inputSchema":{"type":"object"}}`)
			}
			_, _ = io.WriteString(w, answer(`{"tools":[`+strings.Join(tools, ",")+`]}`))
			return
		case "tools/call":
		default:
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"error":{"code":-32601,"message":"no"}}`)
			return
		}
		hijack := func(raw string) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			_, _ = io.WriteString(conn, raw)
			_ = conn.Close()
		}
		switch m.Params.Name {
		case "ok":
			_, _ = io.WriteString(w, text("ok"))
		case "chunked":
			for _, part := range []string{text("chunked")[:10], text("chunked")[10:]} {
				_, _ = io.WriteString(w, part)
				w.(http.Flusher).Flush()
			}
		case "sse":
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "id: 1\ndata: "+text("sse")+"\n\n")
		case "garbage":
			hijack("this is not HTTP at all\r\n\r\n")
		case "cut":
			hijack("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{\"jsonrpc\":")
		case "status":
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, "boom")
		case "rpcerror":
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"error":{"code":-32602,"message":"bad arguments, says the upstream"}}`)
		case "big":
			_, _ = io.WriteString(w, text(strings.Repeat("x", 70<<10)))
		case "accepted":
			w.WriteHeader(http.StatusAccepted)
		case "close":
			w.Header().Set("Connection", "close")
			_, _ = io.WriteString(w, text("closed"))
		}
	})
	srv := httptest.NewUnstartedServer(mux)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// TestHTTPUpstreamBadAnswers: each broken HTTP answer fails only its
// call, with an error naming the upstream, and the next call is served.
func TestHTTPUpstreamBadAnswers(t *testing.T) {
	for _, pipeline := range []int{1, 4} {
		t.Run("pipeline="+strconv.Itoa(pipeline), func(t *testing.T) {
			u := gateway.Upstream{Name: "h", Transport: gateway.HTTP, URL: scriptedHTTP(t), Pipeline: pipeline, Timeout: 5 * time.Second}
			f := startFront(t, gateway.Options{Upstreams: []gateway.Upstream{u}, MaxMessage: 64 << 10})
			c := f.dial(t, client.Options{})
			ctx := testCtx(t)
			ok := func(t *testing.T) {
				t.Helper()
				r, err := c.CallTool(ctx, "ok", map[string]any{})
				require.NoError(t, err)
				assert.Equal(t, "ok", text(t, r))
			}
			for _, tt := range []struct {
				tool, text string
				code       int
				contains   string
			}{
				{tool: "chunked", text: "chunked"},
				{tool: "sse", text: "sse"},
				{tool: "close", text: "closed"},
				{tool: "garbage", code: codec.CodeServerBusy, contains: "upstream HTTP: POST"},
				{tool: "cut", code: codec.CodeServerBusy, contains: "upstream HTTP"},
				{tool: "status", code: codec.CodeServerBusy, contains: "HTTP status 500"},
				{tool: "rpcerror", code: codec.CodeInvalidParams, contains: "says the upstream"},
				{tool: "big", code: codec.CodeServerBusy, contains: "too large"},
				{tool: "accepted", code: codec.CodeServerBusy, contains: "HTTP status 202"},
			} {
				t.Run(tt.tool, func(t *testing.T) {
					r, err := c.CallTool(ctx, tt.tool, map[string]any{})
					if tt.code == 0 {
						require.NoError(t, err)
						assert.Equal(t, tt.text, text(t, r))
					} else {
						requireCode(t, err, tt.code, tt.contains)
					}
					ok(t)
				})
			}
			st := f.gw.Status()[0]
			assert.Equal(t, "ready", st.State, "the session survived every broken answer")
		})
	}
}

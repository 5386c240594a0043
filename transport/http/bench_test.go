package http

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/handlers/builtin"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"
)

const benchCall = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`

var benchAnswer = []byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hello"}]}}`)

// benchServer serves the bench handler set on an in-memory listener and
// returns a keep-alive client for it and a session id.
func benchServer(b testing.TB, opts Options) (*fasthttp.HostClient, *Server, string) {
	b.Helper()
	eng := engine.New(engine.Options{})
	if err := builtin.Install("bench", eng.Registry(), builtin.Env{}); err != nil {
		b.Fatal(err)
	}
	ln := fasthttputil.NewInmemoryListener()
	srv := New(eng, opts)
	go func() { _ = srv.Serve(context.Background(), ln) }()
	hc := &fasthttp.HostClient{
		Addr:     "127.0.0.1:7401",
		Dial:     func(string) (net.Conn, error) { return ln.Dial() },
		MaxConns: 1024,
	}
	b.Cleanup(func() {
		hc.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = eng.Shutdown(ctx)
		_ = srv.Shutdown(ctx)
	})
	sid := ""
	if !opts.Stateless {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		benchRequest(req, "", initBody)
		if err := hc.Do(req, resp); err != nil || resp.StatusCode() != 200 {
			b.Fatalf("initialize: %v %d %s", err, resp.StatusCode(), resp.Body())
		}
		sid = string(resp.Header.Peek("Mcp-Session-Id"))
		benchRequest(req, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		if err := hc.Do(req, resp); err != nil || resp.StatusCode() != 202 {
			b.Fatalf("initialized: %v %d", err, resp.StatusCode())
		}
	}
	return hc, srv, sid
}

func benchRequest(req *fasthttp.Request, sid, body string) {
	req.Reset()
	req.SetRequestURI("http://127.0.0.1:7401/mcp")
	req.Header.SetHost("127.0.0.1:7401")
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", testVersion)
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	req.SetBodyString(body)
}

// BenchmarkToolsCall is one keep-alive tools/call round trip of the bench
// echo tool over the in-memory listener: client and server costs both.
func BenchmarkToolsCall(b *testing.B) {
	for _, mode := range []struct {
		name string
		opts Options
	}{{"stateful", Options{}}, {"stateless", Options{Stateless: true}}} {
		b.Run(mode.name, func(b *testing.B) {
			hc, _, sid := benchServer(b, mode.opts)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
				defer fasthttp.ReleaseRequest(req)
				defer fasthttp.ReleaseResponse(resp)
				benchRequest(req, sid, benchCall)
				for pb.Next() {
					if err := hc.Do(req, resp); err != nil {
						b.Error(err)
						return
					}
					if !bytes.Equal(resp.Body(), benchAnswer) {
						b.Errorf("answer %d %s", resp.StatusCode(), resp.Body())
						return
					}
				}
			})
		})
	}
}

// handlerBench is the request handler alone on a parsed request of an
// initialized session; echo2 is a typed tool not declared NonBlocking,
// served on the engine's worker pool.
func handlerBench(tb testing.TB, body string) (fasthttp.RequestHandler, *fasthttp.RequestCtx) {
	_, srv, sid := benchServer(tb, Options{})
	if err := handlers.AddTool(srv.eng.Registry(), &mcp.Tool{Name: "echo2", Description: "echo, blocking"},
		func(_ context.Context, req *handlers.CallToolRequest, in struct {
			Text string `json:"text"`
		}) (*mcp.CallToolResult, any, error) {
			return req.TextResult(in.Text), nil, nil
		}); err != nil {
		tb.Fatal(err)
	}
	ctx := new(fasthttp.RequestCtx)
	var req fasthttp.Request
	benchRequest(&req, sid, body)
	ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, nil)
	return srv.Handler(), ctx
}

// statelessCall is a 2026-07-28 tools/call of echo, with the headers its
// client sends (statelessHeaders).
const statelessCall = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`

// statelessHandlerBench is handlerBench for a stateless 2026-07-28 POST.
func statelessHandlerBench(tb testing.TB, body string) (fasthttp.RequestHandler, *fasthttp.RequestCtx) {
	_, srv, _ := benchServer(tb, Options{})
	ctx := new(fasthttp.RequestCtx)
	var req fasthttp.Request
	benchRequest(&req, "", body)
	req.Header.Set("Mcp-Protocol-Version", mcp.Version20260728)
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "echo")
	ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, nil)
	return srv.Handler(), ctx
}

var handlerCases = []struct{ name, body string }{
	{"echo", benchCall},
	{"ping", `{"jsonrpc":"2.0","id":7,"method":"ping"}`},
	{"worker", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo2","arguments":{"text":"x"}}}`},
}

// BenchmarkHandler is the server's side alone: the request handler on a
// parsed request, tools/call of echo (inline), ping, and tools/call of a
// tool served on the worker pool, answered as JSON; and stateless-echo, the
// echo tools/call of a stateless 2026-07-28 client (its headers checked,
// a stateless session opened and closed).
func BenchmarkHandler(b *testing.B) {
	cases := append(handlerCases[:len(handlerCases):len(handlerCases)], struct{ name, body string }{"stateless-echo", statelessCall})
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			h, ctx := handlerBench(b, tc.body)
			if tc.body == statelessCall {
				h, ctx = statelessHandlerBench(b, tc.body)
			}
			b.ReportAllocs()
			for b.Loop() {
				ctx.Response.Reset()
				h(ctx)
				if ctx.Response.StatusCode() != 200 {
					b.Fatalf("status %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
				}
			}
		})
	}
}

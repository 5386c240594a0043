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
func benchServer(b *testing.B, opts Options) (*fasthttp.HostClient, *Server, string) {
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

// BenchmarkHandler is the server's side alone: the request handler on a
// parsed request, tools/call of echo (inline) and of count (on a goroutine
// of its own, answered as JSON).
func BenchmarkHandler(b *testing.B) {
	for _, tc := range []struct{ name, body string }{
		{"echo", benchCall},
		{"ping", `{"jsonrpc":"2.0","id":7,"method":"ping"}`},
		{"worker", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo2","arguments":{"text":"x"}}}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			_, srv, sid := benchServer(b, Options{})
			// A tool not declared NonBlocking: served on a goroutine of its own.
			if err := srv.eng.Registry().AddTool(&mcp.Tool{Name: "echo2", Description: "echo, blocking"},
				func(_ context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
					return mcp.TextResult(string(req.Params.Arguments)), nil
				}); err != nil {
				b.Fatal(err)
			}
			h := srv.Handler()
			var ctx fasthttp.RequestCtx
			var req fasthttp.Request
			benchRequest(&req, sid, tc.body)
			ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, nil)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				ctx.Response.Reset()
				h(&ctx)
				if ctx.Response.StatusCode() != 200 {
					b.Fatalf("status %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
				}
			}
		})
	}
}

//go:build !race

// The race detector makes sync.Pool drop items at random, so allocation
// counts are measured without it.

package admin_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/admin"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/handlers/builtin"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
	mcphttp "github.com/mcpedge/mcpedge/transport/http"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"
)

// signalSink reports the length of each message sent to it.
type signalSink struct{ ch chan int }

func (s signalSink) Send(b *codec.Buffer) error {
	n := len(b.B)
	codec.PutBuffer(b)
	s.ch <- n
	return nil
}

type echoArgs struct {
	Text string `json:"text"`
}

// observedEngine is an engine with the bench handler set, a blocking echo
// (echo2), and Metrics installed when observe is set; sess is an
// initialized session whose sink is sink.
func observedEngine(tb testing.TB, observe bool) (*engine.Server, engine.Conn, signalSink) {
	tb.Helper()
	var opts engine.Options
	var m *admin.Metrics
	if observe {
		m = admin.NewMetrics()
		opts.Observer = m
	}
	eng := engine.New(opts)
	tb.Cleanup(func() { _ = eng.Shutdown(context.Background()) })
	if m != nil {
		m.TrackTools(eng.Registry()) // per-tool series of the tools registered
	}
	require.NoError(tb, builtin.Install("bench", eng.Registry(), builtin.Env{}))
	require.NoError(tb, handlers.AddTool(eng.Registry(), &mcp.Tool{Name: "echo2"},
		func(_ context.Context, req *handlers.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
			return req.TextResult(in.Text), nil, nil
		}))
	sink := signalSink{ch: make(chan int, 1)}
	conn := eng.Open(sink)
	conn.Session().Transport = "tcp"
	out := conn.HandleFrame([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`), nil)
	require.Contains(tb, string(out), `"result"`)
	conn.HandleFrame([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), nil)
	return eng, conn, sink
}

var inlineFrames = []struct{ name, frame string }{
	{"ping", `{"jsonrpc":"2.0","id":2,"method":"ping"}`},
	{"tools/list", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
	{"echo inline", `{"jsonrpc":"2.0","id":"e-1","method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`},
}

const workerFrame = `{"jsonrpc":"2.0","id":123,"method":"tools/call","params":{"name":"echo2","arguments":{"text":"hello, world"}}}`

// TestObservedZeroAlloc holds the engine's paths at zero allocations with
// Metrics installed (its per-tool series included), as engine's
// TestHandleFrameZeroAlloc and TestToolsCallZeroAlloc hold them without:
// answers on the event loop, and a tools/call served on the worker pool.
func TestObservedZeroAlloc(t *testing.T) {
	_, conn, sink := observedEngine(t, true)
	out := make([]byte, 0, 64<<10)
	for _, tc := range inlineFrames {
		t.Run(tc.name, func(t *testing.T) {
			frame := []byte(tc.frame)
			out = conn.HandleFrame(frame, out[:0]) // warm up: the series are made on first use
			require.NotEmpty(t, out)
			assert.Zero(t, testing.AllocsPerRun(1000, func() { out = conn.HandleFrame(frame, out[:0]) }))
		})
	}
	t.Run("worker pool", func(t *testing.T) {
		frame := []byte(workerFrame)
		call := func() {
			if out = conn.HandleFrame(frame, out[:0]); len(out) > 0 {
				t.Fatalf("answered on the caller's goroutine: %s", out)
			}
			if n := <-sink.ch; n < 50 {
				t.Fatalf("short answer: %d bytes", n)
			}
		}
		call()
		assert.Zero(t, testing.AllocsPerRun(1000, call))
	})
}

// observedHandler is transport/http's handlerBench with Metrics installed
// when observe is set: the fasthttp handler and a POST of an initialized
// session carrying body.
func observedHandler(tb testing.TB, observe bool, body string) (fasthttp.RequestHandler, *fasthttp.RequestCtx) {
	tb.Helper()
	var opts engine.Options
	if observe {
		opts.Observer = admin.NewMetrics()
	}
	eng := engine.New(opts)
	require.NoError(tb, builtin.Install("bench", eng.Registry(), builtin.Env{}))
	require.NoError(tb, handlers.AddTool(eng.Registry(), &mcp.Tool{Name: "echo2"},
		func(_ context.Context, req *handlers.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
			return req.TextResult(in.Text), nil, nil
		}))
	ln := fasthttputil.NewInmemoryListener()
	srv := mcphttp.New(eng, mcphttp.Options{})
	go func() { _ = srv.Serve(context.Background(), ln) }()
	hc := &fasthttp.HostClient{Addr: "127.0.0.1:7401", Dial: func(string) (net.Conn, error) { return ln.Dial() }}
	tb.Cleanup(func() {
		hc.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = eng.Shutdown(ctx)
		_ = srv.Shutdown(ctx)
	})
	var req fasthttp.Request
	var resp fasthttp.Response
	postRequest(&req, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	require.NoError(tb, hc.Do(&req, &resp))
	require.Equal(tb, 200, resp.StatusCode(), string(resp.Body()))
	sid := string(resp.Header.Peek("Mcp-Session-Id"))
	postRequest(&req, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	require.NoError(tb, hc.Do(&req, &resp))
	require.Equal(tb, 202, resp.StatusCode())

	ctx := new(fasthttp.RequestCtx)
	var post fasthttp.Request
	postRequest(&post, sid, body)
	ctx.Init(&post, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, nil)
	return srv.Handler(), ctx
}

func postRequest(req *fasthttp.Request, sid, body string) {
	req.Reset()
	req.SetRequestURI("http://127.0.0.1:7401/mcp")
	req.Header.SetHost("127.0.0.1:7401")
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	req.SetBodyString(body)
}

var handlerCases = []struct{ name, body string }{
	{"echo", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`},
	{"ping", `{"jsonrpc":"2.0","id":7,"method":"ping"}`},
	{"worker", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo2","arguments":{"text":"x"}}}`},
}

// TestObservedHandlerAllocs holds a Streamable HTTP POST with Metrics
// installed to transport/http's TestHandlerAllocs bound: one allocation
// at most.
func TestObservedHandlerAllocs(t *testing.T) {
	for _, tc := range handlerCases {
		t.Run(tc.name, func(t *testing.T) {
			h, ctx := observedHandler(t, true, tc.body)
			serve := func() {
				ctx.Response.Reset()
				h(ctx)
				if ctx.Response.StatusCode() != 200 {
					t.Fatalf("status %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
				}
			}
			serve()
			assert.LessOrEqual(t, testing.AllocsPerRun(500, serve), 1.0)
		})
	}
}

// BenchmarkObserver compares the engine's paths and the HTTP handler
// without (off) and with (on) Metrics installed.
func BenchmarkObserver(b *testing.B) {
	for _, mode := range []struct {
		name string
		on   bool
	}{{"off", false}, {"on", true}} {
		for _, tc := range inlineFrames[:3] {
			b.Run("frame/"+tc.name+"/"+mode.name, func(b *testing.B) {
				_, conn, _ := observedEngine(b, mode.on)
				frame, out := []byte(tc.frame), make([]byte, 0, 64<<10)
				b.ReportAllocs()
				for b.Loop() {
					out = conn.HandleFrame(frame, out[:0])
				}
			})
		}
		b.Run("frame/worker/"+mode.name, func(b *testing.B) {
			_, conn, sink := observedEngine(b, mode.on)
			frame := []byte(workerFrame)
			b.ReportAllocs()
			for b.Loop() {
				conn.HandleFrame(frame, nil)
				<-sink.ch
			}
		})
		for _, tc := range handlerCases {
			b.Run("http/"+tc.name+"/"+mode.name, func(b *testing.B) {
				h, ctx := observedHandler(b, mode.on, tc.body)
				b.ReportAllocs()
				for b.Loop() {
					ctx.Response.Reset()
					h(ctx)
				}
			})
		}
	}
}

var _ session.Sink = signalSink{}

// BenchmarkToolDone is the per-tool series' share of a tools/call: the
// ToolObserver's call, for a registered tool (untimed, as 15 in 16 calls
// on an event loop are, and timed) and for an unknown name.
func BenchmarkToolDone(b *testing.B) {
	m := admin.NewMetrics()
	reg := handlers.NewRegistry(handlers.Options{})
	require.NoError(b, builtin.Install("bench", reg, builtin.Env{}))
	m.TrackTools(reg)
	sess := session.New(context.Background(), nil)
	for _, tc := range []struct {
		name, tool string
		d          time.Duration
	}{{"registered", "echo", -1}, {"registered timed", "echo", 3 * time.Microsecond}, {"unknown", "nope", -1}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				m.ToolDone(sess, tc.tool, 0, false, tc.d)
			}
		})
	}
}

package engine_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeTracer samples when sample is set, and records the spans it starts
// and how they end.
type fakeTracer struct {
	sample  bool
	samples atomic.Int64 // Sample's calls
	mu      sync.Mutex
	parents []string // Sample's traceparents
	spans   []*fakeSpan
}

type spanKey struct{}

type fakeSpan struct {
	st        engine.SpanStart // its strings copied
	id        string
	code      int
	toolError bool
	ended     chan struct{}
}

func (f *fakeTracer) Sample(tp string) bool {
	f.samples.Add(1)
	if f.sample {
		f.mu.Lock()
		f.parents = append(f.parents, tp)
		f.mu.Unlock()
	}
	return f.sample
}

func (f *fakeTracer) Start(st *engine.SpanStart) engine.Span {
	s := &fakeSpan{st: *st, id: string(st.ID), ended: make(chan struct{})}
	s.st.ID = nil
	s.st.TraceParent, s.st.TraceState = string([]byte(st.TraceParent)), string([]byte(st.TraceState))
	s.st.Tool, s.st.Prompt, s.st.Session = string([]byte(st.Tool)), string([]byte(st.Prompt)), string([]byte(st.Session))
	f.mu.Lock()
	f.spans = append(f.spans, s)
	f.mu.Unlock()
	return s
}

func (f *fakeTracer) last(t *testing.T) *fakeSpan {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	require.NotEmpty(t, f.spans)
	s := f.spans[len(f.spans)-1]
	select {
	case <-s.ended:
	case <-time.After(wait):
		t.Fatal("the span did not end")
	}
	return s
}

func (s *fakeSpan) Value(key any) any {
	if _, ok := key.(spanKey); ok {
		return s
	}
	return nil
}

func (s *fakeSpan) TraceContext() (string, string) {
	return "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "span=1"
}

func (s *fakeSpan) End(code int, toolError bool) {
	s.code, s.toolError = code, toolError
	close(s.ended)
}

// TestTracerSpans: a span per request, from the dispatch's one Sample
// decision, with what the engine knows of the request, ended with its
// code; the handler's context carries it, and its Peer propagates its
// trace context.
func TestTracerSpans(t *testing.T) {
	tr := &fakeTracer{sample: true}
	f := newFixture(t, engine.Options{Tracer: tr})
	var inCtx, scope atomic.Value
	require.NoError(t, handlers.AddTool(f.srv.Registry(), &mcp.Tool{Name: "look"},
		func(ctx context.Context, req *handlers.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			inCtx.Store(ctx.Value(spanKey{}) != nil)
			tp, ts, _ := req.Peer.(handlers.TraceScope).TraceContext()
			scope.Store(tp + " " + ts)
			return mcp.ErrorResult("not found"), nil, nil
		}))
	require.NoError(t, handlers.AddTool(f.srv.Registry(), &mcp.Tool{Name: "quick"},
		func(_ context.Context, req *handlers.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return req.TextResult("q"), nil, nil
		}, handlers.ToolOptions{NonBlocking: true}))
	c := f.ready(t, `{}`)
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

	for _, tc := range []struct {
		name, frame      string
		method, tool, tp string
		code             int
		toolError        bool
	}{
		{"pool", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a"},"_meta":{"traceparent":"` + parent + `","tracestate":"k=v"}}}`, "tools/call", "echo", parent, 0, false},
		{"tool error", `{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"look","arguments":{}}}`, "tools/call", "look", "", 0, true},
		{"inline", `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"quick","arguments":{},"_meta":{"traceparent":"` + parent + `"}}}`, "tools/call", "quick", parent, 0, false},
		{"unknown tool", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"nope","arguments":{}}}`, "tools/call", "", "", codec.CodeInvalidParams, false},
		{"ping", `{"jsonrpc":"2.0","id":10,"method":"ping","params":{"_meta":{"traceparent":"` + parent + `"}}}`, "ping", "", parent, 0, false},
		{"unknown method", `{"jsonrpc":"2.0","id":11,"method":"x/y"}`, "other", "", "", codec.CodeMethodNotFound, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tr.samples.Load()
			c.call(tc.frame)
			s := tr.last(t)
			assert.Equal(t, int64(1), tr.samples.Load()-before, "one decision per request")
			assert.Equal(t, tc.method, s.st.Method)
			assert.Equal(t, tc.tool, s.st.Tool)
			assert.Equal(t, tc.tp, s.st.TraceParent)
			assert.Equal(t, c.sess.ID(), s.st.Session)
			assert.Equal(t, "2025-11-25", s.st.Version)
			assert.Equal(t, tc.code, s.code)
			assert.Equal(t, tc.toolError, s.toolError)
			assert.False(t, s.st.Time.IsZero())
			assert.Contains(t, tc.frame, `"id":`+s.id)
		})
	}
	assert.Equal(t, true, inCtx.Load(), "the handler's context carries the span")
	assert.Equal(t, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01 span=1", scope.Load(), "the Peer propagates the span's context")
	var state string
	for _, s := range tr.spans {
		if s.id == "7" {
			state = s.st.TraceState
		}
	}
	assert.Equal(t, "k=v", state)
}

// traceCarrier is a reply sink whose transport carries a trace context.
type traceCarrier struct{ signalSink }

func (traceCarrier) TraceHeaders() ([]byte, []byte) {
	return []byte("00-11111111111111111111111111111111-2222222222222222-01"), nil
}

// TestTracerTransportParent: a request whose _meta has no trace context
// is parented on its transport's (engine.TraceCarrier); _meta's wins.
func TestTracerTransportParent(t *testing.T) {
	tr := &fakeTracer{sample: true}
	f := newFixture(t, engine.Options{Tracer: tr})
	sink := traceCarrier{signalSink{ch: make(chan int, 4)}}
	sess := f.srv.Open(sink).Session()
	conn := f.srv.Conn(sess)
	conn.HandleFrame([]byte(fmt.Sprintf(initFrame, `{}`)), nil)
	conn.HandleFrame([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), nil)
	for _, tc := range []struct{ frame, want string }{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a"}}}`, "00-11111111111111111111111111111111-2222222222222222-01"},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a"},"_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"}}}`, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"},
	} {
		var m codec.Message
		require.NoError(t, codec.Decode([]byte(tc.frame), &m))
		_, queued := conn.HandleMessage(&m, []byte(tc.frame), nil, sink)
		require.True(t, queued)
		<-sink.ch
		assert.Equal(t, tc.want, tr.last(t).st.TraceParent)
	}
}

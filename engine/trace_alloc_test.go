//go:build !race

package engine_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTracerUnsampledZeroAlloc: with a Tracer that samples nothing, the
// paths held at zero allocations stay there (tools/call on the pool and
// inline, ping, a list page, with a trace context in _meta or none): a
// request not traced costs its one decision. Tracing off is
// TestToolsCallZeroAlloc and TestHandleFrameZeroAlloc.
func TestTracerUnsampledZeroAlloc(t *testing.T) {
	tr := &fakeTracer{}
	f := newFixture(t, engine.Options{Tracer: tr})
	require.NoError(t, handlers.AddTool(f.srv.Registry(), &mcp.Tool{Name: "echo_inline"},
		func(_ context.Context, req *handlers.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
			return req.TextResult(in.Text), nil, nil
		}, handlers.ToolOptions{NonBlocking: true}))
	sink := signalSink{ch: make(chan int, 1)}
	conn := f.srv.Conn(f.srv.Open(sink).Session())
	out := conn.HandleFrame([]byte(fmt.Sprintf(initFrame, `{}`)), make([]byte, 0, 64<<10))
	require.Nil(t, parse(t, out).Error)
	conn.HandleFrame([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), nil)
	const meta = `,"_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"}`
	for _, tc := range []struct {
		name, frame string
		pool        bool
	}{
		{"pool", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`, true},
		{"pool, _meta", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}` + meta + `}}`, true},
		{"inline", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo_inline","arguments":{"text":"hello"}}}`, false},
		{"inline, _meta", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo_inline","arguments":{"text":"hello"}` + meta + `}}`, false},
		{"ping", `{"jsonrpc":"2.0","id":5,"method":"ping"}`, false},
		{"tools/list", `{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			frame := []byte(tc.frame)
			call := func() {
				out = conn.HandleFrame(frame, out[:0])
				if tc.pool {
					<-sink.ch
				} else if len(out) == 0 {
					t.Fatal("not answered at once")
				}
			}
			call()
			before := tr.samples.Load()
			assert.Zero(t, testing.AllocsPerRun(1000, call))
			assert.Equal(t, int64(1001), tr.samples.Load()-before, "one decision per request")
		})
	}
}

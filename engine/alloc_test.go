//go:build !race

// The race detector makes sync.Pool drop items at random, so allocation
// counts are measured without it.

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

// TestHandleFrameZeroAlloc holds the event-loop path at zero allocations:
// answers that need no handler code, appended to a reused output buffer.
func TestHandleFrameZeroAlloc(t *testing.T) {
	assertZeroAllocFrames(t, []frameCase{
		{"tools/list", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
		{"tools/list string id", `{"jsonrpc":"2.0","id":"abc-123","method":"tools/list"}`},
		{"prompts/list", `{"jsonrpc":"2.0","id":3,"method":"prompts/list"}`},
		{"ping", `{"jsonrpc":"2.0","id":2,"method":"ping"}`},
		{"ping string id", `{"jsonrpc":"2.0","id":"p-1","method":"ping"}`},
		{"notifications/initialized", `{"jsonrpc":"2.0","method":"notifications/initialized"}`},
	})
}

type frameCase struct{ name, frame string }

func assertZeroAllocFrames(t *testing.T, cases []frameCase) {
	f := newFixture(t, engine.Options{})
	c := f.ready(t, `{}`)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			frame := []byte(tc.frame)
			out := make([]byte, 0, 64<<10)
			out = f.srv.Conn(c.sess).HandleFrame(frame, out[:0]) // warm the pools and the page cache
			if len(out) > 0 {
				require.Nil(t, parse(t, out).Error)
			}
			allocs := testing.AllocsPerRun(1000, func() {
				out = f.srv.Conn(c.sess).HandleFrame(frame, out[:0])
			})
			assert.Zero(t, allocs, "%s allocates %.1f times per call", tc.name, allocs)
		})
	}
}

// TestToolsCallZeroAlloc holds tools/call of a typed tool with flat
// arguments at zero allocations, from frame to encoded answer: on the
// worker pool (the frame copied into a pooled request, the handler run by
// a worker, the answer sent to the session's sink), and inline for a
// NonBlocking tool.
func TestToolsCallZeroAlloc(t *testing.T) {
	f := newFixture(t, engine.Options{})
	require.NoError(t, handlers.AddTool(f.srv.Registry(), &mcp.Tool{Name: "echo_inline"},
		func(_ context.Context, req *handlers.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
			return req.TextResult(in.Text), nil, nil
		}, handlers.ToolOptions{NonBlocking: true}))
	sink := signalSink{ch: make(chan int, 1)}
	sess := f.srv.Open(sink).Session()
	conn := f.srv.Conn(sess)
	out := conn.HandleFrame([]byte(fmt.Sprintf(initFrame, `{}`)), make([]byte, 0, 4096))
	require.Nil(t, parse(t, out).Error)
	conn.HandleFrame([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), nil)

	t.Run("worker pool", func(t *testing.T) {
		frame := []byte(`{"jsonrpc":"2.0","id":123,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, world"}}}`)
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
	t.Run("inline", func(t *testing.T) {
		frame := []byte(`{"jsonrpc":"2.0","id":124,"method":"tools/call","params":{"name":"echo_inline","arguments":{"text":"hello, world"}}}`)
		out = conn.HandleFrame(frame, out[:0])
		require.Equal(t, "hello, world", parse(t, out).text(t))
		assert.Zero(t, testing.AllocsPerRun(1000, func() { out = conn.HandleFrame(frame, out[:0]) }))
	})
}

//go:build !race

package engine_test

import (
	"testing"

	"github.com/mcpedge/mcpedge/engine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStatelessZeroAlloc holds 2026-07-28 requests to the cost of the
// session's: a stateless tools/call through the worker pool, and a list
// page, allocate nothing on a connection that never initialized.
func TestStatelessZeroAlloc(t *testing.T) {
	f := newFixture(t, engine.Options{})
	sink := signalSink{ch: make(chan int, 1)}
	conn := f.srv.Open(sink)
	out := make([]byte, 0, 4096)
	t.Run("tools/call", func(t *testing.T) {
		frame := []byte(req26(123, "tools/call", `"name":"echo","arguments":{"text":"hello, world"}`, `{}`))
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
	t.Run("tools/list", func(t *testing.T) {
		frame := []byte(req26(124, "tools/list", ``, `{}`))
		out = conn.HandleFrame(frame, out[:0])
		require.Nil(t, parse(t, out).Error)
		assert.Zero(t, testing.AllocsPerRun(1000, func() { out = conn.HandleFrame(frame, out[:0]) }))
	})
}

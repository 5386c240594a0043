//go:build !race

package engine_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mcpedge/mcpedge/engine"
)

// TestAuthorizedZeroAlloc: with authorization on, a session's tools/call
// (its caller rechecked) and a 2026-07-28 tools/call with a static token
// of its own (a digest and a constant-time compare) still allocate
// nothing on the worker-pool path.
func TestAuthorizedZeroAlloc(t *testing.T) {
	f, conn, sink, stateless := authorizedEcho(t)
	fresh := f.srv.Open(sink) // never initialized: 2026-07-28 requests
	var out []byte
	for _, tc := range []struct {
		name  string
		conn  engine.Conn
		frame []byte
	}{
		{"session", conn, []byte(`{"jsonrpc":"2.0","id":123,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, world"}}}`)},
		{"2026-07-28", fresh, stateless},
	} {
		t.Run(tc.name, func(t *testing.T) {
			call := func() {
				if out = tc.conn.HandleFrame(tc.frame, out[:0]); len(out) > 0 {
					t.Fatalf("answered at once: %s", out)
				}
				if n := <-sink.ch; n < 50 {
					t.Fatalf("short answer: %d bytes", n)
				}
			}
			call()
			assert.Zero(t, testing.AllocsPerRun(1000, call))
		})
	}
}

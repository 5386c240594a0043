//go:build !race

package engine_test

import (
	"testing"

	"github.com/mcpedge/mcpedge/engine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMiddlewareZeroAlloc holds the event-loop path at zero allocations
// with a pass-through receiving middleware too.
func TestMiddlewareZeroAlloc(t *testing.T) {
	f := newFixture(t, engine.Options{Receive: []engine.Middleware{passThrough}})
	c := f.ready(t, `{}`)
	for _, frame := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":2,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"mem://static"}}`,
	} {
		in := []byte(frame)
		out := f.srv.Conn(c.sess).HandleFrame(in, make([]byte, 0, 64<<10))
		require.Nil(t, parse(t, out).Error)
		allocs := testing.AllocsPerRun(1000, func() {
			out = f.srv.Conn(c.sess).HandleFrame(in, out[:0])
		})
		assert.Zero(t, allocs, "%s allocates %.1f times per call", frame, allocs)
	}
}

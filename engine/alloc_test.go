//go:build !race

// The race detector makes sync.Pool drop items at random, so allocation
// counts are measured without it.

package engine_test

import (
	"testing"

	"github.com/mcpedge/mcpedge/engine"
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

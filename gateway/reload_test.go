package gateway_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/client"
	"github.com/mcpedge/mcpedge/gateway"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReload: a reload adds, renames and removes upstreams without
// restarting the others, and clients hear of the lists that changed.
func TestReload(t *testing.T) {
	a := selfUpstream("a", "conformance")
	f := startFront(t, gateway.Options{Upstreams: []gateway.Upstream{a}})
	var changed atomic.Int64
	c := f.dial(t, client.Options{OnToolListChanged: func() { changed.Add(1) }})
	assert.Contains(t, toolNames(t, c), "test_simple_text")
	childrenOf := func(name string) uint64 {
		for _, s := range f.gw.Status() {
			if s.Name == name {
				return s.ChildrenStarted
			}
		}
		return 0
	}
	require.Equal(t, uint64(1), childrenOf("a"))

	reload := func(ups ...gateway.Upstream) {
		t.Helper()
		apply, err := f.gw.PrepareReload(ups)
		require.NoError(t, err)
		apply(context.Background())
	}
	waitTools := func(want, notWant string) {
		t.Helper()
		require.Eventually(t, func() bool {
			names := toolNames(t, c)
			has := func(n string) bool {
				for _, x := range names {
					if x == n {
						return true
					}
				}
				return false
			}
			return has(want) && (notWant == "" || !has(notWant))
		}, 10*time.Second, 10*time.Millisecond)
	}

	// Two upstreams: each one's names get its prefix; a keeps its child.
	reload(a, selfUpstream("b", "demo"))
	waitTools("a_test_simple_text", "test_simple_text")
	waitTools("b_echo", "")
	assert.Equal(t, uint64(1), childrenOf("a"), "a was not restarted")
	require.Eventually(t, func() bool { return changed.Load() > 0 }, 5*time.Second, 10*time.Millisecond, "list_changed sent")
	r, err := c.CallTool(testCtx(t), "a_test_simple_text", map[string]any{})
	require.NoError(t, err)
	assert.Equal(t, "This is a simple text response for testing.", text(t, r))

	// A bad configuration is refused whole.
	_, err = f.gw.PrepareReload([]gateway.Upstream{a, {Name: "bad name!", Transport: gateway.Stdio, Command: "true"}})
	require.ErrorIs(t, err, gateway.ErrConfig)
	_, err = f.gw.PrepareReload([]gateway.Upstream{a, {Name: "c", Transport: gateway.Stdio, Command: "/nonexistent/command"}})
	require.ErrorIs(t, err, gateway.ErrConfig)
	assert.Len(t, f.gw.Status(), 2)

	// b removed: its items go, a's names lose their prefix.
	reload(a)
	waitTools("test_simple_text", "b_echo")
	assert.Len(t, f.gw.Status(), 1)
	assert.Equal(t, uint64(1), childrenOf("a"))
}

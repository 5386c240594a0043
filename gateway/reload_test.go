package gateway_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/client"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/gateway"
	"github.com/mcpedge/mcpedge/mcp"
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

// TestReloadDrains: a reload that changes an upstream's connection
// settings replaces its connections without failing the calls in flight
// on the old ones, and without withdrawing its items: new calls go to
// the new connection at once.
func TestReloadDrains(t *testing.T) {
	a := selfUpstream("a", "fake")
	f := startFront(t, gateway.Options{Upstreams: []gateway.Upstream{a}})
	entered, release := make(chan struct{}), make(chan struct{})
	var changed atomic.Int64
	c := f.dial(t, client.Options{
		OnToolListChanged: func() { changed.Add(1) },
		OnElicitation: func(context.Context, *client.ServerRequest, *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			close(entered)
			<-release
			return &mcp.ElicitResult{Action: "accept", Content: codec.RawJSON(`{"name":"ada"}`)}, nil
		},
	})
	ctx := testCtx(t)
	done := make(chan error, 1)
	go func() {
		r, err := c.CallTool(ctx, "elicit", map[string]any{})
		if err == nil && !strings.Contains(text(t, r), "ada") {
			err = fmt.Errorf("answered %q", text(t, r))
		}
		done <- err
	}()
	<-entered // the call is in flight on the old connection

	a.Timeout = 45 * time.Second // a connection setting
	apply, err := f.gw.PrepareReload([]gateway.Upstream{a})
	require.NoError(t, err)
	apply(context.Background())

	r, err := c.CallTool(ctx, "echo", map[string]any{"n": 1})
	require.NoError(t, err, "served by the new connection")
	assert.Equal(t, `{"n":1}`, text(t, r))
	st := f.gw.Status()[0]
	assert.Equal(t, uint64(1), st.ChildrenStarted, "the new upstream's own child")
	assert.Equal(t, uint64(1), st.Calls)

	close(release)
	require.NoError(t, <-done, "the call in flight finished on the old connection")
	assert.Zero(t, changed.Load(), "the items stayed: no list_changed")
}

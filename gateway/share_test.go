package gateway_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/client"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/gateway"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestShareSession: share = "session" gives each downstream session a
// child of its own, stopped when the session ends, bounded by
// max-sessions.
func TestShareSession(t *testing.T) {
	u := selfUpstream("x", "conformance")
	u.Share = gateway.Share{Session: true}
	u.MaxSessions = 2
	f := startFront(t, gateway.Options{Upstreams: []gateway.Upstream{u}})
	ctx := testCtx(t)
	call := func(c *client.Client) error {
		_, err := c.CallTool(ctx, "test_simple_text", map[string]any{})
		return err
	}
	a, b := f.dial(t, client.Options{}), f.dial(t, client.Options{})
	require.NoError(t, call(a))
	require.NoError(t, call(b))
	require.NoError(t, call(a))
	st := f.gw.Status()[0]
	assert.Equal(t, 3, st.Children, "the mirror's child and one per session")
	c := f.dial(t, client.Options{})
	err := call(c)
	var ce *codec.Error
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, ce.Message, "too many sessions")
	require.NoError(t, a.Close())
	require.Eventually(t, func() bool { return f.gw.Status()[0].Children == 2 }, 10*time.Second, 10*time.Millisecond, "a's child stopped")
	require.NoError(t, call(c), "room again")
}

// TestLazy: a lazy pool starts its second child only when the first is
// busy.
func TestLazy(t *testing.T) {
	u := selfUpstream("x", "conformance")
	u.Share, u.Lazy = gateway.Share{Pool: 2}, true
	f := startFront(t, gateway.Options{Upstreams: []gateway.Upstream{u}})
	assert.Equal(t, 1, f.gw.Status()[0].Started)
	elicit := make(chan struct{})
	c := f.dial(t, client.Options{OnElicitation: func(ctx context.Context, _ *client.ServerRequest, _ *mcp.ElicitParams) (*mcp.ElicitResult, error) {
		<-elicit
		return &mcp.ElicitResult{Action: "decline"}, nil
	}})
	done := make(chan error, 1)
	go func() {
		_, err := c.CallTool(context.Background(), "test_elicitation", map[string]any{"message": "hold"})
		done <- err
	}()
	require.Eventually(t, func() bool { return f.gw.Status()[0].InFlight == 1 }, 10*time.Second, 5*time.Millisecond)
	_, err := c.CallTool(testCtx(t), "test_simple_text", map[string]any{})
	require.NoError(t, err)
	assert.Equal(t, 2, f.gw.Status()[0].Started, "the busy pool grew")
	close(elicit)
	require.NoError(t, <-done)
}

// TestTasks2025: task-augmented calls of 2025-11-25 through the gateway.
// The gateway's engine runs the downstream task; its upstream call is a
// plain one for a tool whose task support is optional, and a
// task-augmented one (then tasks/result) for one that requires it. The
// upstream's elicitations reach the downstream task (related-task).
func TestTasks2025(t *testing.T) {
	f := startFront(t, gateway.Options{Upstreams: []gateway.Upstream{selfUpstream("x", "conformance")}})
	c := f.dial(t, client.Options{OnElicitation: func(_ context.Context, _ *client.ServerRequest, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
		if strings.Contains(p.Message, "name") {
			return &mcp.ElicitResult{Action: "accept", Content: codec.RawJSON(`{"name":"Ada"}`)}, nil
		}
		return &mcp.ElicitResult{Action: "accept", Content: codec.RawJSON(`{"confirm":true}`)}, nil
	}})
	ctx := testCtx(t)
	for _, tt := range []struct {
		tool, want string
		isError    bool
	}{
		{"confirm_delete", "Deleted a.txt", false},
		{"test_tool_with_task", "Hello, Ada! (greeted from a task)", false},
		{"failing_job", "", true},
	} {
		t.Run(tt.tool, func(t *testing.T) {
			ct, err := c.CallToolAsTask(ctx, tt.tool, map[string]any{"filename": "a.txt"}, time.Minute)
			require.NoError(t, err)
			res, err := c.ToolTaskResult(ctx, ct.Task.TaskID)
			require.NoError(t, err)
			assert.Equal(t, tt.isError, res.IsError)
			if tt.want != "" {
				assert.Equal(t, tt.want, text(t, res))
			}
			task, err := c.GetTask(ctx, ct.Task.TaskID)
			require.NoError(t, err)
			if tt.isError {
				assert.Equal(t, mcp.TaskFailed, task.Status)
			} else {
				assert.Equal(t, mcp.TaskCompleted, task.Status)
			}
		})
	}
}

// TestShareSessionRoots: with share = "session", a client's
// notifications/roots/list_changed reaches its own upstream connection,
// and the roots/list the upstream then asks outside any call is answered
// with that client's roots.
func TestShareSessionRoots(t *testing.T) {
	u := selfUpstream("x", "fake")
	u.Share = gateway.Share{Session: true}
	f := startFront(t, gateway.Options{Upstreams: []gateway.Upstream{u}})
	c := f.dial(t, client.Options{OnRoots: func(context.Context, *client.ServerRequest) (*mcp.ListRootsResult, error) {
		return &mcp.ListRootsResult{Roots: []mcp.Root{{URI: "file:///work/a", Name: "a"}}}, nil
	}})
	ctx := testCtx(t)
	// A first call opens the session's own upstream connection.
	_, err := c.CallTool(ctx, "echo", map[string]any{})
	require.NoError(t, err)
	require.NoError(t, c.NotifyRootsListChanged(ctx))
	r, err := c.CallTool(ctx, "roots", map[string]any{})
	require.NoError(t, err)
	assert.Contains(t, text(t, r), "file:///work/a")
}

package gateway_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mcpedge/mcpedge/client"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/gateway"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPoolThousandSessions: 1,000 downstream sessions call a tool that
// elicits through a pool of 4 stdio children: 4 children, no error, and
// each elicitation reaches, and is answered by, the session whose call
// caused it (the upstream links its requests with the related-request
// key the gateway asks for).
func TestPoolThousandSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 sessions")
	}
	const sessions = 1000
	u := selfUpstream("x", "conformance")
	u.Share = gateway.Share{Pool: 4}
	f := startFront(t, gateway.Options{Upstreams: []gateway.Upstream{u}})
	ctx := testCtx(t)
	var wrong, failed atomic.Int64
	var wg sync.WaitGroup
	clients := make([]*client.Client, sessions)
	for i := range sessions {
		me := fmt.Sprintf("session-%04d", i)
		c, err := client.Dial(ctx, &client.TCPTransport{Addr: f.addr}, client.Options{Era: client.EraLegacy,
			OnElicitation: func(_ context.Context, _ *client.ServerRequest, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
				if p.Message != me {
					wrong.Add(1)
				}
				return &mcp.ElicitResult{Action: "accept", Content: codec.RawJSON(`{"username":"` + me + `","email":"x@example.com"}`)}, nil
			}})
		require.NoError(t, err)
		clients[i] = c
		t.Cleanup(func() { _ = c.Close() })
	}
	for i, c := range clients {
		me := fmt.Sprintf("session-%04d", i)
		wg.Go(func() {
			r, err := c.CallTool(ctx, "test_elicitation", map[string]any{"message": me})
			if err != nil || r.IsError || len(r.Content) == 0 || !strings.Contains(r.Content[0].Text, `"username":"`+me+`"`) {
				failed.Add(1)
				if failed.Load() < 5 {
					t.Logf("%s: %v %+v", me, err, r)
				}
			}
		})
	}
	wg.Wait()
	assert.Zero(t, wrong.Load(), "elicitations that reached another session")
	assert.Zero(t, failed.Load(), "calls that failed or got another session's answer")
	st := f.gw.Status()
	require.Len(t, st, 1)
	assert.Equal(t, 4, st[0].Children, "children running")
	assert.Equal(t, uint64(4), st[0].ChildrenStarted, "children ever started")
	assert.Equal(t, uint64(sessions), st[0].Calls)
	assert.Zero(t, st[0].Errors)
	assert.Zero(t, st[0].Unrouted)
}

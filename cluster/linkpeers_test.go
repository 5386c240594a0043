package cluster_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/cluster"
	"github.com/stretchr/testify/require"
)

// TestLinkForwards: what must reach another node goes on the direct link
// between them; a link that goes down is dialled again, and a node
// without one is reached through NATS.
func TestLinkForwards(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nodes")
	}
	// taskOn makes a task of a session of nd and returns the session and
	// the task's id, which names nd: tasks/get of it is forwarded there.
	taskOn := func(t *testing.T, nd *node) (string, string) {
		sid := initialize(t, nd, `{}`)
		res := call(t, nd, sid, "tools/call", `{"name":"bake","arguments":{},"task":{"ttl":60000}}`)
		task, _ := res["task"].(map[string]any)
		require.NotNil(t, task, "%v", res)
		id, _ := task["taskId"].(string)
		require.True(t, strings.HasPrefix(id, nd.name+"."), id)
		return sid, id
	}
	// get reads the task through via, until it is served (via meets the
	// session's record and the owner's link address within a few
	// heartbeats).
	get := func(t *testing.T, via *node, sid, id string) {
		require.Eventually(t, func() bool {
			st, _, msgs := post(t, via.url, v, sid, `{"jsonrpc":"2.0","id":9,"method":"tasks/get","params":{"taskId":"`+id+`"}}`)
			return st == http.StatusOK && strings.Contains(fmt.Sprint(msgs), id)
		}, 10*time.Second, 20*time.Millisecond, "tasks/get through %s", via.name)
	}

	t.Run("both with a link", func(t *testing.T) {
		a := startNode(t, "a", nil)
		defer a.kill(t)
		b := startNode(t, "b", []string{routeOf(a)})
		defer b.kill(t)
		waitMesh(t, a, b)
		require.NotNil(t, a.n.LinkAddr())
		sid, id := taskOn(t, a)

		t.Run("a forward goes on the link", func(t *testing.T) {
			require.Eventually(t, func() bool {
				get(t, b, sid, id)
				return b.n.Stats().ForwardedLink > 0
			}, 10*time.Second, 20*time.Millisecond)
			before := b.n.Stats()
			for range 10 {
				get(t, b, sid, id)
			}
			after := b.n.Stats()
			require.Equal(t, after.Forwarded-before.Forwarded, after.ForwardedLink-before.ForwardedLink, "every forward on the link")
			require.GreaterOrEqual(t, after.ForwardedLink-before.ForwardedLink, uint64(10))
			require.Zero(t, a.n.Stats().LinksRefused)
		})

		t.Run("a link that goes down is dialled again", func(t *testing.T) {
			b.n.DropLinks()
			a.n.DropLinks()
			before := b.n.Stats().ForwardedLink
			// The first forward may find the link down and go through
			// NATS; within a second (the redial's wait) it is on the link
			// again.
			require.Eventually(t, func() bool {
				get(t, b, sid, id)
				return b.n.Stats().ForwardedLink > before
			}, 10*time.Second, 50*time.Millisecond)
		})
	})

	t.Run("a node without a link is reached through NATS", func(t *testing.T) {
		a := startNode(t, "a", nil, func(o *cluster.Options) { o.Link = "" })
		defer a.kill(t)
		b := startNode(t, "b", []string{routeOf(a)})
		defer b.kill(t)
		waitMesh(t, a, b)
		require.Nil(t, a.n.LinkAddr())
		sid, id := taskOn(t, a)
		before := b.n.Stats()
		for range 5 {
			get(t, b, sid, id)
		}
		after := b.n.Stats()
		require.GreaterOrEqual(t, after.Forwarded-before.Forwarded, uint64(5))
		require.Zero(t, after.ForwardedLink, "a has no link to send on")
		// And a, with no link of its own, forwards to b through NATS.
		sidB, idB := taskOn(t, b)
		get(t, a, sidB, idB)
		require.Zero(t, a.n.Stats().ForwardedLink)
		require.Positive(t, a.n.Stats().Forwarded)
	})
}

package cluster_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/cluster"
	"github.com/stretchr/testify/require"
)

// TestRoundRobinQuiet: a session's ordinary requests sent to each node in
// turn (a round-robin load balancer) are served where they land, and cost
// the cluster nothing per request: no message on its subjects but the
// heartbeats and a replica's rare word to the home that the session is in
// use (recUsed, at most once per quarter of the idle timeout per session
// and replica), and nothing forwarded.
func TestRoundRobinQuiet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	a, b, c := startThree(t)
	defer func() {
		for _, nd := range []*node{a, b, c} {
			nd.kill(t)
		}
	}()
	nodes := []*node{a, b, c}

	const sessions, calls = 6, 300
	echo := `{"name":"echo","arguments":{"text":"hi"}}`
	sids := make([]string, sessions)
	for i := range sids {
		sids[i] = initialize(t, nodes[i%3], `{}`)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, nd := range nodes { // every record everywhere: none is asked for
		for nd.n.Stats().Records < sessions {
			require.False(t, time.Now().After(deadline), "node %s has %d records: %+v", nd.name, nd.n.Stats().Records, nd.n.Stats())
			time.Sleep(5 * time.Millisecond)
		}
	}
	for _, sid := range sids {
		for _, nd := range nodes { // each node holds each session from now on
			call(t, nd, sid, "tools/call", echo)
		}
	}
	fwd := forwarded(a, b, c)

	counters := make([]*cluster.MsgCounter, len(nodes))
	for i, nd := range nodes {
		mc, err := nd.n.CountMessages()
		require.NoError(t, err)
		counters[i] = mc
		defer mc.Stop()
	}
	// What the nodes published before marker seq is heard before it.
	// Each node sends it again until every other node heard it: the
	// first may go before the routes carry the counters' interest.
	mark := func(seq int) map[string]int {
		deadline := time.Now().Add(10 * time.Second)
		for {
			for _, nd := range nodes {
				require.NoError(t, nd.n.Mark(seq))
			}
			all := true
			for i, mc := range counters {
				var others []string
				for j, nd := range nodes {
					if j != i {
						others = append(others, nd.name)
					}
				}
				all = all && mc.Marked(seq, others...)
			}
			if all {
				break
			}
			require.False(t, time.Now().After(deadline), "marker %d: not heard by every node", seq)
			time.Sleep(20 * time.Millisecond)
		}
		seen := map[string]int{}
		for _, mc := range counters {
			for k, n := range mc.Counts() {
				seen[k] += n
			}
		}
		return seen
	}
	before := mark(1)
	start := time.Now()
	for i := range calls {
		res := call(t, nodes[i%3], sids[(i/3)%sessions], "tools/call", echo)
		require.Contains(t, fmt.Sprint(res["content"]), "hi")
	}
	elapsed := time.Since(start)
	seen := mark(2)
	for k, n := range before {
		seen[k] -= n
	}
	require.Equal(t, fwd, forwarded(a, b, c), "a request of the round-robin was forwarded")
	t.Logf("heard during %d calls in %v: %v", calls, elapsed, seen)
	delete(seen, "hb")
	// Each message is heard by the two other nodes. recUsed goes at most
	// every 30 s / 4 (the default InitTimeout) per session and replica.
	used := 2 * sessions * 2 * (1 + int(elapsed/(30*time.Second/4)))
	require.LessOrEqual(t, seen["rec"], used, "record messages during %d calls in %v: %v", calls, elapsed, seen)
	delete(seen, "rec")
	for k, n := range seen {
		if n == 0 {
			delete(seen, k)
		}
	}
	require.Empty(t, seen, "messages on the cluster's subjects during %d round-robin calls", calls)
}

package cluster_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge"
	"github.com/mcpedge/mcpedge/cluster"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers/builtin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startLimited starts a node routed to routes, serving the demo set, whose
// engine has the options eo and counts the cluster's live nodes as
// mcpedge's command does (its routes and itself), so that each node
// enforces its share of the cluster-wide limits.
func startLimited(t *testing.T, name string, routes []string, eo engine.Options) *node {
	t.Helper()
	n, err := cluster.Start(context.Background(), cluster.Options{Node: name, Embed: "127.0.0.1:0", Routes: routes, ForwardTimeout: 2 * time.Second,
		RouteSecret: routeSecret, Keys: [][]byte{stateKey}, Heartbeat: 100 * time.Millisecond, Link: "127.0.0.1:0"})
	require.NoError(t, err)
	eo.Name, eo.StateKeys = "cluster-limits-test", [][]byte{stateKey}
	eo.Nodes = func() int { return n.Routes() + 1 }
	srv := mcpedge.New(mcpedge.Options{EngineOptions: eo, HTTP: &mcpedge.HTTPOptions{Addr: "127.0.0.1:0"}, Cluster: n, DrainTimeout: time.Second})
	bus := srv.Engine().Bus()
	require.NoError(t, builtin.Install("demo", srv.Registry(), builtin.Env{ResourceUpdated: srv.ResourceUpdated, Publish: bus.Publish, Subscribe: bus.Subscribe}))
	ctx, cancel := context.WithCancel(context.Background())
	nd := &node{name: name, n: n, srv: srv, stop: cancel, done: make(chan error, 1)}
	go func() { nd.done <- srv.Serve(ctx) }()
	a := srv.HTTPAddr(ctx)
	require.NotNil(t, a)
	nd.url = "http://" + a.String() + "/mcp"
	t.Cleanup(func() { nd.kill(t) })
	return nd
}

// TestClusterWideLimits: a cluster-wide limit holds across three nodes.
// One client (no token: its address is its subject) sends stateless
// 2026-07-28 calls to the three nodes in turn, as a load balancer
// spreads them; the rate is so low that only the burst counts, and each
// node admits its share of it, burst/3, so that the calls admitted
// across the cluster total the configured burst (within ±10%), not three
// times it. Every call past a node's share is refused 429 with the
// limit's name.
func TestClusterWideLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes per case")
	}
	const (
		burst = 30
		rate  = 0.001 // a token in 1000 s: only the burst counts
		sends = 3 * burst
	)
	for _, tc := range []struct {
		name  string
		opts  engine.Options
		limit string
	}{
		{"rate-subject", engine.Options{RateSubject: rate, RateSubjectBurst: burst}, engine.LimitRateSubject},
		{"tool rate", engine.Options{ToolLimits: map[string]engine.ToolLimits{"echo": {Rate: rate, Burst: burst}}}, engine.LimitToolRate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := startLimited(t, "a", nil, tc.opts)
			b := startLimited(t, "b", []string{routeOf(a)}, tc.opts)
			c := startLimited(t, "c", []string{routeOf(a), routeOf(b)}, tc.opts)
			nodes := []*node{a, b, c}
			waitMesh(t, nodes...) // the share is the limit over routes+1
			for _, nd := range nodes {
				require.Equal(t, 2, nd.n.Routes(), nd.name)
			}

			accepted := map[string]int{}
			total := 0
			for i := range sends {
				nd := nodes[i%len(nodes)]
				st, msgs := post2026(t, nd.url, "tools/call", "echo", `{"name":"echo","arguments":{"text":"hi"}}`)
				require.NotEmpty(t, msgs, "call %d through %s: status %d", i, nd.name, st)
				last := msgs[len(msgs)-1]
				if st == http.StatusOK && last["error"] == nil {
					require.NotNil(t, last["result"], "call %d through %s: %v", i, nd.name, last)
					accepted[nd.name]++
					total++
					continue
				}
				require.Equal(t, http.StatusTooManyRequests, st, "call %d through %s: %v", i, nd.name, last)
				e, _ := last["error"].(map[string]any)
				require.NotNil(t, e, "call %d through %s: %v", i, nd.name, last)
				assert.EqualValues(t, -32000, e["code"])
				data, _ := e["data"].(map[string]any)
				assert.Equal(t, tc.limit, data["limit"], "call %d through %s: %v", i, nd.name, e)
			}
			t.Logf("accepted %d of %d calls: %v", total, sends, accepted)
			assert.InDelta(t, burst, total, burst/10, "calls admitted across the cluster: %v", accepted)
			for _, nd := range nodes {
				assert.InDelta(t, burst/len(nodes), accepted[nd.name], 1, "node %s's share", nd.name)
			}
		})
	}
}

package gateway_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge"
	"github.com/mcpedge/mcpedge/client"
	"github.com/mcpedge/mcpedge/cluster"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/gateway"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// roundRobin sends each HTTP request to the next of hosts, as a load
// balancer without affinity does.
type roundRobin struct {
	hosts []string
	next  atomic.Uint32
	mu    sync.Mutex
	sent  map[string]int // requests by host
	rt    http.RoundTripper
}

func (r *roundRobin) RoundTrip(req *http.Request) (*http.Response, error) {
	h := r.hosts[int(r.next.Add(1))%len(r.hosts)]
	req = req.Clone(req.Context())
	req.URL.Host, req.Host = h, h
	r.mu.Lock()
	r.sent[h]++
	r.mu.Unlock()
	return r.rt.RoundTrip(req)
}

// TestClusterHeldCall: a 2026-07-28 client behind round-robin across 3
// nodes of a cluster completes an elicitation on a 2025-11-25 stdio
// upstream: the upstream call is held on the node the first round
// reached, whose name the requestState carries, and the retry that
// reaches another node is forwarded there.
func TestClusterHeldCall(t *testing.T) {
	stateKey := []byte("0123456789abcdef0123456789abcdef")
	type node struct {
		gw  *gateway.Gateway
		n   *cluster.Node
		url string
	}
	var nodes []*node
	var routes []string
	for _, name := range []string{"a", "b", "c"} {
		co := cluster.Options{Node: name, Embed: "127.0.0.1:0", Routes: routes, ForwardTimeout: 10 * time.Second, RouteSecret: "test-route-secret-0123456789"}
		n, err := cluster.Start(context.Background(), co)
		require.NoError(t, err)
		routes = append(routes, "nats-route://"+n.RouteAddr().String())
		gw, err := gateway.New(gateway.Options{Upstreams: []gateway.Upstream{selfUpstreamV("x", "conformance", "2025-11-25")}, StartTimeout: 20 * time.Second})
		require.NoError(t, err)
		srv := mcpedge.New(mcpedge.Options{
			EngineOptions: mcpedge.EngineOptions{StateKeys: [][]byte{stateKey}, MaxInflight: -1, Bus: gw.Bus(n.Bus())},
			HTTP:          &mcpedge.HTTPOptions{Addr: "127.0.0.1:0"},
			Cluster:       n,
			DrainTimeout:  time.Second,
		})
		require.NoError(t, gw.Start(context.Background(), srv.Engine()))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ctx) }()
		a := srv.HTTPAddr(ctx)
		require.NotNil(t, a)
		t.Cleanup(func() {
			cancel()
			<-done
			gw.Close()
			_ = n.Close()
		})
		nodes = append(nodes, &node{gw: gw, n: n, url: "http://" + a.String() + "/mcp"})
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, nd := range nodes {
		for nd.n.Routes() < len(nodes)-1 || nd.n.Ready() != nil {
			require.True(t, time.Now().Before(deadline), "the cluster did not form")
			time.Sleep(10 * time.Millisecond)
		}
	}
	// Interest in the nodes' subjects travels with the routes: wait until
	// each node forwards to each other one (a session of another node's
	// that the owner does not know: 404 from the owner, not here).
	for i, a := range nodes {
		for j := range nodes {
			for i != j {
				before := a.n.Stats().ForwardNoOwner
				req, err := http.NewRequest(http.MethodPost, a.url, strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"ping"}`))
				require.NoError(t, err)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Mcp-Session-Id", []string{"a", "b", "c"}[j]+".probe")
				resp, err := http.DefaultClient.Do(req)
				require.NoError(t, err)
				resp.Body.Close()
				if a.n.Stats().ForwardNoOwner == before {
					break
				}
				require.True(t, time.Now().Before(deadline), "node %d does not reach node %d", i, j)
				time.Sleep(20 * time.Millisecond)
			}
		}
	}

	rr := &roundRobin{sent: map[string]int{}, rt: http.DefaultTransport}
	for _, nd := range nodes {
		u, err := url.Parse(nd.url)
		require.NoError(t, err)
		rr.hosts = append(rr.hosts, u.Host)
	}
	var asked atomic.Int64
	ctx := testCtx(t)
	c, err := client.Dial(ctx, &client.HTTPTransport{URL: nodes[0].url, Client: &http.Client{Transport: rr}, NoStandaloneStream: true}, client.Options{
		Era: client.EraModern,
		OnElicitation: func(context.Context, *client.ServerRequest, *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			asked.Add(1)
			return &mcp.ElicitResult{Action: "accept", Content: codec.RawJSON(`{"name":"Ada"}`)}, nil
		},
	})
	require.NoError(t, err)
	defer c.Close()
	require.True(t, c.Modern())

	for i := range 6 {
		r, err := c.CallTool(ctx, "test_input_required_result_elicitation", map[string]any{})
		require.NoError(t, err, "call %d", i)
		assert.Equal(t, "Hello, Ada!", text(t, r))
	}
	assert.EqualValues(t, 6, asked.Load())
	var forwarded uint64
	for _, nd := range nodes {
		assert.Equal(t, 0, nd.gw.HeldCount(), "every held call ended")
		forwarded += nd.n.Stats().Forwarded
	}
	assert.NotZero(t, forwarded, "retries reached other nodes than the one holding their call")
	rr.mu.Lock()
	defer rr.mu.Unlock()
	assert.Len(t, rr.sent, 3, "every node was sent requests")
	for h, n := range rr.sent {
		assert.NotZero(t, n, h)
		assert.True(t, strings.HasPrefix(h, "127.0.0.1:"))
	}
}

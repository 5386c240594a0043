package gateway_test

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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
	nodes := startGatewayCluster(t, func(int) []gateway.Upstream {
		return []gateway.Upstream{selfUpstreamV("x", "conformance", "2025-11-25")}
	})
	rr := newRoundRobin(t, nodes)
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

// gwNode is a node of a test cluster: its gateway, its membership, and
// its MCP endpoint.
type gwNode struct {
	gw  *gateway.Gateway
	n   *cluster.Node
	url string
}

// startGatewayCluster starts 3 nodes of a cluster on 127.0.0.1, each an
// mcpedge serving HTTP through a gateway of ups(i), wired as cmd/mcpedge
// wires them (gatewayCluster), and waits until each forwards to each
// other.
func startGatewayCluster(t *testing.T, ups func(i int) []gateway.Upstream) []*gwNode {
	t.Helper()
	stateKey := []byte("0123456789abcdef0123456789abcdef")
	var nodes []*gwNode
	var routes []string
	for i, name := range []string{"a", "b", "c"} {
		co := cluster.Options{Node: name, Embed: "127.0.0.1:0", Routes: routes, ForwardTimeout: 10 * time.Second, RouteSecret: "test-route-secret-0123456789", Heartbeat: 200 * time.Millisecond}
		n, err := cluster.Start(context.Background(), co)
		require.NoError(t, err)
		routes = append(routes, "nats-route://"+n.RouteAddr().String())
		gw, err := gateway.New(gateway.Options{Upstreams: ups(i), StartTimeout: 20 * time.Second})
		require.NoError(t, err)
		srv := mcpedge.New(mcpedge.Options{
			EngineOptions: mcpedge.EngineOptions{StateKeys: [][]byte{stateKey}, MaxInflight: -1, Bus: gw.Bus(n.Bus()), OnRootsListChanged: gw.RootsListChanged},
			HTTP:          &mcpedge.HTTPOptions{Addr: "127.0.0.1:0"},
			Cluster:       n,
			DrainTimeout:  time.Second,
		})
		require.NoError(t, gw.Start(context.Background(), srv.Engine()))
		gw.SetCluster(n)
		n.SetPlacer(gw.Place)
		n.SetServices(gw.Health)
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
		nodes = append(nodes, &gwNode{gw: gw, n: n, url: "http://" + a.String() + "/mcp"})
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
	return nodes
}

// newRoundRobin is a round-robin balancer across nodes.
func newRoundRobin(t *testing.T, nodes []*gwNode) *roundRobin {
	rr := &roundRobin{sent: map[string]int{}, rt: http.DefaultTransport}
	for _, nd := range nodes {
		u, err := url.Parse(nd.url)
		require.NoError(t, err)
		rr.hosts = append(rr.hosts, u.Host)
	}
	return rr
}

// forwarded is the requests the nodes forwarded, all together.
func forwarded(nodes []*gwNode) uint64 {
	var k uint64
	for _, nd := range nodes {
		k += nd.n.Stats().Forwarded
	}
	return k
}

// TestClusterUpstreams: a session's calls through a gateway of 3 nodes
// behind round-robin. (a) A share = "session" upstream's calls all reach
// the one connection of the session, on its home. (b) A pooled upstream
// down on one node: the calls that land there are forwarded to a node
// where it is up, and succeed; down on every node: a clear JSON-RPC
// error, at once (not after the upstream's timeout, here a minute).
// (c) A pooled upstream up everywhere: nothing is forwarded. (d) As
// (b), for a 2026-07-28 client (stateless: no session, no home): its
// calls that land on the node where the upstream is down are forwarded
// too, and with it down everywhere answered at once.
func TestClusterUpstreams(t *testing.T) {
	const calls = 9
	for _, tt := range []struct {
		name        string
		share       gateway.Share
		down        []int // the nodes whose upstream is down
		stateless   bool  // a 2026-07-28 client
		wantErr     bool
		wantForward bool   // some calls were forwarded
		children    int    // upstream children on every node together, after
		leastDown   string // for wantErr: the error says this
	}{
		{name: "session", share: gateway.Share{Session: true}, wantForward: true, children: 3 + 1},
		{name: "pool down on one", share: gateway.Share{Pool: 1}, down: []int{2}, wantForward: true, children: 2},
		{name: "pool down everywhere", share: gateway.Share{Pool: 1}, down: []int{0, 1, 2}, wantErr: true, leastDown: "unavailable on every node"},
		{name: "pool up everywhere", share: gateway.Share{Pool: 1}, children: 3},
		{name: "stateless pool down on one", share: gateway.Share{Pool: 1}, stateless: true, down: []int{2}, wantForward: true, children: 2},
		{name: "stateless pool down everywhere", share: gateway.Share{Pool: 1}, stateless: true, down: []int{0, 1, 2}, wantErr: true, leastDown: "unavailable on every node"},
		{name: "stateless pool up everywhere", share: gateway.Share{Pool: 1}, stateless: true, children: 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			downFile := func(i int) string { return filepath.Join(dir, strconv.Itoa(i)) }
			nodes := startGatewayCluster(t, func(i int) []gateway.Upstream {
				u := selfUpstreamV("x", "conformance", "2025-11-25")
				u.Share = tt.share
				u.Timeout = time.Minute
				u.Env = append(u.Env, "GATEWAY_TEST_DOWN_FILE="+downFile(i))
				return []gateway.Upstream{u}
			})
			for _, i := range tt.down {
				require.NoError(t, os.WriteFile(downFile(i), nil, 0o600))
				nodes[i].gw.RestartUpstream("x")
			}
			// Every node knows every other's upstream state.
			require.Eventually(t, func() bool {
				for i, nd := range nodes {
					down := slices.Contains(tt.down, i)
					if (nd.gw.Status()[0].State == "down") != down {
						return false
					}
					for j, name := range []string{"a", "b", "c"} {
						if i == j {
							continue
						}
						up, ok := nd.n.PeerServices()[name]["x"]
						if !ok || up == slices.Contains(tt.down, j) {
							return false
						}
					}
				}
				return true
			}, 20*time.Second, 10*time.Millisecond, "the nodes learn each other's upstream state")

			rr := newRoundRobin(t, nodes)
			ctx := testCtx(t)
			era := client.EraLegacy
			if tt.stateless {
				era = client.EraModern
			}
			c, err := client.Dial(ctx, &client.HTTPTransport{URL: nodes[0].url, Client: &http.Client{Transport: rr}, NoStandaloneStream: true}, client.Options{Era: era})
			require.NoError(t, err)
			defer c.Close()
			require.Equal(t, tt.stateless, c.Modern())
			before := forwarded(nodes)
			for i := range calls {
				r, err := c.CallTool(ctx, "test_simple_text", map[string]any{})
				if tt.wantErr {
					var ce *codec.Error
					require.ErrorAs(t, err, &ce, "call %d", i)
					assert.Equal(t, codec.CodeServerBusy, ce.Code)
					assert.Contains(t, ce.Message, tt.leastDown)
					assert.JSONEq(t, `{"upstream":"x"}`, string(ce.Data))
					continue
				}
				require.NoError(t, err, "call %d", i)
				assert.NotEmpty(t, text(t, r))
			}
			fw := forwarded(nodes) - before
			if tt.wantForward {
				assert.NotZero(t, fw, "calls were forwarded")
			} else {
				assert.Zero(t, fw, "every call was served where it landed")
			}
			if tt.children > 0 {
				total := 0
				for _, nd := range nodes {
					total += nd.gw.Status()[0].Children
				}
				assert.Equal(t, tt.children, total, "upstream children on the nodes")
			}
			var served uint64
			for i, nd := range nodes {
				st := nd.gw.Status()[0]
				if slices.Contains(tt.down, i) {
					assert.Zero(t, st.Calls-st.Errors, "node %d served no call itself", i)
				}
				served += st.Calls - st.Errors
			}
			if !tt.wantErr {
				assert.EqualValues(t, calls, served, "each call served once")
			}
			rr.mu.Lock()
			assert.Len(t, rr.sent, 3, "every node was sent requests")
			rr.mu.Unlock()
		})
	}
}

// TestClusterSessionRoots: with share = "session" behind round-robin, a
// client's notifications/roots/list_changed reaches its own upstream
// connection on the session's home, wherever it lands, and the roots/list
// the upstream then asks outside any call (on the standalone stream, held
// by the home) is answered with the client's roots.
func TestClusterSessionRoots(t *testing.T) {
	nodes := startGatewayCluster(t, func(int) []gateway.Upstream {
		u := selfUpstream("x", "fake")
		u.Share = gateway.Share{Session: true}
		return []gateway.Upstream{u}
	})
	rr := newRoundRobin(t, nodes)
	ctx := testCtx(t)
	c, err := client.Dial(ctx, &client.HTTPTransport{URL: nodes[0].url, Client: &http.Client{Transport: rr}}, client.Options{
		Era: client.EraLegacy,
		OnRoots: func(context.Context, *client.ServerRequest) (*mcp.ListRootsResult, error) {
			return &mcp.ListRootsResult{Roots: []mcp.Root{{URI: "file:///work/a", Name: "a"}}}, nil
		},
	})
	require.NoError(t, err)
	defer c.Close()
	for i := range 3 {
		_, err = c.CallTool(ctx, "echo", map[string]any{})
		require.NoError(t, err)
		for range i { // the notification lands on each node in turn
			require.NoError(t, c.Ping(ctx))
		}
		require.NoError(t, c.NotifyRootsListChanged(ctx))
		r, err := c.CallTool(ctx, "roots", map[string]any{})
		require.NoError(t, err)
		assert.Contains(t, text(t, r), "file:///work/a")
	}
}

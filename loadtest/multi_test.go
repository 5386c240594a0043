package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseTargets(t *testing.T) {
	ts, err := ParseTargets("http://127.0.0.1:7401/mcp", "http://127.0.0.1:7411")
	require.NoError(t, err)
	assert.Equal(t, []Target{{Transport: "http", Addr: "http://127.0.0.1:7401/mcp"}, {Transport: "http", Addr: "http://127.0.0.1:7411/mcp"}}, ts)
	assert.Equal(t, "http://127.0.0.1:7401/mcp,http://127.0.0.1:7411/mcp", targetsString(ts))

	ts, err = ParseTargets("tcp://127.0.0.1:1,tcp://127.0.0.1:2", "tcp://127.0.0.1:3")
	require.NoError(t, err)
	require.Len(t, ts, 3)
	assert.Equal(t, "127.0.0.1:3", ts[2].Addr)

	ts, err = ParseTargets("stdio:bin/mcpedge", "-stdio", "-handlers", "bench")
	require.NoError(t, err)
	assert.Equal(t, []Target{{Transport: "stdio", Command: []string{"bin/mcpedge", "-stdio", "-handlers", "bench"}}}, ts)

	for _, args := range [][]string{
		nil,
		{"tcp://127.0.0.1:1,http://127.0.0.1:2/mcp"},
		{"http://127.0.0.1:2/mcp", "tcp://127.0.0.1:1"},
		{"tcp://127.0.0.1:1", "stdio:server"},
		{"stdio:a", "stdio:b"},
		{"tcp://127.0.0.1:1,"},
		{"tcp://127.0.0.1:1,udp://x:1"},
	} {
		_, err := ParseTargets(args...)
		assert.ErrorIs(t, err, ErrConfig, "%q", args)
	}

	stdio := Target{Transport: "stdio", Command: []string{"x"}}
	tcp1 := Target{Transport: "tcp", Addr: "127.0.0.1:1"}
	http1 := Target{Transport: "http", Addr: "http://127.0.0.1:1/mcp"}
	for _, c := range []Config{
		{Targets: []Target{stdio, stdio}},
		{Targets: []Target{tcp1, http1}},
		{Targets: []Target{http1, http1}, Client: true},
		{},
	} {
		assert.ErrorIs(t, c.defaults(), ErrConfig, "%+v", c.Targets)
	}
	_, err = RunSessions(context.Background(), SessionsConfig{Targets: []Target{tcp1, http1}})
	assert.ErrorIs(t, err, ErrConfig)
	_, err = RunSoak(context.Background(), SoakConfig{Targets: []Target{stdio, stdio}})
	assert.ErrorIs(t, err, ErrConfig)
	_, err = RunFanout(context.Background(), FanoutConfig{Targets: []Target{http1, tcp1}})
	assert.ErrorIs(t, err, ErrConfig)

	// One target in Targets is the same run as Target.
	c := Config{Targets: []Target{tcp1}}
	require.NoError(t, c.defaults())
	assert.Equal(t, tcp1, c.Target)
}

// clusterLog records, in order, which fake node served each call.
type clusterLog struct {
	mu    sync.Mutex
	nodes []string // per call, the node's name
	sids  []string // per call, its Mcp-Session-Id
}

// startNode is a fake cluster node: Streamable HTTP that answers any
// session id (as a cluster forwards a session's requests to its owner).
// Initialize hands out session ids prefixed with the node's name; with
// fail, every call is answered 500.
func startNode(t *testing.T, name string, log *clusterLog, fail bool) string {
	return startFakeHTTPWith(t, name+"-", func(w http.ResponseWriter, r *http.Request, msg *codec.Message) {
		log.mu.Lock()
		log.nodes = append(log.nodes, name)
		log.sids = append(log.sids, r.Header.Get("Mcp-Session-Id"))
		log.mu.Unlock()
		if fail {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		writeJSON(w, fakeAnswer(msg))
	})
}

// TestHTTPRequestsAlternate: with two HTTP targets and one session, the
// session is initialized on the first and its requests go to the second,
// the first, the second..., all with the first's session id.
func TestHTTPRequestsAlternate(t *testing.T) {
	for _, mode := range []string{"closed", "open"} {
		t.Run(mode, func(t *testing.T) {
			log := &clusterLog{}
			ts, err := ParseTargets(startNode(t, "a", log, false) + "," + startNode(t, "b", log, false))
			require.NoError(t, err)
			cfg := Config{Targets: ts, Requests: 10, Steps: echoStep(), Timeout: 5 * time.Second}
			if mode == "open" {
				cfg.Rate = 1000
			}
			res := runBounded(t, cfg, 20*time.Second)
			require.Zero(t, res.Errors, "%v", res.ErrorSamples)
			assert.Equal(t, int64(10), res.OK)
			assert.Equal(t, targetsString(ts), res.Target)

			log.mu.Lock()
			defer log.mu.Unlock()
			require.Len(t, log.nodes, 10)
			for i, node := range log.nodes {
				assert.Equal(t, []string{"b", "a"}[i%2], node, "call %d", i)
				assert.Equal(t, "a-1", log.sids[i], "call %d", i)
			}
			require.Len(t, res.Targets, 2)
			assert.Equal(t, TargetResult{Target: ts[0].Addr, Sessions: 1, Requests: 5}, res.Targets[0])
			assert.Equal(t, TargetResult{Target: ts[1].Addr, Requests: 5}, res.Targets[1])
		})
	}
}

// TestHTTPSticky: with Sticky, each session's requests stay on the target
// it was initialized on: two sessions, one on each of two targets.
func TestHTTPSticky(t *testing.T) {
	log := &clusterLog{}
	ts, err := ParseTargets(startNode(t, "a", log, false) + "," + startNode(t, "b", log, false))
	require.NoError(t, err)
	cfg := Config{Targets: ts, Connections: 2, Requests: 20, Steps: echoStep(), Timeout: 5 * time.Second, Sticky: true}
	res := runBounded(t, cfg, 20*time.Second)
	require.Zero(t, res.Errors, "%v", res.ErrorSamples)
	assert.Equal(t, int64(20), res.OK)

	log.mu.Lock()
	defer log.mu.Unlock()
	require.Len(t, log.nodes, 20)
	for i, node := range log.nodes {
		assert.Equal(t, node+"-1", log.sids[i], "call %d: served by %s", i, node)
	}
	require.Len(t, res.Targets, 2)
	assert.Equal(t, int64(1), res.Targets[0].Sessions)
	assert.Equal(t, int64(1), res.Targets[1].Sessions)
	assert.Equal(t, int64(20), res.Targets[0].Requests+res.Targets[1].Requests)
}

// TestHTTPErrorsPerTarget: calls that fail on one node are counted in the
// run's errors and in that node's share.
func TestHTTPErrorsPerTarget(t *testing.T) {
	log := &clusterLog{}
	ts, err := ParseTargets(startNode(t, "a", log, false), startNode(t, "b", log, true))
	require.NoError(t, err)
	res := runBounded(t, Config{Targets: ts, Connections: 2, Requests: 20, Steps: echoStep(), Timeout: 5 * time.Second}, 20*time.Second)
	assert.Equal(t, int64(20), res.Requests)
	assert.Equal(t, int64(10), res.Errors)
	assert.Equal(t, int64(10), res.ErrorsByKind[KindTransport.String()])
	require.Len(t, res.Targets, 2)
	assert.Equal(t, TargetResult{Target: ts[0].Addr, Sessions: 1, Requests: 10}, res.Targets[0])
	assert.Equal(t, TargetResult{Target: ts[1].Addr, Sessions: 1, Requests: 10, Errors: 10}, res.Targets[1])
}

// startCountingTCP is a newline JSON-RPC server that answers every request
// right and counts the connections it accepted.
func startCountingTCP(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var accepted atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					line, err := br.ReadBytes('\n')
					if err != nil {
						return
					}
					var msg codec.Message
					if codec.Decode(bytes.TrimSpace(line), &msg) != nil || msg.Kind != codec.KindRequest {
						continue
					}
					if _, err := c.Write(append(fakeAnswer(&msg), '\n')); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "tcp://" + ln.Addr().String(), &accepted
}

// TestTCPConnectionsSpread: with two TCP targets and four connections, two
// go to each, in the pipelined driver (closed loop) and the workers' (open
// loop) alike.
func TestTCPConnectionsSpread(t *testing.T) {
	for _, mode := range []string{"closed", "open"} {
		t.Run(mode, func(t *testing.T) {
			a, na := startCountingTCP(t)
			b, nb := startCountingTCP(t)
			ts, err := ParseTargets(a, b)
			require.NoError(t, err)
			cfg := Config{Targets: ts, Connections: 4, Requests: 40, Steps: echoStep(), Timeout: 5 * time.Second}
			if mode == "open" {
				cfg.Rate = 2000
			}
			res := runBounded(t, cfg, 20*time.Second)
			require.Zero(t, res.Errors, "%v", res.ErrorSamples)
			assert.Equal(t, int64(2), na.Load())
			assert.Equal(t, int64(2), nb.Load())
			require.Len(t, res.Targets, 2)
			assert.Equal(t, TargetResult{Target: a, Connections: 2}, res.Targets[0])
			assert.Equal(t, TargetResult{Target: b, Connections: 2}, res.Targets[1])
		})
	}
}

// TestSessionsSpread: sessions mode opens sessions on each target in turn.
func TestSessionsSpread(t *testing.T) {
	log := &clusterLog{}
	ts, err := ParseTargets(startNode(t, "a", log, false), startNode(t, "b", log, false))
	require.NoError(t, err)
	res, err := RunSessions(context.Background(), SessionsConfig{Targets: ts, Sessions: 6, Concurrency: 2, Timeout: 5 * time.Second})
	require.NoError(t, err)
	assert.Equal(t, 6, res.Sessions.Opened)
	require.Len(t, res.Targets, 2)
	assert.Equal(t, int64(3), res.Targets[0].Sessions)
	assert.Equal(t, int64(3), res.Targets[1].Sessions)
}

// TestClusterCallAllocations: a call spread over a cluster allocates no
// more than a call to one target.
func TestClusterCallAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocations differ under the race detector")
	}
	params := []byte(`{"name":"echo","arguments":{"text":"x"}}`)
	opts := &sessionOpts{timeout: time.Second, maxFrame: 1 << 20}
	allocs := func(n int) float64 {
		d := &staticDoer{}
		peers := make([]*httpTarget, n)
		for i := range peers {
			peers[i] = &httpTarget{url: "http://127.0.0.1:" + strconv.Itoa(i+1) + "/mcp", client: d, opts: opts, idx: i}
			if n > 1 {
				peers[i].peers = peers
			}
		}
		s := &httpSession{t: peers[0], version: []byte(protocolVersion), sid: []byte("s1")}
		var dst []byte
		return testing.AllocsPerRun(200, func() {
			d.body = codec.AppendResult(d.body[:0], strconv.AppendUint(nil, s.nextID.Load()+1, 10), []byte(`{"content":[{"type":"text","text":"x"}]}`))
			var err error
			if dst, err = s.Call(context.Background(), "tools/call", params, dst[:0]); err != nil {
				t.Fatal(err)
			}
		})
	}
	assert.Equal(t, allocs(1), allocs(3))
}

func TestServerPIDs(t *testing.T) {
	assert.Nil(t, serverPIDs(0, 0, nil))
	assert.Equal(t, []int{7}, serverPIDs(0, 7, nil))
	assert.Equal(t, []int{3, 4, 5}, serverPIDs(3, 7, []int{4, 3, 5}))
	assert.Equal(t, []int{4}, serverPIDs(0, 0, []int{4}))
}

// TestSoakSpread: a soak on two HTTP targets initializes half its
// sessions on each, and each session calls both in turn with its id.
func TestSoakSpread(t *testing.T) {
	log := &clusterLog{}
	ts, err := ParseTargets(startNode(t, "a", log, false), startNode(t, "b", log, false))
	require.NoError(t, err)
	res, err := RunSoak(context.Background(), SoakConfig{
		Targets: ts, Connections: 4, Duration: time.Second, Every: 100 * time.Millisecond,
		Settle: 10 * time.Millisecond, Timeout: 5 * time.Second,
	})
	require.NoError(t, err)
	assert.Zero(t, res.Errors, "%v", res.ErrorSamples)
	require.Len(t, res.Targets, 2)
	assert.Equal(t, int64(2), res.Targets[0].Sessions)
	assert.Equal(t, int64(2), res.Targets[1].Sessions)
	log.mu.Lock()
	defer log.mu.Unlock()
	// Each session's calls go to both nodes, alternately.
	last := map[string]string{}
	for i, sid := range log.sids {
		if prev, ok := last[sid]; ok {
			assert.NotEqual(t, prev, log.nodes[i], "session %s, call %d", sid, i)
		}
		last[sid] = log.nodes[i]
	}
	assert.Len(t, last, 4)
}

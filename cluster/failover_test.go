package cluster_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/cluster"
	"github.com/stretchr/testify/require"
)

// The loss of a node (issue 25): its sessions go on at the others, the
// clients of the others see nothing, a stream it wrote is resumed
// elsewhere from the events the cluster kept, and a stream relayed from
// it ends with an error for its request once it is known lost.

// crash stops nd as a process that dies would: its cluster membership
// goes at once, with no goodbye (the others find it silent), then its
// HTTP server.
func (nd *node) crash(t *testing.T) {
	t.Helper()
	nd.n.Crash()
	nd.stop()
	select {
	case <-nd.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("node %s did not stop", nd.name)
	}
}

// client calls tools/call echo through nd, on each of sids in turn, until
// stop is closed; it counts its calls and its errors.
type client struct {
	nd     *node
	sids   []string
	calls  atomic.Int64
	errors atomic.Int64
	last   atomic.Value // the last error, a string
}

func (c *client) run(stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	hc := &http.Client{Timeout: 10 * time.Second}
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		sid := c.sids[i%len(c.sids)]
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"n%d"}}}`, i, i)
		req, _ := http.NewRequest(http.MethodPost, c.nd.url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", v)
		req.Header.Set("Mcp-Session-Id", sid)
		resp, err := hc.Do(req)
		c.calls.Add(1)
		if err != nil {
			c.errors.Add(1)
			c.last.Store(err.Error())
			continue
		}
		var b strings.Builder
		_, _ = fmt.Fprint(&b, resp.StatusCode)
		buf := make([]byte, 4096)
		k, _ := resp.Body.Read(buf)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(buf[:k]), fmt.Sprintf(`"n%d"`, i)) {
			c.errors.Add(1)
			c.last.Store(fmt.Sprintf("%d %s", resp.StatusCode, buf[:k]))
		}
	}
}

// waitCalls waits until each client made at least n more calls than at
// the start.
func waitCalls(t *testing.T, n int64, clients ...*client) {
	t.Helper()
	start := make([]int64, len(clients))
	for i, c := range clients {
		start[i] = c.calls.Load()
	}
	require.Eventually(t, func() bool {
		for i, c := range clients {
			if c.calls.Load()-start[i] < n {
				return false
			}
		}
		return true
	}, 60*time.Second, 5*time.Millisecond)
}

// TestNodeKilledUnderLoad: a well-behaved client on each node calls
// through it, on its node's sessions and on the session of the node that
// dies; the node dies (crashes) under the load. The clients of the two
// others see no error, and the dead node's session goes on with them: its
// calls, and its subscription, taken over by a live node.
func TestNodeKilledUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	a, b, c := startThree(t)
	defer a.kill(t)
	defer b.kill(t)
	sA, sB, sC := initialize(t, a, `{}`), initialize(t, b, `{}`), initialize(t, c, `{}`)
	const uri = "mem://board/survivor"
	call(t, a, sC, "resources/subscribe", `{"uri":"`+uri+`"}`) // at c, its home

	onA := &client{nd: a, sids: []string{sA, sC}}
	onB := &client{nd: b, sids: []string{sB, sC}}
	onC := &client{nd: c, sids: []string{sC, sA}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, cl := range []*client{onA, onB, onC} {
		wg.Add(1)
		go cl.run(stop, &wg)
	}
	waitCalls(t, 50, onA, onB, onC)
	c.crash(t)
	// The others find c lost, take its session over, and go on.
	require.Eventually(t, func() bool { return a.n.LivePeers() == 1 && b.n.LivePeers() == 1 }, 10*time.Second, 5*time.Millisecond)
	waitCalls(t, 100, onA, onB)
	close(stop)
	wg.Wait()
	for _, cl := range []*client{onA, onB} {
		last, _ := cl.last.Load().(string)
		require.Zero(t, cl.errors.Load(), "client on %s: %d errors in %d calls; last: %s", cl.nd.name, cl.errors.Load(), cl.calls.Load(), last)
	}
	t.Logf("calls: %d on a, %d on b, %d on c (which died: %d errors)", onA.calls.Load(), onB.calls.Load(), onC.calls.Load(), onC.errors.Load())

	// c's session was taken over: its subscription is delivered by its
	// new home, to its standalone stream opened anywhere.
	require.Equal(t, uint64(1), a.n.Stats().TakenOver+b.n.Stats().TakenOver)
	for _, via := range []*node{a, b} {
		ctx, cancel := context.WithCancel(context.Background())
		ch := openStream(t, ctx, via, sC)
		time.Sleep(50 * time.Millisecond)
		a.srv.ResourceUpdated(uri)
		require.Equal(t, 1, count(ch, "notifications/resources/updated"), "through %s", via.name)
		cancel()
	}
	call(t, b, sC, "logging/setLevel", `{"level":"warning"}`)
}

// TestRequestStreamResumedAfterNodeDeath: a request runs on b, its stream
// polled (the handler ends it after its first event); b dies while the
// request runs. The client resumes the stream through c: the events b
// sent meanwhile are replayed from what the cluster kept, then an error
// for the request, which died with b, ends the stream.
func TestRequestStreamResumedAfterNodeDeath(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	a, b, c := startThree(t)
	defer a.kill(t)
	defer c.kill(t)
	sid := initialize(t, a, `{}`)
	msgs := callSSE(t, b, sid, `{"jsonrpc":"2.0","id":31,"method":"tools/call","params":{"name":"poll","arguments":{"n":100},"_meta":{"progressToken":"p"}}}`)
	require.Len(t, msgs, 1)
	// The first event's id: the POST's response also carried the priming
	// event, whose id is the cursor before it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Let b send a few more steps, kept by a and c, then crash it.
	before := c.n.Stats().EventsIn
	require.Eventually(t, func() bool { return c.n.Stats().EventsIn >= before+3 }, 10*time.Second, 5*time.Millisecond)
	b.crash(t)
	lastID := b.n.InstanceName() + ".1-0" // from the start of the request's stream
	resp := getStream(t, ctx, c, sid, lastID)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var got []map[string]any
	for ev := range events(resp.Body) {
		if ev.msg != nil {
			got = append(got, ev.msg)
		}
	}
	require.GreaterOrEqual(t, len(got), 4, "%v", got)
	for _, m := range got[:len(got)-1] {
		require.Equal(t, "notifications/progress", m["method"], m)
	}
	last := got[len(got)-1]
	require.EqualValues(t, 31, last["id"], last)
	require.NotNil(t, last["error"], last)
	require.Contains(t, fmt.Sprint(last["error"]), "gone")
}

// TestStandaloneStreamResumedAfterNodeDeath: the standalone stream of a
// session whose home, a, dies: the client resumes it through b with the
// last id it had from a. The notifications it missed, kept by the
// cluster, are replayed, and the stream goes on at the session's new
// home.
func TestStandaloneStreamResumedAfterNodeDeath(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	a, b, c := startThree(t)
	defer b.kill(t)
	defer c.kill(t)
	sid := initialize(t, a, `{}`)
	const uri = "mem://board/missed"
	call(t, b, sid, "resources/subscribe", `{"uri":"`+uri+`"}`)
	ctx, cancel := context.WithCancel(context.Background())
	resp := getStream(t, ctx, a, sid, "")
	evs := events(resp.Body)
	time.Sleep(50 * time.Millisecond)
	a.srv.ResourceUpdated(uri)
	lastID := ""
	for ev := range evs {
		lastID = ev.id
		if ev.msg != nil {
			break
		}
	}
	cancel()
	resp.Body.Close()
	require.True(t, strings.HasPrefix(lastID, a.n.InstanceName()+".0-"), lastID)
	// Two updates the client misses: a stores them, and so do b and c.
	before := b.n.Stats().EventsIn
	a.srv.ResourceUpdated(uri)
	a.srv.ResourceUpdated(uri)
	require.Eventually(t, func() bool { return b.n.Stats().EventsIn >= before+2 }, 10*time.Second, 5*time.Millisecond)
	a.crash(t)
	// The client resumes once b knows a is lost: before that, b forwards
	// the resumption to the session's home, and a forward to a node that
	// just died is answered 502 (the client's retry then succeeds).
	require.Eventually(t, func() bool { return b.n.LivePeers() == 1 }, 10*time.Second, 5*time.Millisecond)

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	resp = getStream(t, ctx, b, sid, lastID)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	evs = events(resp.Body)
	next := func() event {
		for {
			select {
			case ev, ok := <-evs:
				require.True(t, ok, "the stream ended")
				if ev.msg != nil {
					return ev
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no event")
			}
		}
	}
	for range 2 {
		ev := next()
		require.Equal(t, "notifications/resources/updated", ev.msg["method"], ev.msg)
		require.True(t, strings.HasPrefix(ev.id, a.n.InstanceName()+".0-"), "replayed with the id a gave it: %s", ev.id)
	}
	// The stream goes on at the new home: a new update arrives on it.
	time.Sleep(50 * time.Millisecond)
	b.srv.ResourceUpdated(uri)
	ev := next()
	require.Equal(t, "notifications/resources/updated", ev.msg["method"], ev.msg)
	require.False(t, strings.HasPrefix(ev.id, a.n.InstanceName()), ev.id)
}

// TestRelayedStreamOfDyingNode: a request runs on b; the client resumes
// its stream through c, which relays it from b; b dies (crashes). Once c
// finds b lost, the stream ends with an error for the request, rather
// than when it has been silent for StreamIdle.
func TestRelayedStreamOfDyingNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	a := startNode(t, "a", nil)
	defer a.kill(t)
	b := startNode(t, "b", []string{routeOf(a)})
	c := startNode(t, "c", []string{routeOf(a), routeOf(b)}, func(o *cluster.Options) { o.StreamIdle = time.Hour })
	defer c.kill(t)
	waitMesh(t, a, b, c)
	sid := initialize(t, a, `{}`)
	msgs := callSSE(t, b, sid, `{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"name":"poll","arguments":{"n":100},"_meta":{"progressToken":"p"}}}`)
	require.Len(t, msgs, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := getStream(t, ctx, c, sid, b.n.InstanceName()+".1-0")
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	evs := events(resp.Body)
	for ev := range evs { // relayed live from b
		if ev.msg != nil && ev.msg["method"] == "notifications/progress" {
			break
		}
	}
	forwardedBefore := c.n.Stats().Forwarded
	require.Positive(t, forwardedBefore)
	b.crash(t)
	crashed := time.Now()
	var last map[string]any
	for ev := range evs {
		if ev.msg != nil {
			last = ev.msg
		}
	}
	took := time.Since(crashed)
	require.NotNil(t, last, "after %v, c: %+v", time.Since(crashed), c.n.Stats())
	require.EqualValues(t, 41, last["id"], last)
	require.Contains(t, fmt.Sprint(last["error"]), "left the cluster", last)
	require.Positive(t, c.n.Stats().PeersLost, "ended once b was found lost")
	t.Logf("the relayed stream ended %v after b crashed (heartbeat %v)", took.Round(time.Millisecond), 100*time.Millisecond)
}

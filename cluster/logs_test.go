package cluster_test

import (
	"bytes"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/cluster"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// logBuffer is a log destination safe for concurrent use.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines returns the lines logged from the n-th byte on that contain all
// of subs.
func (l *logBuffer) lines(from int, subs ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.b.String()[from:], "\n") {
		ok := line != ""
		for _, s := range subs {
			ok = ok && strings.Contains(line, s)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

func (l *logBuffer) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Len()
}

func logTo(buf *logBuffer) func(*cluster.Options) {
	return func(o *cluster.Options) {
		o.Logger = slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
}

// TestPeersAndTheirLogs: Routes counts peers, not NATS's pooled route
// connections; a node's start is quiet at info; a dead peer is logged once
// when it goes and once when it is back, while the embedded server's
// retries (each pooled connection, every second) stay at debug; a node
// closed normally logs no lost connection.
func TestPeersAndTheirLogs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	port := freePort(t)
	aEmbed := func(o *cluster.Options) { o.Embed = "127.0.0.1:" + strconv.Itoa(port) }
	var la, lb, lc logBuffer
	a := startNode(t, "a", nil, aEmbed, logTo(&la))
	b := startNode(t, "b", []string{routeOf(a)}, logTo(&lb))
	c := startNode(t, "c", []string{routeOf(a), routeOf(b)}, logTo(&lc))
	defer func() {
		for _, nd := range []*node{b, c} {
			nd.kill(t)
		}
	}()
	waitMesh(t, a, b, c)

	for _, nd := range []*node{a, b, c} {
		require.Eventually(t, func() bool { return len(nd.n.Peers()) == 2 }, 10*time.Second, 10*time.Millisecond)
		assert.Equal(t, 2, nd.n.Routes(), "node %s: peers, not connections", nd.name)
		var names []string
		for _, p := range nd.n.Peers() {
			names = append(names, p.Name)
			assert.Positive(t, p.Conns)
			assert.NotEmpty(t, p.Addr)
		}
		assert.NotContains(t, names, nd.name)
		assert.Len(t, names, 2)
	}
	for _, buf := range []*logBuffer{&la, &lb, &lc} {
		for _, l := range buf.lines(0, "msg=\"nats: ") {
			assert.Contains(t, l, "level=DEBUG", "the embedded server's start is at debug")
		}
	}
	require.Eventually(t, func() bool { return len(lb.lines(0, "cluster: peer joined", "peer=c")) == 1 }, 10*time.Second, 10*time.Millisecond)

	// a goes away: b and c, which route to it by configuration, retry it.
	mark := lb.len()
	a.kill(t)
	assert.Empty(t, la.lines(0, "NATS connection lost"), "a normal shutdown loses nothing")
	require.Eventually(t, func() bool { return len(lb.lines(mark, "connect to route")) >= 4 }, 20*time.Second, 20*time.Millisecond,
		"b retries a's route (at debug)")
	lost := lb.lines(mark, "cluster: peer lost", "peer=a")
	require.Len(t, lost, 1, "logged once")
	assert.Contains(t, lost[0], "level=WARN")
	for _, l := range lb.lines(mark, "msg=\"nats: ") {
		assert.Contains(t, l, "level=DEBUG", "the retries stay at debug")
	}
	assert.Equal(t, 1, b.n.Routes())

	// a comes back on its address: logged once too.
	a2 := startNode(t, "a", nil, aEmbed, logTo(&la))
	defer a2.kill(t)
	require.Eventually(t, func() bool { return len(lb.lines(mark, "cluster: peer back", "peer=a")) == 1 }, 20*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool { return b.n.Routes() == 2 }, 10*time.Second, 10*time.Millisecond)
	assert.Len(t, lb.lines(mark, "cluster: peer lost"), 1)
}

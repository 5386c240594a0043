package cluster

import (
	"maps"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
)

// ClientURL is the embedded server's client port, for the tests that
// play a local process trying it.
func (n *Node) ClientURL() string { return n.srv.ClientURL() }

// Crash stops the node as a process that dies would: no goodbye, no
// drain; its NATS connection and embedded server just go.
func (n *Node) Crash() {
	n.tunMu.Lock()
	n.closed.Store(true)
	n.tunMu.Unlock()
	close(n.workersStop)
	n.tickOnce.Do(func() {})
	if n.tickStop != nil {
		close(n.tickStop)
	}
	n.nc.Close()
	n.shutdownEmbedded()
	n.closeLinks()
}

// Instance is the node's instance name.
func (n *Node) InstanceName() string { return n.inst }

// LivePeers is the number of other nodes this one knows alive.
func (n *Node) LivePeers() int { return n.livePeers() }

// DropLinks ends every direct link the node holds, as a network that
// cuts them would; its listener stays.
func (n *Node) DropLinks() {
	n.linkMu.Lock()
	links := make([]*linkConn, 0, len(n.links))
	for lc := range n.links {
		links = append(links, lc)
	}
	n.linkMu.Unlock()
	for _, lc := range links {
		lc.shut()
	}
}

// EventMessage is the signed message Event publishes for an event.
func (n *Node) EventMessage(sid string, stream, seq uint64, reqID []byte, final bool, data []byte) []byte {
	return n.appendEvent(nil, sid, stream, seq, reqID, final, data)
}

// KeepEvent takes an event's message as if it came on the events subject.
func (n *Node) KeepEvent(m []byte) { n.onEvent(&nats.Msg{Data: m}) }

// MsgCounter counts, by kind (the subject's first token after the
// prefix: "hb", "rec", "bus", "http", "reply", ...), the messages of the
// cluster's subjects that one node hears from the others.
type MsgCounter struct {
	mu    sync.Mutex
	by    map[string]int
	marks map[string]int // the last marker heard from each node
	sub   *nats.Subscription
}

// CountMessages starts counting the messages node n hears on the
// cluster's subjects (its own it does not hear: NoEcho). The other
// nodes hear of the subscription through the routes, a moment later.
func (n *Node) CountMessages() (*MsgCounter, error) {
	c := &MsgCounter{by: make(map[string]int), marks: make(map[string]int)}
	pre := n.prefix + "."
	sub, err := n.nc.Subscribe(pre+">", func(m *nats.Msg) {
		kind, _, _ := strings.Cut(strings.TrimPrefix(m.Subject, pre), ".")
		c.mu.Lock()
		defer c.mu.Unlock()
		if kind == "mark" {
			node, seq, _ := strings.Cut(string(m.Data), " ")
			k, _ := strconv.Atoi(seq)
			c.marks[node] = max(c.marks[node], k)
			return
		}
		c.by[kind]++
	})
	if err != nil {
		return nil, err
	}
	c.sub = sub
	return c, n.nc.Flush()
}

// Mark publishes marker seq, which the other nodes' counters keep apart:
// once a counter has a node's marker, it has every message the node
// published before it (NATS keeps one publisher's order).
func (n *Node) Mark(seq int) error {
	if err := n.nc.Publish(n.prefix+".mark", []byte(n.name+" "+strconv.Itoa(seq))); err != nil {
		return err
	}
	return n.nc.Flush()
}

// Marked reports whether the counter has marker seq from every node
// named.
func (c *MsgCounter) Marked(seq int, nodes ...string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, nd := range nodes {
		if c.marks[nd] < seq {
			return false
		}
	}
	return true
}

// Counts returns the messages counted so far, by kind.
func (c *MsgCounter) Counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.by)
}

// Stop ends the count.
func (c *MsgCounter) Stop() { _ = c.sub.Unsubscribe() }

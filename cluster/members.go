package cluster

import (
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// Membership: which nodes are alive, so that what one of them owned (the
// sessions it was the home of, the streams it wrote, the requests it
// served) is taken over or ended when it goes, within a few seconds.
//
// Each node publishes a heartbeat on "<prefix>.hb" every
// Options.Heartbeat, naming itself and its incarnation (a random number
// drawn at Start: a node restarted under the same name is another
// incarnation, and whatever the old one held is gone). A node silent for
// three heartbeats, or that says goodbye on "<prefix>.bye" as it leaves,
// or whose name comes back with another incarnation, is dead: the others
// end the streams they relay from it (forward.go), take over the sessions
// it was the home of (sessions.go), and keep its events for the clients
// that resume its streams (events.go). A node that starts asks the
// others to answer its first heartbeat at once, so that it knows them
// within a round trip.

// peer is another node as membership knows it.
type peer struct {
	name string
	inc  string
	seen time.Time
	dead bool
	link string // its direct link's address, "" for none (link.go)
}

// members is the table of the other nodes.
type members struct {
	mu    sync.Mutex
	peers map[string]*peer
	cutAt time.Time // when this node was last found cut off from the cluster
}

// Message kinds on the membership subjects.
const (
	msgHeartbeat = 'H'
	msgHello     = 'h' // a heartbeat that asks for the others' at once
	msgBye       = 'B'
	msgGone      = 'G' // another node found the named node gone (NATS has no subscriber for it)
)

// appendHeartbeat appends this node's signed heartbeat of kind to dst.
func (n *Node) appendHeartbeat(dst []byte, kind byte) []byte {
	start := len(dst)
	dst = append(dst, kind)
	dst = appendStr(dst, n.name)
	dst = appendStr(dst, n.inc)
	dst = appendStr(dst, n.linkAddr())
	return n.sig.sign(dst, start)
}

// parseHeartbeat reads a heartbeat or goodbye: kind, name, incarnation
// and direct link address, each checked.
func parseHeartbeat(b []byte) (kind byte, name, inc, link string, ok bool) {
	r := reader{b: b}
	kind = r.byte()
	nm, ic, lk := r.bytes(), r.bytes(), r.bytes()
	if r.bad || len(r.b) != 0 || !validName(nm) || !validInc(ic) || len(lk) > 256 || !printable(lk) {
		return 0, "", "", "", false
	}
	switch kind {
	case msgHeartbeat, msgHello, msgBye, msgGone:
	default:
		return 0, "", "", "", false
	}
	return kind, string(nm), string(ic), string(lk), true
}

// validInc reports whether b can be an incarnation: base-36 digits.
func validInc(b []byte) bool {
	if len(b) == 0 || len(b) > 13 {
		return false
	}
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z') {
			return false
		}
	}
	return true
}

// printable reports whether b is visible ASCII.
func printable(b []byte) bool {
	for _, c := range b {
		if c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}

// linkAddr is the address of this node's direct link that heartbeats
// advertise, "" for none (link.go).
func (n *Node) linkAddr() string { return n.linkAddrS }

// newIncarnation draws this start's incarnation.
func newIncarnation() string { return strconv.FormatUint(rand.Uint64(), 36) }

// heartbeat publishes heartbeats and finds the silent peers, until the
// node closes.
func (n *Node) heartbeat() {
	every := n.opts.Heartbeat
	tk := time.NewTicker(every)
	defer tk.Stop()
	buf := n.appendHeartbeat(nil, msgHello)
	_ = n.nc.Publish(n.prefix+".hb", buf)
	for {
		select {
		case <-n.workersStop:
			return
		case now := <-tk.C:
			buf = n.appendHeartbeat(buf[:0], msgHeartbeat)
			_ = n.nc.Publish(n.prefix+".hb", buf)
			n.reapPeers(now)
		}
	}
}

// deadAfter is how long a peer may stay silent.
func (n *Node) deadAfter() time.Duration { return 3 * n.opts.Heartbeat }

// reapPeers declares dead the peers silent for deadAfter. While this node
// is cut off from the cluster, and for deadAfter after, their silence
// tells nothing of them: none is declared dead.
func (n *Node) reapPeers(now time.Time) {
	var gone []peer
	m := &n.members
	m.mu.Lock()
	if n.cutOff() {
		m.cutAt = now
	}
	for _, p := range m.peers {
		if !p.dead && now.Sub(p.seen) > n.deadAfter() && now.Sub(m.cutAt) > n.deadAfter() {
			p.dead = true
			gone = append(gone, *p)
		}
	}
	m.mu.Unlock()
	for _, p := range gone {
		n.peerGone(p.name, p.inc, "silent for "+n.deadAfter().String())
	}
}

// onHeartbeat takes a peer's heartbeat or goodbye.
func (n *Node) onHeartbeat(msg *nats.Msg) {
	body, ok := n.sig.open(msg.Data)
	if !ok {
		n.badMessage("heartbeat signature", msg.Data)
		return
	}
	kind, name, inc, link, ok := parseHeartbeat(body)
	if !ok {
		n.badMessage("heartbeat", body)
		return
	}
	if kind == msgGone {
		if name == n.name {
			if inc == n.inc { // alive: say so at once
				_ = n.nc.Publish(n.prefix+".hb", n.appendHeartbeat(nil, msgHeartbeat))
			}
			return
		}
		n.markDeadInc(name, inc, "another node found it gone")
		return
	}
	if name == n.name && inc == n.inc {
		return
	}
	if name == n.name {
		// Another node runs under this node's name: the operator's
		// mistake, which breaks routing for both. Say so, at a bounded
		// rate.
		n.badMessage("heartbeat of another node named like this one", body)
		return
	}
	m := &n.members
	var gone *peer
	fresh := false
	m.mu.Lock()
	p := m.peers[name]
	switch {
	case p == nil:
		if kind == msgBye {
			m.mu.Unlock()
			return
		}
		p = &peer{name: name, inc: inc}
		m.peers[name] = p
		fresh = true
	case p.inc != inc:
		if kind == msgBye {
			m.mu.Unlock()
			return // an older incarnation's goodbye
		}
		// Restarted: the incarnation it had is gone.
		if !p.dead {
			old := *p
			gone = &old
		}
		p.inc, p.dead = inc, false
		fresh = true
	case kind == msgBye:
		if !p.dead {
			p.dead = true
			old := *p
			gone = &old
		}
	case p.dead:
		p.dead = false // back (a partition healed): it keeps its name and incarnation
		fresh = true
	}
	if kind != msgBye {
		p.seen = time.Now()
		p.link = link
	}
	m.mu.Unlock()
	if gone != nil {
		why := "left the cluster"
		if kind != msgBye {
			why = "restarted"
		}
		n.peerGone(gone.name, gone.inc, why)
	}
	if fresh {
		n.log.Info("cluster: node joined", "peer", name)
	}
	if kind == msgHello || fresh {
		// A node that meets another learns of it, and tells it of
		// itself, without waiting for its next heartbeat.
		_ = n.nc.Publish(n.prefix+".hb", n.appendHeartbeat(nil, msgHeartbeat))
	}
}

// sayGoodbye tells the others that this node leaves: they take over
// at once what it held.
func (n *Node) sayGoodbye() {
	_ = n.nc.Publish(n.prefix+".hb", n.appendHeartbeat(nil, msgBye))
}

// alive reports whether node name, in incarnation inc ("" for any), is
// alive as far as this node knows: itself, or a peer heard from lately.
// A node this one has never heard of is not.
func (n *Node) alive(name, inc string) bool {
	if name == n.name {
		return inc == "" || inc == n.inc
	}
	m := &n.members
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.peers[name]
	return p != nil && !p.dead && (inc == "" || inc == p.inc)
}

// known reports whether node name is known at all: alive, or dead.
func (n *Node) known(name string) bool {
	if name == n.name {
		return true
	}
	n.members.mu.Lock()
	defer n.members.mu.Unlock()
	return n.members.peers[name] != nil
}

// livePeers returns the number of peers alive.
func (n *Node) livePeers() int {
	n.members.mu.Lock()
	defer n.members.mu.Unlock()
	k := 0
	for _, p := range n.members.peers {
		if !p.dead {
			k++
		}
	}
	return k
}

// markDead declares node name dead on evidence other than its silence:
// NATS has no subscriber for it. It does nothing for a node that is not
// known, or known dead. The others are told (msgGone), so that they take
// over what it held at once too, rather than when they find it silent.
func (n *Node) markDead(name, why string) {
	if inc := n.markDeadInc(name, "", why); inc != "" {
		b := append([]byte(nil), msgGone)
		b = appendStr(appendStr(appendStr(b, name), inc), "")
		_ = n.nc.Publish(n.prefix+".hb", n.sig.sign(b, 0))
	}
}

// markDeadInc declares node name in incarnation inc ("" for the one
// known) dead, returning that incarnation, "" when it was not alive.
func (n *Node) markDeadInc(name, inc, why string) string {
	m := &n.members
	m.mu.Lock()
	p := m.peers[name]
	if p == nil || p.dead || (inc != "" && p.inc != inc) {
		m.mu.Unlock()
		return ""
	}
	p.dead = true
	old := *p
	m.mu.Unlock()
	n.peerGone(old.name, old.inc, why)
	return old.inc
}

// pick returns the live node, this one included, that rendezvous hashing
// gives key: every node that knows the same live nodes picks the same.
func (n *Node) pick(key string) string {
	m := &n.members
	best, bestScore := n.name, score(key, n.name)
	m.mu.Lock()
	for _, p := range m.peers {
		if p.dead {
			continue
		}
		if s := score(key, p.name); s > bestScore || s == bestScore && p.name > best {
			best, bestScore = p.name, s
		}
	}
	m.mu.Unlock()
	return best
}

// score is the rendezvous score of node for key, the same on every node:
// FNV-1a of both, then a 64-bit finalizer so that names that differ in
// their last byte spread.
func score(key, node string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h = (h ^ uint64(key[i])) * 1099511628211
	}
	h *= 1099511628211 // a 0 byte between them
	for i := 0; i < len(node); i++ {
		h = (h ^ uint64(node[i])) * 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// peerGone handles the loss of node name in incarnation inc: the streams
// relayed from it end, the link to it is dropped (a forward finds it
// without asking membership: linkTo), the sessions it was the home of
// are taken over.
func (n *Node) peerGone(name, inc, why string) {
	if n.closed.Load() {
		return
	}
	n.log.Warn("cluster: node lost", "peer", name, "why", why)
	n.stats.peersLost.Add(1)
	n.failForwards(name)
	n.dropLink(name)
	n.forgetServices(name)
	n.takeOver(name, inc)
}

package cluster

import (
	"iter"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/nats-io/nats.go"
	"github.com/valyala/fasthttp"
)

// Services: what a node runs that a request may need and that may be down
// on one node while up on another (a gateway's upstreams), and where a
// session's request that needs one is served (docs/cluster.md, "The
// gateway in a cluster").
//
// Each node tells the others the state of its services (SetServices) on
// "<prefix>.svc", signed like every message of the cluster's own: every
// heartbeat, and at once when one changes (ServicesChanged). A report
// names its node and incarnation, at most maxServices services of at most
// maxServiceName bytes each; one from a node that membership does not
// know alive in that incarnation is dropped, so the table holds one
// report per live peer. A node lost is forgotten with its report.
//
// What a session's request needs is the placer's to say (SetPlacer):
// that it must reach the session's home (a gateway's share = "session"
// upstream, whose one connection the home holds), or the service it
// needs, which is down here (a pooled upstream whose connections failed).
// RouteSession then sends it to the home, or to a live node that reports
// the service up; with none, it is served here, and answered there as
// down. A 2026-07-28 request, which has no session and so no home, is
// sent on the same way when what it needs is down here (RouteStateless).
// A request forwarded here is served here, whatever its placer says:
// nothing is forwarded twice.

// Bounds of a services report.
const (
	maxServices    = 1024
	maxServiceName = 256
	msgServices    = 'S'
)

// Placer tells where a session's request m is to be served: home, at the
// session's home; else down names the service it needs when that is down
// on this node ("" when it is served here). It runs on every request of a
// session that lands here: it must not block, and should not allocate.
type Placer func(m *codec.Message) (home bool, down string)

// services is what the other nodes report of theirs.
type services struct {
	mu     sync.Mutex
	byNode map[string]svcReport
	rr     atomic.Uint32 // spreads the requests for a service among the nodes that have it up
	kick   chan struct{} // cap 1: publish this node's report now
	placer atomic.Pointer[Placer]
	source atomic.Pointer[iter.Seq2[string, bool]]
}

// svcReport is one node's last report.
type svcReport struct {
	inc string
	up  map[string]bool // service → up
}

// SetPlacer sets what decides where a session's requests are served
// (see Placer); nil: where they land, but for the record changes and the
// tasks that go to the home. Call it before serving.
func (n *Node) SetPlacer(p Placer) {
	if p == nil {
		n.svcs.placer.Store(nil)
		return
	}
	n.svcs.placer.Store(&p)
}

// SetServices sets what lists this node's services and whether each is up
// now (a gateway's upstreams): the others are told every heartbeat, and
// at once on ServicesChanged. The first maxServices are told.
func (n *Node) SetServices(src iter.Seq2[string, bool]) {
	if src == nil {
		n.svcs.source.Store(nil)
	} else {
		n.svcs.source.Store(&src)
	}
	n.ServicesChanged()
}

// ServicesChanged tells the other nodes at once that a service changed
// state here. It does not block.
func (n *Node) ServicesChanged() {
	select {
	case n.svcs.kick <- struct{}{}:
	default:
	}
}

// UpElsewhere reports whether a live node other than this one reports
// service name up.
func (n *Node) UpElsewhere(name string) bool { return n.upAt(name, false) != "" }

// PeerServices returns what each live node other than this one last
// reported of its services: node → service → up.
func (n *Node) PeerServices() map[string]map[string]bool {
	out := map[string]map[string]bool{}
	s := &n.svcs
	s.mu.Lock()
	defer s.mu.Unlock()
	for node, r := range s.byNode {
		if n.alive(node, r.inc) {
			out[node] = maps.Clone(r.up)
		}
	}
	return out
}

// upAt returns a live node other than this one that reports service name
// up, "" for none; spread takes them in turn.
func (n *Node) upAt(name string, spread bool) string {
	s := &n.svcs
	var k uint32
	if spread {
		k = s.rr.Add(1)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	count := 0
	for node, r := range s.byNode {
		if r.up[name] && n.alive(node, r.inc) {
			count++
		}
	}
	if count == 0 {
		return ""
	}
	k %= uint32(count)
	for node, r := range s.byNode {
		if r.up[name] && n.alive(node, r.inc) {
			if k == 0 {
				return node
			}
			k--
		}
	}
	return ""
}

// place returns where session request m is to be served: at the home
// (home), at node to (not ""), or here.
func (n *Node) place(m *codec.Message) (home bool, to string) {
	p := n.svcs.placer.Load()
	if p == nil {
		return needsHome(m), ""
	}
	if needsHome(m) {
		return true, ""
	}
	home, down := (*p)(m)
	if home || down == "" {
		return home, ""
	}
	return false, n.upAt(down, true)
}

// RouteStateless implements mcphttp.Cluster: a 2026-07-28 request m (no
// session, so nothing binds it to a home) that needs a service down here
// is forwarded to a live node that reports it up, as a session's is
// (place); it reports whether it was. It is served here when nothing it
// needs is down (the placer says so at once), when it was forwarded here
// (nothing is forwarded twice), when it is the retry of a call held by a
// node (its requestState names it: Route has sent it there, or that node
// is gone), or when no node has the service up: the gateway answers
// then, at once.
func (n *Node) RouteStateless(ctx *fasthttp.RequestCtx, m *codec.Message) bool {
	p := n.svcs.placer.Load()
	if p == nil || n.closed.Load() {
		return false
	}
	if _, ok := ctx.Conn().(*tunnelConn); ok {
		return false
	}
	_, down := (*p)(m)
	if down == "" || heldRetry(m.Params) {
		return false
	}
	to := n.upAt(down, true)
	if to == "" {
		return false
	}
	if n.forwardTo(ctx, to, m.ID, nil) {
		return true
	}
	n.markDead(to, "no subscriber for it")
	return false
}

// heldRetry reports whether params carry a requestState that names the
// node holding the call (engine.StateNode).
func heldRetry(params []byte) bool {
	raw, ok, err := codec.ObjectField(params, "requestState")
	if err != nil || !ok {
		return false
	}
	st, err := codec.StringValue(raw)
	return err == nil && engine.StateNode(st) != nil
}

// appendServices appends this node's signed report to dst; ok is false
// when it has none to tell.
func (n *Node) appendServices(dst []byte) ([]byte, bool) {
	src := n.svcs.source.Load()
	if src == nil {
		return dst, false
	}
	dst = append(dst, msgServices)
	dst = appendStr(dst, n.name)
	dst = appendStr(dst, n.inc)
	k := 0
	for name, up := range *src {
		if k == maxServices {
			break
		}
		if len(name) == 0 || len(name) > maxServiceName || !printable([]byte(name)) {
			continue
		}
		dst = appendStr(dst, name)
		st := byte(0)
		if up {
			st = 1
		}
		dst = append(dst, st)
		k++
	}
	return n.sig.sign(dst, 0), true
}

// parseServices reads a report: its node, incarnation and services, each
// checked.
func parseServices(b []byte) (name, inc string, up map[string]bool, ok bool) {
	r := reader{b: b}
	if r.byte() != msgServices {
		return "", "", nil, false
	}
	nm, ic := r.bytes(), r.bytes()
	if r.bad || !validName(nm) || !validInc(ic) {
		return "", "", nil, false
	}
	up = map[string]bool{}
	for len(r.b) > 0 && !r.bad {
		s := r.bytes()
		st := r.byte()
		if r.bad || len(s) == 0 || len(s) > maxServiceName || !printable(s) || st > 1 || len(up) == maxServices {
			return "", "", nil, false
		}
		up[string(s)] = st == 1
	}
	if r.bad {
		return "", "", nil, false
	}
	return string(nm), string(ic), up, true
}

// maxServicesMessage bounds a report: maxServices names of
// maxServiceName bytes, their lengths and states, and the rest.
const maxServicesMessage = maxServices*(maxServiceName+3) + 128 + macSize

// onServices takes another node's report.
func (n *Node) onServices(msg *nats.Msg) {
	if len(msg.Data) > maxServicesMessage {
		n.badMessage("services report size", msg.Data[:64])
		return
	}
	body, ok := n.sig.open(msg.Data)
	if !ok {
		n.badMessage("services signature", msg.Data)
		return
	}
	name, inc, up, ok := parseServices(body)
	if !ok {
		n.badMessage("services", body)
		return
	}
	if name == n.name || !n.alive(name, inc) {
		return // its own, or of a node not (yet) known alive: its next report counts
	}
	s := &n.svcs
	s.mu.Lock()
	if s.byNode == nil {
		s.byNode = map[string]svcReport{}
	}
	s.byNode[name] = svcReport{inc: inc, up: up}
	s.mu.Unlock()
}

// forgetServices drops the report of node name, lost.
func (n *Node) forgetServices(name string) {
	s := &n.svcs
	s.mu.Lock()
	delete(s.byNode, name)
	s.mu.Unlock()
}

// announceServices publishes this node's report every heartbeat, and at
// once when kicked, until the node closes.
func (n *Node) announceServices() {
	tk := time.NewTicker(n.opts.Heartbeat)
	defer tk.Stop()
	var buf []byte
	for {
		select {
		case <-n.workersStop:
			return
		case <-tk.C:
		case <-n.svcs.kick:
		}
		var ok bool
		if buf, ok = n.appendServices(buf[:0]); ok {
			_ = n.nc.Publish(n.prefix+".svc", buf)
		}
	}
}

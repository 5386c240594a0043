package cluster

import (
	"container/list"
	"net/netip"
	"sync"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
	"github.com/nats-io/nats.go"
)

// Session records: every node keeps the record of each session it has
// heard of (session.Record: version, client declarations, log level,
// subscriptions, subject), so that any node serves the session's
// requests without asking anyone. A record is written by the session's
// home only, which publishes it whole on "<prefix>.rec" when it changes,
// with a revision one up; a node that takes a session over publishes it
// with itself as the home. Every node keeps the newest revision it got
// (equal revisions: the greater home name), in a cache bounded by
// Options.RecordBytes, evicting the records of sessions used least
// recently (those this node is the home of stay). A node that meets a
// session it has no record of asks the others once ("<prefix>.recget"):
// each answers with the record, or that it has none.
//
// The same subject carries the end of a session everywhere (a tombstone:
// DELETE, or its home closed it), a replica's word to the home that the
// session is in use (its idle clock), and notifications/cancelled for a
// request that may run on another node.

// Record message kinds.
const (
	recRecord = 'R' // a record, whole
	recEnd    = 'D' // the session ended everywhere
	recUsed   = 'T' // a replica served the session: the home's idle clock
	recCancel = 'C' // notifications/cancelled: cancel the request where it runs
	recGet    = 'G' // a request for a record (recget)
	recNone   = 'N' // the answer: no record here; the answerer's name follows
)

// Bounds of what a record may hold, checked on the way in.
const (
	maxIDLen       = 256      // a session id
	maxJSONField   = 64 << 10 // client info, client capabilities
	maxRecordURIs  = 1 << 16  // subscriptions
	maxURILen      = 8 << 10  // one subscription's URI (the engine's own bound)
	tombstoneTTL   = time.Minute
	maxTombstones  = 1 << 16
	fetchWaitLimit = time.Second // the longest a record is waited for
)

// entry is one session's record as this node knows it.
type entry struct {
	rec     session.Record
	rev     uint64
	home    string // the node that is its home
	homeInc string // in that incarnation
	size    int    // what it counts against Options.RecordBytes
	elem    *list.Element
}

// records is the node's record cache.
type records struct {
	mu    sync.Mutex
	m     map[string]*entry
	lru   list.List // *entry, most recently used at the front; homes stay out
	bytes int
	tomb  map[string]time.Time // ended sessions, until the time given
}

func (c *records) init() {
	c.m = make(map[string]*entry)
	c.tomb = make(map[string]time.Time)
	c.lru.Init()
}

// validSessionID reports whether b can be a session id of a cluster:
// visible ASCII, of a sane length.
func validSessionID(b []byte) bool {
	return len(b) > 0 && len(b) <= maxIDLen && printable(b)
}

// appendRecord appends the signed wire form of e's record.
func (n *Node) appendRecord(dst []byte, e *entry) []byte {
	start := len(dst)
	r := &e.rec
	dst = append(dst, recRecord)
	dst = appendUvarint64(dst, e.rev)
	dst = appendStr(dst, e.home)
	dst = appendStr(dst, e.homeInc)
	dst = appendStr(dst, r.ID)
	dst = appendStr(dst, r.Version)
	ready := byte(0)
	if r.Ready {
		ready = 1
	}
	dst = append(dst, ready)
	dst = appendUvarint(dst, r.LogLevel+1)
	dst = appendStr(dst, r.Subject)
	remote := ""
	if r.Remote.IsValid() {
		remote = r.Remote.String()
	}
	dst = appendStr(dst, remote)
	info, _ := codec.Marshal(&r.ClientInfo)
	dst = appendBytes(dst, info)
	caps, _ := codec.Marshal(&r.ClientCaps)
	dst = appendBytes(dst, caps)
	dst = appendUvarint(dst, len(r.Subscriptions))
	for _, u := range r.Subscriptions {
		dst = appendStr(dst, u)
	}
	return n.sig.sign(dst, start)
}

// parseRecord decodes a record message (signature removed), checking
// every field; the entry's strings are copies.
func parseRecord(b []byte) (*entry, bool) {
	r := reader{b: b}
	if r.byte() != recRecord {
		return nil, false
	}
	e := &entry{size: len(b) + 256}
	e.rev = r.uvarint()
	home, inc, id, version := r.bytes(), r.bytes(), r.bytes(), r.bytes()
	ready := r.byte()
	level := int(r.uvarint()) - 1
	subject, remote, info, caps := r.bytes(), r.bytes(), r.bytes(), r.bytes()
	nsubs := r.uvarint()
	if r.bad || !validName(home) || !validInc(inc) || !validSessionID(id) || !mcp.SupportedVersion(string(version)) ||
		ready > 1 || level < -1 || level >= len(mcp.LogLevels) || len(subject) > maxIDLen*4 || !printable(subject) ||
		len(info) > maxJSONField || len(caps) > maxJSONField || nsubs > maxRecordURIs {
		return nil, false
	}
	e.home, e.homeInc = string(home), string(inc)
	rec := &e.rec
	rec.ID, rec.Version, rec.Ready, rec.LogLevel, rec.Subject = string(id), string(version), ready == 1, level, string(subject)
	if len(remote) > 0 {
		a, err := netip.ParseAddr(string(remote))
		if err != nil {
			return nil, false
		}
		rec.Remote = a
	}
	if !spliceable(info) || !spliceable(caps) || codec.Unmarshal(info, &rec.ClientInfo) != nil || codec.Unmarshal(caps, &rec.ClientCaps) != nil {
		return nil, false
	}
	if nsubs > 0 {
		rec.Subscriptions = make([]string, 0, min(nsubs, 1024))
	}
	for i := uint64(0); i < nsubs; i++ {
		u := r.bytes()
		if r.bad || len(u) == 0 || len(u) > maxURILen {
			return nil, false
		}
		rec.Subscriptions = append(rec.Subscriptions, string(u))
	}
	if r.bad || len(r.b) != 0 {
		return nil, false
	}
	return e, true
}

// newer reports whether a supersedes b: a higher revision, or the same
// from a greater home (two nodes that took a session over at once agree
// on the winner).
func newer(a, b *entry) bool {
	if a.rev != b.rev {
		return a.rev > b.rev
	}
	if a.home != b.home {
		return a.home > b.home
	}
	return a.homeInc > b.homeInc
}

// get returns the entry of sid, a copy of its record, marking it used.
func (c *records) get(sid string) (entry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[sid]
	if e == nil {
		return entry{}, false
	}
	if e.elem != nil {
		c.lru.MoveToFront(e.elem)
	}
	return *e, true
}

// ended reports whether sid ended everywhere lately.
func (c *records) ended(sid string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.tomb[sid]
	return ok && time.Now().Before(t)
}

// put stores e unless what is stored is newer or the session ended; it
// returns the entry it replaced (nil for none) and whether it stored e.
// self is this node's name: the entries of sessions it is the home of
// are not evicted. Over max bytes, the entries used least recently go.
func (c *records) put(e *entry, self string, max int) (old *entry, stored bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.tomb[e.rec.ID]; ok && time.Now().Before(t) {
		return nil, false
	}
	old = c.m[e.rec.ID]
	if old != nil {
		if !newer(e, old) {
			return old, false
		}
		c.unlinkLocked(old)
	}
	c.m[e.rec.ID] = e
	c.bytes += e.size
	if e.home != self {
		e.elem = c.lru.PushFront(e)
	}
	for c.bytes > max && c.lru.Len() > 0 {
		victim := c.lru.Back().Value.(*entry)
		if victim == e {
			break
		}
		c.unlinkLocked(victim)
		delete(c.m, victim.rec.ID)
	}
	return old, true
}

// unlinkLocked takes e out of the byte count and the LRU list.
func (c *records) unlinkLocked(e *entry) {
	c.bytes -= e.size
	if e.elem != nil {
		c.lru.Remove(e.elem)
		e.elem = nil
	}
}

// end forgets sid and remembers for a while that it ended everywhere, so
// that a record of it still in flight does not bring it back. It returns
// the entry it forgot.
func (c *records) end(sid string) *entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if len(c.tomb) >= maxTombstones {
		for k, t := range c.tomb {
			if now.After(t) {
				delete(c.tomb, k)
			}
		}
		if len(c.tomb) >= maxTombstones {
			for k := range c.tomb { // still full: forget any
				delete(c.tomb, k)
				break
			}
		}
	}
	c.tomb[sid] = now.Add(tombstoneTTL)
	e := c.m[sid]
	if e != nil {
		c.unlinkLocked(e)
		delete(c.m, sid)
	}
	return e
}

// homedBy returns copies of the entries whose home is node in incarnation
// inc.
func (c *records) homedBy(node, inc string) []entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []entry
	for _, e := range c.m {
		if e.home == node && e.homeInc == inc {
			out = append(out, *e)
		}
	}
	return out
}

// size returns the number of records kept and their bytes.
func (c *records) size() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m), c.bytes
}

// publishRecord stores e as this node's word on its session and publishes
// it. The message is built in a pooled buffer: Publish copies it.
func (n *Node) publishRecord(e *entry) {
	buf := codec.GetBuffer()
	buf.B = n.appendRecord(buf.B[:0], e)
	e.size = len(buf.B) + 256
	n.recs.put(e, n.name, n.opts.RecordBytes)
	if err := n.nc.Publish(n.prefix+".rec", buf.B); err != nil {
		n.stats.busDropped.Add(1)
	}
	codec.PutBuffer(buf)
}

// publishSigned publishes on the record subject a short message of kind:
// the session id and, for a cancel, the request id. A replica's first
// request of a session sends one (recUsed): it is built in a pooled
// buffer (appendSigned allocates nothing: TestAppendSignedAllocs), which
// Publish copies.
func (n *Node) publishSigned(kind byte, sid string, extra []byte) {
	buf := codec.GetBuffer()
	buf.B = n.appendSigned(buf.B[:0], kind, sid, extra)
	_ = n.nc.Publish(n.prefix+".rec", buf.B)
	codec.PutBuffer(buf)
}

// appendSigned appends the signed message publishSigned sends.
func (n *Node) appendSigned(dst []byte, kind byte, sid string, extra []byte) []byte {
	start := len(dst)
	dst = append(dst, kind)
	dst = appendStr(dst, sid)
	if extra != nil {
		dst = appendBytes(dst, extra)
	}
	return n.sig.sign(dst, start)
}

// onRecord takes a message of the record subject.
func (n *Node) onRecord(m *nats.Msg) {
	body, ok := n.sig.open(m.Data)
	if !ok || len(body) == 0 {
		n.badMessage("record signature", m.Data)
		return
	}
	switch body[0] {
	case recRecord:
		e, ok := parseRecord(body)
		if !ok {
			n.badMessage("record", body)
			return
		}
		n.takeRecord(e)
	case recEnd, recUsed, recCancel:
		r := reader{b: body[1:]}
		sid := r.bytes()
		var reqID []byte
		if body[0] == recCancel {
			reqID = r.bytes()
			if !validRequestID(reqID) {
				r.bad = true
			}
		}
		if r.bad || len(r.b) != 0 || !validSessionID(sid) {
			n.badMessage("record", body)
			return
		}
		n.sessionNews(body[0], string(sid), reqID)
	default:
		n.badMessage("record", body)
	}
}

// validRequestID reports whether b is a JSON-RPC request id: a number or
// a string.
func validRequestID(b []byte) bool {
	if len(b) == 0 || len(b) > 1024 || !spliceable(b) {
		return false
	}
	return b[0] == '"' || b[0] == '-' || b[0] >= '0' && b[0] <= '9'
}

// onRecordGet answers another node's request for a record: the record if
// this node has it, else that it has none.
func (n *Node) onRecordGet(m *nats.Msg) {
	if m.Reply == "" {
		return
	}
	body, ok := n.sig.open(m.Data)
	if !ok || len(body) < 2 || body[0] != recGet {
		n.badMessage("record request", m.Data)
		return
	}
	r := reader{b: body[1:]}
	sid := r.bytes()
	if r.bad || len(r.b) != 0 || !validSessionID(sid) {
		n.badMessage("record request", body)
		return
	}
	e, ok := n.recs.get(string(sid))
	var b []byte
	if ok {
		b = n.appendRecord(nil, &e)
	} else {
		b = n.sig.sign(appendBytes([]byte{recNone}, []byte(n.name)), 0)
	}
	_ = n.nc.Publish(m.Reply, b)
}

// record returns the record of session sid: from the cache, or else
// asked of the other nodes, which answer with it or that they have none.
// It waits until one has it, every live node said it has not, or
// fetchWait passes; unavailable is set when the answer cannot be known
// now (this node is cut off from the cluster).
func (n *Node) record(sid []byte) (e entry, ok, unavailable bool) {
	if e, ok := n.recs.get(string(sid)); ok {
		return e, true, false
	}
	if !validSessionID(sid) || n.recs.ended(string(sid)) {
		return entry{}, false, false
	}
	if n.cutOff() {
		return entry{}, false, true
	}
	// Every live peer answers; one this node has not heard of yet (it
	// just started, or the other did) answers too: the first "none" is
	// enough when no peer is known.
	peers := max(n.livePeers(), 1)
	// The node the id names opened the session, and is its home unless
	// it is gone: while it is not known gone, the others' "none" is no
	// answer (a node may answer before the record reached it) until its
	// own came, within the wait; a node nobody has heard of (a forged id)
	// that never answers means the session is unknown.
	opener := string(engine.SessionNode(sid))
	waitOpener := opener != "" && opener != n.name && validName(opener) && (n.alive(opener, "") || !n.known(opener))
	f := n.register("", nil)
	defer n.unregister(f)
	req := append([]byte{recGet}, 0)[:1]
	req = n.sig.sign(appendBytes(req, sid), 0)
	if err := n.nc.PublishRequest(n.prefix+".recget", f.reply, req); err != nil {
		return entry{}, false, true
	}
	n.stats.recordFetches.Add(1)
	timer := time.NewTimer(min(fetchWaitLimit, n.opts.ForwardTimeout))
	defer timer.Stop()
	nones := 0
	for {
		select {
		case b := <-f.ch:
			if b == nil {
				return entry{}, false, false // nobody listens: no peer
			}
			body, ok := n.sig.open(b)
			if !ok || len(body) == 0 {
				n.badMessage("record answer signature", b)
				continue
			}
			if body[0] == recNone {
				r := reader{b: body[1:]}
				from := r.bytes()
				if r.bad || len(r.b) != 0 || !validName(from) {
					n.badMessage("record answer", body)
					continue
				}
				if string(from) == opener {
					waitOpener = false // it answered (restarted, it may not know yet): count
				}
				if nones++; nones >= peers && !waitOpener {
					return entry{}, false, false
				}
				continue
			}
			got, ok := parseRecord(body)
			if !ok || got.rec.ID != string(sid) {
				n.badMessage("record answer", body)
				continue
			}
			n.takeRecord(got)
			if e, ok := n.recs.get(string(sid)); ok {
				return e, true, false
			}
			return entry{}, false, false
		case <-timer.C:
			if waitOpener {
				// Its home, known alive, did not answer: ask again later;
				// a node nobody knows: no such session.
				return entry{}, false, n.known(opener)
			}
			return entry{}, false, nones < peers
		}
	}
}

package cluster

import (
	"container/list"
	"sync"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/nats-io/nats.go"
)

// Kept events: so that a client resumes, on any node, a stream whose node
// is gone, every SSE event a node issues for a session (on the session's
// standalone stream, or on a request's stream) is published on
// "<prefix>.ev", signed, and every other node keeps it: per session
// within Options.EventSessionBytes (the oldest go first, as in the
// transport's own store), and in all within Options.EventBytes (the
// sessions used least recently go first). A node keeps the events of
// the others only: its own are in its transport's store. The events of a
// session go when it ends everywhere.
//
// Per event, this costs its issuer one signature and one publish, and
// every other node one delivery, one check (signature, JSON) and one copy
// (docs/cluster.md gives the figures). A JSON answer is no event: only
// streams pay.

// eventKind is the kind byte of a kept event's message.
const eventKind = 'E'

// evKey names a stream: the instance that issued it and its number.
type evKey struct {
	inst   string
	stream uint64
}

// evStream is what is known of one stream.
type evStream struct {
	reqID     []byte // the request it answers; nil for a standalone stream
	final     bool   // its answer is kept
	lastEvict uint64 // the sequence number of its last event evicted
}

// keptEvent is one event kept.
type keptEvent struct {
	st   *evStream
	seq  uint64
	data []byte
}

// sessEvents are the events kept of one session, oldest first.
type sessEvents struct {
	sid     string
	streams map[evKey]*evStream
	q       []keptEvent
	head    int
	bytes   int
	elem    *list.Element
	last    *evStream // the stream added to last, and its key: events of one stream come in runs
	lastKey evKey
}

// eventStore is the node's store of other nodes' events.
type eventStore struct {
	subj  string // "<prefix>.ev"
	mu    sync.Mutex
	m     map[string]*sessEvents
	lru   list.List // *sessEvents, most recently added to at the front
	bytes int
}

func (s *eventStore) init(prefix string) {
	s.subj = prefix + ".ev"
	s.m = make(map[string]*sessEvents)
	s.lru.Init()
}

// eventOverhead is what an event costs besides its data.
const eventOverhead = 96

// add keeps an event of stream (inst, stream) of session sid within the
// bounds: perSession for its session, total for all. sid and inst are
// copied only for a session or a stream not known yet.
func (s *eventStore) add(sid, inst []byte, stream, seq uint64, reqID []byte, final bool, data []byte, perSession, total int) {
	cost := len(data) + eventOverhead
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.m[string(sid)]
	if se == nil {
		se = &sessEvents{sid: string(sid), streams: make(map[evKey]*evStream)}
		s.m[se.sid] = se
		se.elem = s.lru.PushFront(se)
	} else {
		s.lru.MoveToFront(se.elem)
	}
	st := se.last
	if st == nil || se.lastKey.stream != stream || se.lastKey.inst != string(inst) {
		k := evKey{string(inst), stream}
		if st = se.streams[k]; st == nil {
			st = &evStream{}
			if len(reqID) > 0 {
				st.reqID = append([]byte(nil), reqID...)
			}
			se.streams[k] = st
		}
		se.last, se.lastKey = st, k
	}
	if final {
		st.final = true
	}
	se.q = append(se.q, keptEvent{st: st, seq: seq, data: append([]byte(nil), data...)})
	se.bytes += cost
	s.bytes += cost
	for se.bytes > perSession && se.head < len(se.q)-1 {
		s.evictLocked(se)
	}
	for s.bytes > total && s.lru.Len() > 1 {
		victim := s.lru.Back().Value.(*sessEvents)
		if victim == se {
			break
		}
		s.dropLocked(victim)
	}
	if se.head > 64 && se.head >= len(se.q)/2 {
		n := copy(se.q, se.q[se.head:])
		clear(se.q[n:])
		se.q, se.head = se.q[:n], 0
	}
}

// evictLocked drops the oldest event of se.
func (s *eventStore) evictLocked(se *sessEvents) {
	e := se.q[se.head]
	se.q[se.head] = keptEvent{}
	se.head++
	cost := len(e.data) + eventOverhead
	se.bytes -= cost
	s.bytes -= cost
	e.st.lastEvict = e.seq
}

// dropLocked forgets every event of se.
func (s *eventStore) dropLocked(se *sessEvents) {
	s.bytes -= se.bytes
	s.lru.Remove(se.elem)
	delete(s.m, se.sid)
}

// drop forgets the events of session sid.
func (s *eventStore) drop(sid string) {
	s.mu.Lock()
	if se := s.m[sid]; se != nil {
		s.dropLocked(se)
	}
	s.mu.Unlock()
}

// replay calls fn with the events kept of stream k of session sid after
// seq; see Node.Replay.
func (s *eventStore) replay(sid string, k evKey, after uint64, fn func(seq uint64, data []byte)) (reqID []byte, final, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.m[sid]
	if se == nil {
		return nil, false, false
	}
	st := se.streams[k]
	if st == nil {
		return nil, false, false
	}
	reqID = append([]byte(nil), st.reqID...)
	if st.lastEvict > after {
		return reqID, false, true // a gap: what followed after is partly lost
	}
	for _, e := range se.q[se.head:] {
		if e.st == st && e.seq > after {
			fn(e.seq, e.data)
		}
	}
	return reqID, st.final, true
}

// requestOf returns the request id of stream k of session sid, nil when
// unknown.
func (s *eventStore) requestOf(sid string, k evKey) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if se := s.m[sid]; se != nil {
		if st := se.streams[k]; st != nil {
			return append([]byte(nil), st.reqID...)
		}
	}
	return nil
}

// size returns the sessions whose events are kept, and their bytes.
func (s *eventStore) size() (int, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m), s.bytes
}

// Event implements mcphttp.Cluster: an event this node issued is
// published, signed, for the others to keep.
func (n *Node) Event(sid string, stream, seq uint64, reqID []byte, final bool, data []byte) {
	b := codec.GetBuffer()
	b.B = n.appendEvent(b.B[:0], sid, stream, seq, reqID, final, data)
	if len(b.B) <= n.maxFrame {
		if err := n.nc.Publish(n.events.subj, b.B); err != nil {
			n.stats.busDropped.Add(1)
		} else {
			n.stats.eventsOut.Add(1)
		}
	}
	codec.PutBuffer(b)
}

// appendEvent appends the signed message of an event this node issued.
func (n *Node) appendEvent(dst []byte, sid string, stream, seq uint64, reqID []byte, final bool, data []byte) []byte {
	start := len(dst)
	dst = append(dst, eventKind)
	dst = appendStr(dst, sid)
	dst = appendStr(dst, n.inst)
	dst = appendUvarint64(dst, stream)
	dst = appendUvarint64(dst, seq)
	f := byte(0)
	if final {
		f = 1
	}
	dst = append(dst, f)
	dst = appendBytes(dst, reqID)
	dst = append(dst, data...)
	return n.sig.sign(dst, start)
}

// onEvent keeps an event another node issued, once checked: its
// signature, its names, and its data one JSON value.
func (n *Node) onEvent(m *nats.Msg) {
	body, ok := n.sig.open(m.Data)
	if !ok {
		n.badMessage("event signature", m.Data)
		return
	}
	ev, ok := parseEvent(body)
	if !ok {
		n.badMessage("event", body)
		return
	}
	if n.recs.ended(string(ev.sid)) {
		return
	}
	n.stats.eventsIn.Add(1)
	n.events.add(ev.sid, ev.inst, ev.stream, ev.seq, ev.reqID, ev.final, ev.data, n.opts.EventSessionBytes, n.opts.EventBytes)
}

// wireEvent is a kept event's message, parsed; its slices alias it.
type wireEvent struct {
	sid, inst, reqID, data []byte
	stream, seq            uint64
	final                  bool
}

// parseEvent parses and checks a kept event's message (signature
// removed): its session id, its instance, its request id (a JSON-RPC id),
// and its data, one JSON value.
func parseEvent(body []byte) (ev wireEvent, ok bool) {
	r := reader{b: body}
	if r.byte() != eventKind {
		return ev, false
	}
	ev.sid, ev.inst = r.bytes(), r.bytes()
	ev.stream, ev.seq = r.uvarint(), r.uvarint()
	final := r.byte()
	ev.reqID = r.bytes()
	ev.data = r.b
	ev.final = final == 1
	if r.bad || !validSessionID(ev.sid) || !validInstance(ev.inst) || final > 1 ||
		(len(ev.reqID) > 0 && !validRequestID(ev.reqID)) || !validJSON(ev.data) {
		return ev, false
	}
	return ev, true
}

// validInstance reports whether b can name an instance: a node name, a
// '.', an incarnation.
func validInstance(b []byte) bool {
	for i, c := range b {
		if c == '.' {
			return validName(b[:i]) && validInc(b[i+1:])
		}
	}
	return false
}

// splitInstance splits an instance name into node and incarnation.
func splitInstance(b []byte) (node, inc []byte) {
	for i, c := range b {
		if c == '.' {
			return b[:i], b[i+1:]
		}
	}
	return b, nil
}

// Replay implements mcphttp.Cluster: the events this node keeps of a
// stream another instance issued.
func (n *Node) Replay(sid string, inst []byte, stream, after uint64, fn func(seq uint64, data []byte)) ([]byte, bool, bool) {
	return n.events.replay(sid, evKey{string(inst), stream}, after, fn)
}

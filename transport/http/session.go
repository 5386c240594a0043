package http

import (
	"bytes"
	"context"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/session"
	"github.com/valyala/fasthttp"
)

// hsession is the transport's state of one stateful session: the records
// of its SSE streams and the event store they replay from. It is the
// session's Out sink: messages tied to no request go on the standalone
// stream (stream 0), recorded in the store. The transport keeps no index
// of its own: a session is looked up by id in the engine's table, and its
// hsession is its Out (see Server.lookup). Safe for concurrent use.
//
// Every event gets the session's next sequence number; its id
// "<stream>-<seq>" names its stream, and a stream's events are the store's
// events of that stream in order. A priming event carries the cursor
// "<stream>-<seq>" of the last sequence number before the stream's first
// event, so resuming from it replays the whole stream.
type hsession struct {
	s    *Server // the transport serving it: several may share one engine
	sess *session.Session

	mu      sync.Mutex
	closed  bool
	seq     uint64 // last sequence number issued
	nstream uint64 // POST stream ids issued (1..nstream)
	std     streamRec
	recs    map[uint64]*streamRec // POST streams that may still be resumed
	store   eventStore
	live    int // open streams

	posts atomic.Int32 // POSTs being handled: the session is not idle

	created     time.Time   // when initialize created it
	remote      netip.Addr  // the client's address (per-address limit)
	established atomic.Bool // a request named it since: initialization completed

	// A session shared with a cluster (shared.go).
	shared   bool         // held from the cluster's record: not counted per address
	dropped  atomic.Bool  // the cluster ended this hold (Drop): nothing to tell it
	usedSent atomic.Int64 // UnixNano of the last Used sent to the home
}

// streamRec is one stream of a session, open or not.
type streamRec struct {
	id        uint64
	reqID     []byte                  // POST stream: the request's raw id
	cancel    context.CancelCauseFunc // POST stream: cancels the request while it runs
	live      *stream                 // the connection writing it now, if any
	finished  bool                    // POST stream: the request is over
	events    int                     // its events in the store
	lastEvict uint64                  // the sequence number of its last evicted event
	taken     uint64                  // standalone stream: last event handed to a connection
}

// event is one stored SSE event; the store owns buf.
type event struct {
	rec *streamRec
	seq uint64
	buf *codec.Buffer
}

// eventStore keeps a session's recent events, oldest first, within
// Options.EventStoreBytes (the newest event is kept whatever its size).
// It counts the memory it retains, not the length of the messages: the
// capacity of each event's buffer (at least the pool's 512 bytes) and its
// header, and the ring of event slots. The events are ev[head], ...,
// ev[head+n-1], indexes modulo len(ev), a power of two.
type eventStore struct {
	ev    []event
	head  int
	n     int
	bytes int // retained by the events, slots included
}

// slotSize and bufHeader are the sizes of an event's slot in the ring and
// of its buffer's header.
const (
	slotSize  = int(unsafe.Sizeof(event{}))
	bufHeader = int(unsafe.Sizeof(codec.Buffer{}))
)

// eventCost is the memory a stored event's buffer retains.
func eventCost(b *codec.Buffer) int { return cap(b.B) + bufHeader }

// at returns the i-th stored event, oldest first.
func (st *eventStore) at(i int) *event { return &st.ev[(st.head+i)&(len(st.ev)-1)] }

// evictOldest removes the oldest event and returns it.
func (st *eventStore) evictOldest() event {
	p := st.at(0)
	old := *p
	*p = event{}
	st.head = (st.head + 1) & (len(st.ev) - 1)
	st.n--
	st.bytes -= eventCost(old.buf)
	return old
}

// growCost is what appending one more event adds in slots: the ring
// doubles when full.
func (st *eventStore) growCost() int {
	if st.n < len(st.ev) {
		return 0
	}
	return max(len(st.ev), 8) * slotSize
}

// push appends e, doubling the ring when it is full.
func (st *eventStore) push(e event) {
	if st.n == len(st.ev) {
		ev := make([]event, max(2*len(st.ev), 8))
		for i := 0; i < st.n; i++ {
			ev[i] = *st.at(i)
		}
		st.bytes += (len(ev) - len(st.ev)) * slotSize
		st.ev, st.head = ev, 0
	}
	*st.at(st.n) = e
	st.n++
	st.bytes += eventCost(e.buf)
}

// trimSlack is the spare capacity from which a buffer more than half
// empty is copied to one of its size before it is stored: a short message
// in a buffer grown by an earlier large one would pin that memory, and the
// store would keep few events.
const trimSlack = 512

// compact returns b, or a copy of its bytes in a buffer without slack
// (b goes back to the pool).
func compact(b *codec.Buffer) *codec.Buffer {
	if slack := cap(b.B) - len(b.B); slack < trimSlack || slack < len(b.B) {
		return b
	}
	nb := &codec.Buffer{B: append([]byte(nil), b.B...)}
	codec.PutBuffer(b)
	return nb
}

// newSession creates a stateful session for a client at ip, or returns
// errTooManySessions or errTooManySessionsPerIP.
func (s *Server) newSession(ip netip.Addr) (*hsession, error) {
	if err := s.admitSession(ip); err != nil {
		return nil, err
	}
	h := &hsession{s: s, created: time.Now(), remote: ip}
	// The session is in the engine's table, where the reaper and Shutdown
	// find it, from Open on: the fields they read (s, created, posts) are
	// set before, and they use the table's *session.Session, not h.sess.
	// The reaper leaves it alone while posts is above zero.
	h.posts.Store(1) // the initialize that creates it; the caller releases it
	h.sess = s.eng.Open(h).Session()
	h.sess.Transport = "http"
	if ip.IsValid() {
		h.sess.SetRemote(ip)
	}
	if s.opts.Cluster != nil {
		h.sess.Tracker.SetPrefix(s.opts.Cluster.Instance())
		h.sess.OnChange(s.sessionChanged)
	}
	h.sess.OnClose(h.onClose)
	s.pending.push(h)
	s.lru.push(h, s.nsess.Load())
	return h, nil
}

// lookup returns the live Streamable HTTP session of this server named by
// sid, or nil: the session is looked up in the engine's table (without
// allocating), and its hsession is its Out sink. A session of another
// transport, or of another Server on the same engine, is not found. A
// session named by a request has completed its initialization as far as
// the transport cares: the client got its id and uses it.
//
// In a cluster, a session this server does not hold is restored from the
// cluster's record (shared.go), and a replica's home is told it is used.
func (s *Server) lookup(sid []byte) *hsession {
	h, _ := s.find(sid)
	return h
}

// find is lookup, and the error that kept it from restoring a session of
// the cluster (errUnavailable: answer 503, not 404).
func (s *Server) find(sid []byte) (*hsession, error) {
	sess, ok := s.eng.Sessions().GetBytes(sid)
	if !ok {
		if s.opts.Cluster == nil || s.closing.Load() {
			return nil, nil
		}
		h, err := s.restore(sid)
		if h != nil && h.sess.Replica() {
			s.used(h)
		}
		return h, err
	}
	h := s.hsessionOf(sess)
	if h == nil || sess.State() == session.StateClosed {
		return nil, nil
	}
	if !h.established.Load() {
		h.established.Store(true)
	}
	if h.shared && sess.Replica() {
		s.used(h)
	}
	return h, nil
}

// unavailable answers 503 with Retry-After a request for a session of the
// cluster that this server cannot restore now.
func (s *Server) unavailable(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.SetBytesK(hdrRetryAfter, "1")
	s.fail(ctx, fasthttp.StatusServiceUnavailable, codeTransport, "Service Unavailable: the session's record cannot be had from the cluster now, or this server has no room for it; retry")
}

// hsessionOf returns the state of sess if it is a Streamable HTTP session
// of this server, or nil.
func (s *Server) hsessionOf(sess *session.Session) *hsession {
	if h, ok := sess.Out.(*hsession); ok && h.s == s {
		return h
	}
	return nil
}

// owns reports whether sess is a session of this server, Streamable HTTP
// or legacy. Stateless sessions belong to no one: their POST closes them.
func (s *Server) owns(sess *session.Session) bool {
	switch out := sess.Out.(type) {
	case *hsession:
		return out.s == s
	case *legacySession:
		return out.s == s
	}
	return false
}

// pendingInit reports whether sess, the session of h, still waits for the
// client's first request after initialize. sess is a parameter because
// the reaper finds h in the engine's table, where it may be before
// newSession has set h.sess.
func (h *hsession) pendingInit(sess *session.Session) bool {
	st := sess.State()
	return !h.established.Load() && st != session.StateReady && st != session.StateClosed
}

// onClose runs once when the session ends, however it ends: it ends the
// open streams and frees the store.
func (h *hsession) onClose() {
	if h.shared {
		h.s.nsess.Add(-1)
	} else {
		h.s.releaseSession(h.remote)
	}
	if h.s.opts.Cluster != nil {
		h.s.closedShared(h)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	if h.std.live != nil {
		h.std.live.end(false)
	}
	for _, rec := range h.recs {
		if rec.live != nil {
			rec.live.end(false)
		}
	}
	for i := 0; i < h.store.n; i++ {
		codec.PutBuffer(h.store.at(i).buf)
	}
	h.store = eventStore{}
	h.recs = nil
}

// busy reports whether a POST is being handled or a stream is open.
func (h *hsession) busy() bool {
	if h.posts.Load() > 0 {
		return true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.live > 0
}

// Send implements session.Sink for messages tied to no request: they go on
// the standalone stream, and to the store for replay. It takes ownership of
// b.
func (h *hsession) Send(b *codec.Buffer) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		codec.PutBuffer(b)
		return session.ErrClosed
	}
	h.emitLocked(&h.std, b, false)
	h.mu.Unlock()
	return nil
}

// emitLocked records b as the next event of rec and hands it to the
// connection writing rec, if any; final marks the answer of rec's
// request. The store takes ownership of b. In a cluster the event is kept
// by the cluster too.
func (h *hsession) emitLocked(rec *streamRec, b *codec.Buffer, final bool) {
	h.seq++
	if st := rec.live; st != nil {
		st.pushEvent(rec.id, h.seq, b.B, true)
		if rec == &h.std {
			rec.taken = h.seq
		}
	}
	if cl := h.s.opts.Cluster; cl != nil {
		cl.Event(h.sess.ID(), rec.id, h.seq, rec.reqID, final, b.B)
	}
	rec.events++
	h.addLocked(event{rec: rec, seq: h.seq, buf: compact(b)})
}

// addLocked appends e to the store, evicting the oldest events over the
// byte limit.
func (h *hsession) addLocked(e event) {
	st := &h.store
	cost := eventCost(e.buf)
	for st.n > 0 && st.bytes+cost+st.growCost() > h.s.opts.EventStoreBytes {
		old := st.evictOldest()
		codec.PutBuffer(old.buf)
		old.rec.events--
		old.rec.lastEvict = old.seq
		h.dropLocked(old.rec)
	}
	st.push(e)
}

// newRecLocked opens the record of a new POST stream for request id.
func (h *hsession) newRecLocked(id []byte, cancel context.CancelCauseFunc) *streamRec {
	h.nstream++
	rec := &streamRec{id: h.nstream, reqID: append([]byte(nil), id...), cancel: cancel}
	if h.recs == nil {
		h.recs = make(map[uint64]*streamRec)
	}
	h.recs[rec.id] = rec
	return rec
}

// finishLocked marks a POST stream's request over: its open stream ends
// once written.
func (h *hsession) finishLocked(rec *streamRec) {
	if rec == nil {
		return
	}
	rec.finished, rec.cancel = true, nil
	if rec.live != nil {
		rec.live.end(false)
	}
	h.dropLocked(rec)
}

// dropLocked forgets a finished POST stream that has nothing left to
// replay and no connection.
func (h *hsession) dropLocked(rec *streamRec) {
	if rec != &h.std && rec.finished && rec.events == 0 && rec.live == nil {
		delete(h.recs, rec.id)
	}
}

// closeStream ends rec's open stream early at the handler's request (SSE
// polling): a retry hint goes last, and later events of the request are
// only stored until the client resumes with GET and Last-Event-ID.
func (h *hsession) closeStream(rec *streamRec) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if rec == nil || rec.live == nil {
		return
	}
	rec.live.end(true)
	rec.live = nil
}

// detach is called when a stream's response is over; abnormal means the
// client went away before its end (gone says why: ErrClientGone, or the
// limit that cut it), which cancels the request it carried.
func (h *hsession) detach(st *stream, abnormal bool, gone error) {
	h.mu.Lock()
	rec := st.rec
	h.live--
	var cancel context.CancelCauseFunc
	if rec.live == st {
		rec.live = nil
		if abnormal {
			cancel = rec.cancel
		}
	}
	if !h.closed {
		h.dropLocked(rec)
	}
	h.mu.Unlock()
	h.sess.Touch()
	if cancel != nil {
		cancel(gone)
	}
}

// attachLocked makes st the connection of rec, ending the one it replaces.
func (h *hsession) attachLocked(rec *streamRec, st *stream) {
	st.h, st.rec = h, rec
	h.live++
	if old := rec.live; old != nil {
		old.end(false)
	}
	rec.live = st
}

// replayLocked queues on st the stored events of rec after seq.
func (h *hsession) replayLocked(rec *streamRec, seq uint64, st *stream) {
	for i := 0; i < h.store.n; i++ {
		e := h.store.at(i)
		if e.rec == rec && e.seq > seq {
			st.pushEvent(rec.id, e.seq, e.buf.B, false)
			if rec == &h.std {
				rec.taken = max(rec.taken, e.seq)
			}
		}
	}
}

// openStandalone makes st the session's standalone stream: it primes it
// and queues the stored events no connection took yet.
func (h *hsession) openStandalone(st *stream) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	st.prime(0, h.std.taken)
	h.replayLocked(&h.std, h.std.taken, st)
	h.attachLocked(&h.std, st)
	return true
}

// resume answers GET with Last-Event-ID: the stream it names is replayed
// on st from after it, then continues live unless it is over. It returns
// an HTTP status and message when it cannot.
func (h *hsession) resume(st *stream, lastID []byte) (int, int, string) {
	inst, sid, seq, ok := parseEventID(lastID)
	if !ok {
		return fasthttp.StatusBadRequest, codeTransport, "Bad Request: malformed Last-Event-ID: " + string(lastID)
	}
	if len(inst) > 0 && !bytes.Equal(inst, h.s.inst) {
		if h.s.opts.Cluster == nil {
			return fasthttp.StatusBadRequest, codeTransport, "Bad Request: unknown Last-Event-ID: " + string(lastID)
		}
		return h.resumeElsewhere(st, inst, sid, seq, lastID)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return fasthttp.StatusNotFound, codeSessionNotFound, "Session not found"
	}
	if sid > h.nstream || seq > h.seq {
		return fasthttp.StatusBadRequest, codeTransport, "Bad Request: unknown Last-Event-ID: " + string(lastID)
	}
	rec := &h.std
	if sid != 0 {
		rec = h.recs[sid]
	}
	evicted := "Bad Request: cannot resume after Last-Event-ID " + string(lastID) +
		": the events that followed were evicted from the session's event store (" + strconv.Itoa(h.s.opts.EventStoreBytes) + " bytes)"
	if rec == nil {
		return fasthttp.StatusBadRequest, codeTransport, evicted
	}
	st.prime(sid, seq)
	if rec.lastEvict > seq {
		if rec == &h.std {
			return fasthttp.StatusBadRequest, codeTransport, evicted
		}
		// The request's messages are lost: answer it with an error, so the
		// client's call fails now rather than waiting forever.
		b := codec.GetBuffer()
		b.B = codec.AppendError(b.B, rec.reqID, codeTransport, evicted[len("Bad Request: "):], nil)
		st.pushData(b.B)
		codec.PutBuffer(b)
		st.end(false)
		return 0, 0, ""
	}
	h.replayLocked(rec, seq, st)
	h.attachLocked(rec, st)
	if rec.finished {
		st.end(false)
	}
	return 0, 0, ""
}

// get serves GET on the MCP endpoint: the standalone stream, or the
// resumption of a stream with Last-Event-ID.
func (s *Server) get(ctx *fasthttp.RequestCtx) {
	if s.opts.Stateless || statelessHeader(ctx) {
		s.notAllowed(ctx, allowStateless)
		return
	}
	if _, sse := accepts(ctx.Request.Header.PeekCanonical(hdrAccept)); !sse {
		s.fail(ctx, fasthttp.StatusNotAcceptable, codeTransport, "Not Acceptable: GET needs Accept: text/event-stream")
		return
	}
	if _, ok := s.protocolVersion(ctx); !ok {
		return
	}
	h := s.sessionOf(ctx)
	if h == nil {
		return
	}
	h.sess.Touch()
	st := s.newStream()
	if lastID := ctx.Request.Header.PeekCanonical(hdrLastEventID); len(lastID) > 0 {
		if status, code, msg := h.resume(st, lastID); status != 0 {
			s.fail(ctx, status, code, msg)
			return
		}
	} else if !h.openStandalone(st) {
		s.fail(ctx, fasthttp.StatusNotFound, codeSessionNotFound, "Session not found")
		return
	}
	s.respondSSE(ctx, st)
}

// del serves DELETE: the client ends its session.
func (s *Server) del(ctx *fasthttp.RequestCtx) {
	if s.opts.Stateless || statelessHeader(ctx) {
		s.notAllowed(ctx, allowStateless)
		return
	}
	if _, ok := s.protocolVersion(ctx); !ok {
		return
	}
	h := s.sessionOf(ctx)
	if h == nil {
		return
	}
	s.eng.Conn(h.sess).Close(ErrDeleted)
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

// sessionOf returns the session named by the request's Mcp-Session-Id,
// answering 400 (no header) or 404 (unknown or ended) when there is none.
func (s *Server) sessionOf(ctx *fasthttp.RequestCtx) *hsession {
	sid := ctx.Request.Header.PeekCanonical(hdrSessionID)
	if len(sid) == 0 {
		s.fail(ctx, fasthttp.StatusBadRequest, codeTransport, "Bad Request: Mcp-Session-Id header is required")
		return nil
	}
	h, err := s.find(sid)
	switch {
	case err != nil:
		s.unavailable(ctx)
	case h == nil:
		s.fail(ctx, fasthttp.StatusNotFound, codeSessionNotFound, "Session not found")
	}
	return h
}

// respondSSE answers ctx with st as a text/event-stream body. The headers
// are flushed at once; events follow as they come.
func (s *Server) respondSSE(ctx *fasthttp.RequestCtx, st *stream) {
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.Response.Header.SetContentTypeBytes(ctSSE)
	ctx.Response.Header.SetBytesKV(hdrCacheControl, valNoCache)
	ctx.Response.Header.SetBytesKV(hdrAccelBuffering, valNo)
	enc := s.responseEncoding(ctx, -1)
	if enc != encIdentity {
		ctx.Response.Header.SetContentEncodingBytes(enc.header())
		ctx.Response.Header.SetBytesKV(hdrVary, valAcceptEnc)
	}
	ctx.Response.ImmediateHeaderFlush = true
	st.attach(ctx.Conn(), enc)
	ctx.SetBodyStream(st, -1)
}

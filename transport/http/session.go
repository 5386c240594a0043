package mcphttp

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/session"
	"github.com/valyala/fasthttp"
)

// hsession is the transport's state of one stateful session: the records
// of its SSE streams and the event store they replay from. It is the
// session's Out sink: messages tied to no request go on the standalone
// stream (stream 0), recorded in the store. Safe for concurrent use.
//
// Every event gets the session's next sequence number; its id
// "<stream>-<seq>" names its stream, and a stream's events are the store's
// events of that stream in order. A priming event carries the cursor
// "<stream>-<seq>" of the last sequence number before the stream's first
// event, so resuming from it replays the whole stream.
type hsession struct {
	s    *Server
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
type eventStore struct {
	ev    []event
	head  int
	bytes int
}

var errTooManySessions = errors.New("mcphttp: too many sessions")

// newSession creates a stateful session.
func (s *Server) newSession() (*hsession, error) {
	if s.nsess.Add(1) > int64(s.opts.MaxSessions) {
		s.nsess.Add(-1)
		return nil, errTooManySessions
	}
	h := &hsession{s: s}
	h.posts.Store(1) // the initialize that creates it; the caller releases it
	h.sess = s.eng.NewSession(h)
	s.sessions.Store(h.sess.ID(), h)
	h.sess.OnClose(h.onClose)
	return h, nil
}

// lookup returns the live session named by sid, or nil.
func (s *Server) lookup(sid []byte) *hsession {
	h, ok := s.sessions.Load(codec.B2S(sid))
	if !ok || h.sess.State() == session.StateClosed {
		return nil
	}
	return h
}

// onClose runs once when the session ends, however it ends: it ends the
// open streams and frees the store.
func (h *hsession) onClose() {
	h.s.sessions.Delete(h.sess.ID())
	h.s.nsess.Add(-1)
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
	for i := h.store.head; i < len(h.store.ev); i++ {
		codec.PutBuffer(h.store.ev[i].buf)
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
	h.emitLocked(&h.std, b)
	h.mu.Unlock()
	return nil
}

// emitLocked records b as the next event of rec and hands it to the
// connection writing rec, if any. The store takes ownership of b.
func (h *hsession) emitLocked(rec *streamRec, b *codec.Buffer) {
	h.seq++
	if st := rec.live; st != nil {
		st.pushEvent(rec.id, h.seq, b.B, true)
		if rec == &h.std {
			rec.taken = h.seq
		}
	}
	rec.events++
	h.addLocked(event{rec: rec, seq: h.seq, buf: b})
}

// addLocked appends e to the store, evicting the oldest events over the
// byte limit.
func (h *hsession) addLocked(e event) {
	st := &h.store
	for st.bytes+len(e.buf.B) > h.s.opts.EventStoreBytes && st.head < len(st.ev) {
		old := st.ev[st.head]
		st.ev[st.head] = event{}
		st.head++
		st.bytes -= len(old.buf.B)
		codec.PutBuffer(old.buf)
		old.rec.events--
		old.rec.lastEvict = old.seq
		h.dropLocked(old.rec)
	}
	switch {
	case st.head == len(st.ev):
		st.ev, st.head = st.ev[:0], 0
	case st.head >= 64 && 2*st.head >= len(st.ev):
		n := copy(st.ev, st.ev[st.head:])
		clear(st.ev[n:])
		st.ev, st.head = st.ev[:n], 0
	}
	st.ev = append(st.ev, e)
	st.bytes += len(e.buf.B)
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
// client went away before its end, which cancels the request it carried.
func (h *hsession) detach(st *stream, abnormal bool) {
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
		cancel(ErrClientGone)
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
	for _, e := range h.store.ev[h.store.head:] {
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
	sid, seq, ok := parseEventID(lastID)
	if !ok {
		return fasthttp.StatusBadRequest, codeTransport, "Bad Request: malformed Last-Event-ID: " + string(lastID)
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
	if s.opts.Stateless {
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
	if s.opts.Stateless {
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
	s.eng.CloseSession(h.sess, ErrDeleted)
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
	h := s.lookup(sid)
	if h == nil {
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

package http

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/mcpedge/mcpedge/auth"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/session"
	"github.com/valyala/fasthttp"
)

// Sessions shared with the other servers of a cluster (Options.Cluster;
// docs/cluster.md). Each server that a request of a session reaches
// holds the session itself, rebuilt from the record the cluster keeps
// (session.Record): its home, which opened it or took it over, delivers
// what is tied to no request (the standalone stream, resource updates,
// list changes) and writes the record; the others are replicas, which
// serve its requests. Streams and their events belong to the server that
// writes them: event ids and server-to-client request ids name it (its
// instance, "<node>.<incarnation>"), so that a resumption, or a client's
// answer, reaches it; its events are kept by the cluster too, so that a
// client resumes a stream of a server that is gone.

// Cluster is what a server of a cluster asks of it (package cluster's
// Node implements it). Its methods are safe for concurrent use.
type Cluster interface {
	// Instance names this server in the ids it issues: event ids
	// ("<instance>.<stream>-<seq>") and server-to-client request ids
	// ("<instance>.<n>"). It contains no line end.
	Instance() string
	// RouteSession answers ctx itself, by sending it to the server that
	// must serve it, and reports whether it did: a POST of session sid
	// (m is its decoded message), or a GET or DELETE (m nil). It is
	// offered every such request after its Host, Origin and credential
	// checks; subject is whom its credentials name ("" without
	// authorization). A false answer lets this server serve it.
	RouteSession(ctx *fasthttp.RequestCtx, sid []byte, m *codec.Message, subject string) bool
	// RouteStateless answers ctx itself, by sending it to a server that
	// can serve it, and reports whether it did: a 2026-07-28 (stateless)
	// POST of request m that needs what is down on this server. It is
	// offered every such request after its Host, Origin, credential and
	// header checks; a false answer lets this server serve it.
	RouteStateless(ctx *fasthttp.RequestCtx, m *codec.Message) bool
	// Restore returns the record of session sid, which this server does
	// not hold, and whether this server is to be its home. Its error
	// wraps engine.ErrUnknownSession when no server of the cluster knows
	// the session (404); any other error means it cannot be told now
	// (503, retry). It may wait for the other servers (a record not yet
	// seen here).
	Restore(sid []byte) (rec *session.Record, home bool, err error)
	// Changed publishes the record of sess, which this server is the
	// home of, after it changed here (session.Session.OnChange).
	Changed(sess *session.Session)
	// Used tells the home of session sid that a replica served a request
	// of it: its idle clock starts again.
	Used(sid string)
	// Closed tells the cluster that session sid ended on this server;
	// everywhere reports that it ends for every server (DELETE, or its
	// home found it idle) rather than on this one alone.
	Closed(sid string, everywhere bool)
	// Event keeps an SSE event this server issued for session sid in the
	// cluster's store: its stream and sequence number, the raw JSON id
	// of the request the stream answers (nil for the standalone stream),
	// whether it is that request's answer (the stream's last), and the
	// message. data is valid during the call only.
	Event(sid string, stream, seq uint64, reqID []byte, final bool, data []byte)
	// Replay calls fn, in order, with each event the cluster kept of
	// stream `stream` issued by instance inst for session sid, after
	// sequence number after; it returns the stream's request id, whether
	// its answer was kept, and false when nothing is known of the stream.
	// data is valid during the call to fn only.
	Replay(sid string, inst []byte, stream, after uint64, fn func(seq uint64, data []byte)) (reqID []byte, final, ok bool)
}

var _ session.Shared = (*Server)(nil)

// ErrHomeElsewhere is the cause of a session that this server held as its
// home when another server turned out to be it (two took it over at
// once): the hold here ends, the session goes on there.
var ErrHomeElsewhere = errors.New("mcphttp: the session's home is another server of the cluster")

// errLeft is the cause of a request stream resumed after the server that
// served its request left the cluster.
const leftMsg = "the server of the cluster that served this request is gone; it may or may not have completed"

// routeCluster offers a GET or DELETE naming a session to the cluster; a
// POST is offered once its body is decoded (post). It reports whether the
// cluster answered the request.
func (s *Server) routeCluster(ctx *fasthttp.RequestCtx) bool {
	sid := ctx.Request.Header.PeekCanonical(hdrSessionID)
	if len(sid) == 0 || ctx.IsPost() || statelessHeader(ctx) {
		return false
	}
	return s.opts.Cluster.RouteSession(ctx, sid, nil, "")
}

// restore rebuilds session sid from the cluster's record, as a replica or
// as its new home. It returns nil when the cluster does not know the
// session (engine.ErrUnknownSession); errUnavailable when it cannot tell
// now, or this server has no room for it.
func (s *Server) restore(sid []byte) (*hsession, error) {
	rec, home, err := s.opts.Cluster.Restore(sid)
	if err != nil {
		if errors.Is(err, engine.ErrUnknownSession) {
			return nil, nil
		}
		return nil, errUnavailable
	}
	h := s.hold(rec, home)
	if h == nil {
		return nil, errUnavailable
	}
	return h, nil
}

// errUnavailable answers a request for a session of the cluster that this
// server cannot serve now: 503, retry.
var errUnavailable = errors.New("mcphttp: the cluster cannot be reached for the session, or this server has no room for it")

// hold makes this server hold the session rec describes: a replica, or
// its home. The slot counts against MaxSessions (a full table evicts as
// for a new session); replicas do not count against MaxSessionsPerIP,
// which the session's home applied when it was opened. It returns nil
// when there is no room.
func (s *Server) hold(rec *session.Record, home bool) *hsession {
	if err := s.admitShared(); err != nil {
		return nil
	}
	h := &hsession{s: s, created: time.Now(), shared: true}
	h.posts.Store(1) // released below: the reaper leaves it alone until then
	h.established.Store(true)
	conn, fresh := s.eng.OpenShared(h, rec, home, func(sess *session.Session) {
		h.sess = sess
		sess.Transport = "http"
		sess.Tracker.SetPrefix(s.opts.Cluster.Instance())
		if rec.Subject != "" {
			// The subject the session is bound to, until a request's
			// verified caller of that subject replaces it (bindAuth).
			sess.SetAuth(&auth.Info{Subject: rec.Subject})
		}
		sess.OnChange(s.sessionChanged)
		sess.OnClose(h.onClose)
	})
	if !fresh { // another request restored it first
		s.nsess.Add(-1)
		if other := s.hsessionOf(conn.Session()); other != nil && conn.Session().State() != session.StateClosed {
			return other
		}
		return nil
	}
	h.posts.Add(-1)
	s.lru.push(h, s.nsess.Load())
	return h
}

// admitShared reserves a slot for a session held for the cluster, within
// MaxSessions: evicting, when the table is full, as a new session does.
func (s *Server) admitShared() error {
	for try := 0; ; try++ {
		if s.nsess.Add(1) <= int64(s.opts.MaxSessions) {
			return nil
		}
		s.nsess.Add(-1)
		if try == 3 || !(s.evictPending() || s.evictIdle()) {
			return errTooManySessions
		}
	}
}

// sessionChanged publishes a home session's record after it changed.
func (s *Server) sessionChanged(sess *session.Session) {
	if !sess.Replica() {
		s.opts.Cluster.Changed(sess)
	}
}

// usedEvery is how often, at most, a replica tells its session's home that
// it serves it: a fraction of the idle timeout.
func (s *Server) usedEvery() time.Duration {
	return min(s.opts.SessionIdle, s.opts.InitTimeout) / 4
}

// used tells the home of h's session, at most every usedEvery, that this
// replica serves it; the first request at once.
func (s *Server) used(h *hsession) {
	now := time.Now().UnixNano()
	last := h.usedSent.Load()
	if last != 0 && time.Duration(now-last) < s.usedEvery() {
		return
	}
	if h.usedSent.CompareAndSwap(last, now) {
		s.opts.Cluster.Used(h.sess.ID())
	}
}

// Adopt implements session.Shared: this server becomes the home of the
// session rec describes, holding it from now on and delivering its
// subscriptions.
func (s *Server) Adopt(rec *session.Record) {
	if sess, ok := s.eng.Sessions().Get(rec.ID); ok {
		if h := s.hsessionOf(sess); h != nil && sess.Replica() {
			sess.SetReplica(false)
			s.eng.SubscribeAll(sess, rec.Subscriptions)
		}
		return
	}
	if s.closing.Load() {
		return
	}
	s.hold(rec, true)
}

// Refresh implements session.Shared: a replica takes the log level and
// the readiness of the session's record.
func (s *Server) Refresh(rec *session.Record) {
	sess, ok := s.eng.Sessions().Get(rec.ID)
	if !ok || !sess.Replica() || s.hsessionOf(sess) == nil {
		return
	}
	sess.SetLogLevel(rec.LogLevel)
	if rec.Ready {
		sess.MarkReady()
	}
}

// Touch implements session.Shared: a replica served session id, which
// this server is the home of.
func (s *Server) Touch(id string) {
	sess, ok := s.eng.Sessions().Get(id)
	if !ok {
		return
	}
	if h := s.hsessionOf(sess); h != nil {
		sess.Touch()
		h.established.Store(true)
	}
}

// Drop implements session.Shared: this server's hold on session id ends,
// and nothing more (the cluster is not told).
func (s *Server) Drop(id string, cause error) {
	sess, ok := s.eng.Sessions().Get(id)
	if !ok {
		return
	}
	if h := s.hsessionOf(sess); h != nil {
		h.dropped.Store(true)
		s.eng.Conn(sess).Close(cause)
	}
}

// Cancel implements session.Shared: the request reqID of session id is
// cancelled if it runs here.
func (s *Server) Cancel(id string, reqID []byte) {
	if sess, ok := s.eng.Sessions().Get(id); ok && s.hsessionOf(sess) != nil {
		sess.CancelRequest(reqID, nil)
	}
}

// closedShared tells the cluster that h's session ended here, unless the
// cluster asked for it (Drop). It ends everywhere when the client deleted
// it, or when its home closes it for any reason but this server's own
// shutdown.
func (s *Server) closedShared(h *hsession) {
	if h.dropped.Load() {
		return
	}
	cause := context.Cause(h.sess.Context())
	everywhere := errors.Is(cause, ErrDeleted)
	if !h.sess.Replica() && !errors.Is(cause, ErrServerClosed) && !errors.Is(cause, engine.ErrShuttingDown) {
		everywhere = true
	}
	s.opts.Cluster.Closed(h.sess.ID(), everywhere)
}

// instanceOf splits an event id of a cluster, "<instance>.<stream>-<seq>",
// into its instance and the rest; an id without instance has none.
func instanceOf(id []byte) (inst, rest []byte) {
	if i := bytes.LastIndexByte(id, '.'); i >= 0 {
		return id[:i], id[i+1:]
	}
	return nil, id
}

// resumeElsewhere answers a GET with Last-Event-ID naming a stream another
// server issued, which the cluster did not send there (it is gone): the
// events the cluster kept of it are replayed on st, from after seq, and
// then a standalone stream goes on here, or a request's stream ends (with
// an error for its request when its answer was not kept). It returns an
// HTTP status and message when it cannot.
func (h *hsession) resumeElsewhere(st *stream, inst []byte, sid, seq uint64, lastID []byte) (int, int, string) {
	s := h.s
	st.primeAs(inst, sid, seq)
	var frames [][]byte
	reqID, final, ok := s.opts.Cluster.Replay(h.sess.ID(), inst, sid, seq, func(k uint64, data []byte) {
		b := appendEventIDAs(nil, inst, sid, k)
		frames = append(frames, codec.AppendSSEEvent(append(append([]byte("id: "), b...), '\n'), "", "", data))
	})
	if !ok && sid != 0 {
		st.fail(errStreamClosed)
		return fasthttp.StatusBadRequest, codeTransport, "Bad Request: unknown Last-Event-ID: " + string(lastID) + " (the server that issued it is gone, and the cluster kept none of its events)"
	}
	for _, f := range frames {
		st.pushRaw(f)
	}
	if sid != 0 {
		if !final && len(reqID) > 0 {
			b := codec.AppendError(nil, reqID, codeTransport, leftMsg, nil)
			st.pushData(b)
		}
		st.end(false)
		return 0, 0, ""
	}
	// The standalone stream of a server that is gone: it goes on here,
	// the session's home now.
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return fasthttp.StatusNotFound, codeSessionNotFound, "Session not found"
	}
	h.replayLocked(&h.std, h.std.taken, st)
	h.attachLocked(&h.std, st)
	return 0, 0, ""
}

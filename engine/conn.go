package engine

import (
	"context"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/session"
)

// Conn is a transport's hold on one session of the server, and all a
// transport needs of the engine besides its Options: open one with Open
// when a connection opens (TCP, stdio) or on initialize (Streamable HTTP),
// hand it each inbound frame, and Close it when the connection ends.
//
// A Conn is two words: copy it freely, or make one for a session with
// Server.Conn. Its methods are safe for concurrent use.
type Conn struct {
	s    *Server
	sess *session.Session
}

// Open creates a session whose default outbound stream is out (the
// connection for TCP and stdio, the standalone GET stream for Streamable
// HTTP) and adds it to the session table.
func (s *Server) Open(out session.Sink) Conn { return Conn{s, s.newSession(out)} }

// OpenStateless returns a Conn for one exchange of the stateless revision
// (2026-07-28), such as a Streamable HTTP POST: its session
// (session.NewStateless) is in no table, and every request it carries is
// served statelessly. out receives what the exchange's requests send when
// they are given no reply sink. Close it when the exchange ends.
func (s *Server) OpenStateless(out session.Sink) Conn {
	return Conn{s, session.NewStateless(s.ctx, out, s.statelessTracker)}
}

// Conn returns the Conn of a session that Open created.
func (s *Server) Conn(sess *session.Session) Conn { return Conn{s, sess} }

// Session returns the Conn's session.
func (c Conn) Session() *session.Session { return c.sess }

// Close ends the session with cause: its requests are cancelled, its
// pending server-to-client requests fail, its subscriptions end, and it
// leaves the session table. A session whose default sink is a
// session.Closer (a TCP connection) has its connection closed too.
func (c Conn) Close(cause error) { c.s.closeSession(c.sess, cause) }

// HandleFrame serves one inbound frame from an event loop (TCP, stdio,
// the legacy SSE transport's POSTs), which it never blocks. It is
// HandleMessage with the frame decoded here and the session's Out sink as
// the reply: answers given at once are appended to out, which is
// returned; a queued request's answer goes to the session's sink. A frame
// that does not decode is answered with -32700 or -32600
// (codec.AppendDecodeError); a JSON array is a batch, served as
// HandleBatch does when the session negotiated 2025-03-26 (its array of
// answers appended to out, or sent to the session's sink once the last
// queued request is answered), else refused with -32600. A frame over
// Options.BigMessage is copied and
// decoded on the worker pool, so that a large message does not stall the
// loop. frame is not retained.
func (c Conn) HandleFrame(frame, out []byte) []byte { return c.s.handleFrame(c.sess, frame, out) }

// HandleMessage serves one inbound message, m, which the caller decoded
// from frame with codec.Decode: the one path every message takes, on
// every transport. The engine routes it; the transport learns only
// whether it was answered at once or queued.
//
// Responses and notifications are handled at once (queued is false, out
// is unchanged). A request is answered at once, its answer appended to out,
// when the engine answers it itself (ping, initialize, list pages, log
// level, subscriptions, task queries, static resources, errors), when it
// calls a NonBlocking tool, and when it is refused by a limit (through
// reply's Refuse when reply is a Refuser; else the error is appended).
// Every other request is queued (queued is true): frame is copied once,
// and a worker of the bounded pool runs the handler. Its messages
// (progress, logs, server-to-client requests) go to reply, and so does its
// answer: to reply's Final when reply is a Replier, else with Send. reply
// nil means the session's Out sink.
//
// m and frame are not retained: the caller may reuse them when
// HandleMessage returns. It never blocks on a handler, so it may be called
// from an event loop. A panic on the way is recovered: a request is
// answered with CodeInternalError; a message that cannot be answered
// closes the session with ErrPanic.
func (c Conn) HandleMessage(m *codec.Message, frame, out []byte, reply session.Sink) (res []byte, queued bool) {
	return c.s.handleMessage(c.sess, m, frame, out, reply)
}

// OpenShared opens a session of a cluster that another server opened,
// from its record (session.Restore): the session joins the table with
// rec's id. A replica (home false) serves requests only; a home also
// delivers the record's subscriptions, which are subscribed here within
// Options.MaxSubscriptions (those over it are dropped). The transport
// binds the record's subject itself.
//
// setup, if not nil, is called with the session before it joins the
// table, where other goroutines find it (a transport sets its tracker's
// prefix, its hooks). When the table holds a session of that id already
// (a concurrent OpenShared won), it returns that one's Conn and false.
func (s *Server) OpenShared(out session.Sink, rec *session.Record, home bool, setup func(*session.Session)) (Conn, bool) {
	sess := session.Restore(context.Background(), out, rec)
	sess.SetReplica(!home)
	if setup != nil {
		setup(sess)
	}
	if rl := s.rates.Load(); rl.rate > 0 {
		sess.SetRateLimit(rl.rate, rl.burst)
	}
	if old, ok := s.sessions.AddNew(sess); !ok {
		return Conn{s, old}, false
	}
	if home {
		s.SubscribeAll(sess, rec.Subscriptions)
	}
	return Conn{s, sess}, true
}

// SubscribeAll subscribes sess, a session this server has become the
// home of (see OpenShared), to the updates of uris, within
// Options.MaxSubscriptions; those over it, or too long, are dropped.
func (s *Server) SubscribeAll(sess *session.Session, uris []string) {
	max := int(s.maxSubs.Load())
	for _, uri := range uris {
		if uri == "" || len(uri) > maxSubscriptionURI || sess.Subscribed(uri) {
			continue
		}
		if s.subscribeURI(sess, uri, max) != nil {
			return
		}
	}
}

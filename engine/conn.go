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

// Conn returns the Conn of a session that Open created.
func (s *Server) Conn(sess *session.Session) Conn { return Conn{s, sess} }

// Session returns the Conn's session.
func (c Conn) Session() *session.Session { return c.sess }

// Close ends the session with cause: its requests are cancelled, its
// pending server-to-client requests fail, its subscriptions end, and it
// leaves the session table. A session whose default sink is a
// session.Closer (a TCP connection) has its connection closed too.
func (c Conn) Close(cause error) { c.s.closeSession(c.sess, cause) }

// HandleFrame serves one inbound frame from an event loop, which it never
// blocks. Answers that need no handler code (errors, ping, initialize,
// cached lists, log level, subscriptions, static resources, NonBlocking
// tools) are appended to out, which is returned; everything else is copied
// once and run on the worker pool, its answer sent to the session's sink.
// A frame over Options.BigMessage is copied and decoded on the pool too.
// frame is not retained.
//
// A panic on the way is recovered: a request is answered with
// CodeInternalError; a message that cannot be answered closes the session
// with ErrPanic.
func (c Conn) HandleFrame(frame, out []byte) []byte { return c.s.handleFrame(c.sess, frame, out) }

// ServeFrame serves one inbound frame on the caller's goroutine and
// returns when it has been answered (for a request) or handled. Every
// message it produces, the answer included, is sent to reply. ctx, when it
// ends, cancels the request (a Streamable HTTP client that disconnects).
// frame must stay valid and unmodified until ServeFrame returns.
//
// It reports the decoded message's kind (KindInvalid for an undecodable
// frame, which is answered with an error). A request refused by a limit is
// answered with a LimitError, through reply's Refuse when reply is a
// Refuser. Panics are contained as in HandleFrame.
func (c Conn) ServeFrame(ctx context.Context, frame []byte, reply session.Sink) codec.Kind {
	return c.s.serveFrame(ctx, c.sess, frame, reply)
}

// ServeMessage is ServeFrame for a message the caller has decoded already
// (with codec.Decode), so that a transport that routes on the message does
// not decode it twice. m and the bytes it aliases must stay valid and
// unmodified until ServeMessage returns; m is not retained.
func (c Conn) ServeMessage(ctx context.Context, m *codec.Message, reply session.Sink) codec.Kind {
	return c.s.serveMessageSafe(ctx, c.sess, m, reply)
}

package http

import (
	"strconv"
	"sync"

	"github.com/mcpedge/mcpedge/auth"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/session"
	"github.com/valyala/fasthttp"
)

// Direct messages: what another server of a cluster forwards here as a
// message, without its HTTP request (session.Shared.ServeDirect; package
// cluster's direct link). The server that received the request checked
// everything the request's HTTP part tells (Host, Origin, credentials,
// headers, body) and decoded its message; this server serves the
// message in the session it holds and answers with the status and body
// the whole request would have had here. Only what the engine answers at
// once travels so (engine.ServedAtOnce), so that a link's reader serves it
// itself: no worker, no tunnel, no HTTP request to rebuild or answer to
// take apart. Anything else, or anything out of the ordinary here (the
// session not held, bound to another subject, the server shutting down),
// is refused before anything is done, and the whole request follows.

// dcall is one direct message being served: the reply sink of its
// request, answered to the cluster's DirectReply. Pooled.
type dcall struct {
	h     *hsession
	sess  *session.Session
	msg   codec.Message // the message, pointing into the caller's buffer: HandleMessage's, no one else's
	kind  codec.Kind    // the message's
	to    session.DirectReply
	token uint64

	traceParent, traceState []byte

	mu     sync.Mutex
	served bool // answered: later messages go to the session's stream
	outcome
}

var (
	_ engine.Replier      = (*dcall)(nil)
	_ engine.Refuser      = (*dcall)(nil)
	_ engine.TraceCarrier = (*dcall)(nil)
)

var dcalls = sync.Pool{New: func() any { return new(dcall) }}

// ServeDirect implements session.Shared (see the comment at the top of
// this file).
func (s *Server) ServeDirect(r *session.DirectRequest, to session.DirectReply, token uint64) bool {
	if s.closing.Load() || s.eng.ShuttingDown() {
		return false
	}
	sess, ok := s.eng.Sessions().GetBytes(r.Session)
	if !ok {
		return false // not held here: the whole request restores it
	}
	h := s.hsessionOf(sess)
	if h == nil || sess.State() == session.StateClosed {
		return false
	}
	if s.opts.Auth != nil {
		// The whole request binds its credentials to the session
		// (bindAuth); a direct message only checks they name the
		// subject the session is bound to.
		if info, _ := sess.Auth().(*auth.Info); info == nil || info.Subject != r.Subject || r.Subject == "" {
			return false
		}
	}
	// The message is served where it lies: the engine copies what it
	// keeps of a request it queues, as it does for an event loop's frame.
	c := dcalls.Get().(*dcall)
	m := &c.msg
	if r.Decoded != nil {
		*m = *r.Decoded
	} else if err := codec.Decode(r.Message, m); err != nil {
		c.release()
		return false
	}
	if !engine.ServedAtOnce(m) {
		c.release()
		return false
	}
	c.kind = m.Kind
	if !h.established.Load() {
		h.established.Store(true)
	}
	if h.shared && sess.Replica() {
		s.used(h)
	}
	c.h, c.sess, c.to, c.token = h, sess, to, token
	if s.eng.Tracing() {
		c.traceParent = append(c.traceParent[:0], r.TraceParent...)
		c.traceState = append(c.traceState[:0], r.TraceState...)
	}
	h.posts.Add(1)
	out := codec.GetBuffer()
	var queued bool
	out.B, queued = s.eng.Conn(sess).HandleMessage(m, r.Message, out.B, c)
	if queued {
		// Final answers, from a worker, and recycles c: it is not
		// touched here again.
		codec.PutBuffer(out)
		return true
	}
	c.mu.Lock()
	if len(out.B) > 0 && c.answer == nil {
		c.answer, out = out, nil
	}
	c.mu.Unlock()
	if out != nil {
		codec.PutBuffer(out)
	}
	c.reply()
	return true
}

// reply sends the call's answer, and recycles the call.
func (c *dcall) reply() {
	c.mu.Lock()
	c.served = true
	c.mu.Unlock()
	c.h.posts.Add(-1)
	status, retryAfter := c.status(c.kind, c.sess.State() == session.StateClosed)
	var body []byte
	switch {
	case c.answer != nil:
		body = c.answer.B
	case status == fasthttp.StatusNotFound:
		c.answer = codec.GetBuffer()
		c.answer.B = codec.AppendError(c.answer.B, nil, codeSessionNotFound, msgEndedWhileServed, nil)
		body = c.answer.B
	}
	c.to.DirectAnswer(c.token, status, retryAfter, body)
	c.release()
}

// release recycles the call.
func (c *dcall) release() {
	if c.answer != nil {
		codec.PutBuffer(c.answer)
	}
	c.h, c.sess, c.to, c.msg, c.served, c.outcome = nil, nil, nil, codec.Message{}, false, outcome{}
	c.traceParent, c.traceState = c.traceParent[:0], c.traceState[:0]
	dcalls.Put(c)
}

// Send implements session.Sink: a message the request sends before its
// answer. A direct message's request answers at once and sends none; one
// that does anyway (a receiving middleware's) goes where a message tied
// to no request goes, the session's standalone stream, since the POST it
// came in is answered with JSON.
func (c *dcall) Send(b *codec.Buffer) error {
	c.mu.Lock()
	served := c.served
	c.mu.Unlock()
	if served {
		codec.PutBuffer(b) // a handler's goroutine that outlived the request
		return session.ErrClosed
	}
	return c.h.Send(b)
}

// Final implements engine.Replier: the answer of a request the engine
// queued (its authorization would have waited).
func (c *dcall) Final(b *codec.Buffer) {
	c.mu.Lock()
	if b != nil && c.answer == nil {
		c.answer = b
	} else if b != nil {
		codec.PutBuffer(b)
	}
	c.mu.Unlock()
	c.sess.Touch() // the session was in use until now, as a POST's (call.Final)
	c.reply()
}

// Refuse implements engine.Refuser: the request is answered 429 or 503,
// as a POST's is (call.Refuse).
func (c *dcall) Refuse(id []byte, err *engine.LimitError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refuse(id, err)
}

// TraceHeaders implements engine.TraceCarrier: the trace context headers
// of the request the message came in.
func (c *dcall) TraceHeaders() (traceparent, tracestate []byte) { return c.traceParent, c.traceState }

// WriteDirect answers ctx, a request this server sent to another server
// of its cluster as a direct message, with what ServeDirect answered
// there: status, Retry-After seconds (0: none) and JSON body (nil: none),
// written as this server writes its own answers (compressed when the
// client admits it and the body is large enough).
func (s *Server) WriteDirect(ctx *fasthttp.RequestCtx, status, retryAfter int, body []byte) {
	if retryAfter > 0 {
		ctx.Response.Header.SetBytesK(hdrRetryAfter, strconv.Itoa(retryAfter))
	}
	if len(body) == 0 {
		ctx.SetStatusCode(status)
		return
	}
	s.writeJSON(ctx, status, body)
}

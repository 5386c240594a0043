package http

import (
	"fmt"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/session"
	"github.com/valyala/fasthttp"
)

// legacySession is a session of the 2024-11-05 HTTP+SSE transport: one
// long GET stream carries every server message; the client POSTs its
// messages to the endpoint the stream announced. The session lives as long
// as the stream. It is the session's Out sink, which is how the transport
// reaches it from the engine's table (Server.lookupLegacy).
type legacySession struct {
	s    *Server // the transport serving it: several may share one engine
	sess *session.Session
	st   *stream
}

// Send implements session.Sink: every message goes on the stream. It takes
// ownership of b.
func (l *legacySession) Send(b *codec.Buffer) error {
	ok := l.st.pushData(b.B)
	codec.PutBuffer(b)
	if !ok {
		return session.ErrClosed
	}
	return nil
}

// lookupLegacy returns the live legacy session of this server named by
// sid, or nil: like lookup, it looks the session up in the engine's table
// and reaches the transport's state through its Out sink.
func (s *Server) lookupLegacy(sid []byte) *legacySession {
	sess, ok := s.eng.Sessions().GetBytes(sid)
	if !ok || sess.State() == session.StateClosed {
		return nil
	}
	if l, ok := sess.Out.(*legacySession); ok && l.s == s {
		return l
	}
	return nil
}

// legacyGet opens a legacy session: its stream starts with the endpoint
// event naming where to POST.
func (s *Server) legacyGet(ctx *fasthttp.RequestCtx) {
	if !ctx.IsGet() {
		s.notAllowed(ctx, allowGet)
		return
	}
	if _, sse := accepts(ctx.Request.Header.PeekCanonical(hdrAccept)); !sse {
		s.fail(ctx, fasthttp.StatusNotAcceptable, codeTransport, "Not Acceptable: GET needs Accept: text/event-stream")
		return
	}
	ip := s.clientIP(ctx)
	if err := s.admitSession(ip); err != nil {
		s.failLimit(ctx, err)
		return
	}
	st := s.newStream()
	l := &legacySession{s: s, st: st}
	l.sess = s.eng.Open(l).Session()
	l.sess.Transport = "http"
	if ip.IsValid() {
		l.sess.SetRemote(ip)
	}
	id := l.sess.ID()
	l.sess.OnClose(func() {
		s.releaseSession(ip)
		st.end(false)
	})
	st.onEnd = func(gone error) {
		cause := ErrStreamEnded
		if cutFor(gone) { // cut for a limit: the session closes for it
			cause = fmt.Errorf("%w: %w", ErrStreamEnded, gone)
		}
		s.eng.Conn(l.sess).Close(cause)
	}

	b := codec.GetBuffer()
	b.B = append(b.B, "event: endpoint\ndata: "...)
	b.B = append(b.B, s.msgPath...)
	b.B = append(b.B, "?sessionId="...)
	b.B = append(b.B, id...)
	b.B = append(b.B, "\n\n"...)
	st.pushRaw(b.B)
	codec.PutBuffer(b)
	s.respondSSE(ctx, st)
}

// legacyPostHeaders checks the method and content type of a request to
// the legacy message endpoint, before its body is read. It answers 405 or
// 415 and reports false when one fails.
func (s *Server) legacyPostHeaders(ctx *fasthttp.RequestCtx) bool {
	if !ctx.IsPost() {
		s.notAllowed(ctx, allowPost)
		return false
	}
	if !mediaTypeIs(ctx.Request.Header.ContentType(), ctJSON) {
		s.fail(ctx, fasthttp.StatusUnsupportedMediaType, codeTransport, "Unsupported Media Type: Content-Type must be application/json")
		return false
	}
	return true
}

// legacyPost takes one message for a legacy session, its headers checked
// by legacyPostHeaders and its body read: 202 at once, the answer on the
// session's stream.
func (s *Server) legacyPost(ctx *fasthttp.RequestCtx) {
	sid := ctx.QueryArgs().Peek("sessionId")
	if len(sid) == 0 {
		s.fail(ctx, fasthttp.StatusBadRequest, codeTransport, "Bad Request: sessionId query parameter is required")
		return
	}
	l := s.lookupLegacy(sid)
	if l == nil {
		s.fail(ctx, fasthttp.StatusNotFound, codeSessionNotFound, "Session not found")
		return
	}
	c := s.getCall()
	defer s.putCall(c)
	body, ok := s.requestBody(ctx, c)
	if !ok {
		return
	}
	if err := codec.Decode(body, &c.msg); err != nil {
		s.decodeError(ctx, &c.msg, err)
		return
	}
	b := codec.GetBuffer()
	b.B = s.eng.Conn(l.sess).HandleFrame(body, b.B)
	if len(b.B) > 0 {
		_ = l.Send(b)
	} else {
		codec.PutBuffer(b)
	}
	ctx.SetStatusCode(fasthttp.StatusAccepted)
}

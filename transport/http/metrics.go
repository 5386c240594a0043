package http

import (
	"net"

	"github.com/mcpedge/mcpedge/session"
	"github.com/valyala/fasthttp"
)

// observe hooks the engine's ConnObserver, when it has one, into the
// fasthttp server: connections opened and closed. fasthttp gives no reason
// for a close; the sessions' typed reasons (ErrSessionIdle, ErrDeleted,
// ...) reach the engine's Observer.
func (s *Server) observe() {
	s.cobs = s.eng.ConnObserver()
	if s.cobs == nil {
		return
	}
	prev := s.srv.ConnState // the drain's bookkeeping (drain.go)
	s.srv.ConnState = func(c net.Conn, st fasthttp.ConnState) {
		if prev != nil {
			prev(c, st)
		}
		switch st {
		case fasthttp.StateNew:
			s.cobs.ConnOpened("http")
		case fasthttp.StateClosed, fasthttp.StateHijacked:
			s.cobs.ConnClosed("http", nil)
		}
	}
}

// countBytes tells the ConnObserver the bytes of one exchange: the
// request's headers and body, and the response's body when it was
// buffered (an SSE stream's events are not counted).
func (s *Server) countBytes(ctx *fasthttp.RequestCtx) {
	in := len(ctx.Request.Header.RawHeaders()) + len(ctx.Request.Body())
	out := 0
	if !ctx.Response.IsBodyStream() {
		out = len(ctx.Response.Body())
	}
	s.cobs.Bytes("http", in, out)
}

// EventStoreBytes returns the bytes the live sessions' event stores retain
// for SSE resumption (Options.EventStoreBytes bounds each). It walks the
// sessions: call it when scraping metrics, not per request.
func (s *Server) EventStoreBytes() int64 {
	var n int64
	s.eng.Sessions().Range(func(sess *session.Session) bool {
		if h, ok := sess.Out.(*hsession); ok && h.s == s {
			h.mu.Lock()
			n += int64(h.store.bytes)
			h.mu.Unlock()
		}
		return true
	})
	return n
}

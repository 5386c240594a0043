package http

import (
	"net"

	"github.com/mcpedge/mcpedge/session"
	"github.com/valyala/fasthttp"
)

// observe hooks the engine's ConnObserver, when it has one, into the
// fasthttp server: connections opened and closed. A connection the server
// cut for a limit closes with its typed reason (ErrSlowConsumer,
// ErrBufferBudget, ErrOutboundBudget); fasthttp gives none for the
// others, and the sessions' typed reasons (ErrSessionIdle, ErrDeleted,
// ...) reach the engine's Observer.
func (s *Server) observe() {
	s.cobs = s.eng.ConnObserver()
	if s.cobs == nil {
		return
	}
	prev := s.srv.ConnState // the drain's bookkeeping (drain.go)
	s.srv.ConnState = func(c net.Conn, st fasthttp.ConnState) {
		var reason error
		if st == fasthttp.StateClosed {
			reason = s.connReason(c) // before prev forgets c
		}
		if prev != nil {
			prev(c, st)
		}
		switch st {
		case fasthttp.StateNew:
			s.cobs.ConnOpened("http")
		case fasthttp.StateClosed, fasthttp.StateHijacked:
			s.cobs.ConnClosed("http", reason)
		}
	}
}

// countBytes tells the ConnObserver the bytes of one exchange: the
// request's headers and body (none when it was left unread), and the
// response's body when it was buffered (an SSE stream's events are not
// counted).
func (s *Server) countBytes(ctx *fasthttp.RequestCtx) {
	in := len(ctx.Request.Header.RawHeaders())
	if !ctx.Request.IsBodyStream() { // Body would read it
		in += len(ctx.Request.Body())
	}
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

package http

import (
	"github.com/mcpedge/mcpedge/codec"
	"github.com/valyala/fasthttp"
)

// batch serves a POST whose body is a JSON-RPC batch (a JSON array) sent
// by a session that may send one: it negotiated 2025-03-26, the one
// revision with batches (engine.Conn.HandleBatch). The answer is one JSON
// array of the requests' answers, 200, or 202 with no body when none is
// due (every element a notification or a response). Messages the requests
// send on the way (progress, logs, server-to-client requests) go to the
// session's GET stream. It reports false, having written nothing, for any
// other body or session: post then refuses the body as before (400,
// -32600).
func (s *Server) batch(ctx *fasthttp.RequestCtx, body []byte) bool {
	if s.opts.Stateless || !codec.IsBatch(body) {
		return false
	}
	sid := ctx.Request.Header.PeekCanonical(hdrSessionID)
	if len(sid) == 0 {
		return false
	}
	h := s.lookup(sid)
	if h == nil {
		return false
	}
	h.posts.Add(1)
	defer h.posts.Add(-1)
	done := make(chan *codec.Buffer, 1)
	if !s.eng.Conn(h.sess).HandleBatch(body, nil, func(b *codec.Buffer) { done <- b }) {
		return false
	}
	b := <-done // every queued request ends with an answer or a nil Final
	if b == nil {
		ctx.SetStatusCode(fasthttp.StatusAccepted)
		return true
	}
	s.writeJSON(ctx, fasthttp.StatusOK, b.B)
	codec.PutBuffer(b)
	return true
}

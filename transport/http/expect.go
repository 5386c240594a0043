package http

import (
	"bytes"
	"strconv"

	"github.com/valyala/fasthttp"
)

// expect is fasthttp's ExpectHandler: a request with "Expect:
// 100-continue" is checked on its headers before the client is told to
// send its body, with the checks the request would meet after it (size,
// path, Host and Origin, method, content type, Accept, protocol version,
// session). A request that fails gets its final answer at once, 413, 404,
// 403, 405, 415, 406 or 400 with a JSON-RPC error body, instead of 100
// Continue, and fasthttp closes the connection after it, since the client
// may send its body anyway. It returns 100 for a request that passes.
func (s *Server) expect(ctx *fasthttp.RequestCtx) int {
	if !s.expectOK(ctx) {
		return ctx.Response.StatusCode()
	}
	return fasthttp.StatusContinue
}

func (s *Server) expectOK(ctx *fasthttp.RequestCtx) bool {
	if n := ctx.Request.Header.ContentLength(); n > s.max {
		s.refusedOversized(ctx) // headerReceived remembered it
		s.fail(ctx, fasthttp.StatusRequestEntityTooLarge, codeTransport, "Request Entity Too Large: the body exceeds "+strconv.Itoa(s.max)+" bytes")
		return false
	}
	path := ctx.Path()
	switch {
	case bytes.Equal(path, s.path):
		if !s.checkHostOrigin(ctx) {
			return false
		}
		switch {
		case ctx.IsPost():
			return s.expectPost(ctx)
		case ctx.IsGet(), ctx.IsDelete():
			return true // their bodies mean nothing; the handler answers
		case s.opts.Stateless:
			s.notAllowed(ctx, allowStateless)
		default:
			s.notAllowed(ctx, allowStateful)
		}
		return false
	case !s.opts.NoLegacySSE && bytes.Equal(path, s.ssePath):
		return s.checkHostOrigin(ctx)
	case !s.opts.NoLegacySSE && bytes.Equal(path, s.msgPath):
		if !s.checkHostOrigin(ctx) {
			return false
		}
		if !ctx.IsPost() {
			s.notAllowed(ctx, allowPost)
			return false
		}
		if !mediaTypeIs(ctx.Request.Header.ContentType(), ctJSON) {
			s.fail(ctx, fasthttp.StatusUnsupportedMediaType, codeTransport, "Unsupported Media Type: Content-Type must be application/json")
			return false
		}
		sid := ctx.QueryArgs().Peek("sessionId")
		if len(sid) == 0 {
			s.fail(ctx, fasthttp.StatusBadRequest, codeTransport, "Bad Request: sessionId query parameter is required")
			return false
		}
		if s.lookupLegacy(sid) == nil {
			s.fail(ctx, fasthttp.StatusNotFound, codeSessionNotFound, "Session not found")
			return false
		}
		return true
	}
	s.fail(ctx, fasthttp.StatusNotFound, codeTransport, "Not Found: the MCP endpoint is "+s.opts.Path)
	return false
}

// expectPost checks a POST on the MCP endpoint as post does before it
// reads the body. Without a session id the body must be initialize, which
// only the body tells.
func (s *Server) expectPost(ctx *fasthttp.RequestCtx) bool {
	if ct := ctx.Request.Header.ContentType(); !mediaTypeIs(ct, ctJSON) {
		s.fail(ctx, fasthttp.StatusUnsupportedMediaType, codeTransport, "Unsupported Media Type: Content-Type must be application/json")
		return false
	}
	if json, sse := accepts(ctx.Request.Header.PeekCanonical(hdrAccept)); !json || !sse {
		s.fail(ctx, fasthttp.StatusNotAcceptable, codeTransport, "Not Acceptable: Accept must admit both application/json and text/event-stream")
		return false
	}
	switch _, vk := versionOf(ctx.Request.Header.PeekCanonical(hdrVersion)); vk {
	case verBad:
		s.badVersion(ctx)
		return false
	case verStateless:
		return true // stateless: the body decides the rest
	}
	if s.opts.Stateless {
		return true
	}
	if sid := ctx.Request.Header.PeekCanonical(hdrSessionID); len(sid) > 0 && s.opts.Cluster == nil && s.lookup(sid) == nil {
		s.fail(ctx, fasthttp.StatusNotFound, codeSessionNotFound, "Session not found")
		return false
	}
	return true
}

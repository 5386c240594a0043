package http

import (
	"bytes"
	"errors"
	"net"
	"strings"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/internal/hostcheck"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/transport/netlimit"
	"github.com/valyala/fasthttp"
)

// Header names, in fasthttp's normalized spelling, and fixed values. They
// are looked up with PeekCanonical, which skips normalizing the key: the
// server must keep fasthttp's header name normalization (its default).
var (
	hdrSessionID      = []byte("Mcp-Session-Id")
	hdrVersion        = []byte("Mcp-Protocol-Version")
	hdrLastEventID    = []byte("Last-Event-Id")
	hdrOrigin         = []byte("Origin")
	hdrAccept         = []byte("Accept")
	hdrAcceptEncoding = []byte("Accept-Encoding")
	hdrCacheControl   = []byte("Cache-Control")
	hdrVary           = []byte("Vary")
	hdrAllow          = []byte("Allow")
	hdrAccelBuffering = []byte("X-Accel-Buffering")
	hdrTraceParent    = []byte("Traceparent") // W3C Trace Context
	hdrTraceState     = []byte("Tracestate")

	ctJSON         = []byte("application/json")
	ctSSE          = []byte("text/event-stream")
	valNoCache     = []byte("no-cache")
	valNo          = []byte("no")
	valAcceptEnc   = []byte("Accept-Encoding")
	allowStateful  = []byte("GET, POST, DELETE")
	allowStateless = []byte("POST")
	allowGet       = []byte("GET")
	allowPost      = []byte("POST")
)

// JSON-RPC codes of the transport's own error bodies.
const (
	codeTransport       = -32000 // a request the transport refuses (as the reference servers do)
	codeSessionNotFound = -32001 // unknown or ended session, as the TypeScript SDK answers
)

// fail answers ctx with status and a JSON-RPC error body without id.
func (s *Server) fail(ctx *fasthttp.RequestCtx, status, code int, msg string) {
	s.failData(ctx, status, code, msg, nil)
}

// failData is fail with the error's data member.
func (s *Server) failData(ctx *fasthttp.RequestCtx, status, code int, msg string, data []byte) {
	ctx.SetStatusCode(status)
	ctx.Response.Header.SetContentTypeBytes(ctJSON)
	b := codec.GetBuffer()
	b.B = codec.AppendError(b.B, nil, code, msg, data)
	ctx.SetBody(b.B)
	codec.PutBuffer(b)
}

func (s *Server) notAllowed(ctx *fasthttp.RequestCtx, allow []byte) {
	ctx.Response.Header.SetBytesKV(hdrAllow, allow)
	s.fail(ctx, fasthttp.StatusMethodNotAllowed, codeTransport, "Method Not Allowed: "+string(ctx.Method()))
}

// httpError is fasthttp's ErrorHandler: requests it could not read.
func (s *Server) httpError(ctx *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	var nerr net.Error
	switch {
	case s.refusedOversized(ctx) || errors.Is(err, fasthttp.ErrBodyTooLarge):
		// Refused on its declared length (headerReceived).
		s.tooLarge(ctx)
	case errors.Is(err, ErrProxyHeader):
		// A PROXY header refused (proxied.go): the connection ends here.
		s.fail(ctx, fasthttp.StatusBadRequest, codeTransport, "Bad Request: "+err.Error())
	case errors.Is(err, netlimit.ErrTooManyConnsPerIP):
		// The client a PROXY header named is at its connection limit.
		ctx.Response.Header.SetBytesK(hdrRetryAfter, "1")
		s.fail(ctx, fasthttp.StatusServiceUnavailable, codeTransport, "Service Unavailable: per-address connection limit reached")
	case errors.As(err, &small):
		s.fail(ctx, fasthttp.StatusRequestHeaderFieldsTooLarge, codeTransport, "Request Header Fields Too Large")
	case errors.As(err, &nerr) && nerr.Timeout():
		s.fail(ctx, fasthttp.StatusRequestTimeout, codeTransport, "Request Timeout")
	default:
		s.fail(ctx, fasthttp.StatusBadRequest, codeTransport, "Bad Request: malformed HTTP request")
	}
}

// checkHostOrigin validates Host and Origin against DNS rebinding: on a
// server bound to loopback only loopback names and the allow-lists pass.
// It answers 403 and reports false for a request that fails.
func (s *Server) checkHostOrigin(ctx *fasthttp.RequestCtx) bool {
	host := ctx.Request.Header.Host()
	if !s.hostOK(host) {
		s.fail(ctx, fasthttp.StatusForbidden, codeTransport, "Invalid Host: "+string(host))
		return false
	}
	if origin := ctx.Request.Header.PeekCanonical(hdrOrigin); len(origin) > 0 && !s.originOK(origin) {
		s.fail(ctx, fasthttp.StatusForbidden, codeTransport, "Invalid Origin: "+string(origin))
		return false
	}
	return true
}

func (s *Server) hostOK(host []byte) bool {
	al := s.allow.Load()
	return hostcheck.Host(host, al.hosts, al.anyHost, s.loopback.Load())
}

func (s *Server) originOK(origin []byte) bool {
	al := s.allow.Load()
	if al.anyOrigin || s.cors.Load().grants(origin) { // a CORS grant is trust (cors.go)
		return true
	}
	if scheme, rest, ok := bytes.Cut(origin, []byte("://")); ok &&
		(bytes.EqualFold(scheme, []byte("http")) || bytes.EqualFold(scheme, []byte("https"))) &&
		isLoopbackName(hostname(rest)) {
		return true
	}
	for _, o := range al.origins {
		if bytes.EqualFold(origin, []byte(o)) {
			return true
		}
	}
	return len(al.origins) == 0 && !s.loopback.Load()
}

// hostname, isLoopbackName and loopbackAddr are the host check's
// (package hostcheck), which the admin listener makes too.
func hostname(h []byte) []byte      { return hostcheck.Hostname(h) }
func isLoopbackName(n []byte) bool  { return hostcheck.Loopback(n) }
func loopbackAddr(addr string) bool { return hostcheck.LoopbackAddr(addr) }

// mediaTypeIs reports whether a Content-Type value names media type mt
// (case-insensitive, parameters ignored).
func mediaTypeIs(v, mt []byte) bool {
	if i := bytes.IndexByte(v, ';'); i >= 0 {
		v = v[:i]
	}
	return bytes.EqualFold(bytes.TrimSpace(v), mt)
}

// accepts parses an Accept header: whether it admits JSON and SSE. An
// absent header admits everything; q=0 excludes a range.
func accepts(h []byte) (json, sse bool) {
	if len(bytes.TrimSpace(h)) == 0 {
		return true, true
	}
	for len(h) > 0 {
		var item []byte
		item, h, _ = bytes.Cut(h, []byte(","))
		mt, params, _ := bytes.Cut(item, []byte(";"))
		if qZero(params) {
			continue
		}
		mt = bytes.TrimSpace(mt)
		switch {
		case bytes.Equal(mt, []byte("*/*")):
			json, sse = true, true
		case bytes.EqualFold(mt, []byte("application/json")), bytes.EqualFold(mt, []byte("application/*")):
			json = true
		case bytes.EqualFold(mt, ctSSE), bytes.EqualFold(mt, []byte("text/*")):
			sse = true
		}
	}
	return json, sse
}

// qZero reports whether header parameters hold q=0.
func qZero(params []byte) bool {
	for len(params) > 0 {
		var p []byte
		p, params, _ = bytes.Cut(params, []byte(";"))
		k, v, ok := bytes.Cut(p, []byte("="))
		if ok && bytes.EqualFold(bytes.TrimSpace(k), []byte("q")) {
			v = bytes.TrimRight(bytes.TrimSpace(v), "0")
			return bytes.Equal(v, []byte("0.")) || bytes.Equal(v, []byte("0")) || len(v) == 0
		}
	}
	return false
}

// protocolVersion validates MCP-Protocol-Version: absent means 2025-03-26;
// any session revision mcpedge serves is accepted on any session. It
// answers 400 and reports false for an unsupported value.
func (s *Server) protocolVersion(ctx *fasthttp.RequestCtx) (string, bool) {
	v, k := versionOf(ctx.Request.Header.PeekCanonical(hdrVersion))
	if k != verSession {
		s.badVersion(ctx)
		return "", false
	}
	return v, true
}

// badVersion answers 400: MCP-Protocol-Version names no revision served.
func (s *Server) badVersion(ctx *fasthttp.RequestCtx) {
	s.fail(ctx, fasthttp.StatusBadRequest, codeTransport,
		"Bad Request: unsupported MCP-Protocol-Version: "+string(ctx.Request.Header.PeekCanonical(hdrVersion))+
			" (supported: "+strings.Join(mcp.AllVersions[:], ", ")+")")
}

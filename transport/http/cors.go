package http

import (
	"bytes"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/internal/hostcheck"
	"github.com/valyala/fasthttp"
)

// CORS (Options.CORSOrigins, -cors-origins) lets web pages of other
// origins use the endpoints: the MCP Inspector in a browser, a web
// client. A preflight (OPTIONS with Access-Control-Request-Method) is
// answered before any credential is asked for, as browsers send none on
// it; every other answer to a granted origin carries
// Access-Control-Allow-Origin and exposes the headers a client reads
// (Mcp-Session-Id above all).
//
// The grant and the Origin check against DNS rebinding (AllowedOrigins)
// are one decision: an origin the CORS list names passes the Origin check
// too, so listing it once is enough; "*" grants every origin, without
// credentials (no Access-Control-Allow-Credentials: a bearer token in
// Authorization needs none), and so lets every origin pass. An origin
// outside both lists is answered 403 without a grant, preflight or not;
// one the Origin check accepts (a loopback page) but the CORS list does
// not name gets no grant, and the browser keeps the answer from it.

// Header names and values of CORS.
var (
	hdrACAllowOrigin      = []byte("Access-Control-Allow-Origin")
	hdrACAllowCredentials = []byte("Access-Control-Allow-Credentials")
	hdrACAllowMethods     = []byte("Access-Control-Allow-Methods")
	hdrACAllowHeaders     = []byte("Access-Control-Allow-Headers")
	hdrACExposeHeaders    = []byte("Access-Control-Expose-Headers")
	hdrACMaxAge           = []byte("Access-Control-Max-Age")
	hdrACRequestMethod    = []byte("Access-Control-Request-Method")
	hdrACRequestHeaders   = []byte("Access-Control-Request-Headers")

	valStar    = []byte("*")
	valTrue    = []byte("true")
	valOrigin  = []byte("Origin")
	valMaxAge  = []byte("7200") // Chromium's ceiling
	valExposed = []byte("Mcp-Session-Id, Mcp-Protocol-Version, WWW-Authenticate, Retry-After")

	corsMethodsStateful  = []byte("GET, POST, DELETE, OPTIONS")
	corsMethodsStateless = []byte("POST, OPTIONS")
	corsMethodsLegacy    = []byte("GET, POST, OPTIONS")
)

// corsHeaders are the request headers a preflight may ask for, lower
// case; Mcp-Param-* (a tool's x-mcp-header arguments) is matched as a
// prefix, since Access-Control-Allow-Headers has no wildcard that covers
// Authorization and none for a prefix: the headers asked for are echoed.
var corsHeaders = [...]string{
	"mcp-session-id", "mcp-protocol-version", "mcp-method", "mcp-name",
	"last-event-id", "authorization", "content-type", "accept", "accept-encoding",
}

const corsParamPrefix = "mcp-param-"

// corsList is the CORS list in effect, swapped whole by SetCORS.
type corsList struct {
	origins []string // lower-cased, no trailing slash
	any     bool     // "*"
	raw     []string // as given, for Options
}

// SetCORS replaces Options.CORSOrigins of a running server, as a
// configuration reload does; nil or empty turns CORS off. The next
// request is answered by the new list. It is safe for concurrent use.
func (s *Server) SetCORS(origins []string) {
	cl := &corsList{raw: append([]string(nil), origins...)}
	cl.origins, cl.any = hostcheck.LowerList(origins)
	if !cl.any && len(cl.origins) == 0 {
		s.cors.Store(nil)
		return
	}
	s.cors.Store(cl)
}

// grants reports whether the list grants origin.
func (cl *corsList) grants(origin []byte) bool {
	if cl == nil {
		return false
	}
	if cl.any {
		return true
	}
	for _, o := range cl.origins {
		if bytes.EqualFold(origin, []byte(o)) {
			return true
		}
	}
	return false
}

// corsPath returns the methods a CORS answer on path allows, or nil for a
// path that is not an endpoint of the transport.
func (s *Server) corsPath(path []byte) []byte {
	switch {
	case bytes.Equal(path, s.path):
		if s.opts.Stateless {
			return corsMethodsStateless
		}
		return corsMethodsStateful
	case !s.opts.NoLegacySSE && (bytes.Equal(path, s.ssePath) || bytes.Equal(path, s.msgPath)):
		return corsMethodsLegacy
	}
	return nil
}

// serveCORS applies the CORS list to a request with an Origin on one of the
// endpoints: a preflight is answered here (and serveCORS returns true), before
// credentials are checked; any other request of a granted origin gets the
// grant on its answer, whatever that answer is. A request without Origin
// costs a header lookup.
func (s *Server) serveCORS(ctx *fasthttp.RequestCtx, path []byte) bool {
	cl := s.cors.Load()
	if cl == nil {
		return false
	}
	origin := ctx.Request.Header.PeekCanonical(hdrOrigin)
	if len(origin) == 0 {
		return false
	}
	methods := s.corsPath(path)
	if methods == nil {
		return false
	}
	h := &ctx.Response.Header
	if ctx.IsOptions() && len(ctx.Request.Header.PeekCanonical(hdrACRequestMethod)) > 0 {
		if !s.checkHostOrigin(ctx) {
			return true
		}
		if !cl.grants(origin) {
			s.fail(ctx, fasthttp.StatusForbidden, codeTransport, "Forbidden: origin not allowed by the CORS list: "+string(origin))
			return true
		}
		s.grant(h, cl, origin)
		h.SetBytesKV(hdrACAllowMethods, methods)
		if asked := ctx.Request.Header.PeekCanonical(hdrACRequestHeaders); len(asked) > 0 {
			b := codec.GetBuffer()
			if b.B = appendAllowedHeaders(b.B[:0], asked); len(b.B) > 0 {
				h.SetBytesKV(hdrACAllowHeaders, b.B)
			}
			codec.PutBuffer(b)
		}
		h.SetBytesKV(hdrACMaxAge, valMaxAge)
		ctx.SetStatusCode(fasthttp.StatusNoContent)
		return true
	}
	if cl.grants(origin) {
		s.grant(h, cl, origin)
		h.SetBytesKV(hdrACExposeHeaders, valExposed)
	}
	return false
}

// grant sets the allowed origin: "*" for a list of "*", else the origin
// itself, with credentials allowed and Vary: Origin.
func (s *Server) grant(h *fasthttp.ResponseHeader, cl *corsList, origin []byte) {
	if cl.any {
		h.SetBytesKV(hdrACAllowOrigin, valStar)
		return
	}
	h.SetBytesKV(hdrACAllowOrigin, origin)
	h.SetBytesKV(hdrACAllowCredentials, valTrue)
	h.AddBytesKV(hdrVary, valOrigin)
}

// appendAllowedHeaders appends to dst, comma-separated, the headers of a
// preflight's Access-Control-Request-Headers that an MCP client may send;
// the others are left out, and the browser refuses the request that
// wanted them.
func appendAllowedHeaders(dst, asked []byte) []byte {
	for len(asked) > 0 {
		var name []byte
		name, asked, _ = bytes.Cut(asked, []byte(","))
		name = bytes.TrimSpace(name)
		if len(name) == 0 || !corsHeaderAllowed(name) {
			continue
		}
		if len(dst) > 0 {
			dst = append(dst, ", "...)
		}
		dst = append(dst, name...)
	}
	return dst
}

func corsHeaderAllowed(name []byte) bool {
	if len(name) > len(corsParamPrefix) && bytes.EqualFold(name[:len(corsParamPrefix)], []byte(corsParamPrefix)) {
		return validToken(name)
	}
	for _, h := range corsHeaders {
		if bytes.EqualFold(name, []byte(h)) {
			return true
		}
	}
	return false
}

// validToken reports whether b is an HTTP token (RFC 9110 §5.6.2), so
// that nothing but a header name is echoed.
func validToken(b []byte) bool {
	for _, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case bytes.IndexByte([]byte("!#$%&'*+-.^_`|~"), c) >= 0:
		default:
			return false
		}
	}
	return len(b) > 0
}

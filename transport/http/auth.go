package http

import (
	"bytes"
	"context"
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/mcpedge/mcpedge/auth"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
)

// The authorization of Streamable HTTP and the legacy endpoints, when
// Options.Auth is set (docs/authorization.md): every request to them
// carries Authorization: Bearer <token>, verified by Options.Auth before
// anything else; the RFC 9728 metadata is served at the well-known paths.
// Failures are answered 401 or 403 with a WWW-Authenticate challenge and a
// JSON-RPC error body (auth.CodeUnauthorized, auth.CodeForbidden); the
// token is never echoed nor logged. Every refusal is counted once
// (Verifier.OnFailure): by Verify for the tokens it refuses, by
// refuseAuth for the rest.
//
// The request's caller is then recorded on the session it is served on
// (bindAuth: a POST's stateless exchange too), where the engine's
// authorization step (engine.Options.Authorize, the same Verifier) finds
// it: the token is verified once, here, and the engine decides the
// request with it.

var (
	hdrAuthorization   = []byte("Authorization")
	hdrWWWAuthenticate = "WWW-Authenticate"
	bearerPrefix       = []byte("bearer ")
	wellKnown          = []byte(auth.WellKnown)
	allowMeta          = []byte("GET, OPTIONS")
)

// serveMetadata answers GET (and HEAD, OPTIONS) of the RFC 9728 document at
// /.well-known/oauth-protected-resource and at that path followed by the
// endpoint's path. It reports whether path was one of them.
func (s *Server) serveMetadata(ctx *fasthttp.RequestCtx, path []byte) bool {
	rest, ok := bytes.CutPrefix(path, wellKnown)
	if !ok || (len(rest) > 0 && !bytes.Equal(rest, s.path)) {
		return false
	}
	ctx.Response.Header.Set("Access-Control-Allow-Origin", "*")
	switch {
	case ctx.IsGet(), ctx.IsHead():
		ctx.Response.Header.SetContentTypeBytes(ctJSON)
		ctx.Response.Header.Set("Cache-Control", "max-age=300")
		ctx.SetBody(s.opts.Auth.Metadata())
	case ctx.IsOptions():
		ctx.Response.Header.Set("Access-Control-Allow-Methods", "GET, OPTIONS")
		ctx.SetStatusCode(fasthttp.StatusNoContent)
	default:
		s.notAllowed(ctx, allowMeta)
	}
	return true
}

// bearer returns the token of an Authorization: Bearer header, and
// whether the header was well-formed (RFC 6750 §2.1: the scheme, case
// insensitive, one or more spaces, a token68). A header too long is not
// parsed.
func bearer(h []byte) (tok []byte, ok bool) {
	if len(h) > auth.MaxTokenLen+64 || len(h) < len(bearerPrefix) ||
		!bytes.EqualFold(h[:len(bearerPrefix)], bearerPrefix) {
		return nil, false
	}
	tok = bytes.TrimLeft(h[len(bearerPrefix):], " ")
	if len(tok) == 0 || len(tok) > auth.MaxTokenLen {
		return nil, false
	}
	end := len(tok)
	for end > 0 && tok[end-1] == '=' {
		end--
	}
	for i, c := range tok {
		if i >= end {
			break
		}
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/') {
			return nil, false
		}
	}
	return tok, true
}

// authenticate verifies the request's bearer token, answering 401 or 403
// when it fails. With Options.Auth nil it admits every request (nil info).
func (s *Server) authenticate(ctx *fasthttp.RequestCtx) (*auth.Info, bool) {
	v := s.opts.Auth
	if v == nil {
		return nil, true
	}
	h := ctx.Request.Header.PeekBytes(hdrAuthorization)
	if len(h) == 0 {
		s.refuseAuth(ctx, auth.ErrNoToken)
		return nil, false
	}
	tok, ok := bearer(h)
	if !ok {
		s.refuseAuth(ctx, &auth.Error{Status: fasthttp.StatusUnauthorized, Code: "invalid_token",
			Description: "malformed Authorization header: Bearer <token> expected"})
		return nil, false
	}
	info, err := v.VerifyFrom(context.Background(), string(tok), addrIP(ctx.RemoteAddr()))
	if err != nil {
		s.challenge(ctx, err) // counted by Verify
		return nil, false
	}
	// A request naming a session must come from its subject.
	if sid := ctx.Request.Header.PeekCanonical(hdrSessionID); len(sid) > 0 && !ctx.IsPost() {
		if h := s.lookup(sid); h != nil && !s.bindAuth(ctx, h.sess, info) {
			return nil, false
		}
	} else if sid := ctx.QueryArgs().Peek("sessionId"); len(sid) > 0 {
		if l := s.lookupLegacy(sid); l != nil && !s.bindAuth(ctx, l.sess, info) {
			return nil, false
		}
	}
	return info, true
}

// bindAuth makes info the caller of sess (auth.Bind), answering 403 when
// the session belongs to another subject.
func (s *Server) bindAuth(ctx *fasthttp.RequestCtx, sess *session.Session, info *auth.Info) bool {
	if info == nil {
		return true
	}
	if err := auth.Bind(sess, info); err != nil {
		s.refuseAuth(ctx, err)
		return false
	}
	return true
}

// authorizeMessage answers 403 insufficient_scope for a tools/call of a
// tool whose RequiredScopes info lacks.
func (s *Server) authorizeMessage(ctx *fasthttp.RequestCtx, info *auth.Info, m *codec.Message) bool {
	if info == nil || m.Kind != codec.KindRequest || m.Method != mcp.MethodToolsCall {
		return true
	}
	need := s.opts.Auth.ToolScopes(s.eng, info, m.Params)
	if missing := info.Missing(need); len(missing) > 0 {
		s.refuseAuth(ctx, auth.InsufficientScope(missing))
		return false
	}
	return true
}

// refuseAuth counts a refusal (Verifier.Refused) and answers it
// (challenge).
func (s *Server) refuseAuth(ctx *fasthttp.RequestCtx, err error) {
	s.opts.Auth.Refused(err, addrIP(ctx.RemoteAddr()))
	s.challenge(ctx, err)
}

// challenge answers err: its status, the challenge, and the JSON-RPC
// error as the body.
func (s *Server) challenge(ctx *fasthttp.RequestCtx, err error) {
	var e *auth.Error
	if !errors.As(err, &e) {
		e = &auth.Error{Status: fasthttp.StatusUnauthorized, Code: "invalid_token", Description: "invalid token"}
	}
	ctx.Response.Header.Set(hdrWWWAuthenticate, s.opts.Auth.Challenge(e))
	ctx.Response.Header.Set("Access-Control-Expose-Headers", hdrWWWAuthenticate)
	re := auth.RPCError(e)
	s.failData(ctx, e.Status, re.Code, re.Message, re.Data)
}

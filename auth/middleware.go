package auth

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
)

// Middleware authorizes every request the engine answers, on every
// transport (mcpedge.Options.Auth installs it outermost):
//
//   - The caller is the one the transport verified for the session
//     (Streamable HTTP, from the Authorization header of each request), or
//     the one verified from the token in params._meta["io.mcpedge/token"]
//     of initialize (kept for the session: TCP, stdio) or of the request
//     itself (2026-07-28 requests, which have no session). Without one,
//     or with an expired one, the request is refused with CodeUnauthorized
//     and nothing is served.
//   - tools/call of a tool whose handlers.ToolOptions.RequiredScopes the
//     caller lacks is refused with CodeForbidden.
//
// The handler's context carries the caller (FromContext).
func Middleware(v *Verifier) engine.Middleware {
	return func(next engine.MethodHandler) engine.MethodHandler {
		return func(ctx context.Context, req *engine.Request) ([]byte, error) {
			info, err := v.caller(ctx, req)
			if err != nil {
				return nil, RPCError(err)
			}
			if req.Method == mcp.MethodToolsCall {
				if need := ToolScopes(req.Server, req.Params); len(need) > 0 {
					if missing := info.Missing(need); len(missing) > 0 {
						return nil, RPCError(InsufficientScope(missing))
					}
				}
			}
			return next(NewContext(ctx, info), req)
		}
	}
}

// caller finds the verified caller of req.
func (v *Verifier) caller(ctx context.Context, req *engine.Request) (*Info, error) {
	if info, ok := req.Session.Auth().(*Info); ok && info != nil {
		if info.expired(time.Now()) {
			return nil, invalid("token expired")
		}
		return info, nil
	}
	tok := MetaToken(req.Params)
	if tok == "" {
		return nil, ErrNoToken
	}
	info, err := v.Verify(ctx, tok)
	if err != nil {
		return nil, err
	}
	if req.Method == mcp.MethodInitialize && !req.Session.Stateless() {
		req.Session.SetAuth(info)
	}
	return info, nil
}

// Bind records info as the caller of sess, refusing (403) a caller other
// than the one the session was started by: a session is bound to its
// subject.
func Bind(sess *session.Session, info *Info) error {
	if old, ok := sess.Auth().(*Info); ok && old != nil && old != info && old.Subject != info.Subject {
		return &Error{Status: 403, Code: "invalid_token", Description: "the session belongs to another subject"}
	}
	sess.SetAuth(info)
	return nil
}

// MetaToken returns the token in params._meta["io.mcpedge/token"], or "".
func MetaToken(params []byte) string {
	meta, ok, _ := codec.ObjectField(params, "_meta")
	if !ok {
		return ""
	}
	raw, ok, _ := codec.ObjectField(meta, MetaKey)
	if !ok || len(raw) > MaxTokenLen+2 {
		return ""
	}
	if s, err := codec.StringValue(raw); err == nil {
		return string(s)
	}
	var s string
	if codec.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// ToolScopes returns the scopes required by the tool that tools/call
// params name (handlers.ToolOptions.RequiredScopes), or nil.
func ToolScopes(srv *engine.Server, params []byte) []string {
	raw, ok, _ := codec.ObjectField(params, "name")
	if !ok {
		return nil
	}
	name, err := codec.StringValue(raw)
	if err != nil {
		var s string
		if codec.Unmarshal(raw, &s) != nil {
			return nil
		}
		name = []byte(s)
	}
	opts, _ := srv.Registry().ToolOptionsOf(string(name))
	return opts.RequiredScopes
}

// RPCError turns a refusal into the JSON-RPC error answering it:
// CodeUnauthorized or CodeForbidden, with data {"error", "scope"}.
func RPCError(err error) *codec.Error {
	e, ok := err.(*Error)
	if !ok {
		e = invalid("invalid token")
	}
	code := CodeUnauthorized
	if e.Status == 403 {
		code = CodeForbidden
	}
	data, _ := json.Marshal(struct {
		Error string `json:"error,omitempty"`
		Scope string `json:"scope,omitempty"`
	}{e.Code, strings.Join(e.Scope, " ")})
	return &codec.Error{Code: code, Message: e.Error(), Data: data}
}

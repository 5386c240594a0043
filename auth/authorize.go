package auth

import (
	"context"
	"encoding/json"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/internal/bytesconv"
	"github.com/mcpedge/mcpedge/session"
)

var _ engine.Authorizer = (*Verifier)(nil)

// Authorize implements engine.Authorizer: the engine asks it about every
// request, on every transport and revision, before anything else.
//
//   - A session with a caller (what Streamable HTTP verified from the
//     request's Authorization header, or what initialize's token gave on
//     TCP and stdio) is served as that caller, while its token has not
//     expired and the configuration in force still accepts it: after a
//     Reload or SetTokens the caller is checked again, once, cheaply (a
//     static token must still be listed; a JWT or an introspected token
//     must have been verified under the same keys URL, audience, issuer,
//     algorithms and introspection endpoint), and with the scopes every
//     request needs now.
//   - Otherwise the request's own token, params._meta["io.mcpedge/token"]
//     (initialize, a 2026-07-28 request), is verified.
//   - Without either, the request is refused with CodeUnauthorized.
//
// Unless block is set (the engine's worker pool), only a static token's
// digest and the cache of verified tokens decide; a JWT to verify or an
// introspection call returns engine.ErrAuthWouldBlock, and the engine
// asks again from a worker. Every refusal is counted (OnFailure).
func (v *Verifier) Authorize(ctx context.Context, sess *session.Session, _ string, params []byte, block bool) (any, error) {
	if info, ok := sess.Auth().(*Info); ok && info != nil {
		if !block && v.reevaluate(info) {
			// Its rules' conditions to evaluate again: CEL, on a worker.
			return nil, engine.ErrAuthWouldBlock
		}
		cur, err := v.current(info, time.Now())
		if err != nil {
			v.failed(err, sess.Remote())
			return nil, RPCError(err)
		}
		if cur != info {
			sess.SetAuth(cur)
		}
		return cur, nil
	}
	info, err := v.verifyToken(ctx, metaToken(params), block)
	if err == engine.ErrAuthWouldBlock {
		return nil, err
	}
	if err != nil {
		v.failed(err, sess.Remote())
		return nil, RPCError(err)
	}
	return info, nil
}

// AuthorizeTool implements engine.Authorizer: a caller lacking a scope
// the tool requires, of its own (scopes) or configured for it
// (Config.ToolScopes), is refused with CodeForbidden naming the scopes
// missing.
func (v *Verifier) AuthorizeTool(caller any, tool string, scopes []string) error {
	info, ok := caller.(*Info)
	if !ok || info == nil {
		v.failed(ErrNoToken, netip.Addr{})
		return RPCError(ErrNoToken)
	}
	missing := info.Missing(scopes)
	if more := v.st.Load().cfg.ToolScopes[tool]; len(more) > 0 {
		for _, s := range info.Missing(more) {
			if !slices.Contains(missing, s) {
				missing = append(missing, s)
			}
		}
	}
	if len(missing) > 0 {
		err := InsufficientScope(missing)
		v.failed(err, netip.Addr{})
		return RPCError(err)
	}
	return nil
}

var _ engine.Policy = (*Verifier)(nil)

// Class implements engine.Policy: the policy class of caller (an *Info)
// under the rules in force (Config.Rules), computed when its token was
// verified, or nil without rules. A caller verified before the rules
// changed, not yet rechecked, has its class computed anew, and not kept.
func (v *Verifier) Class(caller any) handlers.Class {
	info, ok := caller.(*Info)
	if !ok || info == nil {
		return nil
	}
	rules := v.st.Load().cfg.Rules
	if rules == nil {
		return nil
	}
	if c := info.class; c != nil && c.rules == rules {
		return c
	}
	return rules.classOf(info)
}

// reevaluate reports whether rechecking info (current) under the
// configuration in force evaluates rules' conditions: a JWT or an
// introspected token verified under other rules. A static token's class
// comes with its entry.
func (v *Verifier) reevaluate(info *Info) bool {
	st := v.st.Load()
	return info.gen != st.gen && info.static == nil && st.cfg.Rules != nil &&
		(info.class == nil || info.class.rules != st.cfg.Rules)
}

// current returns the caller info as the configuration in force sees it
// at now: info itself, or its recheck after a reload (state.recheck), or
// the error refusing it.
func (v *Verifier) current(info *Info, now time.Time) (*Info, error) {
	if st := v.st.Load(); info.gen != st.gen {
		var err error
		if info, err = st.recheck(info); err != nil {
			return nil, err
		}
	}
	if info.expired(now) {
		return nil, invalid("token expired")
	}
	return info, nil
}

// recheck returns info, verified under another configuration, as st sees
// it: a static token's entry in st (its scopes may have changed), or a
// copy of a JWT's or introspected token's info when st verifies such
// tokens as the other configuration did. A static token st no longer
// lists is refused: removing it from the token file and reloading
// revokes it, on the sessions it opened too.
func (st *state) recheck(info *Info) (*Info, error) {
	var fresh *Info
	switch {
	case info.static != nil:
		if fresh = st.matchStatic(&info.static.sum); fresh == nil {
			return nil, invalid("token revoked")
		}
		if st.cfg.KeepToken && info.Token != "" {
			c := *fresh
			c.Token = info.Token
			fresh = &c
		}
	case info.vkey == st.vkey:
		c := *info
		c.gen = st.gen
		if c.class == nil || c.class.rules != st.cfg.Rules {
			c.class = st.cfg.Rules.classOf(&c)
		}
		fresh = &c
	default:
		return nil, invalid("token verified under settings since replaced")
	}
	if missing := fresh.Missing(st.cfg.Scopes); len(missing) > 0 {
		return nil, InsufficientScope(missing)
	}
	return fresh, nil
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
func MetaToken(params []byte) string { return strings.Clone(metaToken(params)) }

// metaToken is MetaToken aliasing params when the token has no escape.
func metaToken(params []byte) string {
	meta, ok, _ := codec.ObjectField(params, "_meta")
	if !ok {
		return ""
	}
	raw, ok, _ := codec.ObjectField(meta, MetaKey)
	if !ok || len(raw) > MaxTokenLen+2 {
		return ""
	}
	if s, err := codec.StringValue(raw); err == nil {
		return bytesconv.B2S(s)
	}
	var s string
	if codec.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// ToolScopes returns the scopes that a tools/call by caller of the tool
// its params name requires: the tool's own
// (handlers.ToolOptions.RequiredScopes) and those configured for it
// (Config.ToolScopes). It returns nil for a tool that caller's class
// hides (Class), whose call the engine answers as it answers a call of a
// tool that does not exist: a 403 naming scopes would tell it the tool
// is there. The slice must not be modified.
func (v *Verifier) ToolScopes(srv *engine.Server, caller *Info, params []byte) []string {
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
	reg := srv.Registry()
	if c := v.Class(caller); c != nil && !reg.Allowed(c, handlers.ListNameTools, bytesconv.B2S(name)) {
		return nil
	}
	opts, _ := reg.ToolOptionsOf(bytesconv.B2S(name))
	more := v.st.Load().cfg.ToolScopes[bytesconv.B2S(name)]
	if len(more) == 0 {
		return opts.RequiredScopes
	}
	if len(opts.RequiredScopes) == 0 {
		return more
	}
	return append(slices.Clone(opts.RequiredScopes), more...)
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

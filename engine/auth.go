package engine

import (
	"context"
	"errors"
	"reflect"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
)

// Authorization is one step of the path of every request (route, from
// the transport's goroutine or, for serveBig, from a worker): it
// runs after responses and notifications are set aside and before
// anything else, so no answer of the engine's own (ping, list pages,
// server/discover, subscriptions/listen, tasks), no limit and no handler
// is reached by a request that Options.Authorize refuses. With no
// Authorizer the path pays one nil check.

// An Authorizer decides which requests are served (Options.Authorize).
// Package auth's Verifier is one: it verifies bearer tokens.
type Authorizer interface {
	// Authorize returns the verified caller of a request of sess (method,
	// params: raw JSON aliasing the message, not to be kept), or the
	// error that refuses it, answered as codec.AsError words it (package
	// auth: CodeUnauthorized or CodeForbidden with data).
	//
	// The caller is the session's when it has one (sess.Auth: what the
	// transport verified, Streamable HTTP's Authorization header, or what
	// initialize's token gave), else the one the request's own token
	// names (a 2026-07-28 request, an initialize).
	//
	// block is false on the goroutine that reads the connection (a gnet
	// event loop, stdio's reader): a decision that needs more than a
	// lookup (a signature to verify, a key to fetch, an introspection
	// call) then returns ErrAuthWouldBlock, and the engine asks again
	// with block true from a worker of the pool, which serves the request
	// there. Authorize must be safe for concurrent use.
	Authorize(ctx context.Context, sess *session.Session, method string, params []byte, block bool) (caller any, err error)
	// AuthorizeTool refuses (an error, as Authorize's) a caller that
	// lacks scopes the tool named tool requires: scopes, its
	// handlers.ToolOptions.RequiredScopes, and any the Authorizer
	// requires of it itself. It is asked before the tool runs, about
	// every tools/call on every path, tasks included.
	AuthorizeTool(caller any, tool string, scopes []string) error
}

// A Policy narrows what each caller sees and may use. An Authorizer that
// is also a Policy (package auth's Verifier, whose rules decide) has the
// engine serve each caller the lists of its class
// (handlers.Registry.ListPageFor), and answer a request naming an item
// its class hides (tools/call, prompts/get, resources/read,
// completion/complete, resources/subscribe, and the URIs of
// subscriptions/listen) as it answers one naming an item that does not
// exist: the caller learns nothing of what it may not use. Lists of a
// class are pages encoded once per class and registry change, and an
// item is checked by a lookup in its class's view: no rule is evaluated
// per request.
type Policy interface {
	// Class returns the policy class of caller, what Authorize returned
	// for a request: nil when it may see and use every item (no rules).
	// It is asked once per request that lists or names an item, and
	// must be cheap (a lookup): safe for concurrent use, and on an
	// event loop.
	Class(caller any) handlers.Class
}

// ErrAuthWouldBlock is what an Authorizer returns when it cannot decide
// without blocking; see Authorizer.
var ErrAuthWouldBlock = errors.New("engine: authorization would block")

// A Subject is a verified caller that names its subject (package auth's
// *Info). The engine binds what a caller creates, tasks, to it.
type Subject interface {
	AuthSubject() string
}

// SubjectOf returns the subject of caller (a Subject), or "".
func SubjectOf(caller any) string {
	s, ok := caller.(Subject)
	if !ok {
		return ""
	}
	if rv := reflect.ValueOf(caller); rv.Kind() == reflect.Pointer && rv.IsNil() {
		return "" // a typed nil: no caller
	}
	return s.AuthSubject()
}

// callerKey is the context key of a request's verified caller.
type callerKey struct{}

// WithCaller returns ctx carrying caller, as a handler's context carries
// the caller Options.Authorize verified (Caller).
func WithCaller(ctx context.Context, caller any) context.Context {
	return context.WithValue(ctx, callerKey{}, caller)
}

// Caller returns the verified caller ctx carries: a handler's context
// carries what Options.Authorize returned for its request. nil without
// one.
func Caller(ctx context.Context) any { return ctx.Value(callerKey{}) }

// authorize asks Options.Authorize about the request m on sess. An
// initialize that passes records its caller on its session (TCP, stdio:
// the token of initialize is the session's), unless the session has one.
func (s *Server) authorize(sess *session.Session, m *codec.Message, block bool) (any, error) {
	caller, err := s.authz.Authorize(sess.Context(), sess, m.Method, m.Params, block)
	if err != nil {
		return nil, err
	}
	if m.Method == mcp.MethodInitialize && !sess.Stateless() && sess.Auth() == nil {
		sess.SetAuth(caller)
	}
	return caller, nil
}

// callerOf returns the verified caller of a request of sess: a
// 2026-07-28 request's own (mm, when not nil), else its session's.
func callerOf(sess *session.Session, mm *statelessMeta) any {
	if mm != nil && mm.caller != nil {
		return mm.caller
	}
	return sess.Auth()
}

// caller returns the verified caller of r (callerOf).
func (r *request) caller() any { return callerOf(r.sess, &r.stateless) }

// deferRequest hands the request in frame, which Options.Authorize cannot
// decide without blocking, to the worker pool whole, as a big frame is
// (handleBig): decoded, authorized and served there (serveBig), its
// answers going to reply. Until it is authorized it is in its session's
// in-flight set, so that one session's verifications hold no more than
// its share of the pool (-max-inflight) and a drain waits for them. A
// full pool refuses it at once (its code returned).
func (s *Server) deferRequest(sess *session.Session, m *codec.Message, frame, out []byte, reply session.Sink) ([]byte, int, bool) {
	if reply == nil {
		reply = sess.Out
	}
	r := s.newRequest(sess, reply)
	r.buf = append(r.buf[:0], frame...)
	rebase(&r.msg, m, frame, r.buf) // the id the session tracks, in r's copy
	r.big = true
	r.rc.reset(sess.Context())
	switch err := sess.Track(r.msg.ID, &r.rc, int(s.maxInflight.Load())); err {
	case nil:
		r.authWait, r.authID = true, r.msg.ID
	case session.ErrInflightLimit:
		s.release(r)
		return s.refuse(sess, out, reply, m.ID, errInflight), codec.CodeServerBusy, false
	case session.ErrDuplicateID:
		s.release(r)
		out, code := errAnswer(out, m.ID, codec.CodeInvalidRequest, errDuplicateID)
		return out, code, false
	default:
		s.release(r)
		out, code := errAnswer(out, m.ID, codec.CodeInvalidRequest, errSessionClosed)
		return out, code, false
	}
	if s.watch {
		r.obsStart = s.monotonic()
	}
	// Waits its turn in the fair scheduler, as the session's other
	// requests do.
	if le := s.sched.submit(r, s.flowKey(sess, sess.Auth()), sess.Stateless(), int(s.maxInflight.Load())); le != nil {
		s.authDone(r)
		s.release(r)
		return s.refuse(sess, out, reply, m.ID, le), codec.CodeServerBusy, false
	}
	return out, 0, true
}

// authDone takes r, a request deferRequest handed over, out of its
// session's in-flight set once its authorization is decided (or it is not
// served): what serves it next tracks it again.
func (s *Server) authDone(r *request) {
	if r.authWait {
		r.sess.Done(r.authID, &r.rc)
		r.sess.Answered()
		r.authWait, r.authID = false, nil
	}
}

// authorizeTool refuses r, a tools/call of the tool named name, when its
// caller's class hides the tool (answered as for a tool that does not
// exist, before any scope is named), or when it lacks a scope the tool
// requires.
func (s *Server) authorizeTool(r *request, name string) error {
	caller := r.caller()
	if err := s.reg.Check(s.class(caller), handlers.ListNameTools, name); err != nil {
		return err
	}
	o, _ := s.reg.ToolOptionsOf(name)
	return s.authz.AuthorizeTool(caller, name, o.RequiredScopes)
}

// class returns the policy class of caller (Policy), nil without a
// Policy or rules: the caller then sees and uses every item.
func (s *Server) class(caller any) handlers.Class {
	if s.policy == nil {
		return nil
	}
	return s.policy.Class(caller)
}

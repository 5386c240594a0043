package engine

import (
	"context"
	"sync"
	"unsafe"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/session"
)

// Request is a client request on its way to being answered, as receiving
// middleware sees it. It is valid until the MethodHandler it was given to
// returns; a middleware that keeps anything of it copies it.
type Request struct {
	// Server is the server serving the request.
	Server *Server
	// Session is the client's session.
	Session *session.Session
	// Method is the request's method ("tools/call", "ping", ...).
	Method string
	// ID is the request's id and Params its params (nil when absent), both
	// raw JSON aliasing the inbound frame. A middleware may set Params to
	// other bytes (a rewritten request) before calling next; it must not
	// modify the bytes themselves.
	ID, Params []byte
	// Peer reaches the client for requests served by a handler; it is nil
	// for the requests the engine answers itself (ping, initialize, list
	// pages, static resources, subscriptions, logging/setLevel, tasks/get,
	// tasks/list, tasks/cancel).
	Peer handlers.Peer

	r       *request       // set for requests served by serve
	msg     *codec.Message // set for the requests the engine answers itself
	row     *method        // msg's method
	scratch *codec.Buffer  // where fastInner writes msg's answer
}

// errForeignRequest answers a request that a middleware passed on as a
// Request of its own making: the engine serves only those it handed out.
var errForeignRequest = &codec.Error{Code: codec.CodeInternalError, Message: "internal error: middleware passed on a Request the engine did not make"}

// errRewritten answers a request the engine answers itself whose params a
// middleware rewrote into a request only a handler serves (a static
// resource's URI into another's).
var errRewritten = &codec.Error{Code: codec.CodeInvalidRequest, Message: "invalid request: params rewritten by middleware into a request this path does not serve"}

// MethodHandler answers a request: its result, encoded JSON ({} when
// empty), or an error. A *codec.Error (errors.As) is answered with its
// code and data; any other error with -32603 and its text. The result
// bytes are valid until the answer is written or next is called again: a
// middleware that keeps them copies them.
type MethodHandler func(ctx context.Context, req *Request) (result []byte, err error)

// Middleware wraps the handling of every request (see Options.Receive).
// A middleware may act before and after calling next, answer without
// calling it (an error refusing the request), pass next a derived context
// (values for the handler: an identity, granted scopes), or replace
// req.Params. It passes next the *Request it was given, not one of its
// own.
type Middleware func(next MethodHandler) MethodHandler

// Outbound is a message the server sends its client on its own initiative:
// a notification (progress, log, resource updated, list changed, task
// status, cancelled) or a server-to-client request (sampling, elicitation,
// roots, ping). Answers to the client's requests are not Outbound: receiving
// middleware sees them.
type Outbound struct {
	// Session is the client's session.
	Session *session.Session
	// Method is the message's method.
	Method string
	// Message is the whole encoded JSON-RPC message. A middleware may read
	// it, or replace its bytes (Message.B) before calling next; the engine
	// recycles it when no middleware passed it on.
	Message *codec.Buffer

	sink session.Sink
	sent bool
}

// Sender sends an outbound message to its client. The innermost sends it
// to the session's sink (the connection, or the request's stream).
type Sender func(ctx context.Context, out *Outbound) error

// SendMiddleware wraps the sending of every outbound message (see
// Options.Send). Not calling next drops the message: return nil to drop
// it silently, an error to report a failed send to whoever sent it (a
// handler's Peer.Log or CreateMessage, for one).
type SendMiddleware func(next Sender) Sender

// chain composes mw around h: mw[0] is the outermost, the first to see a
// request and the last to see its answer.
func chain[H any](h H, mw []func(H) H) H {
	for i := len(mw) - 1; i >= 0; i-- {
		h = mw[i](h)
	}
	return h
}

// buildMiddleware composes the receiving and sending chains of opts; with
// none configured the fields stay nil and the hot paths pay a nil check.
func (s *Server) buildMiddleware() {
	if len(s.opts.Receive) > 0 {
		mw := make([]func(MethodHandler) MethodHandler, len(s.opts.Receive))
		for i, m := range s.opts.Receive {
			mw[i] = m
		}
		s.receive = chain(MethodHandler(s.serveInner), mw)
		s.receiveFast = chain(MethodHandler(s.fastInner), mw)
	}
	if len(s.opts.Send) > 0 {
		mw := make([]func(Sender) Sender, len(s.opts.Send))
		for i, m := range s.opts.Send {
			mw[i] = m
		}
		s.sender = chain(Sender(sendInner), mw)
	}
}

// sameBytes reports whether a and b are the same slice of the same memory.
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && unsafe.SliceData(a) == unsafe.SliceData(b)
}

// serveThrough runs r's handler through the receiving middleware; dst
// holds the answer's head up to the result (body bytes). It returns dst
// with the result appended.
func (s *Server) serveThrough(r *request, dst []byte, body int) ([]byte, error) {
	r.out, r.outBody = dst, body
	r.req = Request{Server: s, Session: r.sess, Method: r.msg.Method, ID: r.msg.ID, Params: r.msg.Params, Peer: r, r: r}
	res, err := s.receive(r.ctx, &r.req)
	out := r.out
	r.out, r.req = nil, Request{}
	if err != nil {
		return out[:body], err
	}
	if len(out) >= body && sameBytes(res, out[body:]) {
		return out, nil // the handler's own result, in place
	}
	r.shape = shapeUnknown // the middleware's bytes
	return append(out[:body], res...), nil
}

// serveInner is the innermost receiving handler of the requests served by
// serve: it runs the method's handler with the middleware's context and
// params, writing the result into the answer in place.
func (s *Server) serveInner(ctx context.Context, req *Request) ([]byte, error) {
	r := req.r
	if r == nil {
		return nil, errForeignRequest
	}
	if ctx != r.ctx {
		saved := r.ctx
		r.ctx = ctx
		defer func() { r.ctx = saved }()
	}
	if !sameBytes(req.Params, r.msg.Params) {
		r.msg.Params = req.Params
		r.tool, r.tokenParsed, r.token = toolFields{}, false, nil
		r.rawSet, r.rawH = false, nil
	}
	dst, err := s.dispatch(r, r.out[:r.outBody])
	r.out = dst
	if err != nil {
		return nil, err
	}
	return dst[r.outBody:], nil
}

// answersItself reports whether fast answers m, of method row, itself:
// the requests that receiving middleware sees on the fast path (those the
// table answers at once). Refusals (a session not initialized) are not
// among them, and tools/call of a NonBlocking tool goes through serve.
func (s *Server) answersItself(sess *session.Session, m *codec.Message, row *method) bool {
	if !row.early && !sess.Initialized() {
		return false
	}
	switch row.now {
	case opNone, opInlineTool:
		return false
	case opStaticRead:
		_, ok := s.staticRead(m, s.sessionClass(sess))
		return ok
	}
	return true
}

var fastRequests = sync.Pool{New: func() any { return new(Request) }}

// fastThrough answers m, of method row, one of the requests fast answers
// itself, through the receiving middleware, appending the answer to dst;
// it returns the answer's code. The middleware's context is the
// session's, as for the requests served by handlers, with the session's
// caller when requests are authorized.
func (s *Server) fastThrough(sess *session.Session, m *codec.Message, row *method, dst []byte) ([]byte, int) {
	scratch := codec.GetBuffer()
	req := fastRequests.Get().(*Request)
	*req = Request{Server: s, Session: sess, Method: m.Method, ID: m.ID, Params: m.Params, msg: m, row: row, scratch: scratch}
	defer func() { // after the result, which scratch may hold, is appended
		*req = Request{}
		fastRequests.Put(req)
		codec.PutBuffer(scratch)
	}()
	ctx := sess.Context()
	if s.authz != nil {
		ctx = WithCaller(ctx, sess.Auth())
	}
	res, err := s.receiveFast(ctx, req)
	if err != nil {
		return errObject(dst, m.ID, codec.AsError(err))
	}
	return codec.AppendResult(dst, m.ID, res), 0
}

// fastInner is the innermost receiving handler of the requests fast
// answers itself: it has fast write the whole answer, then returns the
// answer's result or error.
func (s *Server) fastInner(_ context.Context, req *Request) ([]byte, error) {
	if req.msg == nil || req.scratch == nil {
		return nil, errForeignRequest
	}
	m := *req.msg
	m.Params = req.Params
	var f toolFields
	b, code, ok := s.fastDirect(req.Session, &m, req.row, req.scratch.B[:0], &f)
	req.scratch.B = b
	if !ok { // params rewritten into a request for a handler
		return nil, errRewritten
	}
	// fastDirect wrote the whole answer: its result, or the error the
	// middleware is handed as one.
	if raw, found, err := codec.ObjectField(b, "error"); code != 0 && err == nil && found {
		e := &codec.Error{}
		if err := codec.Unmarshal(raw, e); err != nil {
			return nil, err
		}
		return nil, e
	}
	raw, _, err := codec.ObjectField(b, "result")
	return raw, err
}

// send sends b, an outbound message with the given method, to sink on
// behalf of sess, through the sending middleware.
func (s *Server) send(ctx context.Context, sess *session.Session, sink session.Sink, method string, b *codec.Buffer) error {
	if s.sender == nil {
		return sink.Send(b)
	}
	return s.sendThrough(ctx, sess, sink, method, b)
}

// sendTo is send with sess's context, which it reads only for the
// sending middleware: a resource update fanned out to many sessions
// touches each session's memory once less.
func (s *Server) sendTo(sess *session.Session, sink session.Sink, method string, b *codec.Buffer) error {
	if s.sender == nil {
		return sink.Send(b)
	}
	return s.sendThrough(sess.Context(), sess, sink, method, b)
}

func (s *Server) sendThrough(ctx context.Context, sess *session.Session, sink session.Sink, method string, b *codec.Buffer) error {
	out := &Outbound{Session: sess, Method: method, Message: b, sink: sink}
	err := s.sender(ctx, out)
	if !out.sent {
		codec.PutBuffer(out.Message)
	}
	return err
}

func sendInner(_ context.Context, out *Outbound) error {
	out.sent = true
	return out.sink.Send(out.Message)
}

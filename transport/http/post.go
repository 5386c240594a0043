package http

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/auth"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/internal/bytesconv"
	"github.com/mcpedge/mcpedge/internal/connwatch"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
	"github.com/valyala/fasthttp"
)

// watchAfter is how long a POST waits for its answer before it starts
// watching the connection for the client going away.
const watchAfter = 20 * time.Millisecond

// handle routes a request. Everything its headers tell is checked before
// its body is read (readBody): the path, Host and Origin, the credentials,
// and for a POST the method, content type, Accept and protocol version.
func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	path := ctx.Path()
	if s.opts.Auth != nil && s.serveMetadata(ctx, path) {
		return
	}
	if s.serveCORS(ctx, path) { // a preflight, answered before credentials (cors.go)
		return
	}
	switch {
	case bytes.Equal(path, s.path):
		if !s.checkHostOrigin(ctx) {
			return
		}
		ai, ok := s.authenticate(ctx)
		if !ok {
			return
		}
		if ctx.IsPost() && (!s.postHeaders(ctx) || !s.readBody(ctx)) {
			return
		}
		if s.opts.Cluster != nil && s.routeCluster(ctx) {
			return
		}
		if s.opts.Route != nil {
			if id := s.routeID(ctx); len(id) > 0 && s.opts.Route(ctx, id) {
				return
			}
		}
		switch {
		case ctx.IsPost():
			s.post(ctx, ai)
		case ctx.IsGet():
			s.get(ctx)
		case ctx.IsDelete():
			s.del(ctx)
		case s.opts.Stateless:
			s.notAllowed(ctx, allowStateless)
		default:
			s.notAllowed(ctx, allowStateful)
		}
	case !s.opts.NoLegacySSE && bytes.Equal(path, s.ssePath):
		if s.checkHostOrigin(ctx) {
			if _, ok := s.authenticate(ctx); ok {
				s.legacyGet(ctx)
			}
		}
	case !s.opts.NoLegacySSE && bytes.Equal(path, s.msgPath):
		if s.checkHostOrigin(ctx) {
			if _, ok := s.authenticate(ctx); ok {
				if !s.legacyPostHeaders(ctx) || !s.readBody(ctx) {
					return
				}
				if s.opts.Route != nil {
					if id := ctx.QueryArgs().Peek("sessionId"); len(id) > 0 && s.opts.Route(ctx, id) {
						return
					}
				}
				s.legacyPost(ctx)
			}
		}
	default:
		s.fail(ctx, fasthttp.StatusNotFound, codeTransport, "Not Found: the MCP endpoint is "+s.opts.Path)
	}
}

// routeID returns the id Options.Route is offered for a request on the
// MCP endpoint: its Mcp-Session-Id (without a Cluster, which routes
// sessions itself), else the task a 2026-07-28 request names in Mcp-Name
// (the methods whose Mcp-Name mirrors params.taskId in the engine's
// method table: tasks/get, tasks/update, tasks/cancel), else the
// requestState of a 2026-07-28 retry of a method that names a tool,
// prompt or resource, when it names the node holding its work
// (engine.StateNode: a gateway's upstream call held open between input
// rounds).
func (s *Server) routeID(ctx *fasthttp.RequestCtx) []byte {
	h := &ctx.Request.Header
	if sid := h.PeekCanonical(hdrSessionID); len(sid) > 0 && s.opts.Cluster == nil {
		return sid
	}
	if !ctx.IsPost() {
		return nil
	}
	switch engine.NameParam(bytesconv.B2S(trimOWS(h.PeekCanonical(hdrMethod)))) {
	case taskIDParam:
		return trimOWS(h.PeekCanonical(hdrName))
	case "name", "uri":
		return stateRoute(ctx.PostBody())
	}
	return nil
}

// taskIDParam is the params member that names a task.
const taskIDParam = "taskId"

var keyRequestState = []byte(`"requestState"`)

// stateRoute returns the requestState of the request body when it names
// a node (engine.StateNode), nil otherwise.
func stateRoute(body []byte) []byte {
	if !bytes.Contains(body, keyRequestState) {
		return nil
	}
	params, ok, err := codec.ObjectField(body, "params")
	if err != nil || !ok {
		return nil
	}
	raw, ok, err := codec.ObjectField(params, "requestState")
	if err != nil || !ok || len(raw) < 2 || raw[0] != '"' {
		return nil
	}
	st := raw[1 : len(raw)-1] // a node name and '~' need no escape
	if engine.StateNode(st) == nil {
		return nil
	}
	return st
}

// mode is where a call's answer goes.
type mode uint8

const (
	modeWait mode = iota // nothing sent yet, or only the final answer
	modeSSE              // streaming on c.st
)

// call is one POSTed message being served: the reply sink (an
// engine.Replier) that the engine sends a queued request's messages to,
// its answer last through Final. It decides how the POST is answered:
// when the answer comes first, as JSON; when anything comes before it, as
// an SSE stream that carries everything, the answer last. Calls are
// pooled.
//
// The engine routes the message (engine.Conn.HandleMessage): what it
// answers at once comes back to the handler, which writes it; a queued
// request runs on the engine's bounded worker pool while the handler
// waits for its first message, since an SSE response can start only once
// the handler has returned.
type call struct {
	s    *Server
	h    *hsession // nil when stateless
	sess *session.Session

	msg   codec.Message
	dec   []byte // decompressed request body
	idBuf []byte
	id    []byte // the request's raw id (idBuf)

	mu     sync.Mutex
	mode   mode
	final  bool // the answer was sent
	served bool // the engine is done with the request (Final)

	// The POST's W3C trace context headers, copied when the engine
	// traces requests (engine.TraceCarrier).
	traceParent, traceState []byte

	outcome
	tracked bool       // stateless and streaming: in s.live
	rec     *streamRec // stateful SSE: the stream's record
	st      *stream    // SSE: the POST's own stream

	wake  chan struct{} // the handler's wake-up: streaming began, or Final came
	timer *time.Timer
	refs  atomic.Int32
}

var (
	_ engine.Replier      = (*call)(nil)
	_ engine.TraceCarrier = (*call)(nil)
)

// TraceHeaders implements engine.TraceCarrier: the POST's traceparent
// and tracestate headers, the parent of a request whose _meta carries no
// trace context.
func (c *call) TraceHeaders() (traceparent, tracestate []byte) { return c.traceParent, c.traceState }

func (s *Server) getCall() *call { return s.calls.Get().(*call) }

func (s *Server) putCall(c *call) {
	if c.h == nil && c.sess != nil {
		if c.tracked {
			s.live.remove(c.sess)
		}
		cause := errStateless
		if c.st != nil {
			if cut := c.st.cutCause(); cut != nil { // its stream was cut for a limit
				cause = fmt.Errorf("%w: %w", errStateless, cut)
			}
		}
		s.eng.Conn(c.sess).Close(cause)
	}
	if c.answer != nil {
		codec.PutBuffer(c.answer)
	}
	dec, idBuf := c.dec[:0], c.idBuf[:0]
	if cap(dec) > 64<<10 {
		dec = nil
	}
	c.h, c.sess, c.msg, c.dec, c.idBuf, c.id = nil, nil, codec.Message{}, dec, idBuf, nil
	c.mode, c.final, c.served, c.answer, c.rec, c.st = modeWait, false, false, nil, nil, nil
	c.refused, c.rejected, c.tracked = nil, 0, false
	s.calls.Put(c)
}

func (c *call) unref() {
	if c.refs.Add(-1) == 0 {
		c.s.putCall(c)
	}
}

// cancelFunc returns a function that cancels the call's request with a
// cause (a client gone). It holds the session and a copy of the id, not
// the pooled call, so that calling it late is harmless.
func (c *call) cancelFunc() context.CancelCauseFunc {
	sess, id := c.sess, bytes.Clone(c.id)
	return func(cause error) { sess.CancelRequest(id, cause) }
}

// Send implements session.Sink: the messages a queued request sends
// before its answer (progress, logs, server-to-client requests). The
// first one turns the POST into an SSE stream. It takes ownership of b.
func (c *call) Send(b *codec.Buffer) error {
	if len(b.B) == 0 {
		codec.PutBuffer(b)
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.final || c.served {
		codec.PutBuffer(b) // a handler's goroutine that outlived the request
		return session.ErrClosed
	}
	if c.mode == modeWait {
		c.startSSE()
	}
	c.emit(b)
	return nil
}

// Final implements engine.Replier: the request's answer, or nil when none
// is due. It wakes the waiting handler, or ends the SSE stream.
func (c *call) Final(b *codec.Buffer) {
	c.mu.Lock()
	if b != nil && !c.final && !c.served {
		c.final = true
		if c.mode == modeWait {
			c.answer = b
		} else {
			c.emit(b)
		}
	} else if b != nil {
		codec.PutBuffer(b)
	}
	c.served = true
	switch {
	case c.mode == modeWait:
		c.wake <- struct{}{}
	case c.h == nil:
		c.st.end(false)
	default:
		c.h.mu.Lock()
		if !c.h.closed {
			c.h.finishLocked(c.rec)
		}
		c.h.mu.Unlock()
	}
	c.mu.Unlock()
	if c.h != nil {
		c.sess.Touch() // the session was in use until now
	}
	c.unref()
}

// Refuse implements engine.Refuser: a request the engine refused for a
// limit is answered 429 when the limit is the client's own share
// (LimitError.ClientShare: its rate, its requests in flight, its
// subscriptions, its tasks)
// or 503 (the worker pool is full, so are the workers tasks may use, or
// the server is draining) with Retry-After, rather than 200 with the
// JSON-RPC error, which is still the body. The engine refuses before it
// queues a request, or, for a tools/call refused as it was to become a
// task, before its Final and before anything was sent: the handler is
// still there to answer.
func (c *call) Refuse(id []byte, err *engine.LimitError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refuse(id, err)
	c.final = true
}

// CloseStream implements engine.StreamCloser: the handler ends the POST's
// stream now (SSE polling); what the request sends later, its answer
// included, is stored for the client to fetch with GET and Last-Event-ID.
// Without a session to resume there is nothing to do.
func (c *call) CloseStream() {
	if c.h == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.final || c.served {
		return
	}
	if c.mode == modeWait {
		c.startSSE()
	}
	c.h.closeStream(c.rec)
}

// startSSE turns the call into a stream, primed, and wakes the handler to
// send it. c.mu is held.
func (c *call) startSSE() {
	st := c.s.newStream()
	c.st, c.mode = st, modeSSE
	if h := c.h; h != nil {
		h.mu.Lock()
		if h.closed {
			st.end(false)
		} else {
			c.rec = h.newRecLocked(c.id, c.cancelFunc())
			st.prime(c.rec.id, h.seq)
			h.attachLocked(c.rec, st)
		}
		h.mu.Unlock()
	} else {
		st.cancel = c.cancelFunc()
		c.tracked = true
		c.s.live.add(c.sess)
	}
	c.wake <- struct{}{}
}

// emit sends b on the call's stream. c.mu is held.
func (c *call) emit(b *codec.Buffer) {
	h := c.h
	if h == nil {
		c.st.pushData(b.B)
		codec.PutBuffer(b)
		if c.final {
			c.st.end(false)
		}
		return
	}
	h.mu.Lock()
	if h.closed || c.rec == nil {
		codec.PutBuffer(b)
	} else {
		h.emitLocked(c.rec, b, c.final)
		if c.final {
			h.finishLocked(c.rec)
		}
	}
	h.mu.Unlock()
}

// wait blocks the handler until the call streams or is served. A call
// that takes long gets its connection watched, so that a client that goes
// away cancels it.
func (c *call) wait(conn net.Conn) {
	if c.timer == nil {
		c.timer = time.NewTimer(watchAfter)
	} else {
		c.timer.Reset(watchAfter)
	}
	select {
	case <-c.wake:
		c.timer.Stop()
		return
	case <-c.timer.C:
	}
	cancel := c.cancelFunc()
	w := connwatch.Watch(conn, func() { cancel(ErrClientGone) })
	<-c.wake
	w.Stop()
}

// postHeaders checks the headers of a POST on the MCP endpoint, before its
// body is read: content type, Accept, protocol version. It answers 415,
// 406 or 400 and reports false when one fails.
func (s *Server) postHeaders(ctx *fasthttp.RequestCtx) bool {
	if ct := ctx.Request.Header.ContentType(); !mediaTypeIs(ct, ctJSON) {
		s.fail(ctx, fasthttp.StatusUnsupportedMediaType, codeTransport, "Unsupported Media Type: Content-Type must be application/json")
		return false
	}
	if json, sse := accepts(ctx.Request.Header.PeekCanonical(hdrAccept)); !json || !sse {
		s.fail(ctx, fasthttp.StatusNotAcceptable, codeTransport, "Not Acceptable: Accept must admit both application/json and text/event-stream")
		return false
	}
	if _, vk := versionOf(ctx.Request.Header.PeekCanonical(hdrVersion)); vk == verBad {
		s.badVersion(ctx)
		return false
	}
	return true
}

// post serves POST on the MCP endpoint: one JSON-RPC message, its headers
// checked by postHeaders and its body read.
func (s *Server) post(ctx *fasthttp.RequestCtx, ai *auth.Info) {
	version, vk := versionOf(ctx.Request.Header.PeekCanonical(hdrVersion)) // not verBad: postHeaders
	c := s.getCall()
	body, ok := s.requestBody(ctx, c)
	if !ok {
		s.putCall(c)
		return
	}
	m := &c.msg
	if err := codec.Decode(body, m); err != nil {
		if s.batch(ctx, body) { // a JSON-RPC batch of a 2025-03-26 session (batch.go)
			s.putCall(c)
			return
		}
		s.decodeError(ctx, m, err)
		s.putCall(c)
		return
	}
	if !s.authorizeMessage(ctx, ai, m) {
		s.putCall(c)
		return
	}
	created := false
	switch {
	case vk == verStateless || (m.Kind == codec.KindRequest &&
		(s.opts.Stateless || len(ctx.Request.Header.PeekCanonical(hdrSessionID)) == 0) && metaVersion(m.Params) != nil):
		// 2026-07-28: stateless, whatever the mode; Mcp-Session-Id is ignored.
		// A request is answered here when its headers do not match it,
		// or by another server when the cluster sends it there.
		if m.Kind == codec.KindRequest && (!s.checkStatelessHeaders(ctx, m) ||
			s.opts.Cluster != nil && s.opts.Cluster.RouteStateless(ctx, m)) {
			s.putCall(c)
			return
		}
		c.sess = s.eng.OpenStateless(discard{}).Session()
		c.sess.Transport = "http"
		c.sess.SetRemote(s.clientIP(ctx)) // its tasks' owner and share, per-address limits
	case s.opts.Stateless:
		c.sess = s.eng.Open(discard{}).Session()
		c.sess.Transport = "http"
		if m.Kind != codec.KindRequest || m.Method != mcp.MethodInitialize {
			c.sess.SetVersion(version, nil, nil)
		}
	default:
		sid := ctx.Request.Header.PeekCanonical(hdrSessionID)
		if len(sid) > 0 && s.opts.Cluster != nil && s.opts.Cluster.RouteSession(ctx, sid, m, subjectOf(ai)) {
			s.putCall(c)
			return
		}
		if len(sid) == 0 {
			if m.Kind != codec.KindRequest || m.Method != mcp.MethodInitialize {
				s.fail(ctx, fasthttp.StatusBadRequest, codeTransport, "Bad Request: Mcp-Session-Id header is required")
				s.putCall(c)
				return
			}
			h, err := s.newSession(s.clientIP(ctx))
			if err != nil {
				s.failLimit(ctx, err)
				s.putCall(c)
				return
			}
			c.h, created = h, true
		} else if h, err := s.find(sid); h == nil {
			if err != nil {
				s.unavailable(ctx)
			} else {
				s.sessionNotFound(ctx, "Session not found")
			}
			s.putCall(c)
			return
		} else {
			c.h = h
			c.h.posts.Add(1)
		}
		c.sess = c.h.sess
		defer c.h.posts.Add(-1) // evaluated now: c.h is reset before this runs
	}

	if !s.bindAuth(ctx, c.sess, ai) {
		s.putCall(c)
		return
	}
	kind := m.Kind
	c.idBuf = append(c.idBuf[:0], m.ID...)
	c.id = c.idBuf
	c.refs.Store(2) // the handler's and, once queued, the engine's (Final)
	if s.eng.Tracing() {
		c.traceParent = append(c.traceParent[:0], ctx.Request.Header.PeekCanonical(hdrTraceParent)...)
		c.traceState = append(c.traceState[:0], ctx.Request.Header.PeekCanonical(hdrTraceState)...)
	}
	out := codec.GetBuffer()
	var queued bool
	out.B, queued = s.eng.Conn(c.sess).HandleMessage(m, body, out.B, c)
	if !queued {
		if len(out.B) > 0 && c.answer == nil {
			c.answer, out = out, nil
		}
		if out != nil {
			codec.PutBuffer(out)
		}
		s.answer(ctx, c, kind, created)
		s.putCall(c)
		return
	}
	codec.PutBuffer(out)
	c.wait(ctx.Conn())
	c.mu.Lock()
	sse := c.mode == modeSSE
	c.mu.Unlock()
	if sse {
		s.respondSSE(ctx, c.st)
	} else {
		s.answer(ctx, c, kind, false)
	}
	c.unref()
}

// subjectOf returns whom ai names, "" when nil (no authorization).
func subjectOf(ai *auth.Info) string {
	if ai == nil {
		return ""
	}
	return ai.Subject
}

// answer responds to a POST answered without streaming: at once, or by
// its queued request's Final.
func (s *Server) answer(ctx *fasthttp.RequestCtx, c *call, kind codec.Kind, created bool) {
	status, retryAfter := c.status(kind, c.h != nil && c.sess.State() == session.StateClosed)
	switch {
	case status == fasthttp.StatusNotFound && c.answer == nil:
		s.sessionNotFound(ctx, msgEndedWhileServed)
		return
	case c.answer == nil:
		ctx.SetStatusCode(status)
		return
	case created && (c.refused != nil || status == fasthttp.StatusOK && c.sess.State() == session.StateNew):
		s.eng.Conn(c.sess).Close(session.ErrNotInitialized) // refused, or initialize failed
	case created && status == fasthttp.StatusOK:
		ctx.Response.Header.SetBytesKV(hdrSessionID, []byte(c.sess.ID()))
	}
	if retryAfter > 0 {
		ctx.Response.Header.SetBytesK(hdrRetryAfter, strconv.Itoa(retryAfter))
	}
	s.writeJSON(ctx, status, c.answer.B)
}

// msgEndedWhileServed is the 404's message for a request whose session
// ended while it was served.
const msgEndedWhileServed = "Session not found: it ended while the request was served"

// outcome is how the engine ended a POSTed message: its answer, or why
// it refused or rejected it. A call (post) and a direct call (direct.go)
// are answered from it alike (status).
type outcome struct {
	refused  *engine.LimitError // the engine refused the request (Refuse)
	rejected int                // a 2026-07-28 error answered with a status of its own (Reject)
	answer   *codec.Buffer
}

// refuse makes the answer the refusal of request id for err (the
// caller's lock held): see call.Refuse.
func (o *outcome) refuse(id []byte, err *engine.LimitError) {
	if o.answer == nil {
		o.answer = codec.GetBuffer()
	}
	o.answer.B = err.AppendAnswer(o.answer.B[:0], id)
	o.refused = err
}

// status returns the status of the answer to a message of kind that
// ended with o and streamed nothing, and the seconds of its Retry-After
// (0: none). closed tells that the request's session ended while it was
// served: with no answer, that is a 404 (whose body the caller writes);
// any other status with no answer has no body.
func (o *outcome) status(kind codec.Kind, closed bool) (status, retryAfter int) {
	switch {
	case kind != codec.KindRequest && kind != codec.KindInvalid:
		return fasthttp.StatusAccepted, 0 // a notification or a response
	case o.answer == nil && closed:
		return fasthttp.StatusNotFound, 0
	case o.answer == nil:
		return fasthttp.StatusAccepted, 0 // cancelled by the client: no answer is due
	case o.refused != nil:
		status = fasthttp.StatusServiceUnavailable
		if o.refused.ClientShare() {
			status = fasthttp.StatusTooManyRequests
		}
		secs := 1
		if d := o.refused.RetryAfter; d > time.Second {
			secs = int((d + time.Second - 1) / time.Second)
		}
		return status, secs
	case o.rejected != 0:
		return rejectStatus(o.rejected), 0
	case kind == codec.KindInvalid:
		return fasthttp.StatusBadRequest, 0
	}
	return fasthttp.StatusOK, 0
}

// decodeError answers a body that is not one JSON-RPC message with 400
// and the JSON-RPC error the engine gives on other transports.
func (s *Server) decodeError(ctx *fasthttp.RequestCtx, m *codec.Message, err error) {
	b := codec.GetBuffer()
	if b.B = codec.AppendDecodeError(b.B, m, err); len(b.B) == 0 { // an invalid notification
		b.B = codec.AppendError(b.B, nil, codec.CodeInvalidRequest, "invalid request: not a JSON-RPC 2.0 message", nil)
	}
	s.writeJSON(ctx, fasthttp.StatusBadRequest, b.B)
	codec.PutBuffer(b)
}

package http

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bytedance/sonic"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/internal/bytesconv"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
	"github.com/valyala/fasthttp"
)

// watchAfter is how long a POST waits for its answer before it starts
// watching the connection for the client going away.
const watchAfter = 20 * time.Millisecond

// handle routes a request.
func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	path := ctx.Path()
	switch {
	case bytes.Equal(path, s.path):
		if !s.checkHostOrigin(ctx) {
			return
		}
		switch {
		case ctx.IsPost():
			s.post(ctx)
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
			s.legacyGet(ctx)
		}
	case !s.opts.NoLegacySSE && bytes.Equal(path, s.msgPath):
		if s.checkHostOrigin(ctx) {
			s.legacyPost(ctx)
		}
	default:
		s.fail(ctx, fasthttp.StatusNotFound, codeTransport, "Not Found: the MCP endpoint is "+s.opts.Path)
	}
}

// mode is where a call's answer goes.
type mode uint8

const (
	modeWait mode = iota // nothing sent yet, or only the final answer
	modeSSE              // streaming on c.st
)

// call is one POSTed message being served. It is the reply sink the engine
// sends the request's messages to, and it decides how the POST is
// answered: when the first message is the request's answer, as JSON; when
// anything comes before it, as an SSE stream that carries everything, the
// answer last. Calls are pooled.
//
// Requests the engine answers itself and calls of NonBlocking tools run
// inline on the handler's goroutine. Others run ServeFrame on a goroutine
// of their own while the handler waits for the first message, since an SSE
// response can start only once the handler has returned.
type call struct {
	s    *Server
	h    *hsession // nil when stateless
	sess *session.Session

	msg   codec.Message
	body  []byte // the message (the worker's own copy)
	dec   []byte // decompressed request body
	idBuf []byte
	id    []byte // the request's raw id
	probe toolProbe

	ctx    context.Context
	cancel context.CancelCauseFunc
	inline bool

	mu     sync.Mutex
	mode   mode
	final  bool // the answer was sent
	served bool // ServeFrame returned

	refused *engine.LimitError // the engine refused the request (Refuse)
	kind    codec.Kind
	answer  *codec.Buffer
	rec     *streamRec // stateful SSE: the stream's record
	st      *stream    // SSE: the POST's own stream

	wake  chan struct{} // the handler's wake-up: streaming began, or ServeFrame returned
	timer *time.Timer
	refs  atomic.Int32
}

func (s *Server) getCall() *call { return s.calls.Get().(*call) }

func (s *Server) putCall(c *call) {
	if c.cancel != nil {
		c.cancel(nil)
	}
	if c.answer != nil {
		codec.PutBuffer(c.answer)
	}
	body, dec, idBuf := c.body[:0], c.dec[:0], c.idBuf[:0]
	if cap(body) > 64<<10 {
		body = nil
	}
	if cap(dec) > 64<<10 {
		dec = nil
	}
	c.probe = toolProbe{}
	c.h, c.sess, c.msg, c.body, c.dec, c.idBuf, c.id = nil, nil, codec.Message{}, body, dec, idBuf, nil
	c.ctx, c.cancel, c.inline = nil, nil, false
	c.mode, c.final, c.served, c.kind, c.answer, c.rec, c.st = modeWait, false, false, 0, nil, nil, nil
	c.refused = nil
	s.calls.Put(c)
}

func (c *call) unref() {
	if c.refs.Add(-1) == 0 {
		c.s.putCall(c)
	}
}

// answerHead starts every answer the engine encodes.
var answerHead = []byte(`{"jsonrpc":"2.0","id":`)

// answerKind classifies an outbound message of the request with raw id:
// 0 not its answer, 1 its result, 2 its error.
func answerKind(b, id []byte) int {
	if len(id) == 0 || !bytes.HasPrefix(b, answerHead) {
		return 0
	}
	rest := b[len(answerHead):]
	if !bytes.HasPrefix(rest, id) {
		return 0
	}
	rest = rest[len(id):]
	switch {
	case bytes.HasPrefix(rest, []byte(`,"result":`)):
		return 1
	case bytes.HasPrefix(rest, []byte(`,"error":`)):
		return 2
	}
	return 0
}

// Send implements session.Sink: the engine's messages for the request. It
// takes ownership of b.
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
	final := answerKind(b.B, c.id) != 0
	if c.mode == modeWait {
		if final {
			c.answer, c.final = b, true
			return nil
		}
		if c.inline {
			// Only a handler swapped in after inline chose this goroutine
			// can get here; it cannot stream from it.
			c.s.log.Debug("message dropped: request served inline", "session", c.sess.ID())
			codec.PutBuffer(b)
			return session.ErrClosed
		}
		c.startSSE()
	}
	c.final = final
	c.emit(b)
	return nil
}

// Refuse implements engine.Refuser: a request the engine refused for a
// limit is answered 429 (its session's or address's request rate, or its
// session's requests in flight) or 503 (the worker pool is full, or the
// server is draining) with Retry-After, rather than 200 with
// the JSON-RPC error, which is still the body. On a POST that is already
// streaming, the error is its stream's last event.
func (c *call) Refuse(id []byte, err *engine.LimitError) {
	b := codec.GetBuffer()
	b.B = err.AppendAnswer(b.B, id)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.final || c.served {
		codec.PutBuffer(b)
		return
	}
	if c.mode == modeSSE {
		c.final = true
		c.emit(b)
		return
	}
	c.answer, c.final, c.refused = b, true, err
}

// CloseStream implements engine.StreamCloser: the handler ends the POST's
// stream now (SSE polling); what the request sends later, its answer
// included, is stored for the client to fetch with GET and Last-Event-ID.
// Without a session to resume there is nothing to do.
func (c *call) CloseStream() {
	if c.inline || c.h == nil {
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
			c.rec = h.newRecLocked(c.id, c.cancel)
			st.prime(c.rec.id, h.seq)
			h.attachLocked(c.rec, st)
		}
		h.mu.Unlock()
	} else {
		st.cancel = c.cancel
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
		h.emitLocked(c.rec, b)
		if c.final {
			h.finishLocked(c.rec)
		}
	}
	h.mu.Unlock()
}

// done records that ServeFrame returned with kind.
func (c *call) done(kind codec.Kind) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.served, c.kind = true, kind
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
}

// work runs the request on the call's goroutine.
func (c *call) work() {
	kind := c.s.eng.Conn(c.sess).ServeFrame(c.ctx, c.body, c)
	if c.h == nil {
		c.s.eng.Conn(c.sess).Close(errStateless)
	} else {
		c.sess.Touch() // the session was in use until now
	}
	c.done(kind)
	c.unref()
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
	cancel := c.cancel
	w := watchConn(conn, func() { cancel(ErrClientGone) })
	<-c.wake
	w.stop()
}

// inline reports whether the engine answers m without handler code that
// may send anything but its answer, so that the handler's goroutine can
// serve it: every message but requests, the requests the engine answers
// itself, and tools/call of a tool registered NonBlocking (its handler
// cannot send to its client). Everything else, methods unknown here
// included, runs on a goroutine of its own.
func (s *Server) inline(c *call) bool {
	m := &c.msg
	if m.Kind != codec.KindRequest {
		return true
	}
	switch m.Method {
	case mcp.MethodInitialize, mcp.MethodPing, mcp.MethodToolsList, mcp.MethodResourcesList,
		mcp.MethodResourcesTemplatesList, mcp.MethodPromptsList, mcp.MethodLoggingSetLevel,
		mcp.MethodResourcesSubscribe, mcp.MethodResourcesUnsubscribe,
		mcp.MethodTasksGet, mcp.MethodTasksList, mcp.MethodTasksCancel:
		return true
	case mcp.MethodToolsCall:
		if len(m.Params) == 0 {
			return false
		}
		name, task, ok := scanToolProbe(m.Params)
		if !ok {
			p := &c.probe
			*p = toolProbe{}
			if codec.UnmarshalNoCopy(m.Params, p) != nil {
				return false
			}
			name, task = p.Name, len(p.Task) > 0 && string(p.Task) != "null"
		}
		if task {
			return false
		}
		o, ok := s.eng.Registry().ToolOptionsOf(name)
		return ok && o.NonBlocking
	}
	return false
}

var probeKeys = []string{"name", "task"}

// scanToolProbe reads the tool name and whether a task is asked for with
// the allocation-free scanner; ok is false when it cannot decide (an
// escape, a name that is not a string).
func scanToolProbe(params []byte) (name string, task, ok bool) {
	var v [2][]byte
	if codec.ObjectFields(params, probeKeys, v[:]) != nil || v[0] == nil {
		return "", false, false
	}
	b, err := codec.StringValue(v[0])
	if err != nil {
		return "", false, false
	}
	return bytesconv.B2S(b), v[1] != nil && string(v[1]) != "null", true
}

// toolProbe is what inline reads of tools/call params when the scanner
// cannot decide. It aliases the body.
type toolProbe struct {
	Name string                 `json:"name"`
	Task sonic.NoCopyRawMessage `json:"task"`
}

// post serves POST on the MCP endpoint: one JSON-RPC message.
func (s *Server) post(ctx *fasthttp.RequestCtx) {
	if ct := ctx.Request.Header.ContentType(); !mediaTypeIs(ct, ctJSON) {
		s.fail(ctx, fasthttp.StatusUnsupportedMediaType, codeTransport, "Unsupported Media Type: Content-Type must be application/json")
		return
	}
	if json, sse := accepts(ctx.Request.Header.PeekCanonical(hdrAccept)); !json || !sse {
		s.fail(ctx, fasthttp.StatusNotAcceptable, codeTransport, "Not Acceptable: Accept must admit both application/json and text/event-stream")
		return
	}
	version, ok := s.protocolVersion(ctx)
	if !ok {
		return
	}
	c := s.getCall()
	body, ok := s.requestBody(ctx, c)
	if !ok {
		s.putCall(c)
		return
	}
	m := &c.msg
	if err := codec.Decode(body, m); err != nil {
		s.decodeError(ctx, m, err)
		s.putCall(c)
		return
	}
	created := false
	switch {
	case s.opts.Stateless:
		c.sess = s.eng.Open(discard{}).Session()
		if m.Kind != codec.KindRequest || m.Method != mcp.MethodInitialize {
			c.sess.SetVersion(version, nil, nil)
		}
	default:
		sid := ctx.Request.Header.PeekCanonical(hdrSessionID)
		if len(sid) == 0 {
			if m.Kind != codec.KindRequest || m.Method != mcp.MethodInitialize {
				s.fail(ctx, fasthttp.StatusBadRequest, codeTransport, "Bad Request: Mcp-Session-Id header is required")
				s.putCall(c)
				return
			}
			h, err := s.newSession(addrIP(ctx.RemoteAddr()))
			if err != nil {
				s.failLimit(ctx, err)
				s.putCall(c)
				return
			}
			c.h, created = h, true
		} else if c.h = s.lookup(sid); c.h == nil {
			s.fail(ctx, fasthttp.StatusNotFound, codeSessionNotFound, "Session not found")
			s.putCall(c)
			return
		} else {
			c.h.posts.Add(1)
		}
		c.sess = c.h.sess
		defer c.h.posts.Add(-1) // evaluated now: c.h is reset before this runs
	}

	if s.inline(c) {
		c.inline, c.id = true, m.ID
		kind := s.eng.Conn(c.sess).ServeMessage(context.Background(), m, c)
		if c.h == nil {
			s.eng.Conn(c.sess).Close(errStateless)
		}
		s.answer(ctx, c, kind, created)
		s.putCall(c)
		return
	}

	c.body = append(c.body[:0], body...)
	c.idBuf = append(c.idBuf[:0], m.ID...)
	c.id = c.idBuf
	c.ctx, c.cancel = context.WithCancelCause(context.Background())
	c.refs.Store(2)
	go c.work()
	c.wait(ctx.Conn())
	c.mu.Lock()
	sse, kind := c.mode == modeSSE, c.kind
	c.mu.Unlock()
	if sse {
		s.respondSSE(ctx, c.st)
	} else {
		s.answer(ctx, c, kind, false)
	}
	c.unref()
}

// answer responds to a POST whose ServeFrame returned without streaming.
func (s *Server) answer(ctx *fasthttp.RequestCtx, c *call, kind codec.Kind, created bool) {
	switch {
	case kind != codec.KindRequest && kind != codec.KindInvalid:
		ctx.SetStatusCode(fasthttp.StatusAccepted) // a notification or a response
	case c.answer == nil:
		if c.sess.State() == session.StateClosed && c.h != nil {
			s.fail(ctx, fasthttp.StatusNotFound, codeSessionNotFound, "Session not found: it ended while the request was served")
			return
		}
		ctx.SetStatusCode(fasthttp.StatusAccepted) // cancelled by the client: no answer is due
	case c.refused != nil:
		if created {
			s.eng.Conn(c.sess).Close(session.ErrNotInitialized)
		}
		status := fasthttp.StatusServiceUnavailable
		switch c.refused.Limit {
		case engine.LimitRate, engine.LimitRateIP, engine.LimitInflight:
			status = fasthttp.StatusTooManyRequests
		}
		secs := int64(1)
		if d := c.refused.RetryAfter; d > time.Second {
			secs = int64((d + time.Second - 1) / time.Second)
		}
		ctx.Response.Header.SetBytesK(hdrRetryAfter, strconv.FormatInt(secs, 10))
		s.writeJSON(ctx, status, c.answer.B)
	case kind == codec.KindInvalid:
		s.writeJSON(ctx, fasthttp.StatusBadRequest, c.answer.B)
	default:
		if created {
			if answerKind(c.answer.B, c.id) == 1 {
				ctx.Response.Header.SetBytesKV(hdrSessionID, []byte(c.sess.ID()))
			} else {
				s.eng.Conn(c.sess).Close(session.ErrNotInitialized)
			}
		}
		s.writeJSON(ctx, fasthttp.StatusOK, c.answer.B)
	}
}

// decodeError answers a body that is not one JSON-RPC message with 400
// and the JSON-RPC error the engine would give.
func (s *Server) decodeError(ctx *fasthttp.RequestCtx, m *codec.Message, err error) {
	b := codec.GetBuffer()
	if err == codec.ErrParse {
		b.B = codec.AppendError(b.B, nil, codec.CodeParseError, "parse error: invalid JSON (the body must be one JSON-RPC message)", nil)
	} else {
		b.B = codec.AppendError(b.B, m.ID, codec.CodeInvalidRequest, "invalid request: not a JSON-RPC 2.0 message", nil)
	}
	s.writeJSON(ctx, fasthttp.StatusBadRequest, b.B)
	codec.PutBuffer(b)
}

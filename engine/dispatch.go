package engine

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/internal/bytesconv"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
)

var messages = sync.Pool{New: func() any { return new(codec.Message) }}

// routing holds the few params the event loop reads to route a request.
// Its strings alias the frame; it is pooled so that decoding into it does
// not allocate.
type routing struct {
	Cursor string    `json:"cursor"`
	URI    string    `json:"uri"`
	Name   string    `json:"name"`
	Task   *struct{} `json:"task"`
}

var routings = sync.Pool{New: func() any { return new(routing) }}

// decodeRouting decodes params into a pooled routing; put it back with
// putRouting once its strings are no longer needed.
func decodeRouting(params []byte) (*routing, error) {
	p := routings.Get().(*routing)
	*p = routing{}
	if len(params) == 0 {
		return p, nil
	}
	if err := codec.UnmarshalNoCopy(params, p); err != nil {
		routings.Put(p)
		return nil, err
	}
	return p, nil
}

// routeField reads the string field key of params without allocating, the
// common case. The string aliases params. ok is false when the scan cannot
// decide (an escape, a value that is not a string): callers then decode
// with decodeRouting, which also reports malformed params.
func routeField(params []byte, key string) (val string, ok bool) {
	if len(params) == 0 {
		return "", true
	}
	raw, found, err := codec.ObjectField(params, key)
	if err != nil {
		return "", false
	}
	if !found || string(raw) == "null" {
		return "", true
	}
	b, err := codec.StringValue(raw)
	if err != nil {
		return "", false
	}
	return bytesconv.B2S(b), true
}

func putRouting(p *routing) {
	*p = routing{}
	routings.Put(p)
}

// handleFrame is Conn.HandleFrame.
func (s *Server) handleFrame(sess *session.Session, frame []byte, out []byte) []byte {
	if len(frame) > 0 && (frame[0] == '[' || frame[0] <= ' ') { // a batch, maybe (batch.go)
		if res, ok := s.handleBatchFrame(sess, frame, out); ok {
			return res
		}
	}
	if s.opts.BigMessage > 0 && len(frame) > s.opts.BigMessage && s.handleBig(sess, frame) {
		return out
	}
	m := messages.Get().(*codec.Message)
	defer messages.Put(m)
	if err := s.decode(sess, frame, m); err != nil {
		return codec.AppendDecodeError(out, m, err)
	}
	out, _ = s.handleMessage(sess, m, frame, out, nil)
	return out
}

// decode is codec.Decode with panics contained.
func (s *Server) decode(sess *session.Session, frame []byte, m *codec.Message) (err error) {
	defer func() {
		if p := recover(); p != nil {
			s.recovered(p, "decode", sess, "")
			*m = codec.Message{}
			err = codec.ErrParse
		}
	}()
	return codec.Decode(frame, m)
}

// handleMessage is Conn.HandleMessage: the one path of every inbound
// message. m was decoded from frame; reply nil means the session's Out.
//
// Responses and notifications are handled at once. A request is answered
// at once, its answer appended to out, when it needs no handler code or
// calls a NonBlocking tool, or when it is refused (through reply's Refuse
// when reply is a Refuser). Any other request is queued: frame is copied
// once into a pooled request, m rebased onto the copy (with the tools/call
// fields already scanned), and the worker pool runs its handler (run).
func (s *Server) handleMessage(sess *session.Session, m *codec.Message, frame, out []byte, reply session.Sink) (res []byte, queued bool) {
	if s.obs != nil && m.Kind == codec.KindRequest {
		return s.handleObserved(sess, m, frame, out, reply) // observe.go
	}
	var f toolFields
	return s.handleMessageInner(sess, m, frame, out, reply, &f)
}

// handleMessageInner is handleMessage without the Observer. f receives
// the tools/call fields scanned, and whether a tool run at once answered
// with isError (handleObserved reads them).
func (s *Server) handleMessageInner(sess *session.Session, m *codec.Message, frame, out []byte, reply session.Sink, f *toolFields) (res []byte, queued bool) {
	start := len(out)
	defer func() {
		if p := recover(); p != nil {
			s.recovered(p, "HandleMessage", sess, m.Method)
			res, queued = s.panicAnswer(sess, m, out[:start]), false
		}
	}()
	if s.handleNonRequest(sess, m) {
		return out, false
	}
	var caller any
	if s.authz != nil {
		c, err := s.authorize(sess, m, false)
		switch {
		case err == ErrAuthWouldBlock:
			return s.deferRequest(sess, m, frame, out, reply)
		case err != nil:
			return codec.AppendErrorObject(out, m.ID, codec.AsError(err)), false
		}
		caller = c
	}
	if mayBeModern(sess, m) {
		if res, queued, ok := s.handleModern(sess, m, frame, out, reply, caller, f); ok {
			return res, queued
		}
	}
	if reply == nil {
		reply = sess.Out
	}
	if e := s.checkRate(sess); e != nil {
		return s.refuse(sess, out, reply, m.ID, e), false
	}
	if e := s.checkSubscriptions(sess, m); e != nil {
		return s.refuse(sess, out, reply, m.ID, e), false
	}
	if dst, ok := s.fast(sess, m, out, f); ok {
		return dst, false
	}
	return s.enqueue(sess, m, frame, out, reply, f, nil)
}

// enqueue queues the request m for a handler on the worker pool: frame is
// copied once into a pooled request, and m (with the tools/call fields f
// scanned, and a stateless request's _meta mm) rebased onto the copy. It
// appends a refusal to out, or reports queued.
func (s *Server) enqueue(sess *session.Session, m *codec.Message, frame, out []byte, reply session.Sink, f *toolFields, mm *modernMeta) ([]byte, bool) {
	r := s.newRequest(sess, reply)
	r.buf = append(r.buf[:0], frame...)
	rebase(&r.msg, m, frame, r.buf)
	r.tool = f.rebase(frame, r.buf)
	if s.obs != nil {
		r.obsStart = s.monotonic()
	}
	if mm != nil && mm.on {
		r.mod = *mm
		r.mod.rebase(frame, r.buf)
	}
	if dst, ok := s.admit(r, out); !ok {
		s.release(r)
		return dst, false
	}
	if err := s.pool.Invoke(r); err != nil {
		s.unadmit(r)
		s.release(r)
		return s.refuse(sess, out, reply, m.ID, errWorkers), false
	}
	return out, true
}

// admit takes r, a request about to be served by a handler, into the
// server's admission (refused while draining) and its session's in-flight
// set (refused over Options.MaxInflight, or for an id in flight already).
// On refusal it returns out with the refusal appended, or out as it is
// when the refusal went to a Refuser.
func (s *Server) admit(r *request, out []byte) ([]byte, bool) {
	id := r.msg.ID
	if !s.adm.admit() {
		return s.refuse(r.sess, out, r.reply, id, errShutdown), false
	}
	r.rc.reset(r.sess.Context())
	if s.authz != nil {
		r.rc.caller = r.caller()
	}
	r.ctx = &r.rc
	switch err := r.sess.Track(id, &r.rc, int(s.maxInflight.Load())); err {
	case nil:
		r.tracked = true
		return out, true
	case session.ErrInflightLimit:
		out = s.refuse(r.sess, out, r.reply, id, errInflight)
	case session.ErrDuplicateID:
		out = codec.AppendError(out, id, codec.CodeInvalidRequest, "invalid request: a request with this id is in flight", nil)
	default:
		out = codec.AppendError(out, id, codec.CodeInvalidRequest, "session closed", nil)
	}
	s.adm.done()
	return out, false
}

// unadmit undoes admit for a request that will not be served.
func (s *Server) unadmit(r *request) {
	r.sess.Done(r.msg.ID, &r.rc)
	r.sess.Answered()
	r.tracked = false
	s.adm.done()
}

// panicAnswer is what HandleFrame returns after recovering a panic while
// serving m: the request's error answer, or, for a message that gets no
// answer, nothing, and the session is closed.
func (s *Server) panicAnswer(sess *session.Session, m *codec.Message, out []byte) []byte {
	if m.Kind == codec.KindRequest && len(m.ID) > 0 {
		return codec.AppendError(out, m.ID, codec.CodeInternalError, "internal error", nil)
	}
	s.closeSession(sess, ErrPanic)
	return out
}

// handleBig hands a big frame to the worker pool whole, to be decoded and
// served there (serveBig). It reports false when the pool cannot take it;
// the caller then serves the frame itself, slowly but correctly.
func (s *Server) handleBig(sess *session.Session, frame []byte) bool {
	r := s.newRequest(sess, sess.Out)
	r.buf = append(r.buf[:0], frame...)
	r.big = true
	if s.obs != nil {
		r.obsStart = s.monotonic()
	}
	if err := s.pool.Invoke(r); err != nil {
		s.release(r)
		return false
	}
	return true
}

// serveBig decodes and serves, on a worker, a frame that handleBig (or
// deferRequest) handed over, as handleMessage would, but authorizing it
// with leave to block and running a handler on this worker rather than
// queueing it again. Every answer goes to r.reply: to its Final when it is
// a Replier, which is called once, here or by whatever serves the request.
func (s *Server) serveBig(r *request) {
	sess, m := r.sess, &r.msg
	b := codec.GetBuffer()
	queued := false // the answer is another's to deliver (run, enqueue)
	defer func() {
		if p := recover(); p != nil {
			s.recovered(p, "HandleFrame (big frame)", sess, m.Method)
			b.B = s.panicAnswer(sess, m, b.B[:0])
		}
		s.authDone(r)
		deliver(r.reply, b, queued)
	}()
	if err := s.decode(sess, r.buf, m); err != nil {
		b.B = codec.AppendDecodeError(b.B, m, err)
		return
	}
	if s.handleNonRequest(sess, m) {
		return
	}
	var caller any
	var f toolFields
	if s.authz != nil {
		c, err := s.authorize(sess, m, true)
		s.authDone(r)
		if err != nil {
			b.B = codec.AppendErrorObject(b.B, m.ID, codec.AsError(err))
			return
		}
		caller = c
	}
	if mayBeModern(sess, m) {
		if dst, q, ok := s.handleModern(sess, m, r.buf, b.B, r.reply, caller, &f); ok {
			b.B, queued = dst, q
			return
		}
	}
	if e := s.checkRate(sess); e != nil {
		b.B = s.refuse(sess, b.B, r.reply, m.ID, e)
		return
	}
	if e := s.checkSubscriptions(sess, m); e != nil {
		b.B = s.refuse(sess, b.B, r.reply, m.ID, e)
		return
	}
	if dst, ok := s.fast(sess, m, b.B, &f); ok {
		b.B = dst
		return
	}
	r.tool = f
	if dst, ok := s.admit(r, b.B); !ok {
		b.B = dst
		return
	}
	queued = true
	s.run(r)
}

// deliver hands b, what serveBig answered at once, to reply: to its Final
// when it is a Replier (nil for nothing), unless queued says that the
// request's answer is delivered by whatever serves it; else with Send
// when it is not empty.
func deliver(reply session.Sink, b *codec.Buffer, queued bool) {
	f, ok := reply.(Replier)
	if !ok {
		sendNonEmpty(reply, b)
		return
	}
	if queued || len(b.B) == 0 {
		codec.PutBuffer(b)
		b = nil
	}
	if !queued {
		f.Final(b)
	}
}

// sendNonEmpty sends b to sink, or recycles it when it is empty.
func sendNonEmpty(sink session.Sink, b *codec.Buffer) {
	if len(b.B) == 0 {
		codec.PutBuffer(b)
		return
	}
	_ = sink.Send(b)
}

// rebase sets dst to src with every slice that points into old moved to
// its copy nw (same length, same bytes): the frame is decoded once, on the
// transport's goroutine, and the pool works on the copy. A slice outside
// old is kept as it is: the decoder made it in memory of its own (it
// corrects invalid UTF-8 in a copy of the frame, and unescapes strings
// into new memory), so it stays valid when the frame is reused.
func rebase(dst, src *codec.Message, old, nw []byte) {
	mv := mover{old: old, nw: nw}
	*dst = *src
	dst.ID, dst.Params, dst.Result, dst.Error = mv.move(src.ID), mv.move(src.Params), mv.move(src.Result), mv.move(src.Error)
	if len(src.Method) > 0 {
		if off, ok := mv.inside(unsafe.Pointer(unsafe.StringData(src.Method)), len(src.Method)); ok {
			dst.Method = unsafe.String(&nw[off], len(src.Method))
		}
	}
	dst.JSONRPC = ""
}

// mover moves slices of old to the same place in nw.
type mover struct{ old, nw []byte }

func (mv mover) inside(p unsafe.Pointer, n int) (uintptr, bool) {
	base := uintptr(unsafe.Pointer(unsafe.SliceData(mv.old)))
	q := uintptr(p)
	return q - base, q >= base && q+uintptr(n) <= base+uintptr(len(mv.old))
}

func (mv mover) move(b []byte) []byte {
	if b == nil {
		return nil
	}
	off, ok := mv.inside(unsafe.Pointer(unsafe.SliceData(b)), len(b))
	if !ok {
		return b
	}
	return mv.nw[off : off+uintptr(len(b)) : off+uintptr(len(b))]
}

// handleNonRequest records activity on sess and handles m if it is a
// response or a notification, which get no answer. It reports whether it
// did; requests are left to the caller.
func (s *Server) handleNonRequest(sess *session.Session, m *codec.Message) bool {
	sess.Touch()
	switch m.Kind {
	case codec.KindResponse, codec.KindError:
		s.handleResponse(sess, m)
		return true
	case codec.KindNotification:
		s.handleNotification(sess, m)
		return true
	}
	return false
}

// fast answers the requests that need no handler code, appending the answer
// to dst, through the receiving middleware when there is some. It reports
// false for requests that must go to a handler.
//
// For tools/call, it leaves in f the params' fields it scanned, so that a
// call it does not answer is not scanned again.
func (s *Server) fast(sess *session.Session, m *codec.Message, dst []byte, f *toolFields) ([]byte, bool) {
	if s.receiveFast != nil && m.Method != mcp.MethodToolsCall && s.answersItself(sess, m) {
		return s.fastThrough(sess, m, dst), true
	}
	return s.fastDirect(sess, m, dst, f)
}

// fastDirect is fast without middleware.
func (s *Server) fastDirect(sess *session.Session, m *codec.Message, dst []byte, f *toolFields) ([]byte, bool) {
	switch m.Method {
	case mcp.MethodPing:
		return codec.AppendResult(dst, m.ID, nil), true
	case mcp.MethodInitialize:
		return s.initialize(sess, m, dst), true
	}
	if !sess.Initialized() {
		if sess.State() == session.StateClosed {
			if s.adm.closing() { // closed by Shutdown: a retry elsewhere may succeed
				return errShutdown.AppendAnswer(dst, m.ID), true
			}
			return codec.AppendError(dst, m.ID, codec.CodeInvalidRequest, "session closed", nil), true
		}
		return codec.AppendError(dst, m.ID, codec.CodeInvalidRequest, "session not initialized: send initialize first", nil), true
	}
	switch m.Method {
	case mcp.MethodToolsList:
		return s.listPage(handlers.ListNameTools, m, dst, s.sessionClass(sess)), true
	case mcp.MethodResourcesList:
		return s.listPage(handlers.ListNameResources, m, dst, s.sessionClass(sess)), true
	case mcp.MethodResourcesTemplatesList:
		return s.listPage(handlers.ListNameTemplates, m, dst, s.sessionClass(sess)), true
	case mcp.MethodPromptsList:
		return s.listPage(handlers.ListNamePrompts, m, dst, s.sessionClass(sess)), true
	case mcp.MethodLoggingSetLevel:
		return s.setLevel(sess, m, dst), true
	case mcp.MethodResourcesSubscribe:
		return s.subscribe(sess, m, dst), true
	case mcp.MethodResourcesUnsubscribe:
		return s.unsubscribe(sess, m, dst), true
	case mcp.MethodToolsCall:
		return s.inlineTool(sess, m, dst, f, nil, nil)
	case mcp.MethodTasksGet, mcp.MethodTasksList, mcp.MethodTasksCancel:
		return s.legacyTaskMethod(sess, m, dst), true
	case mcp.MethodResourcesRead:
		if res, ok := s.staticRead(m, s.sessionClass(sess)); ok {
			return codec.AppendResult(dst, m.ID, res), true
		}
	}
	return dst, false
}

// sessionClass returns the policy class of the caller of sess (class),
// for a request of an older revision, whose caller is its session's.
func (s *Server) sessionClass(sess *session.Session) handlers.Class {
	if s.policy == nil {
		return nil
	}
	return s.policy.Class(sess.Auth())
}

// staticRead returns the result of resources/read m when it reads a static
// resource that class c allows (nil: any): a hidden one is left to the
// handler path, which answers it as a URI nothing serves.
func (s *Server) staticRead(m *codec.Message, c handlers.Class) ([]byte, bool) {
	uri, ok := routeField(m.Params, "uri")
	if !ok {
		p, err := decodeRouting(m.Params)
		if err != nil {
			return nil, false // the handler path reports it
		}
		defer putRouting(p)
		uri = p.URI
	}
	if c != nil && !s.reg.Allowed(c, handlers.ListNameResources, uri) {
		return nil, false
	}
	return s.reg.StaticResourceResult(uri)
}

// inlineTool runs a tools/call of a NonBlocking tool on the caller's
// goroutine (the event loop), appending its answer to dst. It reports false
// for every other tool, and for task-augmented calls, leaving in f what it
// scanned of the params.
// For a 2026-07-28 request, mm is its _meta and reply its reply sink,
// told of an error its binding answers with a status (Rejecter).
func (s *Server) inlineTool(sess *session.Session, m *codec.Message, dst []byte, f *toolFields, mm *modernMeta, reply session.Sink) ([]byte, bool) {
	var name string
	if f.ok || f.scan(m.Params) {
		name = bytesconv.B2S(f.name)
	} else {
		p, err := decodeRouting(m.Params)
		if err != nil {
			return dst, false
		}
		defer putRouting(p)
		if p.Task != nil {
			return dst, false
		}
		name = p.Name
	}
	if o, ok := s.reg.ToolOptionsOf(name); !ok || !o.NonBlocking {
		return dst, false
	}
	if s.policy != nil && !s.reg.Allowed(s.class(callerOf(sess, mm)), handlers.ListNameTools, name) {
		return dst, false // callTool answers it as a tool that does not exist
	}
	if mm != nil && mm.on {
		// A tool that supports tasks may become one (modernToolTask).
		if t, ok := s.reg.Tool(name); ok && t.Execution != nil && t.Execution.TaskSupport != "" && t.Execution.TaskSupport != mcp.TaskForbidden {
			return dst, false
		}
	}
	r := s.newRequest(sess, nil)
	r.tool = *f
	r.inline = true
	r.msg = *m
	if mm != nil {
		r.mod, r.rej = *mm, reply
	}
	r.ctx = sess.Context()
	if s.authz != nil {
		r.ctx = WithCaller(r.ctx, r.caller())
	}
	s.active.Add(1)
	dst = s.serve(r, dst)
	s.active.Add(-1)
	f.isError = r.toolErr
	s.release(r)
	return dst, true
}

// listPage appends the answer to a list request m: the page its cursor
// names of the list as class c sees it (nil: the whole list).
func (s *Server) listPage(list handlers.ListName, m *codec.Message, dst []byte, c handlers.Class) []byte {
	cursor, ok := routeField(m.Params, "cursor")
	if !ok {
		p, err := decodeRouting(m.Params)
		if err != nil {
			return codec.AppendErrorObject(dst, m.ID, paramsError(m.Method+" params", m.Params, &routing{}))
		}
		cursor = p.Cursor
		defer putRouting(p)
	}
	page, err := s.reg.ListPageFor(c, list, cursor)
	if err != nil {
		return codec.AppendErrorObject(dst, m.ID, codec.AsError(err))
	}
	return codec.AppendResult(dst, m.ID, page)
}

func (s *Server) setLevel(sess *session.Session, m *codec.Message, dst []byte) []byte {
	var p mcp.SetLevelParams
	if len(m.Params) == 0 || codec.UnmarshalNoCopy(m.Params, &p) != nil {
		return codec.AppendError(dst, m.ID, codec.CodeInvalidParams, "invalid params: logging/setLevel needs a level", nil)
	}
	i := mcp.LogLevelIndex(p.Level)
	if i < 0 {
		return codec.AppendError(dst, m.ID, codec.CodeInvalidParams, "invalid params: level must be one of "+strings.Join(mcp.LogLevels[:], ", "), nil)
	}
	sess.SetLogLevel(i)
	return codec.AppendResult(dst, m.ID, nil)
}

// maxSubscriptionURI bounds the URI of a subscription, which the session
// and the bus keep as long as the subscription lives.
const maxSubscriptionURI = 8 << 10

var errLongURI = "invalid params: uri longer than " + strconv.Itoa(maxSubscriptionURI) + " bytes"

// subscribe serves resources/subscribe: one bus subscription per URI and
// session, within the session's Options.MaxSubscriptions.
func (s *Server) subscribe(sess *session.Session, m *codec.Message, dst []byte) []byte {
	var p mcp.SubscribeParams
	if len(m.Params) == 0 || codec.UnmarshalNoCopy(m.Params, &p) != nil || p.URI == "" {
		return codec.AppendError(dst, m.ID, codec.CodeInvalidParams, "invalid params: resources/subscribe needs a uri", nil)
	}
	if len(p.URI) > maxSubscriptionURI {
		return codec.AppendError(dst, m.ID, codec.CodeInvalidParams, errLongURI, nil)
	}
	if c := s.sessionClass(sess); c != nil {
		// A URI the caller may not read, hidden or served by nothing
		// alike: nothing to subscribe to.
		if err := s.reg.CheckRead(c, p.URI); err != nil {
			return codec.AppendErrorObject(dst, m.ID, codec.AsError(err))
		}
	}
	if sess.Subscribed(p.URI) {
		return codec.AppendResult(dst, m.ID, nil)
	}
	max := int(s.maxSubs.Load())
	if !sess.CanSubscribe(p.URI, max) {
		return errSubs.AppendAnswer(dst, m.ID)
	}
	// One copy of the URI (p.URI aliases the frame): the topic, which
	// the session's key shares.
	topic := session.TopicResourceUpdated + p.URI
	out := sess.Out
	unsub := s.bus.Subscribe(topic, func(_ string, uriJSON []byte) {
		b := codec.GetBuffer()
		b.B = append(b.B, `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":`...)
		b.B = append(b.B, uriJSON...)
		b.B = append(b.B, "}}"...)
		_ = s.sendTo(sess, out, mcp.NotificationResourceUpdated, b)
	})
	if sess.Subscribe(topic[len(session.TopicResourceUpdated):], unsub, max) == session.ErrSubscriptionLimit {
		return errSubs.AppendAnswer(dst, m.ID) // a concurrent subscribe took the last place
	}
	return codec.AppendResult(dst, m.ID, nil)
}

// checkSubscriptions refuses, before dispatch, a resources/subscribe from a
// session that holds as many subscriptions as it may, so that a reply sink
// that answers limits in its own terms (Refuser: HTTP 429) does. subscribe
// checks again, under the session's lock.
func (s *Server) checkSubscriptions(sess *session.Session, m *codec.Message) *LimitError {
	if m.Method != mcp.MethodResourcesSubscribe {
		return nil
	}
	max := int(s.maxSubs.Load())
	if max <= 0 || sess.Subscriptions() < max {
		return nil
	}
	if uri, ok := routeField(m.Params, "uri"); !ok || uri == "" || sess.Subscribed(uri) {
		return nil // subscribe answers it
	}
	return errSubs
}

func (s *Server) unsubscribe(sess *session.Session, m *codec.Message, dst []byte) []byte {
	var p mcp.SubscribeParams
	if len(m.Params) == 0 || codec.UnmarshalNoCopy(m.Params, &p) != nil || p.URI == "" {
		return codec.AppendError(dst, m.ID, codec.CodeInvalidParams, "invalid params: resources/unsubscribe needs a uri", nil)
	}
	sess.Unsubscribe(p.URI)
	return codec.AppendResult(dst, m.ID, nil)
}

func (s *Server) initialize(sess *session.Session, m *codec.Message, dst []byte) []byte {
	var p mcp.InitializeParams
	if len(m.Params) == 0 {
		return codec.AppendError(dst, m.ID, codec.CodeInvalidParams, "invalid params: initialize needs params", nil)
	}
	if err := codec.Unmarshal(m.Params, &p); err != nil {
		return codec.AppendErrorObject(dst, m.ID, paramsError("initialize params", m.Params, &p))
	}
	if p.ProtocolVersion == "" {
		return codec.AppendError(dst, m.ID, codec.CodeInvalidParams, "invalid params: initialize needs protocolVersion", nil)
	}
	version := s.offer.negotiate(p.ProtocolVersion)
	if version == "" {
		// A server of 2026-07-28 only: the error names what it offers,
		// the only diagnostic an older client has (versioning.mdx).
		return codec.AppendErrorObject(dst, m.ID, s.offer.unsupported(p.ProtocolVersion))
	}
	version, err := sess.InitializeAs(&p, version)
	if err != nil {
		return codec.AppendError(dst, m.ID, codec.CodeInvalidRequest, "invalid request: session already initialized", nil)
	}
	res := mcp.InitializeResult{
		ProtocolVersion: version,
		Capabilities:    s.capabilitiesFor(version),
		ServerInfo:      implementationFor(mcp.Implementation{Name: s.opts.Name, Title: s.opts.Title, Version: s.opts.Version}, version),
		Instructions:    s.Instructions(),
	}
	body, err := codec.Marshal(&res)
	if err != nil {
		return codec.AppendError(dst, m.ID, codec.CodeInternalError, "internal error: encoding the initialize result", nil)
	}
	return codec.AppendResult(dst, m.ID, body)
}

// Capabilities returns what the server advertises: the features its
// registry serves now, and logging.
func (s *Server) Capabilities() mcp.ServerCapabilities {
	c := mcp.ServerCapabilities{Logging: &struct{}{}}
	if s.reg.Len(handlers.ListNameTools) > 0 {
		c.Tools = &mcp.ListChangedCap{ListChanged: true}
	}
	if s.reg.Len(handlers.ListNameResources) > 0 || s.reg.Len(handlers.ListNameTemplates) > 0 {
		c.Resources = &mcp.ResourcesCapability{Subscribe: true, ListChanged: true}
	}
	if s.reg.Len(handlers.ListNamePrompts) > 0 {
		c.Prompts = &mcp.ListChangedCap{ListChanged: true}
	}
	if s.reg.HasCompletions() {
		c.Completions = &struct{}{}
	}
	if c.Tools != nil {
		c.Tasks = &mcp.TasksCapability{
			List:   &struct{}{},
			Cancel: &struct{}{},
			Requests: &mcp.TaskRequestsCaps{Tools: &struct {
				Call *struct{} `json:"call,omitempty"`
			}{Call: &struct{}{}}},
		}
	}
	return c
}

func (s *Server) handleNotification(sess *session.Session, m *codec.Message) {
	switch m.Method {
	case mcp.NotificationInitialized:
		sess.MarkReady()
	case mcp.NotificationCancelled:
		var p struct {
			RequestID codec.RawJSON `json:"requestId"`
		}
		if len(m.Params) > 0 && codec.UnmarshalNoCopy(m.Params, &p) == nil && len(p.RequestID) > 0 {
			sess.CancelRequest(p.RequestID, nil)
		}
	case mcp.NotificationRootsListChanged:
		if f := s.opts.OnRootsListChanged; f != nil {
			f(sess)
		}
	case mcp.NotificationProgress:
		// Progress from the client about a request of ours needs no answer.
	default:
		s.log.Debug("unknown notification ignored", "session", sess.ID(), "method", m.Method)
	}
}

func (s *Server) handleResponse(sess *session.Session, m *codec.Message) {
	var errObj []byte
	if m.Kind == codec.KindError {
		errObj = m.Error
	}
	if err := sess.Tracker.Resolve(m.ID, m.Result, errObj); err != nil && s.log.Enabled(context.Background(), slog.LevelDebug) {
		s.log.Debug("response with unknown id ignored", "session", sess.ID(), "id", string(m.ID))
	}
}

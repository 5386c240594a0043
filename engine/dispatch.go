package engine

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"

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
// message (route), with a request's end told to the Observer, and traced,
// when it is answered at once (observe.go).
func (s *Server) handleMessage(sess *session.Session, m *codec.Message, frame, out []byte, reply session.Sink) (res []byte, queued bool) {
	if s.watch && m.Kind == codec.KindRequest { // an Observer or a Tracer
		return s.handleObserved(sess, m, frame, out, reply)
	}
	var f toolFields
	res, _, queued = s.route(sess, m, frame, out, reply, nil, &f)
	return res, queued
}

// route serves m, decoded from frame; reply nil means the session's Out.
// It is the path of every message, on every transport and revision.
//
// Responses and notifications are handled at once. A request is
// authorized first (Options.Authorize), then looked up in the method
// table: a request of the stateless revision goes to handleStateless,
// one of a session passes the rate limits and is answered at once, its
// answer appended to out, when it needs no handler code or calls a
// NonBlocking tool (fast), or when it is refused (through reply's Refuse
// when reply is a Refuser). Any other request is queued (enqueue): frame
// is copied once into a pooled request, m rebased onto the copy (with the
// tools/call fields already scanned), and the worker pool runs its
// handler (run). code is the JSON-RPC error code of an answer given at
// once (0: a result). f receives the tools/call fields scanned, and
// whether a tool run at once answered with isError (handleObserved reads
// them).
//
// here is not nil when m is the message of a request already on a worker
// (serveBig: a big frame, or a request whose authorization would have
// blocked its event loop), which frame is the buffer of: it is authorized
// with leave to block, and a request for a handler is served by here, on
// this worker, rather than queued again.
func (s *Server) route(sess *session.Session, m *codec.Message, frame, out []byte, reply session.Sink, here *request, f *toolFields) (res []byte, code int, queued bool) {
	start := len(out)
	defer func() {
		if p := recover(); p != nil {
			where := "HandleMessage"
			if here != nil {
				where = "HandleFrame (big frame)"
			}
			s.recovered(p, where, sess, m.Method)
			res, code, queued = s.panicAnswer(sess, m, out[:start]), codec.CodeInternalError, false
		}
	}()
	if s.handleNonRequest(sess, m) {
		return out, 0, false
	}
	var caller any
	if s.authz != nil {
		c, err := s.authorize(sess, m, here != nil)
		if here != nil {
			s.authDone(here)
		}
		switch {
		case err == ErrAuthWouldBlock && here == nil:
			return s.deferRequest(sess, m, frame, out, reply)
		case err != nil:
			out, code := errObject(out, m.ID, codec.AsError(err))
			return out, code, false
		}
		caller = c
	}
	row := lookup(m.Method)
	if mayBeStateless(sess, row) {
		if res, code, queued, ok := s.handleStateless(sess, m, row, frame, out, reply, caller, here, f); ok {
			return res, code, queued
		}
	}
	if reply == nil {
		reply = sess.Out
	}
	if e := s.checkRate(sess, caller); e != nil {
		return s.refuse(sess, out, reply, m.ID, e), codec.CodeServerBusy, false
	}
	row = sessionRow(sess, row)
	switch row.now {
	case opSubscribe:
		if e := s.checkSubscriptions(sess, m); e != nil {
			return s.refuse(sess, out, reply, m.ID, e), codec.CodeServerBusy, false
		}
		if s.receiveFast == nil && sess.Initialized() {
			dst, code, e := s.subscribeOrLimit(sess, m, out)
			if e != nil {
				return s.refuse(sess, out, reply, m.ID, e), codec.CodeServerBusy, false
			}
			return dst, code, false
		}
	case opInlineTool:
		if e := s.checkToolCall(m, f); e != nil {
			return s.refuse(sess, out, reply, m.ID, e), codec.CodeServerBusy, false
		}
		defer toolDone(f) // unless a request took the call's place
	}
	if dst, code, ok := s.fast(sess, m, row, out, f); ok {
		return dst, code, false
	}
	return s.enqueue(sess, m, row, frame, out, reply, f, nil, here)
}

// The -32600 refusals of a request that cannot be tracked.
const (
	errDuplicateID   = "invalid request: a request with this id is in flight"
	errSessionClosed = "session closed"
)

// errObject appends the error answer e to request id and returns its
// code; errAnswer does so for an error without data.
func errObject(dst, id []byte, e *codec.Error) ([]byte, int) {
	return codec.AppendErrorObject(dst, id, e), e.Code
}

func errAnswer(dst, id []byte, code int, msg string) ([]byte, int) {
	return codec.AppendError(dst, id, code, msg, nil), code
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

// rebase sets dst to src with every slice that points into old moved to
// its copy nw (same length, same bytes): the frame is decoded once, on the
// transport's goroutine, and the pool works on the copy (codec.Mover).
func rebase(dst, src *codec.Message, old, nw []byte) {
	*dst = *src
	dst.Rebase(old, nw)
	dst.JSONRPC = ""
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

// fast answers the requests of a session that need no handler code
// (row.now), appending the answer to dst, through the receiving
// middleware when there is some, and returns the answer's code. It
// reports false for requests that must go to a handler.
//
// For tools/call, it leaves in f the params' fields it scanned, so that a
// call it does not answer is not scanned again.
func (s *Server) fast(sess *session.Session, m *codec.Message, row *method, dst []byte, f *toolFields) ([]byte, int, bool) {
	if s.receiveFast != nil && s.answersItself(sess, m, row) {
		dst, code := s.fastThrough(sess, m, row, dst)
		return dst, code, true
	}
	return s.fastDirect(sess, m, row, dst, f)
}

// fastDirect is fast without middleware: the one switch over what a
// session's requests are answered with at once.
func (s *Server) fastDirect(sess *session.Session, m *codec.Message, row *method, dst []byte, f *toolFields) ([]byte, int, bool) {
	if !row.early && !sess.Initialized() {
		if sess.State() == session.StateClosed {
			if s.adm.closing() { // closed by Shutdown: a retry elsewhere may succeed
				return errShutdown.AppendAnswer(dst, m.ID), codec.CodeServerBusy, true
			}
			dst, code := errAnswer(dst, m.ID, codec.CodeInvalidRequest, errSessionClosed)
			return dst, code, true
		}
		dst, code := errAnswer(dst, m.ID, codec.CodeInvalidRequest, "session not initialized: send initialize first")
		return dst, code, true
	}
	var code int
	switch row.now {
	case opPing:
		dst = codec.AppendResult(dst, m.ID, nil)
	case opInitialize:
		dst, code = s.initialize(sess, m, dst)
	case opListPage:
		dst, code = s.listPage(row.list, m, dst, s.sessionClass(sess), nil)
	case opSetLevel:
		dst, code = s.setLevel(sess, m, dst)
	case opSubscribe:
		dst, code = s.subscribe(sess, m, dst)
	case opUnsubscribe:
		dst, code = s.unsubscribe(sess, m, dst)
	case opSessionTask:
		dst, code = s.sessionTaskMethod(sess, m, dst)
	case opInlineTool:
		return s.inlineTool(sess, m, row, dst, f, nil, nil)
	case opStaticRead:
		res, ok := s.staticRead(m, s.sessionClass(sess))
		if !ok {
			return dst, 0, false
		}
		dst = codec.AppendResult(dst, m.ID, res)
	default:
		return dst, 0, false
	}
	return dst, code, true
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
// told of an error its binding answers with a status (Rejecter). It
// returns the answer's code.
func (s *Server) inlineTool(sess *session.Session, m *codec.Message, row *method, dst []byte, f *toolFields, mm *statelessMeta, reply session.Sink) ([]byte, int, bool) {
	var name string
	if f.ok || f.scan(m.Params) {
		name = bytesconv.B2S(f.name)
	} else {
		p, err := decodeRouting(m.Params)
		if err != nil {
			return dst, 0, false
		}
		defer putRouting(p)
		if p.Task != nil {
			return dst, 0, false
		}
		name = p.Name
	}
	if o, ok := s.reg.ToolOptionsOf(name); !ok || !o.NonBlocking {
		return dst, 0, false
	}
	if s.policy != nil && !s.reg.Allowed(s.class(callerOf(sess, mm)), handlers.ListNameTools, name) {
		return dst, 0, false // callTool answers it as a tool that does not exist
	}
	if mm != nil && mm.on {
		// A tool that supports tasks may become one (toolTask).
		if t, ok := s.reg.Tool(name); ok && t.Execution != nil && t.Execution.TaskSupport != "" && t.Execution.TaskSupport != mcp.TaskForbidden {
			return dst, 0, false
		}
	}
	r := s.newRequest(sess, nil)
	r.tool = *f
	r.tool.lim = nil // the caller (route) holds the call's place
	r.row = row
	r.inline = true
	r.msg = *m
	if mm != nil {
		r.stateless, r.rej = *mm, reply
	}
	r.ctx = sess.Context()
	if s.authz != nil {
		r.ctx = WithCaller(r.ctx, r.caller())
	}
	s.active.Add(1)
	dst, code := s.serve(r, dst)
	s.active.Add(-1)
	f.isError = r.toolErr
	s.release(r)
	return dst, code, true
}

// listPage answers a list request m with the page its cursor names of
// the list as class c sees it (nil: the whole list), and the answer's
// code. tail, when not nil, completes the result as a 2026-07-28 result
// with the list's cache hint (appendTail).
func (s *Server) listPage(list handlers.ListName, m *codec.Message, dst []byte, c handlers.Class, tail *handlers.CacheHint) ([]byte, int) {
	cursor, ok := routeField(m.Params, "cursor")
	if !ok {
		p, err := decodeRouting(m.Params)
		if err != nil {
			return errObject(dst, m.ID, paramsError(m.Method+" params", m.Params, &routing{}))
		}
		cursor = p.Cursor
		defer putRouting(p)
	}
	page, err := s.reg.ListPageFor(c, list, cursor)
	if err != nil {
		return errObject(dst, m.ID, codec.AsError(err))
	}
	if tail == nil {
		return codec.AppendResult(dst, m.ID, page), 0
	}
	// A page is an object of the registry's making, with none of the
	// members the tail adds.
	dst = codec.AppendResultStart(dst, m.ID)
	dst = append(dst, page[:len(page)-1]...)
	dst = s.appendTail(dst, len(page) > 2, tail, true, true)
	return append(dst, "}}"...), 0
}

func (s *Server) setLevel(sess *session.Session, m *codec.Message, dst []byte) ([]byte, int) {
	var p mcp.SetLevelParams
	if len(m.Params) == 0 || codec.UnmarshalNoCopy(m.Params, &p) != nil {
		return errAnswer(dst, m.ID, codec.CodeInvalidParams, "invalid params: logging/setLevel needs a level")
	}
	i := mcp.LogLevelIndex(p.Level)
	if i < 0 {
		return errAnswer(dst, m.ID, codec.CodeInvalidParams, "invalid params: level must be one of "+strings.Join(mcp.LogLevels[:], ", "))
	}
	sess.SetLogLevel(i)
	return codec.AppendResult(dst, m.ID, nil), 0
}

// maxSubscriptionURI bounds the URI of a subscription, which the session
// and the bus keep as long as the subscription lives.
const maxSubscriptionURI = 8 << 10

var errLongURI = "invalid params: uri longer than " + strconv.Itoa(maxSubscriptionURI) + " bytes"

// subscribe serves resources/subscribe: one bus subscription per URI and
// session, within the session's Options.MaxSubscriptions.
func (s *Server) subscribe(sess *session.Session, m *codec.Message, dst []byte) ([]byte, int) {
	dst, code, e := s.subscribeOrLimit(sess, m, dst)
	if e != nil {
		return e.AppendAnswer(dst, m.ID), codec.CodeServerBusy
	}
	return dst, code
}

// subscribeOrLimit is subscribe, but a refusal for the session's
// subscriptions limit is returned, not appended, so that route hands it
// to a reply sink that answers limits in its own terms (Refuser: HTTP
// 429) even when a concurrent subscribe took the last place after
// checkSubscriptions.
func (s *Server) subscribeOrLimit(sess *session.Session, m *codec.Message, dst []byte) ([]byte, int, *LimitError) {
	var p mcp.SubscribeParams
	if len(m.Params) == 0 || codec.UnmarshalNoCopy(m.Params, &p) != nil || p.URI == "" {
		dst, code := errAnswer(dst, m.ID, codec.CodeInvalidParams, "invalid params: resources/subscribe needs a uri")
		return dst, code, nil
	}
	if len(p.URI) > maxSubscriptionURI {
		dst, code := errAnswer(dst, m.ID, codec.CodeInvalidParams, errLongURI)
		return dst, code, nil
	}
	if c := s.sessionClass(sess); c != nil {
		// A URI the caller may not read, hidden or served by nothing
		// alike: nothing to subscribe to.
		if err := s.reg.CheckRead(c, p.URI); err != nil {
			dst, code := errObject(dst, m.ID, codec.AsError(err))
			return dst, code, nil
		}
	}
	if sess.Subscribed(p.URI) {
		return codec.AppendResult(dst, m.ID, nil), 0, nil
	}
	max := int(s.maxSubs.Load())
	if !sess.CanSubscribe(p.URI, max) {
		return dst, 0, errSubs
	}
	if s.subscribeURI(sess, p.URI, max) == session.ErrSubscriptionLimit {
		return dst, 0, errSubs // a concurrent subscribe took the last place
	}
	return codec.AppendResult(dst, m.ID, nil), 0, nil
}

// subscribeURI subscribes sess to the updates of uri on the bus, within
// max subscriptions (session.Session.Subscribe). uri may alias a frame:
// it is copied once, into the topic, which the session's key shares.
func (s *Server) subscribeURI(sess *session.Session, uri string, max int) error {
	topic := session.TopicResourceUpdated + uri
	out := sess.Out
	unsub := s.bus.Subscribe(topic, func(_ string, uriJSON []byte) {
		b := codec.GetBuffer()
		b.B = append(b.B, `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":`...)
		b.B = append(b.B, uriJSON...)
		b.B = append(b.B, "}}"...)
		_ = s.sendTo(sess, out, mcp.NotificationResourceUpdated, b)
	})
	return sess.Subscribe(topic[len(session.TopicResourceUpdated):], unsub, max)
}

// checkSubscriptions refuses, before dispatch, a resources/subscribe from a
// session that holds as many subscriptions as it may, so that a reply sink
// that answers limits in its own terms (Refuser: HTTP 429) does. subscribe
// checks again, under the session's lock.
func (s *Server) checkSubscriptions(sess *session.Session, m *codec.Message) *LimitError {
	max := int(s.maxSubs.Load())
	if max <= 0 || sess.Subscriptions() < max {
		return nil
	}
	if uri, ok := routeField(m.Params, "uri"); !ok || uri == "" || sess.Subscribed(uri) {
		return nil // subscribe answers it
	}
	return errSubs
}

func (s *Server) unsubscribe(sess *session.Session, m *codec.Message, dst []byte) ([]byte, int) {
	var p mcp.SubscribeParams
	if len(m.Params) == 0 || codec.UnmarshalNoCopy(m.Params, &p) != nil || p.URI == "" {
		return errAnswer(dst, m.ID, codec.CodeInvalidParams, "invalid params: resources/unsubscribe needs a uri")
	}
	sess.Unsubscribe(p.URI)
	return codec.AppendResult(dst, m.ID, nil), 0
}

func (s *Server) initialize(sess *session.Session, m *codec.Message, dst []byte) ([]byte, int) {
	var p mcp.InitializeParams
	if len(m.Params) == 0 {
		return errAnswer(dst, m.ID, codec.CodeInvalidParams, "invalid params: initialize needs params")
	}
	if err := codec.Unmarshal(m.Params, &p); err != nil {
		return errObject(dst, m.ID, paramsError("initialize params", m.Params, &p))
	}
	if p.ProtocolVersion == "" {
		return errAnswer(dst, m.ID, codec.CodeInvalidParams, "invalid params: initialize needs protocolVersion")
	}
	version := s.offer.negotiate(p.ProtocolVersion)
	if version == "" {
		// A server of 2026-07-28 only: the error names what it offers,
		// the only diagnostic an older client has (versioning.mdx).
		return errObject(dst, m.ID, s.offer.unsupported(p.ProtocolVersion))
	}
	version, err := sess.InitializeAs(&p, version)
	if err != nil {
		return errAnswer(dst, m.ID, codec.CodeInvalidRequest, "invalid request: session already initialized")
	}
	res := mcp.InitializeResult{
		ProtocolVersion: version,
		Capabilities:    s.capabilitiesFor(version),
		ServerInfo:      implementationFor(mcp.Implementation{Name: s.opts.Name, Title: s.opts.Title, Version: s.opts.Version}, version),
		Instructions:    s.Instructions(),
	}
	body, err := codec.Marshal(&res)
	if err != nil {
		return errAnswer(dst, m.ID, codec.CodeInternalError, "internal error: encoding the initialize result")
	}
	return codec.AppendResult(dst, m.ID, body), 0
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

package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/bytedance/sonic"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/internal/bytesconv"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
)

// request is one client request being served by a handler. It implements
// handlers.Peer for that handler: everything it sends goes to reply, the
// request's own stream. It is pooled: a handler must not keep its Peer past
// its return.
type request struct {
	s     *Server
	sess  *session.Session
	reply session.Sink
	buf   []byte // the frame: the request's own copy, which msg aliases
	msg   codec.Message
	ctx   context.Context // &rc, but for NonBlocking tools (the session's) and tasks
	rc    reqCtx

	tracked bool // in the session's in-flight set, under msg.ID

	tokenParsed bool
	token       []byte // progressToken from params._meta, aliasing buf

	row     *method    // its row in the method table
	tool    toolFields // tools/call params, when already scanned
	toolErr bool       // the tool's result has isError set (callTool), for ToolObserver

	// What callTool hands the tool's handler, reused.
	call   handlers.CallToolRequest
	params mcp.CallToolParams

	// A request a raw handler serves (handlers.RawHandler): found once
	// (rawRoute), and what it is handed.
	rawH   handlers.RawHandler
	rawSet bool
	raw    handlers.RawRequest

	// A request of the stateless revision (2026-07-28): its _meta, the
	// client's declarations decoded when asked for, and its input rounds.
	stateless     statelessMeta
	statelessCaps *mcp.ClientCapabilities
	statelessInfo *mcp.Implementation
	mrtr          *mrtrState // made on the first input request
	hint          handlers.CacheHint
	hintSet       bool
	rej           session.Sink // an inline 2026-07-28 request's reply sink, for Reject only
	shape         resultShape  // what the engine knows of the result it encoded (finishStateless)

	deferHint bool        // toolTask: the task's CreateTaskResult carries mcp.MetaDeferTask
	task      *task       // set on a task's own request (not pooled): the task its handler runs
	refused   *LimitError // the request was refused as it was to become a task
	inMu      sync.Mutex  // serializes the input requests of a stateless request
	inline    bool        // a NonBlocking tool run on the event loop: it sends nothing
	big       bool        // buf holds a big frame, not yet decoded (HandleFrame)
	lis       *listener   // a subscriptions/listen to open on a worker; buf holds its params
	// authWait: a request deferRequest handed over, in its session's
	// in-flight set under authID (in buf) until its authorization is
	// decided (authDone).
	authWait bool
	authID   []byte

	// With receiving middleware: the request as it sees it, and the
	// answer being written, its result starting at outBody.
	req     Request
	out     []byte
	outBody int

	obsStart time.Duration // when it arrived (Server.monotonic), with an Observer

	// The fair scheduler's (sched.go): the next request of its key's
	// queue, the flow a stateless client's request counts in while it is
	// admitted, and whether it waited in a queue (a cancellation meanwhile
	// makes it a no-op).
	qnext  *request
	flow   *flow
	waited bool
}

// ErrNonBlocking is returned to a handler registered as NonBlocking that
// tries to send progress, a log message or a request to its client.
var ErrNonBlocking = errors.New("engine: a NonBlocking tool cannot send messages to its client")

var requests = sync.Pool{New: func() any { return new(request) }}

func (s *Server) newRequest(sess *session.Session, reply session.Sink) *request {
	r := requests.Get().(*request)
	r.s, r.sess, r.reply = s, sess, reply
	return r
}

func (s *Server) release(r *request) {
	if r.flow != nil {
		s.sched.release(r)
	}
	if r.tool.lim != nil {
		r.tool.lim.done()
	}
	buf := r.buf
	if cap(buf) > 64<<10 {
		buf = nil
	}
	*r = request{buf: buf[:0]}
	requests.Put(r)
}

// enqueue queues the request m, of method row, for a handler on the
// worker pool: frame is copied once into a pooled request, and m (with
// the tools/call fields f scanned, and a stateless request's _meta mm)
// rebased onto the copy. When here is not nil, m is its message, decoded
// from its buffer on a worker already: here is admitted, for its caller
// (serveBig) to run on this worker. It appends a refusal to out (and
// returns its code), or reports queued.
func (s *Server) enqueue(sess *session.Session, m *codec.Message, row *method, frame, out []byte, reply session.Sink, f *toolFields, mm *statelessMeta, here *request) ([]byte, int, bool) {
	r := here
	if r == nil {
		r = s.newRequest(sess, reply)
		r.buf = append(r.buf[:0], frame...)
		rebase(&r.msg, m, frame, r.buf)
		r.tool = f.rebase(frame, r.buf)
		if s.watch {
			r.obsStart = s.monotonic()
		}
	} else {
		r.tool = *f
	}
	f.lim = nil // r holds the tool's place now (release)
	r.row = row
	if mm != nil && mm.on {
		r.stateless = *mm
		if here == nil {
			r.stateless.rebase(frame, r.buf)
		}
	}
	if dst, code, ok := s.admit(r, out); !ok {
		if here == nil {
			s.release(r)
		} else if r.tool.lim != nil {
			r.tool.lim.done() // here is released by its caller, without it
			r.tool.lim = nil
		}
		return dst, code, false
	}
	if here != nil {
		return out, 0, true
	}
	if le := s.sched.submit(r, s.flowKey(sess, r.rc.caller), sess.Stateless(), int(s.maxInflight.Load())); le != nil {
		s.unadmit(r)
		s.release(r)
		return s.refuse(sess, out, reply, m.ID, le), codec.CodeServerBusy, false
	}
	return out, 0, true
}

// flowKey returns the key whose share a request of sess by caller (its
// verified caller, nil without one) counts against in the fair
// scheduler: the caller's subject, else the session, else, for a
// stateless exchange, the client's address.
func (s *Server) flowKey(sess *session.Session, caller any) flowKey {
	if caller != nil {
		if sub := SubjectOf(caller); sub != "" {
			return flowKey{sub: sub}
		}
	}
	if sess.Stateless() {
		return flowKey{addr: sess.Remote()}
	}
	return flowKey{sess: sess}
}

// admit takes r, a request about to be served by a handler, into the
// server's admission (refused while draining) and its session's in-flight
// set (refused over Options.MaxInflight, or for an id in flight already).
// On refusal it returns out with the refusal appended, or out as it is
// when the refusal went to a Refuser, and the refusal's code.
func (s *Server) admit(r *request, out []byte) ([]byte, int, bool) {
	id := r.msg.ID
	if !s.adm.admit() {
		return s.refuse(r.sess, out, r.reply, id, errShutdown), codec.CodeServerBusy, false
	}
	r.rc.reset(r.sess.Context())
	if s.authz != nil {
		r.rc.caller = r.caller()
	}
	r.ctx = &r.rc
	code := codec.CodeInvalidRequest
	switch err := r.sess.Track(id, &r.rc, int(s.maxInflight.Load())); err {
	case nil:
		r.tracked = true
		return out, 0, true
	case session.ErrInflightLimit:
		out, code = s.refuse(r.sess, out, r.reply, id, errInflight), codec.CodeServerBusy
	case session.ErrDuplicateID:
		out = codec.AppendError(out, id, code, errDuplicateID, nil)
	default:
		out = codec.AppendError(out, id, code, errSessionClosed, nil)
	}
	s.adm.done()
	return out, code, false
}

// unadmit undoes admit for a request that will not be served.
func (s *Server) unadmit(r *request) {
	r.sess.Done(r.msg.ID, &r.rc)
	r.sess.Answered()
	r.tracked = false
	s.adm.done()
}

// handleBig hands a big frame to the worker pool whole, to be decoded and
// served there (serveBig). It reports false when the pool cannot take it;
// the caller then serves the frame itself, slowly but correctly.
func (s *Server) handleBig(sess *session.Session, frame []byte) bool {
	r := s.newRequest(sess, sess.Out)
	r.buf = append(r.buf[:0], frame...)
	r.big = true
	if s.watch {
		r.obsStart = s.monotonic()
	}
	if err := s.invokeNow(r); err != nil {
		s.release(r)
		return false
	}
	return true
}

// invokeNow starts r, a job that does not queue (a big frame, a task's
// handler, a listen's filter), on a worker of the pool when one is free
// and no request waits for one (scheduler.tryAcquire).
func (s *Server) invokeNow(r *request) error {
	if !s.sched.tryAcquire() {
		return errWorkers
	}
	if err := s.pool.Invoke(r); err != nil {
		s.sched.unacquire()
		return err
	}
	return nil
}

// serveBig decodes and serves, on a worker, a frame that handleBig (or
// deferRequest) handed over: route, with r as the request that a handler
// serves, here. Every answer goes to r.reply: to its Final when it is a
// Replier, which is called once, here or by whatever serves the request.
func (s *Server) serveBig(r *request) {
	sess, m := r.sess, &r.msg
	b := codec.GetBuffer()
	queued := false // the answer is another's to deliver (run, enqueue)
	defer func() {
		s.authDone(r)
		deliver(r.reply, b, queued)
	}()
	if r.authWait && r.waited && r.rc.cause() != nil {
		return // cancelled while it waited for a worker: nothing is due
	}
	if err := s.decode(sess, r.buf, m); err != nil {
		b.B = codec.AppendDecodeError(b.B, m, err)
		return
	}
	var code int
	var f toolFields
	b.B, code, queued = s.route(sess, m, r.buf, b.B, r.reply, r, &f)
	if r.tracked { // admitted, to be served here
		s.run(r)
		return
	}
	if s.watch && m.Kind == codec.KindRequest && !queued {
		code = observedCode(b.B, code)
		if s.obs != nil {
			s.observeNow(sess, m, code, s.monotonic()-r.obsStart, &f)
		}
		if s.tracer != nil {
			s.traceNow(sess, m, r.reply, code, &f, s.epoch.Add(r.obsStart))
		}
	}
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

// work is the worker pool's function: it serves its job, then the
// requests the fair scheduler hands it, until none waits.
func (s *Server) work(arg any) {
	for r := arg.(*request); r != nil; r = s.sched.next() {
		s.job(r)
	}
}

// job serves one job of the pool.
func (s *Server) job(r *request) {
	if r.task != nil { // a task's handler: its request is not pooled
		s.runTask(r)
		return
	}
	switch {
	case r.lis != nil:
		s.openListen(r)
	case r.big:
		s.serveBig(r)
	default:
		s.run(r)
	}
	s.release(r)
}

// Replier is a reply sink that is told which message ends a request the
// engine queued (Conn.HandleMessage reported queued): its answer comes to
// Final, not to Send. Streamable HTTP's POSTs are Repliers: the answer
// decides whether the POST is answered with JSON or ends its SSE stream.
type Replier interface {
	session.Sink
	// Final is called once per queued request, last: after every message
	// the request sent, and before the engine forgets the request. b is
	// the answer, which Final takes ownership of, or nil when none is due
	// (the client cancelled the request, or its session closed). It runs
	// on the worker that served the request and must not block.
	Final(b *codec.Buffer)
}

// run serves r, an admitted request, and delivers its answer: to r.reply's
// Final when it is a Replier, else with Send.
func (s *Server) run(r *request) {
	s.active.Add(1)
	if s.tracer != nil {
		s.traceStart(r) // trace.go
	}
	b := codec.GetBuffer()
	var code int
	if !r.waited || r.rc.cause() == nil {
		b.B, code = s.serve(r, b.B)
	} // else cancelled while it waited for a worker: nothing is due
	// Out of the session's in-flight set, and its client's share, before
	// the answer is sent: a client may reuse the id, and its place, as
	// soon as it has its answer.
	if r.tracked {
		r.sess.Done(r.msg.ID, &r.rc)
		r.tracked = false
	}
	if r.flow != nil {
		s.sched.release(r)
	}
	if r.tool.lim != nil {
		r.tool.lim.done()
		r.tool.lim = nil
	}
	r.rc.finish()
	if r.refused != nil {
		if s.obs != nil {
			s.obs.Refused(r.sess, r.refused.Limit)
		}
		if rf, ok := r.reply.(Refuser); ok {
			// Refused before the handler sent anything: the sink answers
			// in its transport's terms (HTTP 429 or 503).
			b.B = b.B[:0]
			rf.Refuse(r.msg.ID, r.refused)
			if s.obs != nil {
				s.observeQueued(r, codec.CodeServerBusy)
			}
		}
	}
	if len(b.B) == 0 || r.sess.State() == session.StateClosed {
		codec.PutBuffer(b)
		b = nil
	} else if s.obs != nil {
		s.observeQueued(r, code)
	}
	if r.rc.span != nil {
		s.traceEnd(r, code, b == nil)
	}
	if f, ok := r.reply.(Replier); ok {
		f.Final(b)
	} else if b != nil {
		_ = r.reply.Send(b)
	}
	r.sess.Answered()
	// Active drops after the answer is sent, so that a caller seeing
	// Active()==0 (Shutdown) sees every answer handed to its transport.
	s.active.Add(-1)
	s.adm.done()
}

// serve runs the handler and appends the answer to dst; code is the
// answer's JSON-RPC error code (0: a result). It appends nothing when
// the client cancelled the request: no answer is due then.
func (s *Server) serve(r *request, dst []byte) (out []byte, code int) {
	id := r.msg.ID
	start := len(dst)
	defer func() {
		if p := recover(); p != nil {
			s.recovered(p, "handler", r.sess, r.msg.Method)
			// dst[:start]: an event loop's output holds earlier answers.
			out, code = errAnswer(dst[:start], id, codec.CodeInternalError, fmt.Sprintf("internal error: handler panicked: %v", p))
		}
	}()
	dst = codec.AppendResultStart(dst, id)
	body := len(dst)
	var err error
	if r.stateless.on && s.rawRoute(r) == nil {
		// A raw handler's server owns the input rounds it asks for: their
		// inputResponses and requestState pass through to it.
		if err = r.checkMRTR(); err != nil {
			return errObject(dst[:start], id, codec.AsError(err))
		}
	}
	if s.receive == nil {
		dst, err = s.dispatch(r, dst)
	} else {
		dst, err = s.serveThrough(r, dst, body)
	}
	if errors.Is(r.rc.cause(), session.ErrCancelledByClient) {
		return dst[:start], 0
	}
	if r.refused != nil {
		return r.refused.AppendAnswer(dst[:start], id), codec.CodeServerBusy
	}
	if r.stateless.on {
		return s.finishStateless(r, dst, start, body, err)
	}
	if err != nil {
		return errObject(dst[:start], id, codec.AsError(err))
	}
	if len(dst) == body {
		dst = append(dst, "{}"...)
	}
	return append(dst, '}'), 0
}

// finishStateless completes the answer of a 2026-07-28 request, and returns
// its code: an InputRequiredResult when its handler asked for input the
// client has not given yet (whatever the handler returned), else the
// result with what the revision adds to it, or the error. A result the
// engine encoded gets the members it lacks by its shape (appendTail);
// only bytes of a middleware's making are scanned (statelessTail).
func (s *Server) finishStateless(r *request, dst []byte, start, body int, err error) ([]byte, int) {
	id := r.msg.ID
	if r.mrtr != nil && len(r.mrtr.pending) > 0 {
		return s.appendInputRequired(r, dst[:start])
	}
	if err != nil {
		e := codec.AsError(err)
		if e.Code == mcp.CodeMissingClientCapability || e.Code == mcp.CodeHeaderMismatch {
			if r.reply != nil {
				reject(r.reply, e.Code)
			} else {
				reject(r.rej, e.Code)
			}
		}
		return errObject(dst[:start], id, e)
	}
	if r.shape != shapeUnknown && len(dst) >= body+2 && dst[len(dst)-1] == '}' {
		more := len(dst) > body+2
		dst = s.appendTail(dst[:len(dst)-1], more, r.cacheHint(), r.shape != shapeTyped, r.shape != shapeMeta)
		return append(dst, "}}"...), 0
	}
	if len(dst) == body {
		dst = append(dst, "{}"...)
	}
	dst = append(dst, '}')
	return s.statelessTail(dst, start, r.cacheHint()), 0
}

// dispatch runs the handler of r's method (its row's pool), appending its
// result to dst: the one switch over what the worker pool serves.
func (s *Server) dispatch(r *request, dst []byte) ([]byte, error) {
	if r.row == nil {
		r.row = lookup(r.msg.Method)
	}
	if r.row.pool != opCallTool { // callTool decides for tools: tasks
		if h := s.rawRoute(r); h != nil {
			return s.serveRaw(r, h, r.raw.Name, dst)
		}
	}
	switch r.row.pool {
	case opCallTool:
		return s.callTool(r, dst)
	case opReadResource:
		return s.readResource(r, dst)
	case opGetPrompt:
		return s.getPrompt(r, dst)
	case opComplete:
		return s.complete(r, dst)
	case opTasksResult:
		return s.tasksResult(r, dst)
	}
	return dst, codec.NewError(codec.CodeMethodNotFound, "method not found: "+r.msg.Method)
}

// toolFields are the fields of tools/call params found by one scan,
// aliasing the params. ok is set when the scan decided: no escape, no
// task, a string name, object (or null) arguments and _meta. Otherwise the
// full decoder runs, and reports what is wrong.
type toolFields struct {
	ok               bool
	retry            bool // inputResponses or requestState present (2026-07-28)
	isError          bool // set by inlineTool: the tool answered with isError
	name, args, meta []byte
	// The tool's limits (Options.ToolLimits): checked once the name is
	// known, and the place the call holds within the tool's MaxInflight,
	// given back when the call ends (its holder: route, then the request).
	checked bool
	lim     *toolLimit
}

var toolKeys = []string{"name", "arguments", "_meta", "task", "inputResponses", "requestState"}

func (f *toolFields) scan(params []byte) bool {
	*f = toolFields{}
	if len(params) == 0 {
		return false
	}
	var v [6][]byte
	if codec.ObjectFields(params, toolKeys, v[:]) != nil || v[0] == nil || (v[3] != nil && string(v[3]) != "null") {
		return false
	}
	name, err := codec.StringValue(v[0])
	if err != nil || !objectOrNull(v[1]) || !objectOrNull(v[2]) {
		return false
	}
	f.ok, f.name, f.args, f.meta = true, name, v[1], v[2]
	f.retry = v[4] != nil || v[5] != nil
	return true
}

func objectOrNull(raw []byte) bool {
	return raw == nil || raw[0] == '{' || string(raw) == "null"
}

// fill sets p from the scanned fields, which it aliases.
func (f *toolFields) fill(p *mcp.CallToolParams) {
	p.Name = bytesconv.B2S(f.name)
	if f.args != nil && string(f.args) != "null" {
		p.Arguments = f.args
	}
	if f.meta != nil && string(f.meta) != "null" {
		p.Meta = f.meta
	}
}

// rebase returns f with its slices of old moved to the same place in nw
// (see rebase).
func (f toolFields) rebase(old, nw []byte) toolFields {
	if !f.ok {
		return toolFields{}
	}
	mv := codec.Mover{Old: old, New: nw}
	f.name, f.args, f.meta = mv.Bytes(f.name), mv.Bytes(f.args), mv.Bytes(f.meta)
	return f
}

func decodeParams(r *request, v any) error {
	if len(r.msg.Params) == 0 {
		return codec.NewError(codec.CodeInvalidParams, "invalid params: "+r.msg.Method+" needs params")
	}
	if err := codec.Unmarshal(r.msg.Params, v); err != nil {
		return paramsError(r.msg.Method+" params", r.msg.Params, v)
	}
	return nil
}

// callTool serves tools/call. Its params alias the request's buffer: the
// handler borrows them (handlers.CallToolRequest's Lifetime).
func (s *Server) callTool(r *request, dst []byte) ([]byte, error) {
	p := &r.params
	*p = mcp.CallToolParams{}
	if r.tool.ok || r.tool.scan(r.msg.Params) {
		r.tool.fill(p)
	} else if err := decodeParams(r, p); err != nil {
		return dst, err
	}
	if p.Name == "" {
		return dst, codec.NewError(codec.CodeInvalidParams, "invalid params: tools/call needs a name")
	}
	if s.authz != nil {
		if err := s.authorizeTool(r, p.Name); err != nil {
			return dst, err
		}
	}
	if !r.tool.checked && r.task == nil && s.tools.Load() != nil {
		// A call whose name the scan could not read on the way in.
		r.tool.checked = true
		lim, le := s.checkTool(p.Name)
		if le != nil {
			r.refused = le
			return dst, le
		}
		r.tool.lim = lim
	}
	var raw handlers.RawHandler
	if s.reg.HasRaw() {
		raw, _ = s.reg.RawTool(p.Name)
	}
	// A raw tool's server decides whether a 2026-07-28 call is a task: its
	// result passes through (Registry.SetForeignTasks).
	if r.task == nil && (raw == nil || !r.stateless.on || s.reg.RawToolTasks(p.Name)) {
		if dst, err, done := s.toolTask(r, p, dst); done {
			return dst, err
		}
	}
	if raw != nil {
		return s.serveRaw(r, raw, p.Name, dst)
	}
	r.call = handlers.CallToolRequest{Peer: r, Params: p}
	res, err := s.reg.CallTool(r.ctx, &r.call)
	if err != nil {
		return dst, err
	}
	if res == nil {
		res = &mcp.CallToolResult{}
	}
	r.toolErr = res.IsError
	return s.appendToolResult(r, res, dst)
}

// toolTask decides whether r, a tools/call with params p, runs as a task,
// by the rules of its revision: done reports that it answered (dst, err);
// otherwise the tool runs as a plain request.
func (s *Server) toolTask(r *request, p *mcp.CallToolParams, dst []byte) (_ []byte, _ error, done bool) {
	support := mcp.TaskForbidden
	tool, ok := s.reg.Tool(p.Name)
	if ok && tool.Execution != nil && tool.Execution.TaskSupport != "" {
		support = tool.Execution.TaskSupport
	}
	if r.stateless.on { // 2026-07-28: the server decides; params.task is ignored
		if support == mcp.TaskForbidden {
			return dst, nil, false
		}
		if !hasTasksExt(r.stateless.caps) {
			if support == mcp.TaskRequired {
				return dst, MissingCapability(tasksExtCaps), true
			}
			return dst, nil, false
		}
		o, _ := s.reg.ToolOptionsOf(p.Name)
		dst, err := s.startTask(r, dst, !o.DeferTask)
		return dst, err, true
	}
	if p.Task != nil && !atLeast(r.sess.Version(), mcp.Version20251125) {
		p.Task = nil // tasks are 2025-11-25's: an older client's call is a plain one
	}
	switch {
	case p.Task != nil && support == mcp.TaskForbidden:
		if ok {
			return dst, codec.NewError(codec.CodeMethodNotFound, "tool "+p.Name+" does not support task-augmented calls"), true
		}
		return dst, nil, false // an unknown tool: the registry says so
	case p.Task == nil && support == mcp.TaskRequired:
		return dst, codec.NewError(codec.CodeMethodNotFound, "tool "+p.Name+" must be called as a task (params.task)"), true
	case p.Task != nil:
		if o, _ := s.reg.ToolOptionsOf(p.Name); o.DeferTask && r.linkDeclared() {
			r.deferHint = true // a proxy is told (mcp.MetaDeferTask)
		}
		dst, err := s.startTask(r, dst, true)
		return dst, err, true
	}
	return dst, nil, false
}

// appendToolResult appends res, the result of r's tool, to dst. In a
// 2026-07-28 request, a _meta of the handler's own gets the server's
// identity (withServerInfo), on a copy of res: the handler may share it.
func (s *Server) appendToolResult(r *request, res *mcp.CallToolResult, dst []byte) ([]byte, error) {
	if !r.stateless.on {
		return res.AppendJSON(dst)
	}
	if len(res.Meta) == 0 {
		r.shape = shapePlain
		return res.AppendJSON(dst)
	}
	cp := *res
	cp.Meta = s.withServerInfo(res.Meta)
	r.shape = shapeMeta
	return cp.AppendJSON(dst)
}

// resultMeta prepares the _meta of a result of r that is about to be
// encoded, meta (nil for a result without one), for 2026-07-28
// (withServerInfo), and records the result's shape.
func (s *Server) resultMeta(r *request, meta *mcp.Meta) {
	if !r.stateless.on {
		return
	}
	if meta == nil || len(*meta) == 0 {
		r.shape = shapePlain
		return
	}
	*meta = s.withServerInfo(*meta)
	r.shape = shapeMeta
}

func (s *Server) readResource(r *request, dst []byte) ([]byte, error) {
	var p mcp.ReadResourceParams
	if err := decodeParams(r, &p); err != nil {
		return dst, err
	}
	if p.URI == "" {
		return dst, codec.NewError(codec.CodeInvalidParams, "invalid params: resources/read needs a uri")
	}
	c := s.class(r.caller())
	if r.stateless.on {
		r.hint, r.hintSet = s.reg.ResourceCacheHint(p.URI), true
		r.hint.Public = r.hint.Public && c == nil // what a class narrows is no one else's
	}
	err := s.reg.CheckRead(c, p.URI)
	var res *mcp.ReadResourceResult
	if err == nil {
		res, err = s.reg.ReadResource(r.ctx, &handlers.ReadResourceRequest{Peer: r, Params: &p})
	}
	if err != nil {
		if r.stateless.on {
			// 2026-07-28: a resource not found is invalid params.
			if e, ok := errors.AsType[*codec.Error](err); ok && e.Code == codec.CodeResourceNotFound {
				return dst, &codec.Error{Code: codec.CodeInvalidParams, Message: e.Message, Data: e.Data}
			}
		}
		return dst, err
	}
	if res.Contents == nil {
		res.Contents = []mcp.ResourceContents{}
	}
	s.resultMeta(r, &res.Meta)
	return appendJSON(dst, res)
}

func (s *Server) getPrompt(r *request, dst []byte) ([]byte, error) {
	var p mcp.GetPromptParams
	if err := decodeParams(r, &p); err != nil {
		return dst, err
	}
	if err := s.reg.Check(s.class(r.caller()), handlers.ListNamePrompts, p.Name); err != nil {
		return dst, err
	}
	res, err := s.reg.GetPrompt(r.ctx, &handlers.GetPromptRequest{Peer: r, Params: &p})
	if err != nil {
		return dst, err
	}
	if res.Messages == nil {
		res.Messages = []mcp.PromptMessage{}
	}
	s.resultMeta(r, &res.Meta)
	return appendJSON(dst, res)
}

func (s *Server) complete(r *request, dst []byte) ([]byte, error) {
	var p mcp.CompleteParams
	if err := decodeParams(r, &p); err != nil {
		return dst, err
	}
	if err := s.reg.CheckComplete(s.class(r.caller()), &p); err != nil {
		return dst, err
	}
	res, err := s.reg.Complete(r.ctx, &handlers.CompleteRequest{Peer: r, Params: &p})
	if err != nil {
		return dst, err
	}
	s.resultMeta(r, nil) // a CompleteResult has no _meta
	return appendJSON(dst, res)
}

func appendJSON(dst []byte, v any) ([]byte, error) {
	b, err := codec.Marshal(v)
	if err != nil {
		return dst, fmt.Errorf("engine: encoding result: %w", err)
	}
	return append(dst, b...), nil
}

// Peer implementation.

// SessionID implements handlers.Peer: "" for a stateless request.
func (r *request) SessionID() string {
	if r.stateless.on {
		return ""
	}
	return r.sess.ID()
}

// ProtocolVersion implements handlers.Peer.
func (r *request) ProtocolVersion() string {
	if r.stateless.on {
		return r.stateless.version
	}
	return r.sess.Version()
}

// ClientInfo implements handlers.Peer: for a stateless request, what its
// _meta declares.
func (r *request) ClientInfo() mcp.Implementation {
	if !r.stateless.on {
		return r.sess.ClientInfo()
	}
	r.inMu.Lock()
	defer r.inMu.Unlock()
	if r.statelessInfo == nil {
		r.statelessInfo = new(mcp.Implementation)
		if r.stateless.info != nil {
			_ = codec.Unmarshal(r.stateless.info, r.statelessInfo)
		}
	}
	return *r.statelessInfo
}

// ClientCapabilities implements handlers.Peer: for a stateless request,
// what its _meta declares.
func (r *request) ClientCapabilities() *mcp.ClientCapabilities {
	if !r.stateless.on {
		return r.sess.ClientCapabilities()
	}
	r.inMu.Lock() // a handler may ask from several goroutines
	defer r.inMu.Unlock()
	if r.statelessCaps == nil {
		r.statelessCaps = new(mcp.ClientCapabilities)
		_ = codec.Unmarshal(r.stateless.caps, r.statelessCaps)
	}
	return r.statelessCaps
}

// logEnabled reports whether a log message at level index i is sent: for
// a stateless request, only at or above the level its _meta names, and
// never without one.
func (r *request) logEnabled(i int) bool {
	if r.stateless.on {
		return r.stateless.level >= 0 && i >= int(r.stateless.level)
	}
	return r.sess.LogEnabled(i)
}

// TraceContext implements handlers.TraceScope: the W3C trace context to
// propagate to what the request calls. For a request the server traces
// (Options.Tracer), its span's traceparent and tracestate; else those a
// stateless request's _meta carries. Baggage is the _meta's. The strings
// alias the request: copy them to keep them.
func (r *request) TraceContext() (traceparent, tracestate, baggage string) {
	baggage = bytesconv.B2S(r.stateless.trace[2])
	if sp := r.rc.span; sp != nil {
		traceparent, tracestate = sp.TraceContext()
		return traceparent, tracestate, baggage
	}
	return bytesconv.B2S(r.stateless.trace[0]), bytesconv.B2S(r.stateless.trace[1]), baggage
}

// progressToken returns the request's params._meta.progressToken, raw.
func (r *request) progressToken() []byte {
	if !r.tokenParsed {
		r.tokenParsed = true
		var p struct {
			Meta struct {
				ProgressToken sonic.NoCopyRawMessage `json:"progressToken"`
			} `json:"_meta"`
		}
		if len(r.msg.Params) > 0 && codec.UnmarshalNoCopy(r.msg.Params, &p) == nil {
			if t := p.Meta.ProgressToken; len(t) > 0 && (t[0] == '"' || t[0] == '-' || (t[0] >= '0' && t[0] <= '9')) {
				r.token = t
			}
		}
	}
	return r.token
}

// Progress implements handlers.Peer.
func (r *request) Progress(progress, total float64, message string) error {
	if r.inline {
		return ErrNonBlocking
	}
	tok := r.progressToken()
	if tok == nil {
		return nil
	}
	b := codec.GetBuffer()
	b.B = append(b.B, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":`...)
	b.B = append(b.B, tok...)
	b.B = append(b.B, `,"progress":`...)
	b.B = codec.AppendFloat(b.B, progress)
	if total > 0 {
		b.B = append(b.B, `,"total":`...)
		b.B = codec.AppendFloat(b.B, total)
	}
	if message != "" && atLeast(r.ProtocolVersion(), mcp.Version20250326) {
		b.B = append(b.B, `,"message":`...)
		b.B = codec.AppendString(b.B, message)
	}
	b.B = r.appendRelatedTask(b.B)
	b.B = append(b.B, "}}"...)
	return r.s.send(r.ctx, r.sess, r.reply, mcp.NotificationProgress, b)
}

// Log implements handlers.Peer.
func (r *request) Log(level, logger string, data any) error {
	if r.inline {
		return ErrNonBlocking
	}
	i := mcp.LogLevelIndex(level)
	if i < 0 {
		return fmt.Errorf("engine: unknown log level %q", level)
	}
	if !r.logEnabled(i) {
		return nil
	}
	raw, err := codec.Marshal(data)
	if err != nil {
		return fmt.Errorf("engine: encoding log data: %w", err)
	}
	b := codec.GetBuffer()
	b.B = append(b.B, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":`...)
	b.B = codec.AppendString(b.B, level)
	if logger != "" {
		b.B = append(b.B, `,"logger":`...)
		b.B = codec.AppendString(b.B, logger)
	}
	b.B = append(b.B, `,"data":`...)
	b.B = append(b.B, raw...)
	b.B = r.appendRelatedTask(b.B)
	b.B = append(b.B, "}}"...)
	return r.s.send(r.ctx, r.sess, r.reply, mcp.NotificationMessage, b)
}

// appendRelatedTask appends ,"_meta":{related-task} inside a params object
// when r runs as a task, or ,"_meta":{related-request} when its client
// asked for the link (linked).
func (r *request) appendRelatedTask(dst []byte) []byte {
	if r.task == nil || r.task.sess == nil {
		if !r.linked() {
			return dst
		}
		dst = append(dst, `,"_meta":{"`+mcp.MetaRelatedRequest+`":{"requestId":`...)
		dst = append(dst, r.msg.ID...)
		return append(dst, "}}"...)
	}
	dst = append(dst, `,"_meta":{"`+relatedTaskKey+`":{"taskId":`...)
	dst = codec.AppendString(dst, r.task.id)
	return append(dst, "}}"...)
}

// linked reports whether the messages r sends its client carry
// _meta[mcp.MetaRelatedRequest]: its client declared the key among its
// experimental capabilities, and r is a request, not a task (whose
// messages carry related-task).
func (r *request) linked() bool {
	if r.task != nil || len(r.msg.ID) == 0 {
		return false
	}
	return r.linkDeclared()
}

// linkDeclared reports whether r's client declared mcp.MetaRelatedRequest
// among its experimental capabilities: a proxy, which is also told the
// key of each input its server-to-client requests ask for
// (mcp.MetaInputKey), in a task too.
func (r *request) linkDeclared() bool {
	var exp []byte
	if r.stateless.on {
		exp = r.ClientCapabilities().Experimental
	} else if c := r.sess.ClientCapabilities(); c != nil {
		exp = c.Experimental
	}
	return len(exp) > 0 && bytes.Contains(exp, []byte(`"`+mcp.MetaRelatedRequest+`"`))
}

// withRelatedRequest returns the params object obj with
// _meta[mcp.MetaRelatedRequest] naming r added (a copy): into its _meta
// when it has one.
func (r *request) withRelatedRequest(obj []byte) []byte {
	link := append([]byte(`"`+mcp.MetaRelatedRequest+`":{"requestId":`), r.msg.ID...)
	link = append(link, '}')
	return withMetaMember(obj, link)
}

// withMetaMember returns the params object obj with the member link
// ("key":value) added to its _meta (a copy), which it gets when it has
// none.
func withMetaMember(obj, link []byte) []byte {
	if len(obj) < 2 || obj[0] != '{' {
		obj = []byte("{}")
	}
	if meta, found, err := codec.ObjectField(obj, "_meta"); err == nil && found && len(meta) >= 2 && meta[0] == '{' {
		at := int(uintptr(unsafe.Pointer(unsafe.SliceData(meta)))-uintptr(unsafe.Pointer(unsafe.SliceData(obj)))) + 1
		out := make([]byte, 0, len(obj)+len(link)+1)
		out = append(out, obj[:at]...)
		out = append(out, link...)
		if len(bytes.TrimSpace(meta[1:len(meta)-1])) > 0 {
			out = append(out, ',')
		}
		return append(out, obj[at:]...)
	}
	out := make([]byte, 0, len(obj)+len(link)+12)
	out = append(out, `{"_meta":{`...)
	out = append(out, link...)
	out = append(out, '}')
	if len(bytes.TrimSpace(obj[1:len(obj)-1])) > 0 {
		out = append(out, ',')
	}
	return append(out, obj[1:]...)
}

// StreamCloser is implemented by reply sinks whose stream a handler may end
// early (Streamable HTTP's SSE streams).
type StreamCloser interface {
	CloseStream()
}

// CloseStream implements handlers.Peer.
func (r *request) CloseStream() {
	if r.reply == nil {
		return
	}
	if c, ok := r.reply.(StreamCloser); ok {
		c.CloseStream()
	}
}

// OnSessionClose implements handlers.SessionScope.
func (r *request) OnSessionClose(fn func()) { r.sess.OnClose(fn) }

// NotifyResourceUpdated implements handlers.SessionScope.
func (r *request) NotifyResourceUpdated(uri string) error {
	out := r.sess.Out
	if out == nil || !r.sess.Subscribed(uri) {
		return nil
	}
	b := codec.GetBuffer()
	b.B = append(b.B, `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":`...)
	b.B = codec.AppendString(b.B, uri)
	b.B = append(b.B, "}}"...)
	return r.s.send(r.ctx, r.sess, out, mcp.NotificationResourceUpdated, b)
}

var _ handlers.SessionScope = (*request)(nil)

// ErrCapability reports a server-to-client request the client did not
// declare the capability for. In a 2026-07-28 request the error also
// wraps a *codec.Error, MissingRequiredClientCapabilityError (-32021),
// naming the capability in data.requiredCapabilities: a handler that
// returns it has its request answered with that error.
var ErrCapability = errors.New("engine: client lacks capability")

// missingCapability is the error of an input the client did not declare
// the capability for: required is the ClientCapabilities object needed.
func (r *request) missingCapability(name, required string) error {
	if !r.stateless.on {
		return fmt.Errorf("%w: %s", ErrCapability, name)
	}
	return fmt.Errorf("%w: %s: %w", ErrCapability, name, MissingCapability(required))
}

// MissingCapability returns MissingRequiredClientCapabilityError (-32021)
// for a 2026-07-28 request: required is the raw ClientCapabilities object
// the request needs, such as {"sampling":{}}. A handler returns it to
// refuse a request its client cannot serve.
func MissingCapability(required string) *codec.Error {
	return &codec.Error{
		Code:    mcp.CodeMissingClientCapability,
		Message: "Missing required client capability",
		Data:    codec.RawJSON(`{"requiredCapabilities":` + required + `}`),
	}
}

// cacheHint is the cache hint of r's result, nil when it has none.
func (r *request) cacheHint() *handlers.CacheHint {
	if r.msg.Method == mcp.MethodResourcesRead && r.hintSet {
		return &r.hint
	}
	return nil
}

// CreateMessage implements handlers.Peer.
func (r *request) CreateMessage(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	caps := r.ClientCapabilities()
	if caps.Sampling == nil {
		return nil, r.missingCapability("sampling", `{"sampling":{}}`)
	}
	if (len(p.Tools) > 0 || p.ToolChoice != nil) && caps.Sampling.Tools == nil {
		return nil, r.missingCapability("sampling.tools", `{"sampling":{"tools":{}}}`)
	}
	var res mcp.CreateMessageResult
	if err := r.callClient(ctx, mcp.MethodSamplingCreateMessage, p, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Elicit implements handlers.Peer.
func (r *request) Elicit(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	caps := r.ClientCapabilities()
	if caps.Elicitation == nil {
		return nil, r.missingCapability("elicitation", `{"elicitation":{}}`)
	}
	if p.Mode == "url" && caps.Elicitation.URL == nil {
		return nil, r.missingCapability("elicitation.url", `{"elicitation":{"url":{}}}`)
	}
	if p.Mode != "url" && caps.Elicitation.URL != nil && caps.Elicitation.Form == nil {
		return nil, r.missingCapability("elicitation.form", `{"elicitation":{"form":{}}}`)
	}
	var res mcp.ElicitResult
	if err := r.callClient(ctx, mcp.MethodElicitationCreate, p, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// ListRoots implements handlers.Peer.
func (r *request) ListRoots(ctx context.Context) (*mcp.ListRootsResult, error) {
	if r.ClientCapabilities().Roots == nil {
		return nil, r.missingCapability("roots", `{"roots":{}}`)
	}
	var res mcp.ListRootsResult
	if err := r.callClient(ctx, mcp.MethodRootsList, nil, &res); err != nil {
		return nil, err
	}
	if res.Roots == nil {
		res.Roots = []mcp.Root{}
	}
	return &res, nil
}

// callClient sends a server-to-client request on the request's stream and
// waits for the answer, ctx and the configured timeout.
func (r *request) callClient(ctx context.Context, method string, params, result any) error {
	if r.stateless.on {
		if r.task != nil {
			return r.task.input(ctx, r, handlers.InputKey(ctx), method, params, result)
		}
		r.inMu.Lock()
		defer r.inMu.Unlock()
		return r.input(handlers.InputKey(ctx), method, params, result)
	}
	if r.inline {
		return ErrNonBlocking
	}
	var raw []byte
	if params != nil {
		var err error
		if raw, err = codec.Marshal(params); err != nil {
			return fmt.Errorf("engine: encoding %s params: %w", method, err)
		}
	}
	if r.linked() {
		raw = r.withRelatedRequest(raw)
	}
	if key := handlers.InputKey(ctx); key != "" && r.linkDeclared() {
		// A proxy that turns the request into a 2026-07-28 input request
		// names the input as the handler did.
		raw = withMetaMember(raw, codec.AppendString([]byte(`"`+mcp.MetaInputKey+`":`), key))
	}
	if t := r.task; t != nil {
		// A task waiting on its client is input_required meanwhile, and
		// its requests carry the related-task key.
		if raw == nil {
			raw = []byte("{}")
		}
		raw = withRelatedTask(raw, t.id)
		t.setStatus(mcp.TaskInputRequired, "waiting for "+method)
		defer t.setStatus(mcp.TaskWorking, "")
	}
	reply, err := r.s.CallClient(ctx, r.sess, r.reply, method, codec.RawJSON(raw))
	if err != nil {
		return err
	}
	if err := codec.Unmarshal(reply, result); err != nil {
		return fmt.Errorf("engine: decoding %s result: %w", method, err)
	}
	return nil
}

// CallClient sends a request to the client of sess on sink (nil means the
// session's Out stream) and waits for its result, which it returns raw. A
// JSON-RPC error answer is returned as a *codec.Error. It fails when ctx
// ends, after Options.ClientRequestTimeout, or when the session closes.
func (s *Server) CallClient(ctx context.Context, sess *session.Session, sink session.Sink, method string, params any) ([]byte, error) {
	if sink == nil {
		sink = sess.Out
	}
	var raw []byte
	switch p := params.(type) {
	case nil:
	case codec.RawJSON:
		raw = p
	default:
		var err error
		if raw, err = codec.Marshal(params); err != nil {
			return nil, fmt.Errorf("engine: encoding %s params: %w", method, err)
		}
	}
	call, err := sess.Tracker.Start()
	if err != nil {
		return nil, err
	}
	b := codec.GetBuffer()
	b.B = codec.AppendRequest(b.B, call.AppendID(nil), method, raw)
	if err := s.send(ctx, sess, sink, method, b); err != nil {
		sess.Tracker.Forget(call)
		return nil, fmt.Errorf("engine: sending %s: %w", method, err)
	}
	rep, err := sess.Tracker.Wait(ctx, call, s.opts.ClientRequestTimeout)
	if err != nil {
		if sess.State() != session.StateClosed {
			// Tell the client to stop working on it.
			var p []byte
			p = append(p, `{"requestId":`...)
			p = call.AppendID(p)
			p = append(p, `,"reason":`...)
			p = codec.AppendString(p, err.Error())
			p = append(p, '}')
			_ = s.notify(sess, sink, mcp.NotificationCancelled, p)
		}
		return nil, fmt.Errorf("engine: %s: %w", method, err)
	}
	if rep.Err != nil {
		return nil, rep.Err
	}
	return rep.Result, nil
}

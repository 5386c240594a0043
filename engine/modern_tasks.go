package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
)

// The tasks extension of 2026-07-28 (io.modelcontextprotocol/tasks). A
// request opts in per request, declaring the extension in the
// clientCapabilities of its _meta. A tools/call of a tool that supports
// tasks is then made a task by the server (the older params.task is
// ignored) and answered at once with a flat CreateTaskResult
// (resultType "task"); the client polls tasks/get, answers the inputs
// the task waits for with tasks/update, and stops it with tasks/cancel.
// Without the extension, a tool whose task support is optional runs as a
// plain request, and one that requires it is refused with -32021.
//
// The tasks belong to no session: they are the server's, named by an
// unguessable id that starts with Options.NodeID, bounded in number by
// Options.MaxTasks and kept for Options.TaskTTL.
//
// A task's handler that asks its client for input (Elicit, CreateMessage,
// ListRoots) parks the task in input_required: tasks/get lists every
// input it waits for in inputRequests, under its key (handlers.InputKey,
// or one the engine mints), and the handler's call returns when
// tasks/update delivers the answer. A tool registered with
// ToolOptions.DeferTask first runs as a plain request, gathering its
// inputs in multi round-trip rounds, and becomes a task when it calls
// handlers.StartTask.

// taskPollMs is the poll interval a task suggests.
const taskPollMs = 500

// tasksExtCaps is the ClientCapabilities the tasks methods need.
const tasksExtCaps = `{"extensions":{"` + mcp.ExtensionTasks + `":{}}}`

// mtask is a task of 2026-07-28.
type mtask struct {
	s  *Server
	id string

	mu       sync.Mutex
	status   string
	msg      string
	created  time.Time
	updated  time.Time
	ttl      time.Duration
	started  bool          // a task the client knows of (CreateTaskResult sent)
	decided  chan struct{} // closed when started, or when the handler returned first
	result   []byte        // completed: the tool's result
	err      *codec.Error  // failed: the error it ended with
	inputs   []*taskInput  // the inputs it waits for, in the order asked
	seq      map[string]int
	req      *request // the handler's request
	timer    *time.Timer
	ctx      context.Context
	cancel   context.CancelCauseFunc
	body     []byte // before it started: the handler's result
	callErr  error  // or its error
	creation []byte // the CreateTaskResult
}

// taskInput is an input a task's handler waits for.
type taskInput struct {
	key, method string
	params      []byte
	answer      chan json.RawMessage // buffered: tasks/update never blocks
}

func (t *mtask) terminal() bool {
	switch t.status {
	case mcp.TaskCompleted, mcp.TaskFailed, mcp.TaskCancelled:
		return true
	}
	return false
}

// modernTaskStore holds the server's 2026-07-28 tasks.
type modernTaskStore struct {
	mu    sync.Mutex
	byID  map[string]*mtask
	order []*mtask // creation order
}

func newModernTaskStore() *modernTaskStore {
	return &modernTaskStore{byID: map[string]*mtask{}}
}

func (st *modernTaskStore) get(id string) *mtask {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.byID[id]
}

// add keeps t, evicting the oldest task that has ended when max are kept;
// it reports false when every task kept is still running.
func (st *modernTaskStore) add(t *mtask, max int) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.order) >= max {
		evicted := false
		for i, x := range st.order {
			x.mu.Lock()
			done := x.terminal()
			x.mu.Unlock()
			if done {
				st.removeAt(i)
				if x.timer != nil {
					x.timer.Stop()
				}
				evicted = true
				break
			}
		}
		if !evicted {
			return false
		}
	}
	st.byID[t.id] = t
	st.order = append(st.order, t)
	return true
}

func (st *modernTaskStore) removeAt(i int) {
	delete(st.byID, st.order[i].id)
	st.order = append(st.order[:i], st.order[i+1:]...)
}

func (st *modernTaskStore) remove(t *mtask) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for i, x := range st.order {
		if x == t {
			st.removeAt(i)
			return
		}
	}
}

// Len returns the number of tasks kept (tests).
func (st *modernTaskStore) Len() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.order)
}

// TaskNode returns the node a 2026-07-28 task id names (Options.NodeID of
// the node that created it), "" when none.
func TaskNode(taskID string) string {
	if i := strings.IndexByte(taskID, '.'); i >= 0 {
		return taskID[:i]
	}
	return ""
}

// SessionNode returns the node a session id names (Options.NodeID of the
// node that opened the session), "" when none. It allocates nothing.
func SessionNode(sessionID []byte) []byte {
	if i := bytes.IndexByte(sessionID, '.'); i >= 0 {
		return sessionID[:i]
	}
	return nil
}

// newTaskID returns an unguessable task id naming this node.
func (s *Server) newTaskID() string {
	if s.opts.NodeID == "" {
		return session.NewID()
	}
	return s.opts.NodeID + "." + session.NewID()
}

// hasTasksExt reports whether the raw ClientCapabilities caps declare the
// tasks extension.
func hasTasksExt(caps []byte) bool {
	ext, ok, err := codec.ObjectField(caps, "extensions")
	if err != nil || !ok || len(ext) == 0 || ext[0] != '{' {
		return false
	}
	v, ok, err := codec.ObjectField(ext, mcp.ExtensionTasks)
	return err == nil && ok && len(v) > 0 && v[0] == '{'
}

// modernToolTask decides whether r, a 2026-07-28 tools/call, runs as a
// task: done reports that it answered (dst, err); otherwise the tool runs
// as a plain request.
func (s *Server) modernToolTask(r *request, p *mcp.CallToolParams, dst []byte) (_ []byte, _ error, done bool) {
	tool, ok := s.reg.Tool(p.Name)
	if !ok || tool.Execution == nil {
		return dst, nil, false
	}
	support := tool.Execution.TaskSupport
	if support != mcp.TaskOptional && support != mcp.TaskRequired {
		return dst, nil, false
	}
	if !hasTasksExt(r.mod.caps) {
		if support == mcp.TaskRequired {
			return dst, MissingCapability(tasksExtCaps), true
		}
		return dst, nil, false
	}
	o, _ := s.reg.ToolOptionsOf(p.Name)
	dst, err := s.runAsTask(r, dst, !o.DeferTask)
	return dst, err, true
}

// runAsTask runs the tool of r on a goroutine of its own, as a task from
// the start when now is set, else when its handler calls StartTask. It
// waits for that, or for the handler to return first, and appends the
// answer: the CreateTaskResult, or the handler's result.
func (s *Server) runAsTask(r *request, dst []byte, now bool) ([]byte, error) {
	// The task outlives the request: its own request object (not pooled)
	// and its own copy of the message.
	tr := &request{s: s, sess: r.sess}
	tr.buf = codec.AppendRequest(nil, r.msg.ID, r.msg.Method, r.msg.Params)
	if err := codec.Decode(tr.buf, &tr.msg); err != nil {
		return dst, err
	}
	if _, e := parseModern(tr.msg.Params, nil, &tr.mod); e != nil {
		return dst, e
	}
	var p mcp.CallToolParams
	if tr.tool.scan(tr.msg.Params) {
		tr.tool.fill(&p)
	} else if err := decodeParams(tr, &p); err != nil {
		return dst, err
	}
	// What the handler may ask of its Peer from several goroutines is
	// decoded now.
	tr.ClientCapabilities()
	tr.ClientInfo()
	tr.progressToken()
	sink := &taskSink{to: r.reply}
	tr.reply = sink

	t := &mtask{s: s, id: s.newTaskID(), status: mcp.TaskWorking, decided: make(chan struct{}), seq: map[string]int{}, req: tr}
	t.ctx, t.cancel = context.WithCancelCause(s.ctx)
	tr.ctx, tr.mtask = t.ctx, t
	if now && !t.start() {
		t.cancel(nil)
		return dst, codec.NewError(codec.CodeServerBusy, "too many tasks: limit "+strconv.Itoa(s.opts.MaxTasks))
	}
	if !s.adm.admit() {
		t.abort()
		return dst, codec.NewError(codec.CodeServerBusy, "server shutting down")
	}
	go s.runModernTask(t, tr, &p)
	select {
	case <-t.decided:
	case <-r.ctx.Done():
		// The request ended before the handler decided (the client went
		// away): so does the handler.
		t.cancel(context.Cause(r.ctx))
		<-t.decided
	}
	sink.detach()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.started {
		return append(dst, t.creation...), nil
	}
	if st := tr.mrtr; st != nil && len(st.pending) > 0 {
		r.mrtr = st // answered with an InputRequiredResult (finishModern)
		return dst, nil
	}
	if t.callErr != nil {
		return dst, t.callErr
	}
	return append(dst, t.body...), nil
}

// start makes t a task the client is told of; it reports false when it
// cannot be one (an input asked for before is unanswered, or too many
// tasks are kept).
func (t *mtask) start() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.started {
		return true
	}
	if t.terminal() {
		return false
	}
	if st := t.req.mrtr; st != nil && len(st.pending) > 0 {
		return false
	}
	now := time.Now()
	t.created, t.updated, t.ttl = now, now, t.s.opts.TaskTTL
	if !t.s.mtasks.add(t, t.s.opts.MaxTasks) {
		return false
	}
	t.started = true
	b := make([]byte, 0, 256)
	b = append(b, `{"resultType":"task","taskId":`...)
	b = codec.AppendString(b, t.id)
	b = append(b, `,"status":"working"`...)
	b = t.appendTimes(b)
	t.creation = append(b, '}')
	t.timer = time.AfterFunc(t.ttl, t.expire)
	close(t.decided)
	return true
}

// appendTimes appends createdAt, lastUpdatedAt, ttlMs and pollIntervalMs.
func (t *mtask) appendTimes(b []byte) []byte {
	b = append(b, `,"createdAt":`...)
	b = codec.AppendString(b, nowISO(t.created))
	b = append(b, `,"lastUpdatedAt":`...)
	b = codec.AppendString(b, nowISO(t.updated))
	b = append(b, `,"ttlMs":`...)
	b = strconv.AppendInt(b, t.ttl.Milliseconds(), 10)
	b = append(b, `,"pollIntervalMs":`...)
	return strconv.AppendInt(b, taskPollMs, 10)
}

// abort forgets t, which never ran.
func (t *mtask) abort() {
	t.mu.Lock()
	t.status = mcp.TaskCancelled
	if t.timer != nil {
		t.timer.Stop()
	}
	t.mu.Unlock()
	t.s.mtasks.remove(t)
	t.cancel(ErrShuttingDown)
}

// expire ends t when its ttl has passed, and forgets it.
func (t *mtask) expire() {
	t.mu.Lock()
	if !t.terminal() {
		t.setLocked(mcp.TaskCancelled, "task ttl expired")
	}
	t.mu.Unlock()
	t.cancel(errTaskCancelled)
	t.s.mtasks.remove(t)
}

// setLocked moves t to status, with t.mu held.
func (t *mtask) setLocked(status, msg string) {
	t.status, t.msg, t.updated = status, msg, time.Now()
	if status != mcp.TaskInputRequired {
		t.inputs = nil
	}
}

// runModernTask runs the handler of t and settles t with its outcome.
func (s *Server) runModernTask(t *mtask, r *request, p *mcp.CallToolParams) {
	defer s.adm.done()
	body, callErr := s.callModernTask(t, r, p)
	t.mu.Lock()
	if !t.started {
		t.body, t.callErr = body, callErr
		t.status = mcp.TaskCancelled // never a task: StartTask fails from now
		close(t.decided)
		t.mu.Unlock()
		t.cancel(nil)
		return
	}
	// tasks/cancel or the ttl may have ended the task first.
	if !t.terminal() {
		if callErr != nil {
			e := codec.AsError(callErr)
			t.err = e
			t.setLocked(mcp.TaskFailed, e.Message)
		} else {
			t.result = body
			t.setLocked(mcp.TaskCompleted, "")
		}
	}
	t.mu.Unlock()
	t.cancel(nil)
}

// callModernTask runs the tool and encodes its result.
func (s *Server) callModernTask(t *mtask, r *request, p *mcp.CallToolParams) (body []byte, err error) {
	defer func() {
		if v := recover(); v != nil {
			s.recovered(v, "task handler "+t.id, r.sess, mcp.MethodToolsCall)
			body, err = nil, &codec.Error{Code: codec.CodeInternalError, Message: "internal error: handler panicked"}
		}
	}()
	r.call = handlers.CallToolRequest{Peer: r, Params: p}
	res, err := s.reg.CallTool(r.ctx, &r.call)
	if err != nil {
		return nil, err
	}
	if res == nil {
		res = &mcp.CallToolResult{}
	}
	return res.AppendJSON(nil)
}

// StartTask implements handlers.TaskStarter.
func (r *request) StartTask() bool {
	if r.mtask == nil {
		return false
	}
	return r.mtask.start()
}

var _ handlers.TaskStarter = (*request)(nil)

// input is a task handler's request for client input: before the task
// started, a multi round-trip input of the request; after, the task waits
// in input_required until tasks/update answers it.
func (t *mtask) input(ctx context.Context, r *request, key, method string, params, result any) error {
	t.mu.Lock()
	if !t.started {
		defer t.mu.Unlock()
		return r.input(key, method, params, result)
	}
	if t.terminal() {
		t.mu.Unlock()
		return context.Cause(t.ctx)
	}
	var raw []byte
	if params != nil {
		var err error
		if raw, err = codec.Marshal(params); err != nil {
			t.mu.Unlock()
			return fmt.Errorf("engine: encoding %s params: %w", method, err)
		}
	}
	if key == "" {
		t.seq[method]++
		key = inputKey(method, t.seq[method])
	}
	in := &taskInput{key: key, method: method, params: raw, answer: make(chan json.RawMessage, 1)}
	t.inputs = append(t.inputs, in)
	t.setLocked(mcp.TaskInputRequired, "waiting for "+method)
	t.mu.Unlock()

	var err error
	select {
	case ans := <-in.answer:
		if e := codec.Unmarshal(ans, result); e != nil {
			err = codec.NewError(codec.CodeInvalidParams, "invalid params: inputResponses["+strconv.Quote(key)+"]: "+e.Error())
		}
		return err
	case <-ctx.Done():
		err = context.Cause(ctx)
	case <-t.ctx.Done():
		err = context.Cause(t.ctx)
	}
	t.mu.Lock()
	for i, x := range t.inputs {
		if x == in {
			t.inputs = append(t.inputs[:i], t.inputs[i+1:]...)
			break
		}
	}
	if len(t.inputs) == 0 && t.status == mcp.TaskInputRequired {
		t.setLocked(mcp.TaskWorking, "")
	}
	t.mu.Unlock()
	return err
}

// taskSink passes what a task's handler sends to its request's stream
// until the request is answered, and drops it after.
type taskSink struct {
	mu sync.Mutex
	to session.Sink
}

func (k *taskSink) Send(b *codec.Buffer) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.to == nil {
		codec.PutBuffer(b)
		return nil
	}
	return k.to.Send(b)
}

func (k *taskSink) detach() {
	k.mu.Lock()
	k.to = nil
	k.mu.Unlock()
}

// taskMethodParams are the params of tasks/get, tasks/update and
// tasks/cancel.
type taskMethodParams struct {
	TaskID         string          `json:"taskId"`
	InputResponses json.RawMessage `json:"inputResponses"`
}

// modernTaskMethod answers tasks/get, tasks/update and tasks/cancel of
// 2026-07-28 at once.
func (s *Server) modernTaskMethod(m *codec.Message, mm *modernMeta, out []byte, reply session.Sink) []byte {
	if !hasTasksExt(mm.caps) {
		e := MissingCapability(tasksExtCaps)
		reject(reply, e.Code)
		return codec.AppendErrorObject(out, m.ID, e)
	}
	var p taskMethodParams
	if len(m.Params) == 0 || codec.Unmarshal(m.Params, &p) != nil || p.TaskID == "" {
		return codec.AppendError(out, m.ID, codec.CodeInvalidParams, "invalid params: "+m.Method+" needs a taskId", nil)
	}
	var answers map[string]json.RawMessage
	if m.Method == mcp.MethodTasksUpdate && len(p.InputResponses) > 0 && string(p.InputResponses) != "null" {
		if codec.Unmarshal(p.InputResponses, &answers) != nil {
			return codec.AppendError(out, m.ID, codec.CodeInvalidParams, "invalid params: inputResponses must be an object", nil)
		}
	}
	t := s.mtasks.get(p.TaskID)
	if t == nil {
		return codec.AppendError(out, m.ID, codec.CodeInvalidParams, "invalid params: unknown task "+strconv.Quote(p.TaskID), nil)
	}
	start := len(out)
	out = codec.AppendResultStart(out, m.ID)
	switch m.Method {
	case mcp.MethodTasksGet:
		out = t.appendDetailed(out)
	case mcp.MethodTasksUpdate:
		t.update(answers)
		out = append(out, `{"resultType":"complete"}`...)
	case mcp.MethodTasksCancel:
		t.cancelByRequest()
		out = append(out, `{"resultType":"complete"}`...)
	}
	out = append(out, '}')
	return s.modernTail(out, start, nil)
}

// appendDetailed appends the task's state, as tasks/get answers it.
func (t *mtask) appendDetailed(b []byte) []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	b = append(b, `{"resultType":"complete","taskId":`...)
	b = codec.AppendString(b, t.id)
	b = append(b, `,"status":`...)
	b = codec.AppendString(b, t.status)
	if t.msg != "" {
		b = append(b, `,"statusMessage":`...)
		b = codec.AppendString(b, t.msg)
	}
	b = t.appendTimes(b)
	switch t.status {
	case mcp.TaskCompleted:
		b = append(b, `,"result":`...)
		b = append(b, t.result...)
	case mcp.TaskFailed:
		b = append(b, `,"error":`...)
		if e, err := codec.Marshal(t.err); err == nil {
			b = append(b, e...)
		} else {
			b = append(b, `{"code":-32603,"message":"internal error"}`...)
		}
	case mcp.TaskInputRequired:
		b = append(b, `,"inputRequests":{`...)
		for i, in := range t.inputs {
			if i > 0 {
				b = append(b, ',')
			}
			b = codec.AppendString(b, in.key)
			b = append(b, `:{"method":`...)
			b = codec.AppendString(b, in.method)
			if in.params != nil {
				b = append(b, `,"params":`...)
				b = append(b, in.params...)
			}
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

// update delivers the answers to the inputs t waits for; keys it does not
// wait for are ignored.
func (t *mtask) update(answers map[string]json.RawMessage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(answers) == 0 || t.terminal() {
		return
	}
	kept := t.inputs[:0]
	for _, in := range t.inputs {
		if ans, ok := answers[in.key]; ok {
			in.answer <- ans
			delete(answers, in.key) // one answer per key
			continue
		}
		kept = append(kept, in)
	}
	clear(t.inputs[len(kept):])
	t.inputs = kept
	if len(t.inputs) == 0 && t.status == mcp.TaskInputRequired {
		t.setLocked(mcp.TaskWorking, "")
	}
}

// cancelByRequest ends t, unless it has ended: its handler's context is
// cancelled.
func (t *mtask) cancelByRequest() {
	t.mu.Lock()
	if t.terminal() {
		t.mu.Unlock()
		return
	}
	t.setLocked(mcp.TaskCancelled, "The task was cancelled by request.")
	t.mu.Unlock()
	t.cancel(errTaskCancelled)
}

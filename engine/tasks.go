package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
)

// Tasks: one store and one task type for both revisions.
//
// 2025-11-25: a tools/call with params.task is answered at once with a
// CreateTaskResult while the tool runs on; the client polls tasks/get,
// fetches the outcome with tasks/result (which waits for a terminal
// state), lists with tasks/list, stops with tasks/cancel, and is told of
// each status change (notifications/tasks/status). Such a task ends with
// its session.
//
// 2026-07-28, the tasks extension (io.modelcontextprotocol/tasks): a
// request opts in by declaring the extension in the clientCapabilities
// of its _meta. A tools/call of a tool that supports tasks is then made a
// task by the server (params.task is ignored) and answered with a flat
// CreateTaskResult (resultType "task"); the client polls tasks/get,
// answers the inputs the task waits for with tasks/update (a handler's
// Elicit, CreateMessage or ListRoots parks the task in input_required,
// its inputs listed in inputRequests under their keys), and stops it with
// tasks/cancel. Without the extension, a tool whose task support is
// optional runs as a plain request, and one that requires it is refused
// with -32021. A tool registered with ToolOptions.DeferTask first runs as
// a plain request, gathering its inputs in multi round-trip rounds, and
// becomes a task when it calls handlers.StartTask.
//
// Every task is bound to its owner (taskOwner): the subject of an
// authenticated caller, else the session that created a 2025-11-25 task,
// else the client's address. A request of anyone else finds nothing:
// tasks/get, tasks/list, tasks/update, tasks/cancel and tasks/result
// answer as for an id never issued. Ids name their node
// ("<NodeID>.<random>", SessionNode) and are unguessable.
//
// Budgets (Options): a task's handler runs on the worker pool, and at
// most TaskWorkers of its workers run tasks at once (-task-workers); a
// client keeps at most MaxTasksPerClient tasks (-max-tasks-per-client),
// the server MaxTasks (-max-tasks), each for at most TaskTTL, and the
// results kept are bounded in bytes (MaxTaskBytes). When a new
// task finds no room, the oldest task that has ended is forgotten, then a
// 2026-07-28 task nobody polled for TaskIdle is cancelled (its client is
// gone); failing both the task is refused with -32000, data
// {"limit":"tasks"} (the client's share; HTTP 429) or
// {"limit":"task-workers"} (the server's; HTTP 503). Shutdown cancels the
// tasks still running, and the drain waits for their handlers to return.

const (
	relatedTaskKey = "io.modelcontextprotocol/related-task"
	taskPollMs     = 500 // the poll interval a task suggests
	// tasksExtCaps is the ClientCapabilities the tasks extension needs.
	tasksExtCaps = `{"extensions":{"` + mcp.ExtensionTasks + `":{}}}`
)

var (
	errTaskCancelled = errors.New("engine: task cancelled by request")
	errTaskAbandoned = errors.New("engine: task abandoned by its client (not polled), cancelled to make room")
	errTaskNotFound  = codec.NewError(codec.CodeInvalidParams, "invalid params: unknown task (it never existed, has expired, or is not yours)")
)

// ErrTaskNotFound is the answer to a tasks method that names a task that
// never existed, has expired, or is another caller's: the same for all
// three, so that an id tells nothing. A gateway answers so for the tasks
// its upstreams hold (handlers.Registry.SetForeignTasks).
var ErrTaskNotFound = errTaskNotFound

// TaskOwnerOf returns the key the engine binds the tasks created by the
// request of p (the Peer of a handler of this engine) to, as for its own
// tasks: its verified caller's subject, else, for a 2026-07-28 request,
// the client's address, else its session. A gateway binds the tasks an
// upstream creates for a request to it, so that another caller finds
// nothing. "" when p is not the engine's.
func TaskOwnerOf(p handlers.Peer) string {
	r, ok := p.(*request)
	if !ok {
		return ""
	}
	return taskOwner(r.sess, r.caller(), r.stateless.on)
}

// task is a task of either revision.
type task struct {
	s      *Server
	id     string
	owner  string           // who may see it (taskOwner)
	client string           // whose share it counts against (taskClient)
	sess   *session.Session // 2025-11-25: the session it belongs to; nil for 2026-07-28
	req    *request         // the handler's request, the task's own
	size   int              // the bytes of its result the store counts (taskStore.mu)
	sink   *taskSink        // 2026-07-28: the creating request's stream, until it is answered
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu       sync.Mutex
	status   string
	msg      string
	created  time.Time
	updated  time.Time
	polled   time.Time // 2026-07-28: when its owner last asked about it
	ttl      time.Duration
	started  bool          // the client knows of it (CreateTaskResult sent)
	slot     bool          // holds one of the task workers
	decided  chan struct{} // closed when started, or when the handler returned first
	done     chan struct{} // closed when it ends
	result   []byte        // the tool's result
	toolErr  bool          // the result has isError set
	err      *codec.Error  // the error it ended with
	inputs   []*taskInput  // 2026-07-28: the inputs it waits for, in the order asked
	seq      map[string]int
	timer    *time.Timer
	res      *mcp.CallToolResult // a deferred handler that returned before starting: its result
	body     []byte              // or a raw tool's, as it came (res nil)
	callErr  error               // or its error
	creation []byte              // the CreateTaskResult
	// deferHint: a 2025-11-25 task of a DeferTask tool whose client is
	// a proxy (mcp.MetaDeferTask in its CreateTaskResult).
	deferHint bool
}

// taskInput is an input a 2026-07-28 task's handler waits for.
type taskInput struct {
	pendingInput
	answer chan json.RawMessage // buffered: tasks/update never blocks
}

func (t *task) terminal() bool {
	switch t.status {
	case mcp.TaskCompleted, mcp.TaskFailed, mcp.TaskCancelled:
		return true
	}
	return false
}

// endLocked moves t, not ended, to a terminal status, with t.mu held, and
// gives back its task worker; it reports false when t had ended.
func (t *task) endLocked(status, msg string, err *codec.Error) bool {
	if t.terminal() {
		return false
	}
	t.status, t.msg, t.updated, t.inputs = status, msg, time.Now(), nil
	if err != nil {
		t.err = err
	}
	if t.slot {
		t.slot = false
		t.s.tasks.running.Add(-1)
	}
	close(t.done)
	return true
}

// end ends t with cause unless it has ended: its handler's context is
// cancelled, and a 2025-11-25 session is told.
func (t *task) end(msg string, cause error) {
	t.mu.Lock()
	ok := t.endLocked(mcp.TaskCancelled, msg, &codec.Error{Code: codec.CodeInvalidRequest, Message: msg})
	t.mu.Unlock()
	t.cancel(cause)
	if ok {
		t.notify()
	}
}

// taskStore holds the server's tasks, of both revisions.
type taskStore struct {
	running atomic.Int64 // task workers held: tasks not ended, and deferred handlers not yet tasks

	mu       sync.Mutex
	byID     map[string]*task
	order    []*task                       // started tasks, oldest first
	pending  int                           // deferred handlers not yet tasks
	bytes    int64                         // the results kept
	clients  map[string]int                // tasks kept and pending, by client
	sessions map[*session.Session]struct{} // sessions told to drop their tasks on close
}

func newTaskStore() *taskStore {
	return &taskStore{byID: map[string]*task{}, clients: map[string]int{}, sessions: map[*session.Session]struct{}{}}
}

// taskOwner returns the key a request's tasks are bound to, and which a
// request must present to see a task: the subject of its verified caller
// (callerOf: a Subject, auth.Info), else the session for the tasks of a
// session (2025-11-25), else the client's address (2026-07-28 requests,
// stateless).
func taskOwner(sess *session.Session, caller any, stateless bool) string {
	if sub := SubjectOf(caller); sub != "" {
		return "sub:" + sub
	}
	if !stateless {
		return "sess:" + sess.ID()
	}
	return remoteKey(sess)
}

// taskClient returns whose share of tasks a request's task counts
// against: the authenticated subject, else the client's address (every
// session of one address shares one), else the session.
func taskClient(sess *session.Session, caller any, stateless bool) string {
	if sub := SubjectOf(caller); sub != "" {
		return "sub:" + sub
	}
	if a := sess.Remote(); a.IsValid() || stateless {
		return remoteKey(sess)
	}
	return "sess:" + sess.ID()
}

func remoteKey(sess *session.Session) string {
	if a := sess.Remote(); a.IsValid() {
		return "addr:" + a.String()
	}
	return "addr:" // unknown (stdio, an embedder's transport): one client
}

// find returns the task id of owner, nil when there is none.
// has reports whether a task id is held here, whoever owns it.
func (st *taskStore) has(id string) bool {
	st.mu.Lock()
	_, ok := st.byID[id]
	st.mu.Unlock()
	return ok
}

func (st *taskStore) find(owner, id string) *task {
	st.mu.Lock()
	t := st.byID[id]
	st.mu.Unlock()
	if t == nil || t.owner != owner {
		return nil
	}
	return t
}

// reserve takes room for t, about to run: a task worker, a place in its
// client's share and one in the server's. It makes room by forgetting the
// oldest task that has ended, then by cancelling the 2026-07-28 task
// polled least recently when nobody has polled it for Options.TaskIdle;
// it returns the refusal when that frees nothing.
func (s *Server) reserve(t *task) *LimitError {
	st, o := s.tasks, &s.opts
	var reclaim []*task
	register := false
	defer func() { // outside the lock: the cancelled handlers, the session's hook
		for _, x := range reclaim {
			x.cancel(errTaskAbandoned)
		}
		if register {
			sess := t.sess
			sess.OnClose(func() { s.dropSessionTasks(sess) })
		}
	}()
	st.mu.Lock()
	defer st.mu.Unlock()
	now := time.Now()
	if o.MaxTasksPerClient > 0 && st.clients[t.client] >= o.MaxTasksPerClient {
		if x := st.oldestEnded(t.client); x != nil {
			st.removeLocked(x)
		} else if x := st.abandoned(t.client, now, o.TaskIdle); x != nil {
			reclaim = append(reclaim, x)
			st.removeLocked(x)
		} else {
			return errTasks
		}
	}
	if st.running.Load() >= int64(o.TaskWorkers) {
		x := st.abandoned("", now, o.TaskIdle) // kept, ended: its client may still ask
		if x == nil {
			return errTaskWorkers
		}
		reclaim = append(reclaim, x)
	}
	if len(st.order)+st.pending >= o.MaxTasks {
		x := st.oldestEnded("")
		if x == nil {
			return errTaskWorkers
		}
		st.removeLocked(x)
	}
	st.clients[t.client]++
	st.pending++
	st.running.Add(1)
	t.slot = true
	if t.sess != nil {
		if _, ok := st.sessions[t.sess]; !ok {
			st.sessions[t.sess] = struct{}{}
			register = true
		}
	}
	return nil
}

// oldestEnded returns the oldest task of client ("": of anyone) that has
// ended. st.mu is held.
func (st *taskStore) oldestEnded(client string) *task {
	for _, x := range st.order {
		if client != "" && x.client != client {
			continue
		}
		x.mu.Lock()
		ended := x.terminal()
		x.mu.Unlock()
		if ended {
			return x
		}
	}
	return nil
}

// abandoned ends and returns the running 2026-07-28 task of client ("":
// of anyone) polled least recently, when nobody polled it for idle; nil
// when there is none. st.mu is held.
func (st *taskStore) abandoned(client string, now time.Time, idle time.Duration) *task {
	var best *task
	var bestPolled time.Time
	for _, x := range st.order {
		if x.sess != nil || (client != "" && x.client != client) {
			continue // a 2025-11-25 task lives while its session does
		}
		x.mu.Lock()
		if !x.terminal() && now.Sub(x.polled) >= idle && (best == nil || x.polled.Before(bestPolled)) {
			best, bestPolled = x, x.polled
		}
		x.mu.Unlock()
	}
	if best != nil {
		best.mu.Lock()
		best.endLocked(mcp.TaskCancelled, "cancelled: not polled for "+idle.String(), nil)
		best.mu.Unlock()
	}
	return best
}

// removeLocked forgets x, a started task. st.mu is held.
func (st *taskStore) removeLocked(x *task) {
	if st.byID[x.id] != x {
		return
	}
	delete(st.byID, x.id)
	for i, y := range st.order {
		if y == x {
			st.order = append(st.order[:i], st.order[i+1:]...)
			break
		}
	}
	st.clients[x.client]--
	if st.clients[x.client] <= 0 {
		delete(st.clients, x.client)
	}
	st.bytes -= int64(x.size)
	x.size = 0
	x.mu.Lock()
	if x.timer != nil {
		x.timer.Stop()
	}
	x.mu.Unlock()
}

func (st *taskStore) remove(x *task) {
	st.mu.Lock()
	st.removeLocked(x)
	st.mu.Unlock()
}

// unreserve gives back what reserve took for t, which never became a task.
func (st *taskStore) unreserve(t *task) {
	st.mu.Lock()
	st.pending--
	st.clients[t.client]--
	if st.clients[t.client] <= 0 {
		delete(st.clients, t.client)
	}
	st.mu.Unlock()
	t.mu.Lock()
	if t.slot {
		t.slot = false
		st.running.Add(-1)
	}
	t.mu.Unlock()
}

// each calls fn for every task kept, outside the store's lock.
func (st *taskStore) each(match func(*task) bool, fn func(*task)) {
	st.mu.Lock()
	var list []*task
	for _, t := range st.order {
		if match(t) {
			list = append(list, t)
		}
	}
	st.mu.Unlock()
	for _, t := range list {
		fn(t)
	}
}

// SessionNode returns the node a session id, or a task id, names
// (Options.NodeID of the node that opened the session or created the
// task), nil when none. It allocates nothing.
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

// RunningTasks returns the number of task handlers running (Active counts
// requests).
func (s *Server) RunningTasks() int64 { return s.taskHandlers.Load() }

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

// startTask runs the tool of r as a task, on a worker of the pool: a task
// from the start when now is set, else when its handler calls StartTask.
// It waits for that, or for the handler to return first, and appends the
// answer: the CreateTaskResult, or the handler's result. A refusal (the
// budgets, a full pool, the drain) is also left in r.refused, for a
// Refuser to answer in its own terms.
func (s *Server) startTask(r *request, dst []byte, now bool) ([]byte, error) {
	// The task outlives the request: its own request object (not pooled)
	// and its own copy of the message, which its params alias.
	tr := &request{s: s, sess: r.sess}
	tr.buf = codec.AppendRequest(nil, r.msg.ID, r.msg.Method, r.msg.Params)
	if err := codec.Decode(tr.buf, &tr.msg); err != nil {
		return dst, err
	}
	stateless := r.stateless.on
	if stateless {
		if _, e := parseStateless(tr.msg.Params, nil, &tr.stateless); e != nil {
			return dst, e
		}
		tr.stateless.caller = r.stateless.caller // the task's own request keeps its verified caller
	}
	if tr.tool.scan(tr.msg.Params) {
		tr.tool.fill(&tr.params)
	} else if err := decodeParams(tr, &tr.params); err != nil {
		return dst, err
	}
	// What the handler may ask of its Peer from several goroutines is
	// decoded now.
	tr.ClientCapabilities()
	tr.ClientInfo()
	tr.progressToken()

	t := &task{s: s, id: s.newTaskID(), req: tr, owner: taskOwner(r.sess, r.caller(), stateless), client: taskClient(r.sess, r.caller(), stateless),
		status: mcp.TaskWorking, decided: make(chan struct{}), done: make(chan struct{}), seq: map[string]int{}, ttl: s.opts.TaskTTL,
		deferHint: r.deferHint}
	base := s.ctx
	if stateless {
		t.sink = &taskSink{to: r.reply}
		tr.reply = t.sink
	} else {
		t.sess, tr.reply, base = r.sess, r.sess.Out, r.sess.Context()
		if p := tr.params.Task; p != nil && p.TTL != nil && *p.TTL > 0 {
			t.ttl = min(t.ttl, time.Duration(*p.TTL)*time.Millisecond)
		}
	}
	t.ctx, t.cancel = context.WithCancelCause(base)
	tr.ctx, tr.task = t.ctx, t

	refuse := func(le *LimitError) ([]byte, error) {
		t.cancel(le)
		r.refused = le
		return dst, le
	}
	if le := s.reserve(t); le != nil {
		return refuse(le)
	}
	if !s.adm.admit() {
		s.tasks.unreserve(t)
		return refuse(errShutdown)
	}
	if now && !t.start() { // the drain began
		s.adm.done()
		s.tasks.unreserve(t)
		return refuse(errShutdown)
	}
	if err := s.invokeNow(tr); err != nil {
		s.adm.done()
		t.mu.Lock()
		started := t.started
		t.endLocked(mcp.TaskCancelled, "server busy", nil)
		t.mu.Unlock()
		if started {
			s.tasks.remove(t)
		} else {
			s.tasks.unreserve(t)
		}
		return refuse(errWorkers)
	}
	if !now {
		select {
		case <-t.decided:
		case <-r.ctx.Done():
			// The request ended before the handler decided (the client
			// went away): so does the handler.
			t.cancel(context.Cause(r.ctx))
			<-t.decided
		}
	}
	if t.sink != nil {
		t.sink.detach()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.started {
		r.shape = shapeTyped // a CreateTaskResult
		return append(dst, t.creation...), nil
	}
	if st := tr.mrtr; st != nil && len(st.pending) > 0 {
		r.mrtr = st // answered with an InputRequiredResult (finishStateless)
		return dst, nil
	}
	if t.callErr != nil {
		return dst, t.callErr
	}
	if t.res == nil {
		r.shape = shapeUnknown // a raw tool's bytes: scanned
		return append(dst, t.body...), nil
	}
	return s.appendToolResult(r, t.res, dst)
}

// start makes t a task the client is told of; it reports false when it
// cannot be one (it ended, the server is draining, or an input asked for
// before is unanswered).
func (t *task) start() bool {
	t.mu.Lock()
	if t.started || t.terminal() || t.s.adm.closing() {
		defer t.mu.Unlock()
		return t.started
	}
	if st := t.req.mrtr; st != nil && len(st.pending) > 0 {
		t.mu.Unlock()
		return false
	}
	now := time.Now()
	t.created, t.updated, t.polled, t.started = now, now, now, true
	b := make([]byte, 0, 256)
	if t.sess != nil {
		b = append(b, `{"task":`...)
		b = t.appendSessionTask(b)
		if t.deferHint {
			b = append(b, `,"_meta":{"`+mcp.MetaDeferTask+`":true}`...)
		}
	} else {
		b = append(b, `{"resultType":"task","taskId":`...)
		b = codec.AppendString(b, t.id)
		b = append(b, `,"status":"working"`...)
		b = t.appendTimes(b)
	}
	t.creation = append(b, '}')
	t.timer = time.AfterFunc(t.ttl, t.expire)
	t.mu.Unlock()
	st := t.s.tasks // the store's lock is taken before a task's, never after
	st.mu.Lock()
	st.pending--
	st.byID[t.id] = t
	st.order = append(st.order, t)
	st.mu.Unlock()
	close(t.decided)
	if t.s.adm.closing() { // Shutdown's endTasks may have run before it was kept
		t.end("server shutting down", ErrShuttingDown)
	}
	return true
}

// appendTimes appends createdAt, lastUpdatedAt, ttlMs and pollIntervalMs
// (2026-07-28). t.mu is held.
func (t *task) appendTimes(b []byte) []byte {
	b = append(b, `,"createdAt":`...)
	b = codec.AppendString(b, nowISO(t.created))
	b = append(b, `,"lastUpdatedAt":`...)
	b = codec.AppendString(b, nowISO(t.updated))
	b = append(b, `,"ttlMs":`...)
	b = strconv.AppendInt(b, t.ttl.Milliseconds(), 10)
	b = append(b, `,"pollIntervalMs":`...)
	return strconv.AppendInt(b, taskPollMs, 10)
}

// appendSessionTask appends t as a 2025-11-25 Task. t.mu is held.
func (t *task) appendSessionTask(b []byte) []byte {
	b = append(b, `{"taskId":`...)
	b = codec.AppendString(b, t.id)
	b = append(b, `,"status":`...)
	b = codec.AppendString(b, t.status)
	if t.msg != "" {
		b = append(b, `,"statusMessage":`...)
		b = codec.AppendString(b, t.msg)
	}
	b = append(b, `,"createdAt":`...)
	b = codec.AppendString(b, nowISO(t.created))
	b = append(b, `,"lastUpdatedAt":`...)
	b = codec.AppendString(b, nowISO(t.updated))
	b = append(b, `,"ttl":`...)
	b = strconv.AppendInt(b, t.ttl.Milliseconds(), 10)
	b = append(b, `,"pollInterval":`...)
	b = strconv.AppendInt(b, taskPollMs, 10)
	return append(b, '}')
}

func nowISO(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// expire ends t when its ttl has passed, and forgets it.
func (t *task) expire() {
	t.end("task ttl expired", errTaskCancelled)
	t.s.tasks.remove(t)
}

// runTask runs the handler of r's task on a worker, and settles the task
// with its outcome.
func (s *Server) runTask(r *request) {
	t := r.task
	s.taskHandlers.Add(1)
	defer func() {
		s.taskHandlers.Add(-1)
		s.adm.done()
	}()
	res, body, toolErr, callErr := s.callTask(r)
	t.mu.Lock()
	if !t.started { // a deferred handler that returned before becoming a task
		t.res, t.body, t.callErr = res, body, callErr
		t.status = mcp.TaskCancelled // never a task: StartTask fails from now
		close(t.decided)
		t.mu.Unlock()
		s.tasks.unreserve(t)
		t.cancel(nil)
		return
	}
	t.mu.Unlock()
	// tasks/cancel, the ttl or the session's end may have ended it first.
	// The result is counted, and the oldest ended tasks forgotten, before
	// anyone can see t ended: the store holds its lock (taken before a
	// task's, as everywhere) from t's end until the bytes kept are back
	// under budget.
	st := s.tasks
	st.mu.Lock()
	t.mu.Lock()
	ended := false
	if !t.terminal() {
		switch {
		case callErr != nil:
			e := codec.AsError(callErr)
			ended = t.endLocked(mcp.TaskFailed, e.Message, e)
		case toolErr && t.sess != nil: // 2025-11-25: failed, with its result
			t.result, t.toolErr = body, true
			ended = t.endLocked(mcp.TaskFailed, "the tool reported an error", nil)
		default:
			t.result, t.toolErr = body, toolErr
			ended = t.endLocked(mcp.TaskCompleted, "", nil)
		}
	}
	keep := ended && len(t.result) > 0 && st.byID[t.id] == t
	if keep {
		t.size = len(t.result)
	}
	t.mu.Unlock()
	if keep {
		s.keepResultLocked(t.size)
	}
	st.mu.Unlock()
	t.cancel(nil)
	if ended {
		t.notify()
	}
}

// keepResultLocked counts n more bytes of results kept, forgetting the
// oldest tasks that have ended while the results kept are over
// Options.MaxTaskBytes. The store's lock is held.
func (s *Server) keepResultLocked(n int) {
	st := s.tasks
	st.bytes += int64(n)
	for st.bytes > s.opts.MaxTaskBytes {
		x := st.oldestEnded("")
		if x == nil {
			return
		}
		st.removeLocked(x)
	}
}

// callTask runs the tool of a task: its result (res), the result encoded
// as the task keeps it (body), and whether it is a tool error, or its
// error. A raw tool's result of a 2026-07-28 task passes as it came: body
// alone, res nil.
func (s *Server) callTask(r *request) (res *mcp.CallToolResult, body []byte, toolErr bool, err error) {
	defer func() {
		if v := recover(); v != nil {
			s.recovered(v, "task handler "+r.task.id, r.sess, mcp.MethodToolsCall)
			res, body, toolErr, err = nil, nil, false, &codec.Error{Code: codec.CodeInternalError, Message: "internal error: handler panicked"}
		}
	}()
	if r.stateless.on && s.reg.HasRaw() {
		// A deferred task's handler may answer an InputRequiredResult,
		// and the params reach it whole (inputResponses, requestState).
		r.raw = handlers.RawRequest{Peer: r, Method: mcp.MethodToolsCall, Name: r.params.Name, Params: r.msg.Params}
		out, ok, err := s.reg.CallRawTool(r.ctx, &r.raw)
		r.raw = handlers.RawRequest{}
		if ok {
			if err != nil {
				return nil, nil, false, err
			}
			if len(out) == 0 {
				return nil, nil, false, errRawResult
			}
			ie, found, _ := codec.ObjectField(out, "isError")
			return nil, out, found && string(ie) == "true", nil
		}
	}
	r.call = handlers.CallToolRequest{Peer: r, Params: &r.params}
	res, err = s.reg.CallTool(r.ctx, &r.call)
	if err != nil {
		return nil, nil, false, err
	}
	if res == nil {
		res = &mcp.CallToolResult{}
	}
	body, err = res.AppendJSON(nil)
	return res, body, res.IsError, err
}

// StartTask implements handlers.TaskStarter.
func (r *request) StartTask() bool {
	if r.task == nil || r.task.sess != nil {
		return false
	}
	return r.task.start()
}

var _ handlers.TaskStarter = (*request)(nil)

// dropSessionTasks ends and forgets the tasks of a closed session.
func (s *Server) dropSessionTasks(sess *session.Session) {
	st := s.tasks
	st.mu.Lock()
	delete(st.sessions, sess)
	var list []*task
	for _, t := range st.order {
		if t.sess == sess {
			list = append(list, t)
		}
	}
	for _, t := range list {
		st.removeLocked(t)
	}
	st.mu.Unlock()
	for _, t := range list {
		t.end("session closed", session.ErrClosed)
	}
}

// endTasks cancels every task still running (Shutdown): their handlers'
// contexts end, and the drain waits for them to return.
func (s *Server) endTasks() {
	s.tasks.each(func(*task) bool { return true }, func(t *task) {
		t.end("server shutting down", ErrShuttingDown)
	})
}

// notify sends a 2025-11-25 task's status to its session.
func (t *task) notify() {
	if t.sess == nil || t.sess.Out == nil {
		return
	}
	t.mu.Lock()
	params := t.appendSessionTask(nil)
	t.mu.Unlock()
	_ = t.s.notify(t.sess, t.sess.Out, mcp.NotificationTaskStatus, params)
}

// setStatus moves a 2025-11-25 task, not ended, to status (working or
// input_required), telling its session.
func (t *task) setStatus(status, msg string) {
	t.mu.Lock()
	ok := !t.terminal() && t.status != status
	if ok {
		t.status, t.msg, t.updated = status, msg, time.Now()
	}
	t.mu.Unlock()
	if ok {
		t.notify()
	}
}

// taskSink passes what a 2026-07-28 task's handler sends to its request's
// stream until the request is answered, and drops it after.
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

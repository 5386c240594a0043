package engine

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
)

// Tasks (2025-11-25): a tools/call with params.task is answered at once
// with a CreateTaskResult while the tool runs on; the client polls
// tasks/get, fetches the outcome with tasks/result (which waits for a
// terminal state), lists with tasks/list and stops with tasks/cancel.
// Tasks belong to the session that created them, are kept for their ttl,
// and are bounded in number per session.

const relatedTaskKey = "io.modelcontextprotocol/related-task"

var errTaskCancelled = errors.New("engine: task cancelled by request")

type task struct {
	mu      sync.Mutex
	t       mcp.Task
	sess    *session.Session
	created time.Time
	done    chan struct{}
	result  []byte       // the tools/call result, _meta related-task included
	err     *codec.Error // or the error it ended with
	cancel  context.CancelCauseFunc
}

type taskStore struct {
	mu        sync.Mutex
	byID      map[string]*task
	bySession map[*session.Session][]*task // creation order
}

func newTaskStore() *taskStore {
	return &taskStore{byID: map[string]*task{}, bySession: map[*session.Session][]*task{}}
}

func nowISO(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// snapshot returns a copy of the task's public state.
func (t *task) snapshot() mcp.Task {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.t
}

func (t *task) terminal() bool {
	switch t.t.Status {
	case mcp.TaskCompleted, mcp.TaskFailed, mcp.TaskCancelled:
		return true
	}
	return false
}

// setStatus moves a non-terminal task to status; it reports whether it did.
func (t *task) setStatus(status, msg string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.terminal() {
		return false
	}
	t.t.Status, t.t.StatusMessage, t.t.LastUpdatedAt = status, msg, nowISO(time.Now())
	return true
}

func (s *Server) lookupTask(sess *session.Session, id string) (*task, error) {
	s.tasks.mu.Lock()
	t, ok := s.tasks.byID[id]
	s.tasks.mu.Unlock()
	if !ok || t.sess != sess {
		return nil, &codec.Error{Code: codec.CodeInvalidParams, Message: "invalid params: unknown task " + strconv.Quote(id)}
	}
	return t, nil
}

func (s *Server) removeTask(t *task) {
	s.tasks.mu.Lock()
	defer s.tasks.mu.Unlock()
	delete(s.tasks.byID, t.t.TaskID)
	list := s.tasks.bySession[t.sess]
	for i, x := range list {
		if x == t {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(s.tasks.bySession, t.sess)
	} else {
		s.tasks.bySession[t.sess] = list
	}
}

// startToolTask creates a task for a task-augmented tools/call and runs the
// tool on its own goroutine. It appends the CreateTaskResult to dst.
func (s *Server) startToolTask(r *request, p *mcp.CallToolParams, dst []byte) ([]byte, error) {
	ttl := s.opts.TaskTTL
	if p.Task.TTL != nil && *p.Task.TTL > 0 {
		if req := time.Duration(*p.Task.TTL) * time.Millisecond; req < ttl {
			ttl = req
		}
	}
	ttlMs := ttl.Milliseconds()
	poll := int64(500)
	now := time.Now()
	t := &task{
		sess:    r.sess,
		created: now,
		done:    make(chan struct{}),
		t: mcp.Task{
			TaskID: session.NewID(), Status: mcp.TaskWorking,
			CreatedAt: nowISO(now), LastUpdatedAt: nowISO(now),
			TTL: &ttlMs, PollInterval: &poll,
		},
	}
	s.tasks.mu.Lock()
	if len(s.tasks.bySession[r.sess]) >= s.opts.MaxTasks {
		s.tasks.mu.Unlock()
		return dst, &codec.Error{Code: codec.CodeServerBusy, Message: "too many tasks for this session: limit " + strconv.Itoa(s.opts.MaxTasks)}
	}
	if len(s.tasks.bySession[r.sess]) == 0 {
		sess := r.sess
		sess.OnClose(func() { s.dropSessionTasks(sess) })
	}
	s.tasks.byID[t.t.TaskID] = t
	s.tasks.bySession[r.sess] = append(s.tasks.bySession[r.sess], t)
	s.tasks.mu.Unlock()
	time.AfterFunc(ttl, func() { s.expireTask(t) })

	// The task outlives the request: it gets its own request object (not
	// pooled), its own copy of the params, and the session's stream.
	tr := &request{s: s, sess: r.sess, reply: r.sess.Out, taskID: t.t.TaskID}
	tr.buf = codec.AppendRequest(nil, r.msg.ID, r.msg.Method, r.msg.Params)
	if err := codec.Decode(tr.buf, &tr.msg); err != nil {
		s.removeTask(t)
		return dst, err
	}
	var ctx context.Context
	ctx, t.cancel = context.WithCancelCause(r.sess.Context())
	tr.ctx = ctx
	// The params alias the request's buffer, which the task outlives.
	pc := mcp.CallToolParams{Name: strings.Clone(p.Name), Arguments: bytes.Clone(p.Arguments), Meta: bytes.Clone(p.Meta)}
	if !s.adm.admit() {
		s.removeTask(t)
		t.cancel(ErrShuttingDown)
		return dst, codec.NewError(codec.CodeServerBusy, "server shutting down")
	}
	// The answer describes the task as created: a fast tool may finish
	// before it is encoded.
	res := mcp.CreateTaskResult{Task: t.snapshot()}
	go s.runToolTask(t, tr, &pc)
	return appendJSON(dst, &res)
}

func (s *Server) runToolTask(t *task, r *request, p *mcp.CallToolParams) {
	defer s.adm.done()
	body, toolErr, cerr := s.callToolTask(t, r, p)
	t.mu.Lock()
	// tasks/cancel or the ttl may have ended the task first; whoever moves
	// it to a terminal status sends the one status notification.
	finished := !t.terminal()
	if finished {
		switch {
		case cerr != nil:
			t.t.Status, t.t.StatusMessage = mcp.TaskFailed, cerr.Message
			t.err = cerr
		case toolErr:
			t.t.Status, t.t.StatusMessage = mcp.TaskFailed, "the tool reported an error"
			t.result = withRelatedTask(body, t.t.TaskID)
		default:
			t.t.Status = mcp.TaskCompleted
			t.result = withRelatedTask(body, t.t.TaskID)
		}
		t.t.LastUpdatedAt = nowISO(time.Now())
		close(t.done)
	}
	t.mu.Unlock()
	t.cancel(nil)
	if finished {
		s.notifyTaskStatus(t)
	}
}

// callToolTask runs the tool of a task and encodes its result; toolErr
// reports a result with isError set.
func (s *Server) callToolTask(t *task, r *request, p *mcp.CallToolParams) (body []byte, toolErr bool, cerr *codec.Error) {
	defer func() {
		if v := recover(); v != nil {
			s.recovered(v, "task handler "+t.t.TaskID, r.sess, mcp.MethodToolsCall)
			body, toolErr = nil, false
			cerr = &codec.Error{Code: codec.CodeInternalError, Message: "internal error: handler panicked"}
		}
	}()
	res, err := s.reg.CallTool(r.ctx, &handlers.CallToolRequest{Peer: r, Params: p})
	if err != nil {
		return nil, false, codec.AsError(err)
	}
	if res == nil {
		res = &mcp.CallToolResult{}
	}
	if body, err = res.AppendJSON(nil); err != nil {
		return nil, false, codec.AsError(err)
	}
	return body, res.IsError, nil
}

func (s *Server) expireTask(t *task) {
	t.mu.Lock()
	if !t.terminal() {
		t.t.Status, t.t.StatusMessage, t.t.LastUpdatedAt = mcp.TaskCancelled, "task ttl expired", nowISO(time.Now())
		t.err = &codec.Error{Code: codec.CodeInvalidRequest, Message: "task ttl expired"}
		close(t.done)
	}
	t.mu.Unlock()
	if t.cancel != nil {
		t.cancel(errTaskCancelled)
	}
	s.removeTask(t)
}

func (s *Server) dropSessionTasks(sess *session.Session) {
	s.tasks.mu.Lock()
	list := s.tasks.bySession[sess]
	delete(s.tasks.bySession, sess)
	for _, t := range list {
		delete(s.tasks.byID, t.t.TaskID)
	}
	s.tasks.mu.Unlock()
	for _, t := range list {
		if t.cancel != nil {
			t.cancel(session.ErrClosed)
		}
	}
}

func (s *Server) notifyTaskStatus(t *task) {
	if out := t.sess.Out; out != nil {
		snap := t.snapshot()
		if params, err := codec.Marshal(&snap); err == nil {
			_ = s.notify(t.sess, out, mcp.NotificationTaskStatus, params)
		}
	}
}

// withRelatedTask returns a copy of the JSON object obj with
// _meta["io.modelcontextprotocol/related-task"] added, unless obj has a
// _meta of its own.
func withRelatedTask(obj []byte, taskID string) []byte {
	if len(obj) < 2 || obj[0] != '{' || bytes.Contains(obj, []byte(`"_meta":`)) {
		return append([]byte(nil), obj...)
	}
	out := make([]byte, 0, len(obj)+64+len(taskID))
	out = append(out, `{"_meta":{"`+relatedTaskKey+`":{"taskId":`...)
	out = codec.AppendString(out, taskID)
	out = append(out, "}}"...)
	if len(bytes.TrimSpace(obj[1:len(obj)-1])) > 0 {
		out = append(out, ',')
	}
	return append(out, obj[1:]...)
}

type taskIDParams struct {
	TaskID string `json:"taskId"`
}

func (s *Server) taskFromParams(sess *session.Session, m *codec.Message) (*task, *codec.Error) {
	var p taskIDParams
	if len(m.Params) == 0 || codec.Unmarshal(m.Params, &p) != nil || p.TaskID == "" {
		return nil, codec.NewError(codec.CodeInvalidParams, "invalid params: "+m.Method+" needs a taskId")
	}
	t, err := s.lookupTask(sess, p.TaskID)
	if err != nil {
		return nil, codec.AsError(err)
	}
	return t, nil
}

// tasksGet, tasksCancel and tasksList answer at once (fast path).
func (s *Server) tasksGet(sess *session.Session, m *codec.Message, dst []byte) []byte {
	t, e := s.taskFromParams(sess, m)
	if e != nil {
		return codec.AppendErrorObject(dst, m.ID, e)
	}
	snap := t.snapshot()
	body, err := codec.Marshal(&snap)
	if err != nil {
		return codec.AppendError(dst, m.ID, codec.CodeInternalError, err.Error(), nil)
	}
	return codec.AppendResult(dst, m.ID, body)
}

func (s *Server) tasksCancel(sess *session.Session, m *codec.Message, dst []byte) []byte {
	t, e := s.taskFromParams(sess, m)
	if e != nil {
		return codec.AppendErrorObject(dst, m.ID, e)
	}
	t.mu.Lock()
	if t.terminal() {
		status := t.t.Status
		t.mu.Unlock()
		return codec.AppendError(dst, m.ID, codec.CodeInvalidParams, "invalid params: task is already "+status, nil)
	}
	t.t.Status, t.t.StatusMessage, t.t.LastUpdatedAt = mcp.TaskCancelled, "The task was cancelled by request.", nowISO(time.Now())
	t.err = &codec.Error{Code: codec.CodeInvalidRequest, Message: "task cancelled"}
	close(t.done)
	snap := t.t
	t.mu.Unlock()
	if t.cancel != nil {
		t.cancel(errTaskCancelled)
	}
	s.notifyTaskStatus(t)
	body, err := codec.Marshal(&snap)
	if err != nil {
		return codec.AppendError(dst, m.ID, codec.CodeInternalError, err.Error(), nil)
	}
	return codec.AppendResult(dst, m.ID, body)
}

func (s *Server) tasksList(sess *session.Session, m *codec.Message, dst []byte) []byte {
	var p struct {
		Cursor string `json:"cursor"`
	}
	if len(m.Params) > 0 && codec.Unmarshal(m.Params, &p) != nil {
		return codec.AppendError(dst, m.ID, codec.CodeInvalidParams, "invalid params: tasks/list", nil)
	}
	start := 0
	if p.Cursor != "" {
		n, err := base64.RawURLEncoding.DecodeString(p.Cursor)
		if err == nil {
			start, err = strconv.Atoi(string(n))
		}
		if err != nil || start < 0 {
			return codec.AppendError(dst, m.ID, codec.CodeInvalidParams, "invalid params: invalid cursor", nil)
		}
	}
	s.tasks.mu.Lock()
	list := append([]*task(nil), s.tasks.bySession[sess]...)
	s.tasks.mu.Unlock()
	page := s.opts.PageSize
	if page <= 0 {
		page = 100
	}
	res := mcp.ListTasksResult{Tasks: []mcp.Task{}}
	for i := start; i < len(list) && len(res.Tasks) < page; i++ {
		res.Tasks = append(res.Tasks, list[i].snapshot())
	}
	if next := start + len(res.Tasks); next < len(list) {
		res.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(next)))
	}
	body, err := codec.Marshal(&res)
	if err != nil {
		return codec.AppendError(dst, m.ID, codec.CodeInternalError, err.Error(), nil)
	}
	return codec.AppendResult(dst, m.ID, body)
}

// tasksResult waits for the task to end and appends exactly what the
// tools/call would have answered. It runs on a worker (it blocks).
func (s *Server) tasksResult(r *request, dst []byte) ([]byte, error) {
	t, e := s.taskFromParams(r.sess, &r.msg)
	if e != nil {
		return dst, e
	}
	select {
	case <-t.done:
	case <-r.ctx.Done():
		return dst, context.Cause(r.ctx)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return dst, t.err
	}
	return append(dst, t.result...), nil
}

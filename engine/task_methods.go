package engine

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
)

// The tasks methods of both revisions (tasks.go has the store, the
// budgets and the lifecycle): 2025-11-25's tasks/get, tasks/list,
// tasks/cancel and tasks/result, in a session; 2026-07-28's tasks/get,
// tasks/update and tasks/cancel, stateless. Each finds only the tasks of
// the caller's owner.

// withRelatedTask returns a copy of the JSON object obj with
// _meta["io.modelcontextprotocol/related-task"] added (into its own
// _meta when it has one).
func withRelatedTask(obj []byte, taskID string) []byte {
	link := append([]byte(`"`+relatedTaskKey+`":{"taskId":`), codec.AppendString(nil, taskID)...)
	return withMetaMember(obj, append(link, '}'))
}

// taskParams are the params of the tasks methods of both revisions.
type taskParams struct {
	TaskID         string          `json:"taskId"`
	Cursor         string          `json:"cursor"`
	InputResponses json.RawMessage `json:"inputResponses"`
}

// taskFromParams returns the task m's params name, if its owner is owner.
func (s *Server) taskFromParams(owner string, m *codec.Message, p *taskParams) (*task, *codec.Error) {
	if len(m.Params) == 0 || codec.Unmarshal(m.Params, p) != nil || p.TaskID == "" {
		return nil, codec.NewError(codec.CodeInvalidParams, "invalid params: "+m.Method+" needs a taskId, a string")
	}
	t := s.tasks.find(owner, p.TaskID)
	if t == nil {
		return nil, errTaskNotFound
	}
	return t, nil
}

// sessionTaskMethod answers tasks/get, tasks/cancel and tasks/list of a
// session (2025-11-25) at once, and returns the answer's code.
func (s *Server) sessionTaskMethod(sess *session.Session, m *codec.Message, dst []byte) ([]byte, int) {
	owner := taskOwner(sess, callerOf(sess, nil), false)
	var p taskParams
	if m.Method == mcp.MethodTasksList {
		return s.tasksList(owner, m, dst)
	}
	t, e := s.taskFromParams(owner, m, &p)
	if e != nil {
		return errObject(dst, m.ID, e)
	}
	if m.Method == mcp.MethodTasksCancel {
		t.mu.Lock()
		status, ended := t.status, t.terminal()
		t.mu.Unlock()
		if ended {
			return errAnswer(dst, m.ID, codec.CodeInvalidParams, "invalid params: task is already "+status)
		}
		t.end("The task was cancelled by request.", errTaskCancelled)
	}
	dst = codec.AppendResultStart(dst, m.ID)
	t.mu.Lock()
	dst = t.appendSessionTask(dst)
	t.mu.Unlock()
	return append(dst, '}'), 0
}

// tasksList answers tasks/list: the owner's tasks, a page at a time.
func (s *Server) tasksList(owner string, m *codec.Message, dst []byte) ([]byte, int) {
	var p taskParams
	if len(m.Params) > 0 && codec.Unmarshal(m.Params, &p) != nil {
		return errAnswer(dst, m.ID, codec.CodeInvalidParams, "invalid params: tasks/list takes an object with an optional cursor, a string")
	}
	start := 0
	if p.Cursor != "" {
		n, err := base64.RawURLEncoding.DecodeString(p.Cursor)
		if err == nil {
			start, err = strconv.Atoi(string(n))
		}
		if err != nil || start < 0 {
			return errAnswer(dst, m.ID, codec.CodeInvalidParams, "invalid params: cursor is not one this server issued")
		}
	}
	page := s.opts.PageSize
	if page <= 0 {
		page = 100
	}
	var list []*task
	s.tasks.each(func(t *task) bool { return t.owner == owner }, func(t *task) { list = append(list, t) })
	dst = codec.AppendResultStart(dst, m.ID)
	dst = append(dst, `{"tasks":[`...)
	i := start
	for ; i < len(list) && i < start+page; i++ {
		if i > start {
			dst = append(dst, ',')
		}
		list[i].mu.Lock()
		dst = list[i].appendSessionTask(dst)
		list[i].mu.Unlock()
	}
	dst = append(dst, ']')
	if i < len(list) {
		dst = append(dst, `,"nextCursor":`...)
		dst = codec.AppendString(dst, base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(i))))
	}
	return append(dst, "}}"...), 0
}

// tasksResult waits for the task to end and appends exactly what the
// tools/call would have answered (2025-11-25). It runs on a worker (it
// blocks).
func (s *Server) tasksResult(r *request, dst []byte) ([]byte, error) {
	var p taskParams
	t, e := s.taskFromParams(taskOwner(r.sess, r.caller(), false), &r.msg, &p)
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
	if t.result == nil && t.err != nil {
		return dst, t.err
	}
	return append(dst, withRelatedTask(t.result, t.id)...), nil
}

// statelessTaskMethod answers tasks/get, tasks/update and tasks/cancel of
// 2026-07-28 at once, and returns the answer's code.
func (s *Server) statelessTaskMethod(sess *session.Session, m *codec.Message, mm *statelessMeta, out []byte, reply session.Sink) ([]byte, int) {
	if !hasTasksExt(mm.caps) {
		e := MissingCapability(tasksExtCaps)
		reject(reply, e.Code)
		return errObject(out, m.ID, e)
	}
	var p taskParams
	t, e := s.taskFromParams(taskOwner(sess, callerOf(sess, mm), true), m, &p)
	if e != nil {
		return errObject(out, m.ID, e)
	}
	var answers map[string]json.RawMessage
	if m.Method == mcp.MethodTasksUpdate && len(p.InputResponses) > 0 && string(p.InputResponses) != "null" {
		if codec.Unmarshal(p.InputResponses, &answers) != nil {
			return errAnswer(out, m.ID, codec.CodeInvalidParams, "invalid params: inputResponses must be an object of results, by input key")
		}
	}
	out = codec.AppendResultStart(out, m.ID)
	out = append(out, `{"resultType":"complete"`...)
	switch m.Method {
	case mcp.MethodTasksGet:
		out = t.appendDetailed(out)
	case mcp.MethodTasksUpdate:
		t.update(answers)
	case mcp.MethodTasksCancel:
		t.end("The task was cancelled by request.", errTaskCancelled)
	}
	out = s.appendTail(out, true, nil, false, true)
	return append(out, "}}"...), 0
}

// appendDetailed appends the members of the task's state, as tasks/get of
// 2026-07-28 answers it, inside its result; its owner polled it now.
func (t *task) appendDetailed(b []byte) []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.polled = time.Now()
	b = append(b, `,"taskId":`...)
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
		if t.toolErr { // a 2025-11-25 task's tool error
			b = append(b, `,"result":`...)
			b = append(b, t.result...)
			break
		}
		b = append(b, `,"error":`...)
		if e, err := codec.Marshal(t.err); err == nil {
			b = append(b, e...)
		} else {
			b = append(b, `{"code":-32603,"message":"internal error"}`...)
		}
	case mcp.TaskInputRequired:
		b = append(b, ',')
		b = appendInputRequests(b, len(t.inputs), func(i int) *pendingInput { return &t.inputs[i].pendingInput })
	}
	return b
}

// update delivers the answers to the inputs t waits for; keys it does not
// wait for are ignored.
func (t *task) update(answers map[string]json.RawMessage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.polled = time.Now()
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
		t.status, t.msg, t.updated = mcp.TaskWorking, "", time.Now()
	}
}

// input is a 2026-07-28 task handler's request for client input: before
// the task started, a multi round-trip input of the request; after, the
// task waits in input_required until tasks/update answers it.
func (t *task) input(ctx context.Context, r *request, key, method string, params, result any) error {
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
	in := &taskInput{pendingInput: pendingInput{key: key, method: method, params: raw}, answer: make(chan json.RawMessage, 1)}
	t.inputs = append(t.inputs, in)
	t.status, t.msg, t.updated = mcp.TaskInputRequired, "waiting for "+method, time.Now()
	t.mu.Unlock()

	var err error
	select {
	case ans := <-in.answer:
		return decodeAnswer(key, ans, result)
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
		t.status, t.msg, t.updated = mcp.TaskWorking, "", time.Now()
	}
	t.mu.Unlock()
	return err
}

package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/require"
)

// taskFixture adds task tools to the engine fixture: "job" (optional task
// support; reports progress, then waits for release or its ctx), "mustTask"
// (required task support) and "fails" (optional; returns an isError result).
type taskFixture struct {
	*fixture
	jobRelease chan struct{}
	jobCauses  chan error
}

func newTaskFixture(t *testing.T, opts engine.Options) *taskFixture {
	f := &taskFixture{fixture: newFixture(t, opts), jobRelease: make(chan struct{}), jobCauses: make(chan error, 16)}
	r := f.srv.Registry()
	optional := &mcp.ToolExecution{TaskSupport: mcp.TaskOptional}
	require.NoError(t, r.AddTool(&mcp.Tool{Name: "job", Execution: optional}, func(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		_ = req.Peer.Progress(1, 2, "half way")
		select {
		case <-f.jobRelease:
			return mcp.TextResult("job done"), nil
		case <-ctx.Done():
			f.jobCauses <- context.Cause(ctx)
			return nil, context.Cause(ctx)
		}
	}))
	require.NoError(t, r.AddTool(&mcp.Tool{Name: "mustTask", Execution: &mcp.ToolExecution{TaskSupport: mcp.TaskRequired}},
		func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.TextResult("ran as a task"), nil
		}))
	require.NoError(t, r.AddTool(&mcp.Tool{Name: "fails", Execution: optional},
		func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.ErrorResult("it broke"), nil
		}))
	return f
}

// await returns the answer to id, gathering the notifications sent before it.
func (c *client) await(id string) (msg, []msg) {
	c.t.Helper()
	var notes []msg
	for {
		m := c.sink.next(c.t)
		if m.Method != "" && len(m.ID) == 0 {
			notes = append(notes, m)
			continue
		}
		require.Equal(c.t, id, string(m.ID), "answer out of order: %+v", m)
		return m, notes
	}
}

// send runs a request whose answer may come from the pool, and waits for it.
func (c *client) send(id, frame string) (msg, []msg) {
	c.t.Helper()
	if out := c.handle(frame); len(out) > 0 {
		return parse(c.t, out), nil
	}
	return c.await(id)
}

func startTask(t *testing.T, c *client, id int, tool string, ttl int) mcp.Task {
	task, _ := startTaskNotes(t, c, id, tool, ttl)
	return task
}

// startTaskNotes starts a task and also returns the notifications that came
// before its CreateTaskResult (the task runs at once and may send some).
func startTaskNotes(t *testing.T, c *client, id int, tool string, ttl int) (mcp.Task, []msg) {
	t.Helper()
	m, notes := c.send(fmt.Sprint(id), fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{},"task":{"ttl":%d},"_meta":{"progressToken":"p%d"}}}`, id, tool, ttl, id))
	require.Nil(t, m.Error, "%+v", m.Error)
	var res mcp.CreateTaskResult
	require.NoError(t, codec.Unmarshal(m.Result, &res))
	require.NotEmpty(t, res.Task.TaskID)
	require.Equal(t, mcp.TaskWorking, res.Task.Status)
	require.NotNil(t, res.Task.TTL)
	require.LessOrEqual(t, *res.Task.TTL, int64(ttl))
	require.NotEmpty(t, res.Task.CreatedAt)
	return res.Task, notes
}

func getTask(t *testing.T, c *client, id int, taskID string) (mcp.Task, msg) {
	t.Helper()
	m, _ := c.send(fmt.Sprint(id), fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tasks/get","params":{"taskId":%q}}`, id, taskID))
	var task mcp.Task
	if m.Error == nil {
		require.NoError(t, codec.Unmarshal(m.Result, &task))
	}
	return task, m
}

func TestTaskLifecycle(t *testing.T) {
	f := newTaskFixture(t, engine.Options{})
	c := f.ready(t, `{}`)
	task, early := startTaskNotes(t, c, 1, "job", 60000)

	got, _ := getTask(t, c, 2, task.TaskID)
	require.Equal(t, task.TaskID, got.TaskID)
	require.Equal(t, mcp.TaskWorking, got.Status)

	// tasks/result waits for the end, then answers exactly what tools/call
	// would have, with the related-task key.
	require.Empty(t, string(c.handle(`{"jsonrpc":"2.0","id":3,"method":"tasks/result","params":{"taskId":"`+task.TaskID+`"}}`)))
	close(f.jobRelease)
	res, notes := c.await("3")
	notes = append(early, notes...)
	require.Equal(t, "job done", res.text(t))
	require.Contains(t, string(res.Result), `"io.modelcontextprotocol/related-task":{"taskId":"`+task.TaskID+`"}`)

	// The task's progress carried the request's token and the related-task
	// key; its status notices went out too.
	var sawProgress, sawCompleted bool
	for _, n := range notes {
		switch n.Method {
		case mcp.NotificationProgress:
			sawProgress = true
			require.Contains(t, string(n.Params), `"progressToken":"p1"`)
			require.Contains(t, string(n.Params), task.TaskID)
		case mcp.NotificationTaskStatus:
			if strings.Contains(string(n.Params), `"status":"completed"`) {
				sawCompleted = true
			}
		}
	}
	require.True(t, sawProgress, "no progress notification among %+v", notes)
	if !sawCompleted { // the status notice may trail the result
		n := c.sink.next(t)
		require.Equal(t, mcp.NotificationTaskStatus, n.Method)
		require.Contains(t, string(n.Params), `"status":"completed"`)
	}

	got, _ = getTask(t, c, 4, task.TaskID)
	require.Equal(t, mcp.TaskCompleted, got.Status)

	// Cancelling a finished task is refused with -32602.
	m, _ := c.send("5", `{"jsonrpc":"2.0","id":5,"method":"tasks/cancel","params":{"taskId":"`+task.TaskID+`"}}`)
	requireError(t, m, "5", codec.CodeInvalidParams)
}

func TestTaskCancel(t *testing.T) {
	f := newTaskFixture(t, engine.Options{})
	c := f.ready(t, `{}`)
	task := startTask(t, c, 1, "job", 60000)
	m, _ := c.send("2", `{"jsonrpc":"2.0","id":2,"method":"tasks/cancel","params":{"taskId":"`+task.TaskID+`"}}`)
	require.Nil(t, m.Error)
	var got mcp.Task
	require.NoError(t, codec.Unmarshal(m.Result, &got))
	require.Equal(t, mcp.TaskCancelled, got.Status)
	select {
	case <-f.jobCauses: // the handler's context ended
	case <-time.After(wait):
		t.Fatal("cancelled task's handler kept running")
	}
	// The result of a cancelled task is an error, and the task stays cancelled.
	m, _ = c.send("3", `{"jsonrpc":"2.0","id":3,"method":"tasks/result","params":{"taskId":"`+task.TaskID+`"}}`)
	require.NotNil(t, m.Error)
	got, _ = getTask(t, c, 4, task.TaskID)
	require.Equal(t, mcp.TaskCancelled, got.Status)
}

func TestTaskSupportRules(t *testing.T) {
	f := newTaskFixture(t, engine.Options{})
	c := f.ready(t, `{}`)
	// A task for a tool that forbids them (the default) is -32601.
	m, _ := c.send("1", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},"task":{}}}`)
	requireError(t, m, "1", codec.CodeMethodNotFound)
	// A tool that requires a task refuses a plain call with -32601...
	m, _ = c.send("2", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mustTask","arguments":{}}}`)
	requireError(t, m, "2", codec.CodeMethodNotFound)
	// ...and runs as a task.
	task := startTask(t, c, 3, "mustTask", 1000)
	m, _ = c.send("4", `{"jsonrpc":"2.0","id":4,"method":"tasks/result","params":{"taskId":"`+task.TaskID+`"}}`)
	require.Equal(t, "ran as a task", m.text(t))
	// A tool's isError result makes the task failed, and tasks/result still
	// returns that result.
	task = startTask(t, c, 5, "fails", 1000)
	m, _ = c.send("6", `{"jsonrpc":"2.0","id":6,"method":"tasks/result","params":{"taskId":"`+task.TaskID+`"}}`)
	require.Equal(t, "it broke", m.text(t))
	got, _ := getTask(t, c, 7, task.TaskID)
	require.Equal(t, mcp.TaskFailed, got.Status)
	// Unknown ids are -32602.
	_, m = getTask(t, c, 8, "nope")
	requireError(t, m, "8", codec.CodeInvalidParams)
}

func TestTaskListScopeAndBounds(t *testing.T) {
	f := newTaskFixture(t, engine.Options{MaxTasksPerClient: 3, PageSize: 2})
	a, b := f.ready(t, `{}`), f.ready(t, `{}`)
	ids := map[string]bool{}
	for i := 1; i <= 3; i++ {
		ids[startTask(t, a, i, "job", 60000).TaskID] = true
	}
	// Over the client's share, every task running: refused.
	m, _ := a.send("9", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"job","arguments":{},"task":{}}}`)
	requireError(t, m, "9", codec.CodeServerBusy)
	require.Equal(t, engine.LimitTasks, limitOf(t, m))

	// tasks/list pages through a's tasks only.
	seen := map[string]bool{}
	cursor := ""
	for page := 0; page < 3; page++ {
		params := `{}`
		if cursor != "" {
			params = `{"cursor":"` + cursor + `"}`
		}
		m, _ := a.send("10", `{"jsonrpc":"2.0","id":10,"method":"tasks/list","params":`+params+`}`)
		require.Nil(t, m.Error)
		var res mcp.ListTasksResult
		require.NoError(t, codec.Unmarshal(m.Result, &res))
		for _, task := range res.Tasks {
			seen[task.TaskID] = true
		}
		if cursor = res.NextCursor; cursor == "" {
			break
		}
	}
	require.Equal(t, ids, seen)

	// Another session sees none of them.
	m, _ = b.send("11", `{"jsonrpc":"2.0","id":11,"method":"tasks/list"}`)
	require.JSONEq(t, `{"tasks":[]}`, string(m.Result))
	for id := range ids {
		_, m := getTask(t, b, 12, id)
		requireError(t, m, "12", codec.CodeInvalidParams)
	}
	close(f.jobRelease)
}

func TestTaskTTLExpires(t *testing.T) {
	f := newTaskFixture(t, engine.Options{})
	c := f.ready(t, `{}`)
	task := startTask(t, c, 1, "job", 50)
	select {
	case <-f.jobCauses: // expiry cancels the work
	case <-time.After(wait):
		t.Fatal("expired task kept running")
	}
	require.Eventually(t, func() bool {
		_, m := getTask(t, c, 2, task.TaskID)
		return m.Error != nil && m.Error.Code == codec.CodeInvalidParams
	}, wait, 10*time.Millisecond, "expired task still retrievable")
}

func TestTasksEndWithSession(t *testing.T) {
	f := newTaskFixture(t, engine.Options{})
	c := f.ready(t, `{}`)
	startTask(t, c, 1, "job", 60000)
	f.srv.Conn(c.sess).Close(nil)
	select {
	case <-f.jobCauses:
	case <-time.After(wait):
		t.Fatal("task outlived its session")
	}
}

// tasks/cancel sends one notifications/tasks/status; the handler that ends
// afterwards must not send a second (it did: defect 11).
func TestTaskCancelNotifiesOnce(t *testing.T) {
	f := newTaskFixture(t, engine.Options{})
	c := f.ready(t, `{}`)
	task := startTask(t, c, 1, "job", 60000)
	m, _ := c.send("2", `{"jsonrpc":"2.0","id":2,"method":"tasks/cancel","params":{"taskId":"`+task.TaskID+`"}}`)
	require.Nil(t, m.Error)
	select {
	case <-f.jobCauses:
	case <-time.After(wait):
		t.Fatal("cancelled task's handler kept running")
	}
	// Shutdown waits for the task's goroutine, so every notice it would
	// send has been sent when it returns.
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	require.NoError(t, f.srv.Shutdown(ctx))
	statuses := 0
	for {
		select {
		case b := <-c.sink.ch:
			n := parse(t, b)
			if n.Method == mcp.NotificationTaskStatus && strings.Contains(string(n.Params), task.TaskID) {
				statuses++
				require.Contains(t, string(n.Params), `"status":"cancelled"`)
			}
			continue
		default:
		}
		break
	}
	require.Equal(t, 1, statuses, "status notifications for the cancelled task")
}

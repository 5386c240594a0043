package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/require"
)

// The tasks extension of 2026-07-28, over HandleFrame (a TCP-like
// connection: answers on the session's sink) and over HandleMessage with
// a reply sink of the request's own (Streamable HTTP: Final, Reject).

const (
	capsTasks   = `{"elicitation":{},"sampling":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}`
	capsNoTasks = `{"elicitation":{}}`
)

type statelessTaskFixture struct {
	*fixture
	release chan struct{} // ends every "work" call
	causes  chan error    // why a "work" call's ctx ended
}

func newStatelessTaskFixture(t *testing.T, opts engine.Options) *statelessTaskFixture {
	f := &statelessTaskFixture{fixture: newFixture(t, opts), release: make(chan struct{}), causes: make(chan error, 16)}
	r := f.srv.Registry()
	optional := handlers.ToolOptions{TaskSupport: mcp.TaskOptional}
	required := handlers.ToolOptions{TaskSupport: mcp.TaskRequired}
	add := func(name string, o handlers.ToolOptions, h handlers.ToolHandler) {
		require.NoError(t, r.AddToolWith(&mcp.Tool{Name: name, Description: name, InputSchema: codec.RawJSON(`{"type":"object"}`)}, h, o))
	}
	add("sync", handlers.ToolOptions{}, func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.TextResult("sync done"), nil
	})
	add("work", optional, func(ctx context.Context, _ *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		select {
		case <-f.release:
			return mcp.TextResult("work done"), nil
		case <-ctx.Done():
			f.causes <- context.Cause(ctx)
			return nil, context.Cause(ctx)
		}
	})
	add("quick", optional, func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.TextResult("quick done"), nil
	})
	add("mustTask", required, func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.ErrorResult("tool error"), nil
	})
	add("protoErr", optional, func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, &codec.Error{Code: -32099, Message: "boom", Data: codec.RawJSON(`{"why":1}`)}
	})
	add("confirm", optional, func(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.Peer.Elicit(ctx, &mcp.ElicitParams{Message: "sure?"})
		if err != nil {
			return nil, err
		}
		return mcp.TextResult("confirmed " + res.Action + " " + string(res.Content)), nil
	})
	add("multi", optional, func(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		var wg sync.WaitGroup
		var got [2]string
		var errs [2]error
		for i := range got {
			wg.Go(func() {
				res, err := req.Peer.Elicit(handlers.WithInputKey(ctx, "k"+strconv.Itoa(i+1)), &mcp.ElicitParams{Message: "which?"})
				if err == nil {
					got[i] = string(res.Content)
				}
				errs[i] = err
			})
		}
		wg.Wait()
		if err := errors.Join(errs[:]...); err != nil {
			return nil, err
		}
		return mcp.TextResult(got[0] + "+" + got[1]), nil
	})
	deferred := handlers.ToolOptions{TaskSupport: mcp.TaskRequired, DeferTask: true}
	add("deferred", deferred, func(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.Peer.Elicit(handlers.WithInputKey(ctx, "user_name"), &mcp.ElicitParams{Message: "name?"})
		if err != nil {
			return nil, err
		}
		if !handlers.StartTask(req.Peer) {
			return mcp.TextResult("not a task"), nil
		}
		return mcp.TextResult("hello " + string(res.Content)), nil
	})
	return f
}

// mreply is a request's own reply sink: a Replier and a Rejecter.
type mreply struct {
	mu       sync.Mutex
	final    chan []byte
	rejected []int
}

func (r *mreply) Send(b *codec.Buffer) error { codec.PutBuffer(b); return nil }

func (r *mreply) Final(b *codec.Buffer) {
	var out []byte
	if b != nil {
		out = append(out, b.B...)
		codec.PutBuffer(b)
	}
	r.final <- out
}

func (r *mreply) Reject(code int) {
	r.mu.Lock()
	r.rejected = append(r.rejected, code)
	r.mu.Unlock()
}

// mclient sends 2026-07-28 requests, over HandleFrame or with a reply
// sink of each request's own.
type mclient struct {
	t       testing.TB
	c       *client
	viaSink bool
	id      int
}

func (f *statelessTaskFixture) mclient(t testing.TB, viaSink bool) *mclient {
	return &mclient{t: t, c: f.client(t), viaSink: viaSink}
}

// statelessFrame returns a 2026-07-28 request frame: params is a JSON object,
// to which the _meta declaring caps is added.
func statelessFrame(id int, method, params, caps string) string {
	meta := `"_meta":{"` + mcp.MetaProtocolVersion + `":"` + mcp.Version20260728 + `","` + mcp.MetaClientCapabilities + `":` + caps + `}`
	inner := strings.TrimSpace(params[1:])
	if inner != "}" {
		meta += ","
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{%s%s}`, id, method, meta, inner) + ""
}

// do sends a request and returns its answer and the codes the reply sink
// was told to reject with (only with viaSink).
func (m *mclient) do(method, params, caps string) (msg, []int) {
	m.t.Helper()
	m.id++
	frame := statelessFrame(m.id, method, params, caps)
	if !m.viaSink {
		return m.c.call(frame), nil
	}
	var dm codec.Message
	require.NoError(m.t, codec.Decode([]byte(frame), &dm))
	rep := &mreply{final: make(chan []byte, 1)}
	out, queued := m.c.srv.Conn(m.c.sess).HandleMessage(&dm, []byte(frame), nil, rep)
	if !queued {
		require.NotEmpty(m.t, out, "no answer to %s", frame)
		return parse(m.t, out), rep.rejected
	}
	select {
	case b := <-rep.final:
		require.NotEmpty(m.t, b, "no answer to %s", frame)
		rep.mu.Lock()
		defer rep.mu.Unlock()
		return parse(m.t, b), rep.rejected
	case <-time.After(wait):
		m.t.Fatalf("no answer to %s", frame)
		return msg{}, nil
	}
}

// result decodes an answer's result into a map, failing on an error.
func result(t testing.TB, m msg) map[string]any {
	t.Helper()
	require.Nil(t, m.Error, "error answer: %+v", m.Error)
	var r map[string]any
	require.NoError(t, codec.Unmarshal(m.Result, &r))
	return r
}

func (m *mclient) call(tool, args string) msg {
	m.t.Helper()
	a, _ := m.do(mcp.MethodToolsCall, `{"name":"`+tool+`","arguments":`+args+`}`, capsTasks)
	return a
}

// create calls tool with the extension and returns the task id.
func (m *mclient) create(tool, args string) string {
	m.t.Helper()
	r := result(m.t, m.call(tool, args))
	require.Equal(m.t, "task", r["resultType"], "%v", r)
	id, _ := r["taskId"].(string)
	require.NotEmpty(m.t, id)
	return id
}

func (m *mclient) get(id string) map[string]any {
	m.t.Helper()
	a, _ := m.do(mcp.MethodTasksGet, `{"taskId":"`+id+`"}`, capsTasks)
	return result(m.t, a)
}

// until polls tasks/get until the task has status.
func (m *mclient) until(id, status string) map[string]any {
	m.t.Helper()
	var r map[string]any
	require.Eventually(m.t, func() bool { r = m.get(id); return r["status"] == status }, wait, 5*time.Millisecond, "task never %s: %v", status, r)
	return r
}

// requireAck checks a tasks/update or tasks/cancel answer is a bare ack.
func requireAck(t testing.TB, m msg) {
	t.Helper()
	r := result(t, m)
	require.Equal(t, "complete", r["resultType"])
	for _, k := range []string{"taskId", "status", "result", "error", "inputRequests"} {
		require.NotContains(t, r, k)
	}
}

func bothPaths(t *testing.T, fn func(t *testing.T, viaSink bool)) {
	for _, viaSink := range []bool{false, true} {
		t.Run(map[bool]string{false: "frame", true: "sink"}[viaSink], func(t *testing.T) { fn(t, viaSink) })
	}
}

func TestStatelessTaskGating(t *testing.T) {
	bothPaths(t, func(t *testing.T, viaSink bool) {
		f := newStatelessTaskFixture(t, engine.Options{})
		m := f.mclient(t, viaSink)
		missing := `{"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
		for _, tc := range []struct {
			name, method, params, caps string
			code                       int    // error code, 0 for a result
			text                       string // the result's text, "" for a task
		}{
			{"get without extension", mcp.MethodTasksGet, `{"taskId":"x"}`, capsNoTasks, mcp.CodeMissingClientCapability, ""},
			{"update without extension", mcp.MethodTasksUpdate, `{"taskId":"x","inputResponses":{}}`, capsNoTasks, mcp.CodeMissingClientCapability, ""},
			{"cancel without extension", mcp.MethodTasksCancel, `{"taskId":"x"}`, `{}`, mcp.CodeMissingClientCapability, ""},
			{"required tool without extension", mcp.MethodToolsCall, `{"name":"mustTask","arguments":{}}`, `{}`, mcp.CodeMissingClientCapability, ""},
			{"optional tool without extension runs", mcp.MethodToolsCall, `{"name":"quick","arguments":{}}`, capsNoTasks, 0, "quick done"},
			{"sync tool with extension and a 2025-11-25 task param", mcp.MethodToolsCall, `{"name":"sync","arguments":{},"task":{"ttl":60000}}`, capsTasks, 0, "sync done"},
			{"2025-11-25 task param on optional tool without extension", mcp.MethodToolsCall, `{"name":"quick","task":{"ttl":1}}`, `{}`, 0, "quick done"},
			{"tasks/result removed", mcp.MethodTasksResult, `{"taskId":"x"}`, capsTasks, codec.CodeMethodNotFound, ""},
			{"tasks/list removed", mcp.MethodTasksList, `{}`, capsTasks, codec.CodeMethodNotFound, ""},
			{"get unknown task", mcp.MethodTasksGet, `{"taskId":"nonexistent"}`, capsTasks, codec.CodeInvalidParams, ""},
			{"get without taskId", mcp.MethodTasksGet, `{}`, capsTasks, codec.CodeInvalidParams, ""},
			{"update unknown task", mcp.MethodTasksUpdate, `{"taskId":"nonexistent","inputResponses":{}}`, capsTasks, codec.CodeInvalidParams, ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				a, rejected := m.do(tc.method, tc.params, tc.caps)
				if tc.code != 0 {
					require.NotNil(t, a.Error, "want error %d, got %s", tc.code, a.Result)
					require.Equal(t, tc.code, a.Error.Code, a.Error.Message)
					if tc.code == mcp.CodeMissingClientCapability {
						require.JSONEq(t, missing, string(a.Error.Data))
						if viaSink {
							require.Equal(t, []int{mcp.CodeMissingClientCapability}, rejected, "HTTP answers -32021 with 400")
						}
					}
					return
				}
				r := result(t, a)
				require.Equal(t, "complete", r["resultType"])
				require.NotContains(t, r, "taskId")
				require.Equal(t, tc.text, a.text(t))
			})
		}
	})
}

func TestStatelessTaskLifecycle(t *testing.T) {
	bothPaths(t, func(t *testing.T, viaSink bool) {
		f := newStatelessTaskFixture(t, engine.Options{NodeID: "node7"})
		m := f.mclient(t, viaSink)

		// Creation: a flat CreateTaskResult.
		a := m.call("work", `{}`)
		r := result(t, a)
		require.Equal(t, "task", r["resultType"])
		require.Equal(t, "working", r["status"])
		for _, k := range []string{"task", "result", "error", "inputRequests", "requestState", "ttl", "pollInterval"} {
			require.NotContains(t, r, k)
		}
		require.Regexp(t, `^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}`, r["createdAt"])
		require.Regexp(t, `^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}`, r["lastUpdatedAt"])
		require.Greater(t, r["ttlMs"], 0.0)
		require.Greater(t, r["pollIntervalMs"], 0.0)
		id := r["taskId"].(string)
		require.True(t, strings.HasPrefix(id, "node7."), id)
		require.Equal(t, "node7", string(engine.SessionNode([]byte(id))))
		require.Greater(t, len(id), len("node7.")+20, "unguessable")

		// Strongly consistent, and working until released.
		g := m.get(id)
		require.Equal(t, id, g["taskId"])
		require.Equal(t, "working", g["status"])
		require.Equal(t, "complete", g["resultType"])
		require.NotContains(t, g, "requestState")
		require.NotContains(t, g, "result")

		// Another client (no session in common) sees the same task.
		g2 := f.mclient(t, !viaSink).get(id)
		require.Equal(t, "working", g2["status"])

		close(f.release)
		g = m.until(id, mcp.TaskCompleted)
		res := g["result"].(map[string]any)
		require.Equal(t, "work done", res["content"].([]any)[0].(map[string]any)["text"])
		if meta, ok := res["_meta"].(map[string]any); ok {
			require.NotContains(t, meta, "io.modelcontextprotocol/related-task")
		}
		require.NotContains(t, g, "error")
		requireAck(t, must(m.do(mcp.MethodTasksCancel, `{"taskId":"`+id+`"}`, capsTasks)))
		require.Equal(t, mcp.TaskCompleted, m.get(id)["status"], "cancel of an ended task changes nothing")

		// A tool error completes the task; a protocol error fails it.
		g = m.until(m.create("mustTask", `{}`), mcp.TaskCompleted)
		require.Equal(t, true, g["result"].(map[string]any)["isError"])
		g = m.until(m.create("protoErr", `{}`), mcp.TaskFailed)
		require.NotContains(t, g, "result")
		e := g["error"].(map[string]any)
		require.Equal(t, -32099.0, e["code"])
		require.Equal(t, "boom", e["message"])
	})
}

func must(m msg, _ []int) msg { return m }

func TestStatelessTaskCancelStopsHandler(t *testing.T) {
	bothPaths(t, func(t *testing.T, viaSink bool) {
		f := newStatelessTaskFixture(t, engine.Options{})
		m := f.mclient(t, viaSink)
		id := m.create("work", `{}`)
		requireAck(t, must(m.do(mcp.MethodTasksCancel, `{"taskId":"`+id+`"}`, capsTasks)))
		select {
		case err := <-f.causes:
			require.Error(t, err)
		case <-time.After(wait):
			t.Fatal("cancel left the handler running")
		}
		require.Equal(t, mcp.TaskCancelled, m.get(id)["status"])
		require.Equal(t, mcp.TaskCancelled, m.get(id)["status"], "the handler's error does not fail a cancelled task")
		requireAck(t, must(m.do(mcp.MethodTasksCancel, `{"taskId":"`+id+`"}`, capsTasks)))
	})
}

func TestStatelessTaskInputRequired(t *testing.T) {
	bothPaths(t, func(t *testing.T, viaSink bool) {
		f := newStatelessTaskFixture(t, engine.Options{})
		m := f.mclient(t, viaSink)

		// One input, under a key the engine mints.
		id := m.create("confirm", `{}`)
		g := m.until(id, mcp.TaskInputRequired)
		reqs := g["inputRequests"].(map[string]any)
		require.Len(t, reqs, 1)
		var key string
		for k, v := range reqs {
			key = k
			require.Equal(t, mcp.MethodElicitationCreate, v.(map[string]any)["method"])
			require.Equal(t, "sure?", v.(map[string]any)["params"].(map[string]any)["message"])
		}
		require.NotContains(t, g, "requestState")
		// Unknown keys and values are acknowledged and ignored.
		requireAck(t, must(m.do(mcp.MethodTasksUpdate, `{"taskId":"`+id+`","inputResponses":{"unknown-key":{"ignored":true}}}`, capsTasks)))
		require.Equal(t, mcp.TaskInputRequired, m.get(id)["status"])
		requireAck(t, must(m.do(mcp.MethodTasksUpdate, `{"taskId":"`+id+`","inputResponses":{"`+key+`":{"action":"accept","content":{"confirm":true}}}}`, capsTasks)))
		g = m.until(id, mcp.TaskCompleted)
		require.Equal(t, `confirmed accept {"confirm":true}`, g["result"].(map[string]any)["content"].([]any)[0].(map[string]any)["text"])

		// Two inputs at once; a partial update leaves the other.
		id = m.create("multi", `{}`)
		require.Eventually(t, func() bool {
			g = m.get(id)
			r, _ := g["inputRequests"].(map[string]any)
			return len(r) == 2
		}, wait, 5*time.Millisecond)
		requireAck(t, must(m.do(mcp.MethodTasksUpdate, `{"taskId":"`+id+`","inputResponses":{"k1":{"action":"accept","content":"one"}}}`, capsTasks)))
		g = m.get(id)
		require.Equal(t, mcp.TaskInputRequired, g["status"])
		reqs = g["inputRequests"].(map[string]any)
		require.Contains(t, reqs, "k2")
		require.NotContains(t, reqs, "k1")
		requireAck(t, must(m.do(mcp.MethodTasksUpdate, `{"taskId":"`+id+`","inputResponses":{"k2":{"action":"accept","content":"two"}}}`, capsTasks)))
		g = m.until(id, mcp.TaskCompleted)
		require.Equal(t, `"one"+"two"`, g["result"].(map[string]any)["content"].([]any)[0].(map[string]any)["text"])

		// A task cancelled while it waits for input ends.
		id = m.create("confirm", `{}`)
		m.until(id, mcp.TaskInputRequired)
		requireAck(t, must(m.do(mcp.MethodTasksCancel, `{"taskId":"`+id+`"}`, capsTasks)))
		g = m.get(id)
		require.Equal(t, mcp.TaskCancelled, g["status"])
		require.NotContains(t, g, "inputRequests")
	})
}

func TestStatelessTaskAfterInputRounds(t *testing.T) {
	bothPaths(t, func(t *testing.T, viaSink bool) {
		f := newStatelessTaskFixture(t, engine.Options{})
		m := f.mclient(t, viaSink)
		// Round 1: an InputRequiredResult, synchronously, no task.
		r1 := result(t, m.call("deferred", `{}`))
		require.Equal(t, mcp.ResultInputRequired, r1["resultType"])
		require.NotContains(t, r1, "taskId")
		require.Contains(t, r1["inputRequests"].(map[string]any), "user_name")
		state, _ := r1["requestState"].(string)
		require.NotEmpty(t, state)
		// Round 2: the answer makes the call a task.
		params := `{"name":"deferred","arguments":{},"inputResponses":{"user_name":{"action":"accept","content":{"name":"Alice"}}},"requestState":"` + state + `"}`
		r2 := result(t, must(m.do(mcp.MethodToolsCall, params, capsTasks)))
		require.Equal(t, "task", r2["resultType"])
		require.NotContains(t, r2, "requestState")
		require.NotContains(t, r2, "inputRequests")
		g := m.until(r2["taskId"].(string), mcp.TaskCompleted)
		require.Contains(t, g["result"].(map[string]any)["content"].([]any)[0].(map[string]any)["text"], "Alice")
		// Without the extension the required tool is refused.
		a, _ := m.do(mcp.MethodToolsCall, params, `{"elicitation":{}}`)
		require.NotNil(t, a.Error)
		require.Equal(t, mcp.CodeMissingClientCapability, a.Error.Code)
	})
}

func TestStatelessTaskBoundsAndExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStatelessTaskFixture(t, engine.Options{MaxTasksPerClient: 2, TaskTTL: time.Minute})
		m := f.mclient(t, false)
		done := m.create("quick", `{}`)
		synctest.Wait()
		require.Equal(t, mcp.TaskCompleted, m.get(done)["status"])
		running := m.create("work", `{}`)
		// Full: a new task evicts the oldest that has ended...
		other := m.create("work", `{}`)
		a, _ := m.do(mcp.MethodTasksGet, `{"taskId":"`+done+`"}`, capsTasks)
		require.NotNil(t, a.Error, "evicted")
		require.Equal(t, codec.CodeInvalidParams, a.Error.Code)
		// ...and is refused when every task kept runs.
		a = m.call("work", `{}`)
		require.NotNil(t, a.Error, "%s", a.Result)
		require.Equal(t, codec.CodeServerBusy, a.Error.Code)
		require.Equal(t, engine.LimitTasks, limitOf(t, a))
		// Past its ttl a task is cancelled and forgotten.
		time.Sleep(time.Minute + time.Second)
		synctest.Wait()
		for _, id := range []string{running, other} {
			a, _ := m.do(mcp.MethodTasksGet, `{"taskId":"`+id+`"}`, capsTasks)
			require.NotNil(t, a.Error, "expired task %s kept", id)
			require.Equal(t, codec.CodeInvalidParams, a.Error.Code)
		}
		for range 2 {
			require.Error(t, <-f.causes)
		}
		// There is room again.
		m.create("quick", `{}`)
	})
}

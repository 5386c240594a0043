package engine_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/require"
)

// Task hoarders (issue 20, defect 8): one client starting many long
// tasks, and going away; the budgets of tasks, the worker pool, and the
// binding of tasks to their owner, in both revisions.

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

// limitOf returns the limit a -32000 refusal names, "" for any other
// answer.
func limitOf(t testing.TB, m msg) string {
	t.Helper()
	if m.Error == nil || m.Error.Code != codec.CodeServerBusy {
		return ""
	}
	var d struct {
		Limit string `json:"limit"`
	}
	require.NoError(t, codec.Unmarshal(m.Error.Data, &d), "data %s", m.Error.Data)
	return d.Limit
}

// sessionTaskCall starts a 2025-11-25 task of tool and returns the answer.
func sessionTaskCall(c *client, id int, tool string) msg {
	c.t.Helper()
	m, _ := c.send(fmt.Sprint(id), fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{},"task":{"ttl":600000}}}`, id, tool))
	return m
}

// hoard starts n tasks with start and counts those refused for the
// client's share.
func hoard(t *testing.T, n int, start func(i int) msg) (created, refused int) {
	t.Helper()
	for i := range n {
		m := start(i)
		if m.Error == nil {
			created++
			continue
		}
		require.Equal(t, engine.LimitTasks, limitOf(t, m), "%+v", m.Error)
		refused++
	}
	return created, refused
}

// TestTaskHoarderLeavesRoom: one client's 64 long tasks leave another
// client able to create tasks; the hoarder is refused past its share, with
// -32000 {"limit":"tasks"}.
func TestTaskHoarderLeavesRoom(t *testing.T) {
	t.Run("2025-11-25", func(t *testing.T) {
		f := newTaskFixture(t, engine.Options{})
		hoarder, other := f.ready(t, `{}`), f.ready(t, `{}`)
		hoarder.sess.SetRemote(addr("192.0.2.1"))
		other.sess.SetRemote(addr("203.0.113.9"))
		created, refused := hoard(t, 64, func(i int) msg { return sessionTaskCall(hoarder, 100+i, "job") })
		require.Equal(t, 16, created, "the default share")
		require.Equal(t, 48, refused)
		// A second session of the hoarder's address shares its share.
		again := f.ready(t, `{}`)
		again.sess.SetRemote(addr("192.0.2.1"))
		require.Equal(t, engine.LimitTasks, limitOf(t, sessionTaskCall(again, 1, "job")))
		// Another client is not locked out.
		startTask(t, other, 1, "job", 60000)
		close(f.jobRelease)
	})
	t.Run("2026-07-28", func(t *testing.T) {
		f := newStatelessTaskFixture(t, engine.Options{})
		hoarder, other := f.mclient(t, false), f.mclient(t, true)
		hoarder.c.sess.SetRemote(addr("192.0.2.1"))
		other.c.sess.SetRemote(addr("203.0.113.9"))
		created, refused := hoard(t, 64, func(int) msg { return hoarder.call("work", `{}`) })
		require.Equal(t, 16, created)
		require.Equal(t, 48, refused)
		other.create("work", `{}`)
		close(f.release)
	})
}

// TestTaskHoarderGoneFreesShare: the tasks of a client that is gone do not
// keep its share, or the server's task workers, taken. A session's tasks
// end with it; a stateless client is gone when it stops polling: its
// running tasks are cancelled when a new task needs their room.
func TestTaskHoarderGoneFreesShare(t *testing.T) {
	t.Run("2025-11-25 session closes", func(t *testing.T) {
		f := newTaskFixture(t, engine.Options{MaxTasksPerClient: 4})
		hoarder, next := f.ready(t, `{}`), f.ready(t, `{}`)
		hoarder.sess.SetRemote(addr("192.0.2.1"))
		next.sess.SetRemote(addr("192.0.2.1")) // the same client, reconnected
		for i := range 4 {
			startTask(t, hoarder, 10+i, "job", 600000)
		}
		require.Equal(t, engine.LimitTasks, limitOf(t, sessionTaskCall(next, 1, "job")))
		f.srv.Conn(hoarder.sess).Close(nil)
		for range 4 {
			<-f.jobCauses
		}
		startTask(t, next, 2, "job", 600000)
		close(f.jobRelease)
	})
	t.Run("2026-07-28 stops polling", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newStatelessTaskFixture(t, engine.Options{MaxTasksPerClient: 3, TaskWorkers: 4})
			mk := func(a string) *mclient {
				m := f.mclient(t, false)
				m.c.sess.SetRemote(addr(a))
				return m
			}
			a, b, c := mk("192.0.2.1"), mk("192.0.2.2"), mk("192.0.2.3")
			var ids []string
			for range 3 {
				ids = append(ids, a.create("work", `{}`))
			}
			ids = append(ids, b.create("work", `{}`))
			// a's share is full, and so are the task workers.
			require.Equal(t, engine.LimitTasks, limitOf(t, a.call("work", `{}`)))
			require.Equal(t, engine.LimitTaskWorkers, limitOf(t, c.call("work", `{}`)))
			// b keeps polling its task; a went away.
			for range 6 {
				time.Sleep(10 * time.Second)
				require.Equal(t, mcp.TaskWorking, b.get(ids[3])["status"])
			}
			time.Sleep(time.Second)
			// A new client takes the room of a's task polled least
			// recently, which is cancelled and says why.
			c.create("work", `{}`)
			synctest.Wait()
			require.Error(t, <-f.causes)
			g := a.get(ids[0])
			require.Equal(t, mcp.TaskCancelled, g["status"])
			require.Contains(t, g["statusMessage"], "not polled")
			require.Equal(t, mcp.TaskWorking, b.get(ids[3])["status"], "a polled task is kept running")
			// a, back, has its share again: its oldest ended task makes
			// room, then its abandoned running ones.
			a.create("work", `{}`)
			a.create("work", `{}`)
			close(f.release)
		})
	})
}

// TestTasksWithinWorkers: task handlers run on the worker pool, and at
// most TaskWorkers of them at once, whatever the revision: the rest of the
// pool stays with requests.
func TestTasksWithinWorkers(t *testing.T) {
	f := newTaskFixture(t, engine.Options{Workers: 8, MaxTasksPerClient: -1}) // TaskWorkers: 2
	c := f.ready(t, `{}`)
	created, refused := 0, 0
	for i := range 20 {
		m := sessionTaskCall(c, 100+i, "job")
		if m.Error == nil {
			created++
			continue
		}
		require.Equal(t, engine.LimitTaskWorkers, limitOf(t, m), "%+v", m.Error)
		refused++
	}
	require.Equal(t, 2, created)
	require.Equal(t, 18, refused)
	require.Eventually(t, func() bool { return f.srv.RunningTasks() == 2 }, wait, time.Millisecond)
	// The six other workers serve requests.
	for i := range 6 {
		require.Empty(t, c.handle(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"slow","arguments":{"tag":"s%d"}}}`, 200+i, i)))
		<-f.started
	}
	// Tasks and requests together never exceed -workers: the next request
	// waits for a worker.
	require.Empty(t, c.handle(`{"jsonrpc":"2.0","id":300,"method":"tools/call","params":{"name":"slow","arguments":{"tag":"full"}}}`))
	running, queued := f.srv.PoolStats()
	require.Equal(t, 8, running)
	require.Equal(t, 1, queued)
	close(f.release)
	require.Equal(t, "full", <-f.started, "the waiting request runs once a worker is free")
	close(f.jobRelease)
	require.Eventually(t, func() bool { return f.srv.RunningTasks() == 0 }, wait, time.Millisecond)
	// Ended tasks hold no worker: new ones run.
	f2 := newTaskFixture(t, engine.Options{Workers: 8})
	c2 := f2.ready(t, `{}`)
	close(f2.jobRelease)
	for i := range 4 {
		task := startTask(t, c2, i+1, "job", 60000)
		m, _ := c2.send("9", `{"jsonrpc":"2.0","id":9,"method":"tasks/result","params":{"taskId":"`+task.TaskID+`"}}`)
		require.Equal(t, "job done", m.text(t))
	}
}

// TestTasksBoundToSubject: a task is its creator's; another subject's
// tasks/get, tasks/list, tasks/update, tasks/cancel and tasks/result find
// nothing, answered exactly as an id never issued.
func TestTasksBoundToSubject(t *testing.T) {
	t.Run("2025-11-25", func(t *testing.T) {
		f := newTaskFixture(t, engine.Options{})
		alice, bob, alice2 := f.ready(t, `{}`), f.ready(t, `{}`), f.ready(t, `{}`)
		alice.sess.SetAuth(subject("alice"))
		bob.sess.SetAuth(subject("bob"))
		alice2.sess.SetAuth(subject("alice"))
		task := startTask(t, alice, 1, "job", 60000)
		_, unknown := getTask(t, bob, 2, "no-such-task")
		requireError(t, unknown, "2", codec.CodeInvalidParams)
		for i, method := range []string{mcp.MethodTasksGet, mcp.MethodTasksCancel, mcp.MethodTasksResult} {
			id := fmt.Sprint(10 + i)
			m, _ := bob.send(id, `{"jsonrpc":"2.0","id":`+id+`,"method":"`+method+`","params":{"taskId":"`+task.TaskID+`"}}`)
			requireError(t, m, id, codec.CodeInvalidParams)
			require.Equal(t, unknown.Error, m.Error, "%s: no oracle", method)
		}
		m, _ := bob.send("20", `{"jsonrpc":"2.0","id":20,"method":"tasks/list"}`)
		require.JSONEq(t, `{"tasks":[]}`, string(m.Result))
		// The subject's other session sees it; the task still runs.
		got, _ := getTask(t, alice2, 21, task.TaskID)
		require.Equal(t, mcp.TaskWorking, got.Status)
		close(f.jobRelease)
	})
	t.Run("2026-07-28", func(t *testing.T) {
		f := newStatelessTaskFixture(t, engine.Options{})
		mk := func(sub string) *mclient {
			m := f.mclient(t, false)
			m.c.sess.SetRemote(addr("192.0.2.1")) // one address, behind a proxy
			if sub != "" {
				m.c.sess.SetAuth(subject(sub))
			}
			return m
		}
		alice, bob, anon := mk("alice"), mk("bob"), mk("")
		id := alice.create("confirm", `{}`)
		alice.until(id, mcp.TaskInputRequired)
		unknown, _ := bob.do(mcp.MethodTasksGet, `{"taskId":"no-such-task"}`, capsTasks)
		require.NotNil(t, unknown.Error)
		require.Equal(t, codec.CodeInvalidParams, unknown.Error.Code)
		for _, other := range []*mclient{bob, anon} {
			for _, tc := range []struct{ method, params string }{
				{mcp.MethodTasksGet, `{"taskId":"` + id + `"}`},
				{mcp.MethodTasksUpdate, `{"taskId":"` + id + `","inputResponses":{"elicitation-1":{"action":"decline"}}}`},
				{mcp.MethodTasksCancel, `{"taskId":"` + id + `"}`},
			} {
				m, _ := other.do(tc.method, tc.params, capsTasks)
				require.Equal(t, unknown.Error, m.Error, "%s: no oracle", tc.method)
			}
		}
		// Nothing reached the task: it still waits for its input.
		g := alice.get(id)
		require.Equal(t, mcp.TaskInputRequired, g["status"])
		require.NotContains(t, fmt.Sprint(g), "decline")
	})
	// 2026-07-28 requests that carry their own token on one connection
	// (TCP, stdio): the task is bound to the caller verified for the
	// request that created it, not to the connection.
	t.Run("2026-07-28 per-request caller", func(t *testing.T) {
		f := newStatelessTaskFixture(t, engine.Options{Authorize: &fakeAuthz{}})
		conn := f.client(t)
		as := func(sub string) *mclient { return &mclient{t: t, c: conn, id: len(sub) * 100} }
		caps := func(sub string) string { return capsTasks + `,"t":"` + sub + `"` }
		alice, bob := as("alice"), as("bob")
		created, _ := alice.do(mcp.MethodToolsCall, `{"name":"confirm","arguments":{}}`, caps("alice"))
		r := result(t, created)
		require.Equal(t, "task", r["resultType"], "%v", r)
		id := r["taskId"].(string)
		unknown, _ := bob.do(mcp.MethodTasksGet, `{"taskId":"no-such-task"}`, caps("bob"))
		require.NotNil(t, unknown.Error)
		m, _ := bob.do(mcp.MethodTasksGet, `{"taskId":"`+id+`"}`, caps("bob"))
		require.Equal(t, unknown.Error, m.Error, "another caller on the same connection: no oracle")
		m, _ = alice.do(mcp.MethodTasksGet, `{"taskId":"`+id+`"}`, caps("alice"))
		require.Nil(t, m.Error, "its creator sees it")
		require.Nil(t, conn.sess.Auth(), "a request's caller is not its connection's")
	})
}

// TestRequestStateTooLargeIsInvalidParams: answers that make the
// requestState too big to carry are the client's doing: -32602, not
// -32603.
func TestRequestStateTooLargeIsInvalidParams(t *testing.T) {
	f := newStatelessTaskFixture(t, engine.Options{})
	require.NoError(t, f.srv.Registry().AddTool(&mcp.Tool{Name: "twice"}, func(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		for _, k := range []string{"first", "second"} {
			if _, err := req.Peer.Elicit(handlers.WithInputKey(ctx, k), &mcp.ElicitParams{Message: k + "?"}); err != nil {
				return nil, err
			}
		}
		return mcp.TextResult("both"), nil
	}))
	m := f.mclient(t, false)
	big := strings.Repeat("x", 70<<10)
	a, _ := m.do(mcp.MethodToolsCall, `{"name":"twice","arguments":{},"inputResponses":{"first":{"action":"accept","content":{"v":"`+big+`"}}}}`, capsTasks)
	require.NotNil(t, a.Error, "%s", a.Result)
	require.Equal(t, codec.CodeInvalidParams, a.Error.Code, a.Error.Message)
	require.Contains(t, a.Error.Message, "requestState")
	require.NotContains(t, a.Error.Message, "xxxx")
	// Small answers carry on.
	r := result(t, must(m.do(mcp.MethodToolsCall, `{"name":"twice","arguments":{},"inputResponses":{"first":{"action":"accept","content":{"v":"y"}}}}`, capsTasks)))
	require.Equal(t, mcp.ResultInputRequired, r["resultType"])
}

// TestShutdownEndsTasks: the drain cancels the tasks still running and
// waits for their handlers, and counts them: with a task running, it no
// longer waits out its ctx reporting nothing active.
func TestShutdownEndsTasks(t *testing.T) {
	f := newStatelessTaskFixture(t, engine.Options{})
	stuck := make(chan struct{})
	require.NoError(t, f.srv.Registry().AddToolWith(&mcp.Tool{Name: "stuck"}, func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		<-stuck // ignores its context
		return mcp.TextResult("late"), nil
	}, handlers.ToolOptions{TaskSupport: mcp.TaskOptional}))
	m := f.mclient(t, false)
	m.create("work", `{}`)
	sessionEra := newTaskFixture(t, engine.Options{})
	c := sessionEra.ready(t, `{}`)
	startTask(t, c, 1, "job", 60000)

	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	require.NoError(t, sessionEra.srv.Shutdown(ctx), "a 2025-11-25 task ends at the drain")
	require.ErrorIs(t, <-sessionEra.jobCauses, engine.ErrShuttingDown)

	m.create("stuck", `{}`)
	require.Eventually(t, func() bool { return f.srv.RunningTasks() == 2 }, wait, time.Millisecond)
	short, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	require.ErrorIs(t, f.srv.Shutdown(short), context.DeadlineExceeded)
	require.ErrorIs(t, <-f.causes, engine.ErrShuttingDown, "the task that honours its context ended")
	require.EqualValues(t, 0, f.srv.Active())
	require.EqualValues(t, 1, f.srv.RunningTasks(), "what the drain waited for is counted")
	close(stuck)
	require.Eventually(t, func() bool { return f.srv.RunningTasks() == 0 }, wait, time.Millisecond)
}

// TestInvalidParamsInOwnWords: a -32602 answer names the field and what
// was expected, never the JSON library's text or the client's input.
func TestInvalidParamsInOwnWords(t *testing.T) {
	f := newTaskFixture(t, engine.Options{})
	c := f.ready(t, `{}`)
	const secret = "SECRETINPUT"
	for _, tc := range []struct {
		name, frame, want string
	}{
		{"read uri type", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":["` + secret + `"]}}`, "invalid params: resources/read params: uri must be a string"},
		{"prompt arguments", `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"` + secret + `","arguments":7}}`, "invalid params: prompts/get params: arguments must be an object"},
		{"list cursor", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":{"` + secret + `":1}}}`, "invalid params: tools/list params: cursor must be a string"},
		{"log level", `{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"` + secret + `"}}`, "invalid params: level must be one of debug, info, notice, warning, error, critical, alert, emergency"},
		{"task id", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"` + secret + `"}}`, "invalid params: unknown task"},
		{"task id type", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":7}}`, "invalid params: tasks/get needs a taskId, a string"},
		{"task cursor", `{"jsonrpc":"2.0","id":1,"method":"tasks/list","params":{"cursor":"` + secret + `"}}`, "invalid params: cursor is not one this server issued"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := c.send("1", tc.frame)
			requireError(t, m, "1", codec.CodeInvalidParams)
			require.True(t, strings.HasPrefix(m.Error.Message, tc.want), "message %q", m.Error.Message)
			require.NotContains(t, m.Error.Message, secret)
			require.NotContains(t, m.Error.Message, "index")
		})
	}
	fresh := f.client(t)
	m := fresh.call(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":2025,"capabilities":{},"clientInfo":{"name":"` + secret + `","version":"1"}}}`)
	requireError(t, m, "1", codec.CodeInvalidParams)
	require.Equal(t, "invalid params: initialize params: protocolVersion must be a string", m.Error.Message)
}

// TestTaskStoreBounds: the server keeps at most MaxTasks tasks and
// MaxTaskBytes of their results, forgetting the oldest that have ended.
func TestTaskStoreBounds(t *testing.T) {
	t.Run("tasks", func(t *testing.T) {
		f := newStatelessTaskFixture(t, engine.Options{MaxTasks: 2})
		var ms []*mclient
		var ids []string
		for i := range 3 {
			m := f.mclient(t, false)
			m.c.sess.SetRemote(addr(fmt.Sprintf("192.0.2.%d", i+1)))
			ms = append(ms, m)
			id := m.create("quick", `{}`)
			m.until(id, mcp.TaskCompleted)
			ids = append(ids, id)
		}
		a, _ := ms[0].do(mcp.MethodTasksGet, `{"taskId":"`+ids[0]+`"}`, capsTasks)
		require.NotNil(t, a.Error, "the oldest ended task was forgotten")
		require.Equal(t, codec.CodeInvalidParams, a.Error.Code)
		require.Equal(t, mcp.TaskCompleted, ms[1].get(ids[1])["status"])
		require.Equal(t, mcp.TaskCompleted, ms[2].get(ids[2])["status"])
	})
	t.Run("bytes", func(t *testing.T) {
		f := newStatelessTaskFixture(t, engine.Options{MaxTaskBytes: 100 << 10})
		require.NoError(t, f.srv.Registry().AddToolWith(&mcp.Tool{Name: "big"}, func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.TextResult(strings.Repeat("b", 40<<10)), nil
		}, handlers.ToolOptions{TaskSupport: mcp.TaskOptional}))
		m := f.mclient(t, false)
		var ids []string
		for range 4 {
			id := m.create("big", `{}`)
			require.Eventually(t, func() bool {
				a, _ := m.do(mcp.MethodTasksGet, `{"taskId":"`+id+`"}`, capsTasks)
				return a.Error == nil && strings.Contains(string(a.Result), `"status":"completed"`)
			}, wait, time.Millisecond)
			ids = append(ids, id)
		}
		for i, id := range ids {
			a, _ := m.do(mcp.MethodTasksGet, `{"taskId":"`+id+`"}`, capsTasks)
			if i < 2 {
				require.NotNil(t, a.Error, "task %d's result was forgotten", i)
				continue
			}
			require.Nil(t, a.Error, "task %d", i)
		}
	})
}

package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/client"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/gateway"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The era translation's tests: a 2026-07-28 client in front of an
// upstream of the session revisions only (down), and a session's client
// in front of an upstream of 2026-07-28 only (up).

// inputHandlers are a client's answers to every input request; asked
// counts them by method.
type inputHandlers struct{ asked sync.Map }

func (h *inputHandlers) count(method string) int {
	v, _ := h.asked.LoadOrStore(method, new(atomic.Int64))
	return int(v.(*atomic.Int64).Load())
}

func (h *inputHandlers) add(method string) {
	v, _ := h.asked.LoadOrStore(method, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func (h *inputHandlers) options(era client.Era) client.Options {
	return client.Options{
		Era: era,
		OnElicitation: func(_ context.Context, _ *client.ServerRequest, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			h.add(mcp.MethodElicitationCreate)
			switch {
			case strings.Contains(p.Message, "color"):
				return &mcp.ElicitResult{Action: "accept", Content: codec.RawJSON(`{"color":"teal"}`)}, nil
			case strings.Contains(p.Message, "context"):
				return &mcp.ElicitResult{Action: "accept", Content: codec.RawJSON(`{"context":"ctx-1"}`)}, nil
			case strings.Contains(p.Message, "Delete"), strings.Contains(p.Message, "confirm"):
				return &mcp.ElicitResult{Action: "accept", Content: codec.RawJSON(`{"confirm":true,"ok":true}`)}, nil
			}
			return &mcp.ElicitResult{Action: "accept", Content: codec.RawJSON(`{"name":"Ada","username":"ada","email":"a@b"}`)}, nil
		},
		OnSampling: func(context.Context, *client.ServerRequest, *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
			h.add(mcp.MethodSamplingCreateMessage)
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: codec.RawJSON(`{"type":"text","text":"Paris"}`)}, nil
		},
		OnRoots: func(context.Context, *client.ServerRequest) (*mcp.ListRootsResult, error) {
			h.add(mcp.MethodRootsList)
			return &mcp.ListRootsResult{Roots: []mcp.Root{{URI: "file:///work"}}}, nil
		},
	}
}

// TestTranslateDown: a 2026-07-28 client through the gateway to an
// upstream of 2025-11-25 only. Each input the upstream asks for during a
// call is an input round of the client's (the Go client's rounds answer
// them), several asked together one round, with the keys the upstream's
// handler named; logs reach the client at its level; list changes reach
// its listen stream.
func TestTranslateDown(t *testing.T) {
	f := startFront(t, gateway.Options{Upstreams: []gateway.Upstream{selfUpstreamV("x", "conformance", "2025-11-25")}})
	var h inputHandlers
	var logs atomic.Int64
	opts := h.options(client.EraModern)
	opts.LogLevel = "info"
	opts.OnLog = func(*mcp.LoggingMessageParams) { logs.Add(1) }
	c := f.dial(t, opts)
	require.True(t, c.Modern())
	ctx := testCtx(t)
	tests := []struct {
		tool   string
		want   string
		inputs map[string]int // input requests answered, by method
	}{
		{"test_simple_text", "This is a simple text response for testing.", nil},
		{"test_input_required_result_elicitation", "Hello, Ada!", map[string]int{mcp.MethodElicitationCreate: 1}},
		{"test_input_required_result_sampling", "The model answered: Paris", map[string]int{mcp.MethodSamplingCreateMessage: 1}},
		{"test_input_required_result_list_roots", "Client roots: file:///work", map[string]int{mcp.MethodRootsList: 1}},
		{"test_input_required_result_multi_round", "Ada's favorite color is teal", map[string]int{mcp.MethodElicitationCreate: 2}},
		{"test_input_required_result_multiple_inputs", "name=Ada, greeting=Paris, roots=file:///work", map[string]int{mcp.MethodElicitationCreate: 1, mcp.MethodSamplingCreateMessage: 1, mcp.MethodRootsList: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			before := map[string]int{}
			for _, m := range []string{mcp.MethodElicitationCreate, mcp.MethodSamplingCreateMessage, mcp.MethodRootsList} {
				before[m] = h.count(m)
			}
			r, err := c.CallTool(ctx, tt.tool, map[string]any{})
			require.NoError(t, err)
			assert.Equal(t, tt.want, text(t, r))
			for m, n := range tt.inputs {
				assert.Equal(t, n, h.count(m)-before[m], m)
			}
		})
	}

	t.Run("one round names every input asked together, by the upstream's keys", func(t *testing.T) {
		r := f.raw(t, "raw", `{"elicitation":{},"sampling":{},"roots":{}}`)
		m, e := r.call(mcp.MethodToolsCall, `"name":"test_input_required_result_multiple_inputs","arguments":{}`)
		require.Nil(t, e)
		assert.Equal(t, "input_required", str(m["resultType"]))
		var ins map[string]mcp.InputRequest
		require.NoError(t, json.Unmarshal(m["inputRequests"], &ins))
		assert.Len(t, ins, 3)
		for _, k := range []string{"user_name", "greeting", "client_roots"} {
			assert.Contains(t, ins, k)
		}
		assert.True(t, strings.HasPrefix(str(m["requestState"]), "~h~"), "%s", m["requestState"])
		assert.Equal(t, 1, f.gw.HeldCount())
		abandon(t, f)
	})

	t.Run("prompts/get and resources/read", func(t *testing.T) {
		p, err := c.GetPrompt(ctx, "test_input_required_result_prompt", nil)
		require.NoError(t, err)
		require.NotEmpty(t, p.Messages)
		rr, err := c.ReadResource(ctx, "test://static-text")
		require.NoError(t, err)
		require.NotEmpty(t, rr.Contents)
	})

	t.Run("logs at the request's level", func(t *testing.T) {
		logs.Store(0)
		_, err := c.CallTool(ctx, "test_tool_with_logging", map[string]any{})
		require.NoError(t, err)
		// The results come after the messages on the same connection.
		require.Eventually(t, func() bool { return logs.Load() == 3 }, 10*time.Second, 5*time.Millisecond)
	})

	t.Run("listen", func(t *testing.T) {
		sub, err := c.Listen(ctx, mcp.SubscriptionFilter{ToolsListChanged: true})
		require.NoError(t, err)
		defer sub.Close()
		_, err = c.CallTool(ctx, "test_trigger_tool_change", map[string]any{})
		require.NoError(t, err)
		select {
		case n := <-sub.Notifications():
			assert.Equal(t, mcp.NotificationToolListChanged, n.Method)
		case <-ctx.Done():
			t.Fatal("no tools/list_changed on the listen stream")
		}
	})
	assert.Equal(t, 0, f.gw.HeldCount(), "every held call ended")
}

// rawClient speaks 2026-07-28 to a front over TCP by hand: its input
// rounds are the test's to drive.
type rawClient struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
	id   int
	meta string
}

// raw dials f as a 2026-07-28 client declaring caps, named name.
func (f *front) raw(t *testing.T, name, caps string) *rawClient {
	t.Helper()
	conn, err := net.Dial("tcp", f.addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return &rawClient{t: t, conn: conn, r: bufio.NewReaderSize(conn, 1<<20),
		meta: `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"` + name + `","version":"1"},"io.modelcontextprotocol/clientCapabilities":` + caps + `}`}
}

// call sends method with params (an object's members, without braces)
// and returns the result's members, or the error.
func (c *rawClient) call(method, params string) (map[string]json.RawMessage, *codec.Error) {
	c.t.Helper()
	c.id++
	if params != "" {
		params += ","
	}
	frame := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{%s%s}}`+"\n", c.id, method, params, c.meta)
	_ = c.conn.SetDeadline(time.Now().Add(30 * time.Second))
	_, err := c.conn.Write([]byte(frame))
	require.NoError(c.t, err)
	for {
		line, err := c.r.ReadBytes('\n')
		require.NoError(c.t, err)
		var m struct {
			ID     json.RawMessage            `json:"id"`
			Result map[string]json.RawMessage `json:"result"`
			Error  *codec.Error               `json:"error"`
		}
		require.NoError(c.t, json.Unmarshal(line, &m), "%s", line)
		if string(m.ID) != strconv.Itoa(c.id) {
			continue // a notification
		}
		return m.Result, m.Error
	}
}

// str decodes a JSON string.
func str(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// abandon ends every held call as their time running out does.
func abandon(t *testing.T, f *front) {
	t.Helper()
	f.gw.ExpireHeld()
	require.Equal(t, 0, f.gw.HeldCount())
}

// TestTranslateDownTasks: a 2026-07-28 client declaring the tasks
// extension gets tasks of the engine's over 2025-11-25 tasks upstream:
// polled with tasks/get, their inputs answered with tasks/update; a tool
// that decides itself when it becomes a task gathers its input in a
// round first.
func TestTranslateDownTasks(t *testing.T) {
	f := startFront(t, gateway.Options{Upstreams: []gateway.Upstream{selfUpstreamV("x", "conformance", "2025-11-25")}})
	r := f.raw(t, "tasks", `{"elicitation":{},"extensions":{"`+mcp.ExtensionTasks+`":{}}}`)
	call := func(params string) map[string]json.RawMessage {
		t.Helper()
		m, e := r.call(mcp.MethodToolsCall, params)
		require.Nil(t, e, "%+v", e)
		return m
	}
	ctx := testCtx(t)
	poll := func(id string, until func(status string) bool) map[string]json.RawMessage {
		t.Helper()
		for {
			m, e := r.call(mcp.MethodTasksGet, `"taskId":`+string(codec.AppendString(nil, id)))
			require.Nil(t, e, "%+v", e)
			if until(str(m["status"])) {
				return m
			}
			select {
			case <-ctx.Done():
				t.Fatalf("task %s: last %v", id, m)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	terminal := func(s string) bool { return s == "completed" || s == "failed" || s == "cancelled" }

	t.Run("a task, its input by tasks/update", func(t *testing.T) {
		m := call(`"name":"confirm_delete","arguments":{"filename":"a.txt"}`)
		require.Equal(t, "task", str(m["resultType"]), "%s", m)
		id := str(m["taskId"])
		m = poll(id, func(s string) bool { return s == "input_required" || terminal(s) })
		require.Equal(t, "input_required", str(m["status"]), "%s", m)
		var ins map[string]mcp.InputRequest
		require.NoError(t, json.Unmarshal(m["inputRequests"], &ins))
		require.Len(t, ins, 1)
		var key string
		for k := range ins {
			key = k
		}
		_, e := r.call(mcp.MethodTasksUpdate, `"taskId":"`+id+`","inputResponses":{"`+key+`":{"action":"accept","content":{"confirm":true}}}`)
		require.Nil(t, e)
		m = poll(id, terminal)
		assert.Equal(t, "completed", str(m["status"]))
		assert.Contains(t, string(m["result"]), "Deleted a.txt")
	})

	t.Run("a tool error completes the task with isError", func(t *testing.T) {
		m := call(`"name":"failing_job","arguments":{}`)
		require.Equal(t, "task", str(m["resultType"]), "%s", m)
		m = poll(str(m["taskId"]), terminal)
		assert.Equal(t, "completed", str(m["status"]))
		assert.Contains(t, string(m["result"]), `"isError":true`)
	})

	t.Run("input rounds, then a task", func(t *testing.T) {
		m := call(`"name":"test_tool_with_task","arguments":{}`)
		require.Equal(t, "input_required", str(m["resultType"]), "%s", m)
		assert.Contains(t, string(m["inputRequests"]), `"user_name"`)
		m = call(`"name":"test_tool_with_task","arguments":{},"inputResponses":{"user_name":{"action":"accept","content":{"name":"Ada"}}},"requestState":` + string(m["requestState"]))
		require.Equal(t, "task", str(m["resultType"]), "%s", m)
		m = poll(str(m["taskId"]), terminal)
		assert.Equal(t, "completed", str(m["status"]))
		assert.Contains(t, string(m["result"]), "Hello, Ada!")
	})

	t.Run("tasks/cancel cancels the upstream task", func(t *testing.T) {
		m := call(`"name":"slow_compute","arguments":{"seconds":600}`)
		require.Equal(t, "task", str(m["resultType"]), "%s", m)
		id := str(m["taskId"])
		_, e := r.call(mcp.MethodTasksCancel, `"taskId":"`+id+`"`)
		require.Nil(t, e)
		m = poll(id, terminal)
		assert.Equal(t, "cancelled", str(m["status"]))
	})
}

// TestTranslateUp: a session's client through the gateway to an upstream
// of 2026-07-28 only: initialize answered from its server/discover, each
// request sent statelessly with the session's declarations, its input
// rounds asked of the session as server-to-client requests, its progress
// and logs relayed at the session's level, resource subscriptions over
// an upstream listen stream, 2025-11-25 tasks over the tasks extension.
func TestTranslateUp(t *testing.T) {
	f := startFront(t, gateway.Options{Upstreams: []gateway.Upstream{selfUpstreamV("x", "conformance", "2026-07-28")}})
	var h inputHandlers
	var logs atomic.Int64
	opts := h.options(client.EraLegacy)
	opts.OnLog = func(*mcp.LoggingMessageParams) { logs.Add(1) }
	c := f.dial(t, opts)
	require.False(t, c.Modern())
	ctx := testCtx(t)
	caps := c.ServerCapabilities()
	require.NotNil(t, caps.Tools)
	require.NotNil(t, caps.Completions, "the upstream's completions (its server/discover)")

	for _, tt := range []struct {
		tool, want string
		inputs     map[string]int
	}{
		{"test_simple_text", "This is a simple text response for testing.", nil},
		{"test_input_required_result_elicitation", "Hello, Ada!", map[string]int{mcp.MethodElicitationCreate: 1}},
		{"test_input_required_result_multiple_inputs", "name=Ada, greeting=Paris, roots=file:///work", map[string]int{mcp.MethodElicitationCreate: 1, mcp.MethodSamplingCreateMessage: 1, mcp.MethodRootsList: 1}},
		{"test_input_required_result_multi_round", "Ada's favorite color is teal", map[string]int{mcp.MethodElicitationCreate: 2}},
		{"test_sampling", "LLM response: Paris", map[string]int{mcp.MethodSamplingCreateMessage: 1}},
	} {
		t.Run(tt.tool, func(t *testing.T) {
			before := map[string]int{}
			for m := range tt.inputs {
				before[m] = h.count(m)
			}
			r, err := c.CallTool(ctx, tt.tool, map[string]any{"prompt": "capital?"})
			require.NoError(t, err)
			assert.Equal(t, tt.want, text(t, r))
			for m, n := range tt.inputs {
				assert.Equal(t, n, h.count(m)-before[m], m)
			}
		})
	}

	t.Run("progress", func(t *testing.T) {
		var steps atomic.Int64
		_, err := c.CallTool(ctx, "test_tool_with_progress", map[string]any{}, client.WithProgress(func(float64, float64, string) { steps.Add(1) }))
		require.NoError(t, err)
		assert.EqualValues(t, 3, steps.Load())
	})

	t.Run("logs at the session's level", func(t *testing.T) {
		require.NoError(t, c.SetLogLevel(ctx, "error"))
		logs.Store(0)
		_, err := c.CallTool(ctx, "test_tool_with_logging", map[string]any{})
		require.NoError(t, err)
		require.NoError(t, c.SetLogLevel(ctx, "debug"))
		_, err = c.CallTool(ctx, "test_tool_with_logging", map[string]any{})
		require.NoError(t, err)
		require.Eventually(t, func() bool { return logs.Load() == 3 }, 10*time.Second, 5*time.Millisecond, "the info messages of the second call only")
	})

	t.Run("2025-11-25 tasks over the tasks extension", func(t *testing.T) {
		ct, err := c.CallToolAsTask(ctx, "confirm_delete", map[string]any{"filename": "b.txt"}, time.Minute)
		require.NoError(t, err)
		res, err := c.ToolTaskResult(ctx, ct.Task.TaskID)
		require.NoError(t, err)
		assert.Equal(t, "Deleted b.txt", text(t, res))
		ct, err = c.CallToolAsTask(ctx, "failing_job", map[string]any{}, time.Minute)
		require.NoError(t, err)
		res, err = c.ToolTaskResult(ctx, ct.Task.TaskID)
		require.NoError(t, err)
		assert.True(t, res.IsError)
	})
}

// TestTranslateRevisionSwitch: an upstream restarted in the other era is
// followed: the call held for a 2026-07-28 client's input ends (its retry
// gets -32602), and both kinds of clients are served in the new era.
func TestTranslateRevisionSwitch(t *testing.T) {
	file := filepath.Join(t.TempDir(), "versions")
	require.NoError(t, os.WriteFile(file, []byte("2025-11-25"), 0o600))
	u := selfUpstream("x", "conformance")
	u.Env = append(u.Env, "GATEWAY_TEST_VERSIONS_FILE="+file)
	f := startFront(t, gateway.Options{Upstreams: []gateway.Upstream{u}})
	var h inputHandlers
	modern := f.dial(t, h.options(client.EraModern))
	legacy := f.dial(t, h.options(client.EraLegacy))
	ctx := testCtx(t)

	r := f.raw(t, "raw", `{"elicitation":{}}`)
	m, e := r.call(mcp.MethodToolsCall, `"name":"test_input_required_result_elicitation","arguments":{}`)
	require.Nil(t, e)
	state := string(m["requestState"])
	require.Equal(t, 1, f.gw.HeldCount())

	require.NoError(t, os.WriteFile(file, []byte("2026-07-28"), 0o600))
	f.gw.RestartUpstream("x")
	require.Eventually(t, func() bool { return f.gw.UpstreamEra("x") == "2026-07-28" }, 30*time.Second, 10*time.Millisecond)
	assert.Equal(t, 0, f.gw.HeldCount(), "the held call ended with its connection")

	_, e = r.call(mcp.MethodToolsCall, `"name":"test_input_required_result_elicitation","arguments":{},"inputResponses":{"user_name":{"action":"accept","content":{"name":"Ada"}}},"requestState":`+state)
	require.NotNil(t, e)
	assert.Equal(t, codec.CodeInvalidParams, e.Code)
	assert.Contains(t, e.Message, "ended")

	for _, c := range []*client.Client{modern, legacy} {
		r, err := c.CallTool(ctx, "test_input_required_result_elicitation", map[string]any{})
		require.NoError(t, err)
		assert.Equal(t, "Hello, Ada!", text(t, r))
	}
}

// TestTranslateSubscriptions: resource updates and list changes reach
// the clients of the other era: a 2026-07-28 listen stream fed by an
// upstream session's resources/subscribe, and a session's
// resources/subscribe fed by an upstream listen stream.
func TestTranslateSubscriptions(t *testing.T) {
	for _, tt := range []struct {
		name, upstream string
		era            client.Era
		http           bool
	}{
		{"2026-07-28 client, 2025-11-25 upstream", "2025-11-25", client.EraModern, false},
		{"2025-11-25 client, 2026-07-28 upstream", "2026-07-28", client.EraLegacy, false},
		{"2026-07-28 client, 2025-11-25 upstream over HTTP", "2025-11-25", client.EraModern, true},
		{"2025-11-25 client, 2026-07-28 upstream over HTTP", "2026-07-28", client.EraLegacy, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up := selfUpstreamV("x", "demo", tt.upstream)
			if tt.http {
				up = gateway.Upstream{Name: "x", Transport: gateway.HTTP, URL: httpUpstreamWith(t, "demo", tt.upstream) + "/mcp"}
			}
			f := startFront(t, gateway.Options{Upstreams: []gateway.Upstream{up}})
			updated := make(chan string, 16)
			c := f.dial(t, client.Options{Era: tt.era, OnResourceUpdated: func(uri string) {
				select {
				case updated <- uri:
				default:
				}
			}})
			ctx := testCtx(t)
			uris := []string{"mem://board/a", "mem://board/b"}
			if tt.era == client.EraModern {
				sub, err := c.Listen(ctx, mcp.SubscriptionFilter{ResourceSubscriptions: uris})
				require.NoError(t, err)
				defer sub.Close()
			} else {
				for _, uri := range uris {
					require.NoError(t, c.Subscribe(ctx, uri, nil))
				}
			}
			for _, name := range []string{"b", "a"} {
				// The upstream subscription is made a moment after the
				// downstream one: write until the update comes.
				want := "mem://board/" + name
				for got := false; !got; {
					_, err := c.CallTool(ctx, "board_write", map[string]any{"name": name, "text": "x"})
					require.NoError(t, err)
					select {
					case uri := <-updated:
						assert.Equal(t, want, uri)
						got = true
					case <-time.After(50 * time.Millisecond):
					case <-ctx.Done():
						t.Fatalf("no notifications/resources/updated for %s", want)
					}
				}
				for len(updated) > 0 {
					<-updated
				}
			}
		})
	}
}

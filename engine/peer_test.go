package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStateNode: a requestState "<node>.~…" names its node; the engine's
// own states ("payload.signature") and others name none.
func TestStateNode(t *testing.T) {
	for _, tt := range []struct{ state, node string }{
		{"a.~h~xyz", "a"},
		{"web-3_b.~anything", "web-3_b"},
		{"eyJtIjoi.c2ln", ""},
		{"~gw0~abc", ""},
		{".~h~x", ""},
		{"a.", ""},
		{"a b.~h~", ""},
		{"", ""},
	} {
		assert.Equal(t, tt.node, string(engine.StateNode([]byte(tt.state))), tt.state)
	}
}

// TestSignState: what SignState signs VerifyState returns, under any of
// the keys (rotation), and nothing altered verifies.
func TestSignState(t *testing.T) {
	k1, k2 := []byte(strings.Repeat("1", 32)), []byte(strings.Repeat("2", 32))
	old := engine.New(engine.Options{StateKeys: [][]byte{k1}})
	rotated := engine.New(engine.Options{StateKeys: [][]byte{k2, k1}})
	other := engine.New(engine.Options{StateKeys: [][]byte{k2}})
	tok := old.SignState([]byte(`{"h":"x"}`))
	for _, s := range []*engine.Server{old, rotated} {
		p, err := s.VerifyState(tok)
		require.NoError(t, err)
		assert.Equal(t, `{"h":"x"}`, string(p))
	}
	for _, bad := range []string{tok + "x", "x" + tok, strings.Replace(tok, ".", "", 1), "", "a.b", tok[:len(tok)-2]} {
		_, err := old.VerifyState(bad)
		assert.ErrorIs(t, err, engine.ErrStateSignature, bad)
	}
	_, err := other.VerifyState(tok)
	assert.ErrorIs(t, err, engine.ErrStateSignature)
}

// TestRequestDigest: the digest ignores key order, _meta, inputResponses
// and requestState, and nothing else.
func TestRequestDigest(t *testing.T) {
	d := engine.RequestDigest("tools/call", []byte(`{"name":"a","arguments":{"x":1,"y":2}}`))
	assert.Equal(t, d, engine.RequestDigest("tools/call", []byte(`{"arguments":{"y":2,"x":1},"_meta":{"k":1},"inputResponses":{},"requestState":"s","name":"a"}`)))
	assert.NotEqual(t, d, engine.RequestDigest("tools/call", []byte(`{"name":"a","arguments":{"x":1,"y":3}}`)))
	assert.NotEqual(t, d, engine.RequestDigest("prompts/get", []byte(`{"name":"a","arguments":{"x":1,"y":2}}`)))
}

// TestPeerHelpers: PeerOwner, PeerLogLevel and PeerTask of the requests
// of a session and of 2026-07-28.
func TestPeerHelpers(t *testing.T) {
	f := newFixture(t, engine.Options{})
	type seen struct{ owner, level, task string }
	got := make(chan seen, 4)
	require.NoError(t, f.srv.Registry().AddToolWith(&mcp.Tool{Name: "who"}, func(_ context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		id, _ := engine.PeerTask(req.Peer)
		got <- seen{engine.PeerOwner(req.Peer), engine.PeerLogLevel(req.Peer), id}
		return mcp.TextResult("ok"), nil
	}, handlers.ToolOptions{TaskSupport: mcp.TaskOptional}))
	assert.Equal(t, "", engine.PeerOwner(nil))

	s := f.ready(t, `{}`)
	s.call(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"who"}}`)
	w := <-got
	assert.Equal(t, seen{"sess:" + s.sess.ID(), "debug", ""}, w, "a session that set no level gets every message")
	s.call(`{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"warning"}}`)
	s.call(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"who"}}`)
	assert.Equal(t, "warning", (<-got).level)

	m := f.client(t)
	m.call(req26(4, "tools/call", `"name":"who"`, `{}`))
	w = <-got
	assert.Equal(t, seen{"addr:", "", ""}, w, "a 2026-07-28 request without a logLevel gets none")
	frame := strings.Replace(req26(5, "tools/call", `"name":"who"`, `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`), `"io.modelcontextprotocol/protocolVersion"`, `"io.modelcontextprotocol/logLevel":"error","io.modelcontextprotocol/protocolVersion"`, 1)
	r := m.call(frame)
	var ct struct {
		TaskID string `json:"taskId"`
	}
	r.decode(t, &ct)
	w = <-got
	assert.Equal(t, seen{"addr:", "error", ct.TaskID}, w)
}

// TestInputKeyToProxy: a client that declared the related-request link
// (a proxy) is told the key of each input a handler names, in a request
// and in a 2025-11-25 task, whose requests keep their related-task link
// beside it; a DeferTask tool's task says it defers (mcp.MetaDeferTask).
func TestInputKeyToProxy(t *testing.T) {
	f := newFixture(t, engine.Options{})
	ask := func(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.Peer.Elicit(handlers.WithInputKey(ctx, "user_name"), &mcp.ElicitParams{Message: "name?", RequestedSchema: codec.RawJSON(`{"type":"object","properties":{}}`)})
		if err != nil {
			return nil, err
		}
		return mcp.TextResult(res.Action), nil
	}
	require.NoError(t, f.srv.Registry().AddToolWith(&mcp.Tool{Name: "ask"}, ask, handlers.ToolOptions{TaskSupport: mcp.TaskOptional}))
	require.NoError(t, f.srv.Registry().AddToolWith(&mcp.Tool{Name: "defers"}, ask, handlers.ToolOptions{TaskSupport: mcp.TaskRequired, DeferTask: true}))
	link := `{"elicitation":{},"experimental":{"` + mcp.MetaRelatedRequest + `":{}}}`
	for _, tt := range []struct {
		name, caps, params string
		key, related, task bool
	}{
		{"request, proxy", link, `{"name":"ask"}`, true, true, false},
		{"request, not a proxy", `{"elicitation":{}}`, `{"name":"ask"}`, false, false, false},
		{"task, proxy", link, `{"name":"ask","task":{}}`, true, false, true},
		{"deferred task, proxy", link, `{"name":"defers","task":{}}`, true, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := f.ready(t, tt.caps)
			out := c.handle(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + tt.params + `}`)
			require.Empty(t, out)
			var req, answer msg
			for req.Method == "" || (tt.task && answer.ID == nil) {
				m := c.sink.next(t)
				switch {
				case m.Method == mcp.MethodElicitationCreate:
					req = m
				case m.Method == "" && string(m.ID) == "1":
					answer = m
				}
			}
			if tt.task {
				var created struct {
					Meta map[string]json.RawMessage `json:"_meta"`
				}
				require.NoError(t, json.Unmarshal(answer.Result, &created), "%s", answer.Result)
				_, hint := created.Meta[mcp.MetaDeferTask]
				assert.Equal(t, strings.Contains(tt.params, "defers"), hint, "%s", answer.Result)
			}
			var p struct {
				Meta map[string]json.RawMessage `json:"_meta"`
			}
			require.NoError(t, json.Unmarshal(req.Params, &p))
			_, key := p.Meta[mcp.MetaInputKey]
			_, related := p.Meta[mcp.MetaRelatedRequest]
			_, task := p.Meta["io.modelcontextprotocol/related-task"]
			assert.Equal(t, tt.key, key, "%s", req.Params)
			assert.Equal(t, tt.related, related, "%s", req.Params)
			assert.Equal(t, tt.task, task, "%s", req.Params)
			if key {
				assert.JSONEq(t, `"user_name"`, string(p.Meta[mcp.MetaInputKey]))
			}
			c.notify(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"action":"decline"}}`, req.ID))
		})
	}
}

// TestRawToolTasks: a raw tool registered with RawOptions.Tasks is run
// as a task of the engine's for a 2026-07-28 client declaring the tasks
// extension (its task support permitting), its params whole (input
// rounds included) and its result as it came; DeferTask leaves the
// handler to decide, and what it answers before (an InputRequiredResult)
// passes as it is.
func TestRawToolTasks(t *testing.T) {
	f := newFixture(t, engine.Options{})
	var mu sync.Mutex
	var params []string
	h := func(_ context.Context, req *handlers.RawRequest, dst []byte) ([]byte, error) {
		mu.Lock()
		params = append(params, string(req.Params))
		mu.Unlock()
		if !strings.Contains(string(req.Params), "inputResponses") {
			return append(dst, `{"resultType":"input_required","inputRequests":{"k":{"method":"roots/list"}},"requestState":"s"}`...), nil
		}
		handlers.StartTask(req.Peer)
		return append(dst, `{"content":[{"type":"text","text":"raw"}],"extra":1}`...), nil
	}
	reg := f.srv.Registry()
	require.NoError(t, reg.AddRawTool([]byte(`{"name":"rt","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"}}`), h, handlers.RawOptions{Tasks: true, DeferTask: true}))
	require.NoError(t, reg.AddRawTool([]byte(`{"name":"own","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"}}`), h))
	assert.True(t, reg.RawToolTasks("rt"))
	assert.False(t, reg.RawToolTasks("own"))
	ext := `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`
	c := f.client(t)

	var ir struct {
		ResultType string `json:"resultType"`
	}
	c.call(req26(1, "tools/call", `"name":"rt","arguments":{}`, ext)).decode(t, &ir)
	assert.Equal(t, "input_required", ir.ResultType, "a deferred handler's answer passes")
	var ct struct {
		ResultType string `json:"resultType"`
		TaskID     string `json:"taskId"`
	}
	c.call(req26(2, "tools/call", `"name":"rt","arguments":{},"inputResponses":{"k":{"roots":[]}},"requestState":"s"`, ext)).decode(t, &ct)
	assert.Equal(t, "task", ct.ResultType)
	require.NotEmpty(t, ct.TaskID)
	mu.Lock()
	assert.Contains(t, params[1], `"requestState":"s"`, "the params reach the handler whole")
	mu.Unlock()
	var task struct {
		Status string          `json:"status"`
		Result json.RawMessage `json:"result"`
	}
	for task.Status != mcp.TaskCompleted {
		c.call(req26(3, "tasks/get", `"taskId":"`+ct.TaskID+`"`, ext)).decode(t, &task)
	}
	assert.JSONEq(t, `{"content":[{"type":"text","text":"raw"}],"extra":1}`, string(task.Result), "the result as it came")

	c.call(req26(4, "tools/call", `"name":"own","arguments":{}`, ext)).decode(t, &ir)
	assert.Equal(t, "input_required", ir.ResultType, "without Tasks the handler's server decides")
}

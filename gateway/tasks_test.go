package gateway_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/gateway"
	"github.com/mcpedge/mcpedge/session"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// subject is a verified caller (engine.Subject).
type subject string

func (s subject) AuthSubject() string { return string(s) }

// metaAuthz takes the caller a request names in params._meta.t (none:
// anonymous).
type metaAuthz struct{}

func (metaAuthz) Authorize(_ context.Context, _ *session.Session, _ string, params []byte, _ bool) (any, error) {
	meta, ok, _ := codec.ObjectField(params, "_meta")
	if !ok {
		return nil, nil
	}
	raw, ok, _ := codec.ObjectField(meta, "t")
	if !ok {
		return nil, nil
	}
	s, err := codec.StringValue(raw)
	if err != nil {
		return nil, nil
	}
	return subject(s), nil
}

func (metaAuthz) AuthorizeTool(any, string, []string) error { return nil }

// taskFront is a gateway fronting the conformance handlers (whose
// slow_compute runs as a 2026-07-28 task), behind an engine whose callers
// are named in _meta.t; ask sends one 2026-07-28 request and returns its
// answer.
func taskFront(t *testing.T, ttl time.Duration) (ask func(method, params, caller string) *codec.Message) {
	t.Helper()
	gw, err := gateway.New(gateway.Options{Upstreams: []gateway.Upstream{selfUpstream("x", "conformance")}, StartTimeout: 20 * time.Second, TaskTTL: ttl})
	require.NoError(t, err)
	srv := engine.New(engine.Options{Bus: gw.Bus(nil), Authorize: metaAuthz{}})
	require.NoError(t, gw.Start(context.Background(), srv))
	t.Cleanup(func() {
		_ = srv.Shutdown(context.Background())
		gw.Close()
	})
	sink := signalSink{ch: make(chan []byte, 1)}
	conn := srv.Open(sink)
	id := 0
	return func(method, params, caller string) *codec.Message {
		t.Helper()
		id++
		meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}`
		if caller != "" {
			meta += `,"t":"` + caller + `"`
		}
		meta += "}"
		p := "{" + meta + "}"
		if params != "{}" {
			p = params[:len(params)-1] + "," + meta + "}"
		}
		frame := `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"` + method + `","params":` + p + `}`
		out := conn.HandleFrame([]byte(frame), nil)
		if len(out) == 0 {
			select {
			case out = <-sink.ch:
			case <-time.After(30 * time.Second):
				t.Fatalf("%s: no answer", method)
			}
		}
		var m codec.Message
		require.NoError(t, codec.Decode(out, &m), string(out))
		return &m
	}
}

// rpcError returns the error an answer carries, nil when it has none.
func rpcError(t *testing.T, m *codec.Message) *codec.Error {
	t.Helper()
	if m.Error == nil {
		return nil
	}
	var e codec.Error
	require.NoError(t, codec.Unmarshal(m.Error, &e))
	return &e
}

// taskID returns the id of the task a tools/call answer created.
func taskID(t *testing.T, m *codec.Message) string {
	t.Helper()
	require.Nil(t, rpcError(t, m))
	assert.Contains(t, string(m.Result), `"resultType":"task"`)
	raw, ok, err := codec.ObjectField(m.Result, "taskId")
	require.True(t, ok && err == nil, "%s", m.Result)
	id, err := codec.StringValue(raw)
	require.NoError(t, err)
	return string(id)
}

// TestUpstreamTaskBoundToCaller: a 2026-07-28 task an upstream created
// for one caller is reached by that caller only; anyone else, and an id
// the gateway never saw, get the engine's answer for an unknown task, the
// same for both.
func TestUpstreamTaskBoundToCaller(t *testing.T) {
	ask := taskFront(t, 0)
	id := taskID(t, ask("tools/call", `{"name":"slow_compute","arguments":{"seconds":30}}`, "alice"))
	taskArgs := `{"taskId":"` + id + `"}`

	unknown := rpcError(t, ask("tasks/get", `{"taskId":"`+strings.Repeat("0", len(id))+`"}`, "alice"))
	require.NotNil(t, unknown)
	assert.Equal(t, engine.ErrTaskNotFound.Message, unknown.Message)
	for _, tt := range []struct{ method, caller string }{
		{"tasks/get", "bob"}, {"tasks/cancel", "bob"}, {"tasks/update", "bob"}, {"tasks/get", ""}, {"tasks/cancel", ""},
	} {
		t.Run(tt.method+" by "+tt.caller, func(t *testing.T) {
			m := ask(tt.method, taskArgs, tt.caller)
			e := rpcError(t, m)
			require.NotNil(t, e, "%s", m.Result)
			assert.Equal(t, unknown.Code, e.Code)
			assert.Equal(t, unknown.Message, e.Message, "as for an id never issued")
		})
	}
	m := ask("tasks/get", taskArgs, "alice")
	require.Nil(t, rpcError(t, m))
	assert.Contains(t, string(m.Result), `"working"`)
	m = ask("tasks/cancel", taskArgs, "alice")
	require.Nil(t, rpcError(t, m))
	m = ask("tasks/get", taskArgs, "alice")
	require.Nil(t, rpcError(t, m))
	assert.Contains(t, string(m.Result), `"cancelled"`)
}

// TestUpstreamTaskExpires: past TaskTTL, the gateway no longer routes a
// task's methods: its creator too is answered as for an unknown task.
func TestUpstreamTaskExpires(t *testing.T) {
	ask := taskFront(t, time.Nanosecond)
	id := taskID(t, ask("tools/call", `{"name":"slow_compute","arguments":{"seconds":30}}`, "alice"))
	e := rpcError(t, ask("tasks/get", `{"taskId":"`+id+`"}`, "alice"))
	require.NotNil(t, e)
	assert.Equal(t, engine.ErrTaskNotFound.Message, e.Message)
}

package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestInitialize(t *testing.T) {
	f := newFixture(t, engine.Options{Name: "edge-test", Version: "9.9", Instructions: "be nice"})
	for _, tc := range []struct{ requested, want string }{
		{mcp.Version20241105, mcp.Version20241105},
		{mcp.Version20250326, mcp.Version20250326},
		{mcp.Version20250618, mcp.Version20250618},
		{mcp.Version20251125, mcp.Version20251125},
		{"2030-01-01", mcp.LatestVersion},
		{"1.0", mcp.LatestVersion},
	} {
		t.Run(tc.requested, func(t *testing.T) {
			c := f.client(t)
			m := c.call(`{"jsonrpc":"2.0","id":"init-1","method":"initialize","params":{"protocolVersion":"` + tc.requested + `","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
			require.Nil(t, m.Error)
			assert.Equal(t, `"init-1"`, string(m.ID))
			var res mcp.InitializeResult
			require.NoError(t, codec.Unmarshal(m.Result, &res))
			assert.Equal(t, tc.want, res.ProtocolVersion)
			assert.Equal(t, tc.want, c.sess.Version())
			assert.Equal(t, "edge-test", res.ServerInfo.Name)
			assert.Equal(t, "9.9", res.ServerInfo.Version)
			assert.Equal(t, "be nice", res.Instructions)
			require.NotNil(t, res.Capabilities.Tools)
			assert.True(t, res.Capabilities.Tools.ListChanged)
			require.NotNil(t, res.Capabilities.Resources)
			assert.True(t, res.Capabilities.Resources.Subscribe)
			assert.NotNil(t, res.Capabilities.Prompts)
			assert.NotNil(t, res.Capabilities.Logging)
			assert.Equal(t, session.StateInitializing, c.sess.State())
		})
	}
}

func TestCapabilitiesFollowRegistry(t *testing.T) {
	srv := engine.New(engine.Options{})
	defer srv.Shutdown(context.Background())
	caps := srv.Capabilities()
	assert.Nil(t, caps.Tools, "no tools registered")
	assert.Nil(t, caps.Resources)
	assert.Nil(t, caps.Prompts)
	assert.Nil(t, caps.Completions)
	assert.NotNil(t, caps.Logging)
}

func TestLifecycleGate(t *testing.T) {
	f := newFixture(t, engine.Options{})
	c := f.client(t)

	// Before initialize: ping is served, everything else is refused.
	m := c.call(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	require.Nil(t, m.Error)
	assert.JSONEq(t, `{}`, string(m.Result))
	for i, method := range []string{"tools/list", "tools/call", "resources/list", "resources/read", "prompts/get", "logging/setLevel", "resources/subscribe", "completion/complete", "no/such/method"} {
		t.Run(method, func(t *testing.T) {
			m := c.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{}}`, 10+i, method))
			requireError(t, m, fmt.Sprint(10+i), codec.CodeInvalidRequest)
			assert.Contains(t, m.Error.Message, "initialize")
		})
	}
	c.sink.none(t, 10*time.Millisecond)

	// Initialize: params are required.
	requireError(t, c.call(`{"jsonrpc":"2.0","id":2,"method":"initialize"}`), "2", codec.CodeInvalidParams)
	requireError(t, c.call(`{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"capabilities":{}}}`), "3", codec.CodeInvalidParams)
	requireError(t, c.call(`{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":5}}`), "4", codec.CodeInvalidParams)
	assert.Equal(t, session.StateNew, c.sess.State(), "a refused initialize leaves the session new")

	c.init(`{}`)
	m = c.call(`{"jsonrpc":"2.0","id":5,"method":"tools/list"}`)
	require.Nil(t, m.Error)

	// A second initialize is refused, and changes nothing.
	m = c.call(`{"jsonrpc":"2.0","id":6,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"again","version":"1"}}}`)
	requireError(t, m, "6", codec.CodeInvalidRequest)
	assert.Equal(t, mcp.Version20251125, c.sess.Version())
	assert.Equal(t, session.StateReady, c.sess.State())
	c.echo(7, "still fine")

	// Requests are served between initialize and notifications/initialized.
	c2 := f.client(t)
	m = c2.call(fmt.Sprintf(initFrame, `{}`))
	require.Nil(t, m.Error)
	c2.echo(1, "early")
}

func TestClosedSessionRefuses(t *testing.T) {
	f := newFixture(t, engine.Options{})
	c := f.ready(t, `{}`)
	f.srv.Conn(c.sess).Close(errors.New("gone"))
	m := c.call(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	requireError(t, m, "1", codec.CodeInvalidRequest)
	assert.Contains(t, m.Error.Message, "closed")
	_, ok := f.srv.Sessions().Get(c.sess.ID())
	assert.False(t, ok)
}

// TestBadInput sends one bad message per case to a session and checks the
// answer, that the same session still works, and that another session is
// not disturbed.
func TestBadInput(t *testing.T) {
	f := newFixture(t, engine.Options{})
	other := f.ready(t, `{}`)
	for i, tc := range []struct {
		name  string
		frame string
		code  int
		id    string // raw JSON id of the answer
	}{
		{"truncated JSON", `{"jsonrpc":"2.0","id":1,"method":"ping"`, codec.CodeParseError, "null"},
		{"not JSON", `hello`, codec.CodeParseError, "null"},
		{"trailing garbage", `{"jsonrpc":"2.0","id":1,"method":"ping"}}`, codec.CodeParseError, "null"},
		{"control character in string", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"pi\x01ng\"}", codec.CodeParseError, "null"},
		{"batch array", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, codec.CodeInvalidRequest, "null"},
		{"scalar", `"ping"`, codec.CodeInvalidRequest, "null"},
		{"number", `42`, codec.CodeInvalidRequest, "null"},
		{"missing method", `{"jsonrpc":"2.0","id":3}`, codec.CodeInvalidRequest, "3"},
		{"wrong jsonrpc", `{"jsonrpc":"1.0","id":4,"method":"ping"}`, codec.CodeInvalidRequest, "4"},
		{"missing jsonrpc", `{"id":"x","method":"ping"}`, codec.CodeInvalidRequest, `"x"`},
		{"method not a string", `{"jsonrpc":"2.0","id":5,"method":7}`, codec.CodeInvalidRequest, "5"},
		{"params a scalar", `{"jsonrpc":"2.0","id":6,"method":"tools/list","params":5}`, codec.CodeInvalidRequest, "6"},
		{"id an object", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, codec.CodeInvalidRequest, "null"},
		{"null id request", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, codec.CodeInvalidRequest, "null"},
		{"unknown method", `{"jsonrpc":"2.0","id":7,"method":"nope/nope","params":{}}`, codec.CodeMethodNotFound, "7"},
		{"unknown method string id", `{"jsonrpc":"2.0","id":"q","method":"tasks/unknown"}`, codec.CodeMethodNotFound, `"q"`},
		{"tools/call without params", `{"jsonrpc":"2.0","id":8,"method":"tools/call"}`, codec.CodeInvalidParams, "8"},
		{"tools/call name not a string", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":5}}`, codec.CodeInvalidParams, "9"},
		{"tools/call without name", `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"arguments":{}}}`, codec.CodeInvalidParams, "10"},
		{"tools/call unknown tool", `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"nope"}}`, codec.CodeInvalidParams, "11"},
		{"tools/list bad cursor", `{"jsonrpc":"2.0","id":12,"method":"tools/list","params":{"cursor":"garbage"}}`, codec.CodeInvalidParams, "12"},
		{"tools/list cursor not a string", `{"jsonrpc":"2.0","id":13,"method":"tools/list","params":{"cursor":1}}`, codec.CodeInvalidParams, "13"},
		{"setLevel unknown level", `{"jsonrpc":"2.0","id":14,"method":"logging/setLevel","params":{"level":"loud"}}`, codec.CodeInvalidParams, "14"},
		{"setLevel without params", `{"jsonrpc":"2.0","id":15,"method":"logging/setLevel"}`, codec.CodeInvalidParams, "15"},
		{"subscribe without uri", `{"jsonrpc":"2.0","id":16,"method":"resources/subscribe","params":{}}`, codec.CodeInvalidParams, "16"},
		{"unsubscribe without uri", `{"jsonrpc":"2.0","id":17,"method":"resources/unsubscribe","params":{}}`, codec.CodeInvalidParams, "17"},
		{"resources/read without uri", `{"jsonrpc":"2.0","id":18,"method":"resources/read","params":{}}`, codec.CodeInvalidParams, "18"},
		{"resources/read unknown", `{"jsonrpc":"2.0","id":19,"method":"resources/read","params":{"uri":"mem://none"}}`, codec.CodeResourceNotFound, "19"},
		{"prompts/get unknown", `{"jsonrpc":"2.0","id":20,"method":"prompts/get","params":{"name":"none"}}`, codec.CodeInvalidParams, "20"},
		{"prompts/get missing argument", `{"jsonrpc":"2.0","id":21,"method":"prompts/get","params":{"name":"greet"}}`, codec.CodeInvalidParams, "21"},
		{"second initialize", `{"jsonrpc":"2.0","id":22,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, codec.CodeInvalidRequest, "22"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := f.ready(t, `{}`)
			m := c.call(tc.frame)
			requireError(t, m, tc.id, tc.code)
			assert.NotEmpty(t, m.Error.Message)
			c.sink.none(t, 0)
			c.echo(100+i, "same session")
			other.echo(200+i, "other session")
			assert.Equal(t, session.StateReady, c.sess.State())
		})
	}
}

func TestRequestBeforeInitializeDoesNotDisturbOthers(t *testing.T) {
	f := newFixture(t, engine.Options{})
	other := f.ready(t, `{}`)
	c := f.client(t)
	requireError(t, c.call(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`), "1", codec.CodeInvalidRequest)
	other.echo(1, "fine")
	c.init(`{}`)
	c.echo(2, "now fine")
}

func TestMalformedNotifications(t *testing.T) {
	f := newFixture(t, engine.Options{})
	c := f.ready(t, `{}`)
	// A message without an id that is not a valid notification is an
	// invalid request, answered with a null id (JSON-RPC 2.0, section 5.1).
	requireError(t, c.call(`{"jsonrpc":"2.0","method":"notifications/progress","params":5}`), "null", codec.CodeInvalidRequest)
	requireError(t, c.call(`{"jsonrpc":"2.0","method":1,"params":"bar"}`), "null", codec.CodeInvalidRequest)
	// Valid notifications the server does not act on are ignored.
	c.notify(`{"jsonrpc":"2.0","method":"notifications/unknown","params":{}}`)
	c.notify(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":12345}}`)
	c.notify(`{"jsonrpc":"2.0","method":"notifications/cancelled"}`)
	c.notify(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"x","reason":5}}`)
	c.notify(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}`)
	c.notify(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	c.sink.none(t, 10*time.Millisecond)
	c.echo(1, "ok")
}

func TestResponseWithUnknownID(t *testing.T) {
	f := newFixture(t, engine.Options{})
	c := f.ready(t, `{}`)
	other := f.ready(t, `{}`)
	for _, frame := range []string{
		`{"jsonrpc":"2.0","id":999,"result":{}}`,
		`{"jsonrpc":"2.0","id":"zz","result":{"a":1}}`,
		`{"jsonrpc":"2.0","id":998,"error":{"code":-1,"message":"no"}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`,
	} {
		c.notify(frame)
	}
	c.sink.none(t, 10*time.Millisecond)
	c.echo(1, "ok")
	other.echo(1, "ok")
}

func TestToolsCallAndFastPaths(t *testing.T) {
	f := newFixture(t, engine.Options{})
	c := f.ready(t, `{}`)

	// Answers that need no handler are immediate.
	for _, frame := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"resources/list"}`,
		`{"jsonrpc":"2.0","id":4,"method":"resources/templates/list"}`,
		`{"jsonrpc":"2.0","id":5,"method":"prompts/list","params":{}}`,
		`{"jsonrpc":"2.0","id":6,"method":"resources/read","params":{"uri":"mem://static"}}`,
		`{"jsonrpc":"2.0","id":7,"method":"logging/setLevel","params":{"level":"info"}}`,
	} {
		out := c.handle(frame)
		require.NotEmpty(t, out, "no immediate answer to %s", frame)
		require.Nil(t, parse(t, out).Error)
	}
	m := parse(t, c.handle(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`))
	var list mcp.ListToolsResult
	require.NoError(t, codec.Unmarshal(m.Result, &list))
	names := make([]string, len(list.Tools))
	for i, tl := range list.Tools {
		names[i] = tl.Name
	}
	assert.Equal(t, []string{"echo", "slow", "panic", "progress", "log", "peer"}, names)

	m = parse(t, c.handle(`{"jsonrpc":"2.0","id":6,"method":"resources/read","params":{"uri":"mem://static"}}`))
	assert.Contains(t, string(m.Result), `"static text"`)

	// Handler calls go through the pool.
	assert.Empty(t, c.handle(`{"jsonrpc":"2.0","id":"dyn","method":"resources/read","params":{"uri":"mem://dynamic"}}`))
	m = c.sink.next(t)
	assert.Equal(t, `"dyn"`, string(m.ID))
	assert.Contains(t, string(m.Result), `"dynamic text"`)

	m = c.call(`{"jsonrpc":"2.0","id":8,"method":"prompts/get","params":{"name":"greet","arguments":{"name":"Ada"}}}`)
	require.Nil(t, m.Error)
	assert.Contains(t, string(m.Result), "Hello Ada")

	// Arguments that fail the schema are a tool error result, not a protocol error.
	m = c.call(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"text":5}}}`)
	require.Nil(t, m.Error)
	var res mcp.CallToolResult
	require.NoError(t, codec.Unmarshal(m.Result, &res))
	assert.True(t, res.IsError)

	// Ids keep their exact JSON spelling.
	for _, id := range []string{`"a\"b"`, `-1`, `1e3`, `12345678901234567890123`, `""`} {
		m = c.call(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"t"}}}`)
		assert.Equal(t, id, string(m.ID))
		m = c.call(`{"jsonrpc":"2.0","id":` + id + `,"method":"ping"}`)
		assert.Equal(t, id, string(m.ID))
	}
}

package engine_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpedge/mcpedge/auth"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
)

// benchRules are rules of the kind a deployment writes: tools by prefix
// for callers with a scope, a claim or a subject, most of them holding
// for the bench caller (a static token with the scopes mcp and bench).
var benchRules = []auth.Rule{
	{Effect: "allow", Tools: []string{"admin_*"}, When: `"admin" in scopes`},
	{Effect: "deny", Tools: []string{"admin_*"}},
	{Effect: "deny", Tools: []string{"ops_*"}, Prompts: []string{"ops_*"}, When: `!has(claims.team) || claims.team != "ops"`},
	{Effect: "allow", Tools: []string{"*"}, When: `"bench" in scopes && subject.startsWith("static:")`},
	{Effect: "deny", Tools: []string{"*"}, Prompts: []string{"*"}, Resources: []string{"*"}},
}

// rulesFixture returns a server authorizing with a static token
// ("bench-token mcp bench") under rules (none: nil), with
// tools admin_0..9 and ops_0..9 besides the fixture's, and a session
// initialized with the token, answering to sink.
func rulesFixture(tb testing.TB, rules []auth.Rule, sink session.Sink) engine.Conn {
	tb.Helper()
	cfg := auth.Config{Audience: "http://127.0.0.1/mcp", Tokens: []string{"bench-token mcp bench"}}
	if rules != nil {
		p, err := auth.CompileRules(rules, 0)
		require.NoError(tb, err)
		cfg.Rules = p
	}
	v, err := auth.New(cfg)
	require.NoError(tb, err)
	tb.Cleanup(v.Close)
	f := newFixture(tb, engine.Options{Authorize: v})
	ok := func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.TextResult("ok"), nil
	}
	for _, prefix := range []string{"admin_", "ops_"} {
		for i := range 10 {
			require.NoError(tb, f.srv.Registry().AddTool(&mcp.Tool{Name: prefix + strconv.Itoa(i)}, ok))
		}
	}
	conn := f.srv.Open(sink)
	out := conn.HandleFrame([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"},"_meta":{"io.mcpedge/token":"bench-token"}}}`), nil)
	require.Nil(tb, parse(tb, out).Error)
	conn.HandleFrame([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), nil)
	return conn
}

// keepSink keeps a copy of each message sent.
type keepSink struct{ ch chan []byte }

func (s keepSink) Send(b *codec.Buffer) error {
	s.ch <- append([]byte(nil), b.B...)
	codec.PutBuffer(b)
	return nil
}

var (
	rulesCall = []byte(`{"jsonrpc":"2.0","id":123,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, world"}}}`)
	rulesList = []byte(`{"jsonrpc":"2.0","id":124,"method":"tools/list"}`)
)

// TestRulesEngine: under rules, the session's caller lists what its class
// allows, and a hidden tool is answered as one that does not exist.
func TestRulesEngine(t *testing.T) {
	sink := keepSink{ch: make(chan []byte, 4)}
	conn := rulesFixture(t, benchRules, sink)
	m := parse(t, conn.HandleFrame(rulesList, nil))
	require.Nil(t, m.Error)
	var page struct {
		Tools []mcp.Tool `json:"tools"`
	}
	require.NoError(t, codec.Unmarshal(m.Result, &page))
	var names []string
	for _, tool := range page.Tools {
		names = append(names, tool.Name)
	}
	assert.Contains(t, names, "echo")
	for _, name := range names {
		assert.NotContains(t, name, "admin_", "hidden from a caller without the admin scope")
		assert.NotContains(t, name, "ops_", "hidden from a caller without the team claim")
	}

	answer := func(name string) *codec.Error {
		conn.HandleFrame([]byte(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"`+name+`","arguments":{}}}`), nil)
		m := parse(t, <-sink.ch)
		require.NotNil(t, m.Error, name)
		return m.Error
	}
	hidden, missing := answer("admin_3"), answer("no_such_tool")
	assert.Equal(t, missing.Code, hidden.Code)
	assert.Equal(t, "unknown tool: admin_3", hidden.Message)
	assert.Equal(t, "unknown tool: no_such_tool", missing.Message)
}

// BenchmarkRules measures what rules cost a request: a session's
// tools/call of echo (the worker pool path) and its tools/list (a page
// answered on the reading goroutine), with authorization by a static
// token, rules off and on: benchRules, under which the call is checked
// against the class's view of the tools and the list is the class's
// pre-encoded page (a shorter one: 20 tools are hidden), and a rule that
// allows everything, whose page is the unfiltered one (the cost of the
// lookups alone).
func BenchmarkRules(b *testing.B) {
	allowAll := []auth.Rule{{Effect: "allow", Tools: []string{"*"}, When: `"bench" in scopes`}}
	for _, bc := range []struct {
		name  string
		rules []auth.Rule
	}{{"rules-off", nil}, {"rules-on", benchRules}, {"rules-allow-all", allowAll}} {
		b.Run("tools-call/"+bc.name, func(b *testing.B) {
			sink := signalSink{ch: make(chan int, 1)}
			conn := rulesFixture(b, bc.rules, sink)
			var out []byte
			b.ReportAllocs()
			for b.Loop() {
				if out = conn.HandleFrame(rulesCall, out[:0]); len(out) > 0 {
					b.Fatalf("immediate answer: %s", out)
				}
				<-sink.ch
			}
		})
		b.Run("tools-list/"+bc.name, func(b *testing.B) {
			conn := rulesFixture(b, bc.rules, signalSink{ch: make(chan int, 1)})
			var out []byte
			b.ReportAllocs()
			for b.Loop() {
				if out = conn.HandleFrame(rulesList, out[:0]); len(out) < 100 {
					b.Fatalf("short answer: %s", out)
				}
			}
		})
	}
}

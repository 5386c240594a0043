package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// meta26 is the _meta of a 2026-07-28 request declaring caps.
func meta26(caps string) string {
	return `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":` + caps + `}`
}

// req26 is a 2026-07-28 request frame: params (without braces, may be
// empty) plus the _meta of caps.
func req26(id int, method, params, caps string) string {
	if params != "" {
		params += ","
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{%s%s}}`, id, method, params, meta26(caps))
}

// result decodes a result answer into v.
func (m msg) decode(t testing.TB, v any) {
	t.Helper()
	require.Nil(t, m.Error, "error answer: %+v", m.Error)
	require.NoError(t, codec.Unmarshal(m.Result, v), "result %s", m.Result)
}

// codeSink is a reply sink that records what Reject was told.
type codeSink struct {
	*chanSink
	mu    sync.Mutex
	codes []int
}

func (s *codeSink) Reject(code int) {
	s.mu.Lock()
	s.codes = append(s.codes, code)
	s.mu.Unlock()
}

// TestStatelessWithoutInitialize serves 2026-07-28 requests on a connection
// that never initialized, as a TCP or stdio client of that revision does,
// every result completed with resultType and the server's identity.
func TestStatelessWithoutInitialize(t *testing.T) {
	f := newFixture(t, engine.Options{Name: "srv", Version: "9"})
	c := f.client(t)
	type common struct {
		ResultType string `json:"resultType"`
		TTLMs      *int64 `json:"ttlMs"`
		CacheScope string `json:"cacheScope"`
		Meta       struct {
			ServerInfo mcp.Implementation `json:"io.modelcontextprotocol/serverInfo"`
		} `json:"_meta"`
	}
	tests := []struct {
		name, frame string
		cacheable   bool
	}{
		{"server/discover", req26(1, "server/discover", "", `{}`), true},
		{"tools/list", req26(2, "tools/list", "", `{}`), true},
		{"resources/list", req26(3, "resources/list", "", `{}`), true},
		{"resources/templates/list", req26(4, "resources/templates/list", "", `{}`), true},
		{"prompts/list", req26(5, "prompts/list", "", `{}`), true},
		{"static read", req26(6, "resources/read", `"uri":"mem://static"`, `{}`), true},
		{"dynamic read", req26(7, "resources/read", `"uri":"mem://dynamic"`, `{}`), true},
		{"tools/call", req26(8, "tools/call", `"name":"echo","arguments":{"text":"hi"}`, `{}`), false},
		{"prompts/get", req26(9, "prompts/get", `"name":"greet","arguments":{"name":"Ann"}`, `{}`), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := c.call(tt.frame)
			var r common
			m.decode(t, &r)
			assert.Equal(t, "complete", r.ResultType)
			assert.Equal(t, mcp.Implementation{Name: "srv", Version: "9"}, r.Meta.ServerInfo)
			if tt.cacheable {
				require.NotNil(t, r.TTLMs, "ttlMs missing: %s", m.Result)
				assert.Equal(t, "private", r.CacheScope)
			} else {
				assert.Nil(t, r.TTLMs)
			}
		})
	}
	t.Run("discover", func(t *testing.T) {
		var d mcp.DiscoverResult
		c.call(req26(10, "server/discover", "", `{}`)).decode(t, &d)
		assert.Contains(t, d.SupportedVersions, "2026-07-28")
		assert.Contains(t, d.SupportedVersions, "2025-11-25")
		assert.NotNil(t, d.Capabilities.Tools)
		assert.NotNil(t, d.Capabilities.Prompts)
		assert.Nil(t, d.Capabilities.Tasks, "tasks is an extension in 2026-07-28")
		assert.JSONEq(t, `{"io.modelcontextprotocol/tasks":{}}`, string(d.Capabilities.Extensions))
	})
	t.Run("the connection stays uninitialized", func(t *testing.T) {
		m := c.call(`{"jsonrpc":"2.0","id":11,"method":"tools/list"}`)
		requireError(t, m, "11", codec.CodeInvalidRequest)
	})
}

// TestStatelessAfterInitialize: an initialize selects the session-based
// revisions for the rest of its connection, as 2026-07-28 says of
// dual-era servers; server/discover still answers there, and another
// connection may speak either.
func TestStatelessAfterInitialize(t *testing.T) {
	f := newFixture(t, engine.Options{})
	c := f.ready(t, `{}`)
	c.echo(1, "session")
	m := c.call(req26(2, "tools/call", `"name":"echo","arguments":{"text":"in a session"}`, `{}`))
	assert.Equal(t, "in a session", m.text(t))
	assert.NotContains(t, string(m.Result), "resultType", "served as the session's request")
	assert.Contains(t, string(c.call(req26(3, "server/discover", "", `{}`)).Result), `"supportedVersions"`)
	m = c.call(`{"jsonrpc":"2.0","id":4,"method":"ping"}`)
	assert.Equal(t, "{}", string(m.Result))

	stateless := f.client(t)
	m = stateless.call(req26(5, "tools/call", `"name":"echo","arguments":{"text":"stateless"}`, `{}`))
	assert.Equal(t, "stateless", m.text(t))
	assert.Contains(t, string(m.Result), `"resultType":"complete"`)
}

// TestStatelessBadMeta answers a 2026-07-28 request whose _meta is missing or
// malformed with -32602, an unknown version with -32022 naming the
// versions served, and an unknown or removed method with -32601; each is
// reported to a Rejecter, and the session is unharmed.
func TestStatelessBadMeta(t *testing.T) {
	f := newFixture(t, engine.Options{})
	const ok = `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
	tests := []struct {
		name, params string
		method       string
		code         int
	}{
		{"no params", ``, "server/discover", codec.CodeInvalidParams},
		{"no _meta", `{}`, "server/discover", codec.CodeInvalidParams},
		{"_meta not an object", `{"_meta":[]}`, "server/discover", codec.CodeInvalidParams},
		{"no version", `{"_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}`, "server/discover", codec.CodeInvalidParams},
		{"version not a string", `{"_meta":{"io.modelcontextprotocol/protocolVersion":20260728,"io.modelcontextprotocol/clientCapabilities":{}}}`, "tools/list", codec.CodeInvalidParams},
		{"no capabilities", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`, "tools/list", codec.CodeInvalidParams},
		{"capabilities not an object", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":true}}`, "tools/list", codec.CodeInvalidParams},
		{"clientInfo not an object", `{"_meta":{` + ok + `,"io.modelcontextprotocol/clientInfo":"me"}}`, "tools/list", codec.CodeInvalidParams},
		{"unknown log level", `{"_meta":{` + ok + `,"io.modelcontextprotocol/logLevel":"loud"}}`, "tools/list", codec.CodeInvalidParams},
		{"trace not a string", `{"_meta":{` + ok + `,"traceparent":1}}`, "tools/list", codec.CodeInvalidParams},
		{"unknown version", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"v999.0.0","io.modelcontextprotocol/clientCapabilities":{}}}`, "tools/list", mcp.CodeUnsupportedProtocolVersion},
		{"session version", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}}`, "tools/list", mcp.CodeUnsupportedProtocolVersion},
		{"unknown method", `{"_meta":{` + ok + `}}`, "unknown/method", codec.CodeMethodNotFound},
	}
	for _, m := range []string{"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe", "tasks/result", "tasks/list"} {
		tests = append(tests, struct {
			name, params string
			method       string
			code         int
		}{"removed " + m, `{"_meta":{` + ok + `}}`, m, codec.CodeMethodNotFound})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			frame := `{"jsonrpc":"2.0","id":"r-1","method":"` + tt.method + `"`
			if tt.params != "" {
				frame += `,"params":` + tt.params
			}
			frame += "}"
			// A stateless exchange (an HTTP POST of 2026-07-28): every
			// request on it is of that revision.
			sink := &codeSink{chanSink: newChanSink()}
			conn := f.srv.OpenStateless(sink)
			defer conn.Close(nil)
			out := conn.HandleFrame([]byte(frame), nil)
			m := parse(t, out)
			requireError(t, m, `"r-1"`, tt.code)
			assert.Equal(t, []int{tt.code}, sink.codes, "Reject")
			if tt.code == mcp.CodeUnsupportedProtocolVersion {
				var data struct {
					Supported []string `json:"supported"`
					Requested string   `json:"requested"`
				}
				require.NoError(t, codec.Unmarshal(m.Error.Data, &data))
				assert.Contains(t, data.Supported, "2026-07-28")
				assert.NotEmpty(t, data.Requested)
			}
		})
	}
	t.Run("the connection survives", func(t *testing.T) {
		c := f.client(t)
		requireError(t, c.call(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"v9"}}}`), "1", mcp.CodeUnsupportedProtocolVersion)
		assert.Equal(t, "still here", c.call(req26(2, "tools/call", `"name":"echo","arguments":{"text":"still here"}`, `{}`)).text(t))
		c.init(`{}`)
		c.echo(3, "and initialized")
	})
}

// TestStatelessResourceNotFound answers an unknown URI with -32602 and the
// URI in data, as 2026-07-28 requires (-32002 in sessions).
func TestStatelessResourceNotFound(t *testing.T) {
	f := newFixture(t, engine.Options{})
	m := f.client(t).call(req26(1, "resources/read", `"uri":"mem://none"`, `{}`))
	requireError(t, m, "1", codec.CodeInvalidParams)
	assert.JSONEq(t, `{"uri":"mem://none"}`, string(m.Error.Data))
	m = f.ready(t, `{}`).call(`{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"mem://none"}}`)
	requireError(t, m, "2", codec.CodeResourceNotFound)
}

// TestStatelessCacheHints carries the configured hints: per list, per
// resource or template, and for server/discover.
func TestStatelessCacheHints(t *testing.T) {
	f := newFixture(t, engine.Options{DiscoverCache: handlers.CacheHint{TTL: time.Hour, Public: true}})
	r := f.srv.Registry()
	r.SetListCacheHint(handlers.ListNameTools, handlers.CacheHint{TTL: 2 * time.Second, Public: true})
	require.True(t, r.SetResourceCacheHint("mem://static", handlers.CacheHint{TTL: time.Minute}))
	require.False(t, r.SetResourceCacheHint("mem://none", handlers.CacheHint{}))
	c := f.client(t)
	type hint struct {
		TTLMs      int64  `json:"ttlMs"`
		CacheScope string `json:"cacheScope"`
	}
	tests := []struct {
		name, frame string
		want        hint
	}{
		{"discover", req26(1, "server/discover", "", `{}`), hint{3600000, "public"}},
		{"tools", req26(2, "tools/list", "", `{}`), hint{2000, "public"}},
		{"prompts (default)", req26(3, "prompts/list", "", `{}`), hint{0, "private"}},
		{"static resource", req26(4, "resources/read", `"uri":"mem://static"`, `{}`), hint{60000, "private"}},
		{"dynamic resource (default)", req26(5, "resources/read", `"uri":"mem://dynamic"`, `{}`), hint{0, "private"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got hint
			c.call(tt.frame).decode(t, &got)
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestStatelessLogLevel sends notifications/message for a 2026-07-28 request
// only at or above the level its _meta names, and none without one.
func TestStatelessLogLevel(t *testing.T) {
	f := newFixture(t, engine.Options{})
	c := f.client(t)
	m := c.call(req26(1, "tools/call", `"name":"log"`, `{}`))
	assert.Equal(t, "logged", m.text(t))
	c.sink.none(t, 50*time.Millisecond)

	frame := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"log","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"warning"}}}`
	require.Empty(t, c.handle(frame))
	var levels []string
	for {
		m := c.sink.next(t)
		if m.Method == "" {
			assert.Equal(t, "logged", m.text(t))
			break
		}
		require.Equal(t, mcp.NotificationMessage, m.Method)
		var p struct {
			Level string `json:"level"`
		}
		require.NoError(t, codec.Unmarshal(m.Params, &p))
		levels = append(levels, p.Level)
	}
	assert.Equal(t, []string{"warning", "error"}, levels)
}

// TestStatelessTraceContext hands a handler the trace context of its
// request's _meta.
func TestStatelessTraceContext(t *testing.T) {
	f := newFixture(t, engine.Options{})
	require.NoError(t, f.srv.Registry().AddTool(&mcp.Tool{Name: "trace"}, func(_ context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		tp, ts, bg := req.Peer.(handlers.TraceScope).TraceContext()
		return mcp.TextResult(tp + "|" + ts + "|" + bg + "|" + req.Peer.ClientInfo().Name + "|" + req.Peer.ProtocolVersion() + "|" + req.Peer.SessionID()), nil
	}))
	c := f.client(t)
	frame := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"trace","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"cli","version":"2"},"traceparent":"00-abc-def-01","tracestate":"k=v","baggage":"b=1"}}}`
	assert.Equal(t, "00-abc-def-01|k=v|b=1|cli|2026-07-28|", c.call(frame).text(t))
}

// inputRequired is an InputRequiredResult as a test reads it.
type inputRequired struct {
	ResultType    string `json:"resultType"`
	InputRequests map[string]struct {
		Method string        `json:"method"`
		Params codec.RawJSON `json:"params"`
	} `json:"inputRequests"`
	RequestState string `json:"requestState"`
}

// TestStatelessMRTR turns a handler's request for client input into an
// InputRequiredResult, and serves the retry that carries the answer: one
// handler, the same Peer calls as in a session.
func TestStatelessMRTR(t *testing.T) {
	f := newFixture(t, engine.Options{})
	r := f.srv.Registry()
	require.NoError(t, r.AddTool(&mcp.Tool{Name: "two_steps"}, func(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		first, err := req.Peer.Elicit(handlers.WithInputKey(ctx, "step1"), &mcp.ElicitParams{Message: "name?", RequestedSchema: codec.RawJSON(`{"type":"object","properties":{"name":{"type":"string"}}}`)})
		if err != nil {
			return nil, err
		}
		second, err := req.Peer.Elicit(handlers.WithInputKey(ctx, "step2"), &mcp.ElicitParams{Message: "color?", RequestedSchema: codec.RawJSON(`{"type":"object","properties":{"color":{"type":"string"}}}`)})
		if err != nil {
			return nil, err
		}
		return mcp.TextResult(string(first.Content) + " " + string(second.Content)), nil
	}))
	require.NoError(t, r.AddTool(&mcp.Tool{Name: "all_at_once"}, func(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		_, e1 := req.Peer.Elicit(ctx, &mcp.ElicitParams{Message: "name?", RequestedSchema: codec.RawJSON(`{"type":"object","properties":{}}`)})
		_, e2 := req.Peer.CreateMessage(ctx, &mcp.CreateMessageParams{Messages: []mcp.SamplingMessage{{Role: "user", Content: codec.RawJSON(`{"type":"text","text":"hi"}`)}}, MaxTokens: 5})
		roots, e3 := req.Peer.ListRoots(ctx)
		if err := errors.Join(e1, e2, e3); err != nil {
			return nil, err
		}
		return mcp.TextResult(roots.Roots[0].URI), nil
	}))
	require.NoError(t, r.AddTool(&mcp.Tool{Name: "needs_sampling"}, func(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		_, err := req.Peer.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 5})
		return nil, err
	}))
	c := f.client(t)
	const caps = `{"elicitation":{},"sampling":{},"roots":{}}`
	accept := func(content string) string { return `{"action":"accept","content":` + content + `}` }

	t.Run("rounds", func(t *testing.T) {
		var r1 inputRequired
		c.call(req26(1, "tools/call", `"name":"two_steps","arguments":{"x":1}`, caps)).decode(t, &r1)
		assert.Equal(t, "input_required", r1.ResultType)
		require.Contains(t, r1.InputRequests, "step1")
		assert.Equal(t, mcp.MethodElicitationCreate, r1.InputRequests["step1"].Method)
		require.NotEmpty(t, r1.RequestState)

		var r2 inputRequired
		c.call(req26(2, "tools/call", `"name":"two_steps","arguments":{"x":1},"inputResponses":{"step1":`+accept(`{"name":"Alice"}`)+`},"requestState":"`+r1.RequestState+`"`, caps)).decode(t, &r2)
		assert.Equal(t, "input_required", r2.ResultType)
		require.Contains(t, r2.InputRequests, "step2")
		assert.NotContains(t, r2.InputRequests, "step1")
		assert.NotEqual(t, r1.RequestState, r2.RequestState)

		// The client sends only step2's answer: step1's comes back in the state.
		m := c.call(req26(3, "tools/call", `"name":"two_steps","arguments":{"x":1},"inputResponses":{"step2":`+accept(`{"color":"blue"}`)+`},"requestState":"`+r2.RequestState+`"`, caps))
		assert.Equal(t, `{"name":"Alice"} {"color":"blue"}`, m.text(t))
		assert.Contains(t, string(m.Result), `"resultType":"complete"`)
	})
	t.Run("several inputs at once", func(t *testing.T) {
		var r1 inputRequired
		c.call(req26(4, "tools/call", `"name":"all_at_once"`, caps)).decode(t, &r1)
		methods := map[string]string{}
		for k, v := range r1.InputRequests {
			methods[k] = v.Method
		}
		assert.Equal(t, map[string]string{"elicitation-1": mcp.MethodElicitationCreate, "sampling-1": mcp.MethodSamplingCreateMessage, "roots-1": mcp.MethodRootsList}, methods)
		m := c.call(req26(5, "tools/call", `"name":"all_at_once","inputResponses":{"elicitation-1":`+accept(`{}`)+`,"sampling-1":{"role":"assistant","content":{"type":"text","text":"x"},"model":"m"},"roots-1":{"roots":[{"uri":"file:///r"}]},"extra":{"ignored":true}}`, caps))
		assert.Equal(t, "file:///r", m.text(t))
	})
	t.Run("a missing answer is asked again", func(t *testing.T) {
		var r1 inputRequired
		c.call(req26(6, "tools/call", `"name":"two_steps","inputResponses":{"wrong_key":`+accept(`{}`)+`}`, caps)).decode(t, &r1)
		assert.Equal(t, "input_required", r1.ResultType)
		assert.Contains(t, r1.InputRequests, "step1")
	})
	bad := []struct {
		name, params string
	}{
		{"tampered state", `"name":"two_steps","inputResponses":{"step1":` + accept(`{}`) + `},"requestState":"abc.def"`},
		{"state of another request", ""},
		{"answer of the wrong shape", `"name":"two_steps","inputResponses":{"step1":12345}`},
		{"inputResponses not an object", `"name":"two_steps","inputResponses":[1]`},
	}
	for i, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			params := tt.params
			if params == "" {
				var r1 inputRequired
				c.call(req26(10, "tools/call", `"name":"two_steps","arguments":{"x":1}`, caps)).decode(t, &r1)
				params = `"name":"two_steps","arguments":{"x":2},"inputResponses":{"step1":` + accept(`{}`) + `},"requestState":"` + r1.RequestState + `"`
			}
			requireError(t, c.call(req26(20+i, "tools/call", params, caps)), fmt.Sprint(20+i), codec.CodeInvalidParams)
		})
	}
	t.Run("undeclared capability", func(t *testing.T) {
		sink := &codeSink{chanSink: newChanSink()}
		conn := f.srv.OpenStateless(sink)
		defer conn.Close(nil)
		require.Empty(t, conn.HandleFrame([]byte(req26(30, "tools/call", `"name":"needs_sampling"`, `{}`)), nil))
		m := sink.next(t)
		requireError(t, m, "30", mcp.CodeMissingClientCapability)
		assert.JSONEq(t, `{"requiredCapabilities":{"sampling":{}}}`, string(m.Error.Data))
		assert.Equal(t, []int{mcp.CodeMissingClientCapability}, sink.codes)
	})
	t.Run("sessions still get server-to-client requests", func(t *testing.T) {
		s := f.ready(t, caps)
		require.Empty(t, s.handle(`{"jsonrpc":"2.0","id":40,"method":"tools/call","params":{"name":"peer","arguments":{"kind":"elicitation"}}}`))
		out := s.sink.next(t)
		require.Equal(t, mcp.MethodElicitationCreate, out.Method)
		s.notify(`{"jsonrpc":"2.0","id":` + string(out.ID) + `,"result":{"action":"decline"}}`)
		assert.Equal(t, "action decline", s.sink.next(t).text(t))
	})
}

// TestStatelessListen streams the notifications a subscriptions/listen asked
// for, acknowledged first and tagged with its id, until the client cancels
// it or the server shuts down.
func TestStatelessListen(t *testing.T) {
	f := newFixture(t, engine.Options{ListChangedDelay: time.Millisecond})
	c := f.client(t)
	other := f.client(t)
	type params struct {
		Notifications *mcp.SubscriptionFilter `json:"notifications"`
		URI           string                  `json:"uri"`
		Meta          struct {
			ID codec.RawJSON `json:"io.modelcontextprotocol/subscriptionId"`
		} `json:"_meta"`
	}
	open := func(c *client, id int, filter string) {
		t.Helper()
		require.Empty(t, c.handle(req26(id, "subscriptions/listen", `"notifications":`+filter, `{}`)))
		ack := c.sink.next(t)
		require.Equal(t, mcp.NotificationSubscriptionsAcked, ack.Method)
		var p params
		require.NoError(t, codec.Unmarshal(ack.Params, &p))
		assert.Equal(t, fmt.Sprint(id), string(p.Meta.ID))
	}
	open(c, 7, `{"toolsListChanged":true,"resourceSubscriptions":["mem://watched"],"promptsListChanged":false}`)
	open(other, 8, `{"promptsListChanged":true}`)

	require.NoError(t, f.srv.Registry().AddTool(&mcp.Tool{Name: "new_tool"}, func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.TextResult("x"), nil
	}))
	m := c.sink.next(t)
	assert.Equal(t, mcp.NotificationToolListChanged, m.Method)
	var p params
	require.NoError(t, codec.Unmarshal(m.Params, &p))
	assert.Equal(t, "7", string(p.Meta.ID))
	other.sink.none(t, 50*time.Millisecond)

	f.srv.ResourceUpdated("mem://watched")
	m = c.sink.next(t)
	assert.Equal(t, mcp.NotificationResourceUpdated, m.Method)
	require.NoError(t, codec.Unmarshal(m.Params, &p))
	assert.Equal(t, "mem://watched", p.URI)
	assert.Equal(t, "7", string(p.Meta.ID))

	t.Run("cancelled by the client", func(t *testing.T) {
		assert.Zero(t, c.sess.InFlight(), "a stream is no answer its transport waits for")
		c.notify(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`)
		// The id is free again once the stream has ended.
		require.Eventually(t, func() bool {
			out := c.handle(req26(7, "subscriptions/listen", `"notifications":{}`, `{}`))
			return len(out) == 0
		}, wait, time.Millisecond)
		assert.Equal(t, mcp.NotificationSubscriptionsAcked, c.sink.next(t).Method)
		f.srv.ResourceUpdated("mem://watched")
		c.sink.none(t, 50*time.Millisecond)
	})
	t.Run("a duplicate id is refused", func(t *testing.T) {
		m := parse(t, other.handle(req26(8, "subscriptions/listen", `"notifications":{}`, `{}`)))
		requireError(t, m, "8", codec.CodeInvalidRequest)
	})
	t.Run("no filter", func(t *testing.T) {
		m := parse(t, other.handle(req26(9, "subscriptions/listen", "", `{}`)))
		requireError(t, m, "9", codec.CodeInvalidParams)
	})
	t.Run("ended by shutdown with an empty result", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		require.NoError(t, f.srv.Shutdown(ctx))
		m := other.sink.next(t)
		require.Equal(t, "8", string(m.ID))
		var r struct {
			ResultType string `json:"resultType"`
			Meta       struct {
				ID codec.RawJSON `json:"io.modelcontextprotocol/subscriptionId"`
			} `json:"_meta"`
		}
		m.decode(t, &r)
		assert.Equal(t, "complete", r.ResultType)
		assert.Equal(t, "8", string(r.Meta.ID))
	})
}

// TestStatelessExchangeClose frees what a stateless exchange's
// handler registered on its session.
func TestStatelessExchangeClose(t *testing.T) {
	f := newFixture(t, engine.Options{})
	closed := make(chan struct{})
	require.NoError(t, f.srv.Registry().AddTool(&mcp.Tool{Name: "scoped"}, func(_ context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		req.Peer.(handlers.SessionScope).OnSessionClose(func() { close(closed) })
		return mcp.TextResult(strings.ToUpper("ok")), nil
	}))
	sink := newChanSink()
	conn := f.srv.OpenStateless(sink)
	assert.True(t, conn.Session().Stateless())
	assert.Empty(t, conn.Session().ID())
	require.Empty(t, conn.HandleFrame([]byte(req26(1, "tools/call", `"name":"scoped"`, `{}`)), nil))
	assert.Equal(t, "OK", sink.next(t).text(t))
	conn.Close(nil)
	select {
	case <-closed:
	case <-time.After(wait):
		t.Fatal("close hook did not run")
	}
}

// TestStatelessInlineReject tells the reply sink of a NonBlocking tool's
// -32021, as it does for a pooled one.
func TestStatelessInlineReject(t *testing.T) {
	f := newFixture(t, engine.Options{})
	require.NoError(t, f.srv.Registry().AddTool(&mcp.Tool{Name: "inline_needs"}, func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, engine.MissingCapability(`{"roots":{}}`)
	}, handlers.ToolOptions{NonBlocking: true}))
	sink := &codeSink{chanSink: newChanSink()}
	conn := f.srv.OpenStateless(sink)
	defer conn.Close(nil)
	m := parse(t, conn.HandleFrame([]byte(req26(1, "tools/call", `"name":"inline_needs"`, `{}`)), nil))
	requireError(t, m, "1", mcp.CodeMissingClientCapability)
	assert.Equal(t, []int{mcp.CodeMissingClientCapability}, sink.codes)
}

// TestStatelessMetaMemo: a connection's requests are read from their own
// _meta, memoized or not.
func TestStatelessMetaMemo(t *testing.T) {
	f := newFixture(t, engine.Options{})
	c := f.client(t)
	for i, tc := range []struct{ caps, want string }{
		{`{}`, "no capability"},
		{`{}`, "no capability"},
		{`{"sampling":{}}`, "input_required"},
		{`{"sampling":{}}`, "input_required"},
		{`{}`, "no capability"},
	} {
		m := c.call(req26(i+1, "tools/call", `"name":"peer","arguments":{"kind":"sampling"}`, tc.caps))
		require.Nil(t, m.Error)
		assert.Contains(t, string(m.Result), tc.want, "request %d", i+1)
	}
	frame := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"trace","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"traceparent":"%s"}}}`
	require.NoError(t, f.srv.Registry().AddTool(&mcp.Tool{Name: "trace"}, func(_ context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		tp, _, _ := req.Peer.(handlers.TraceScope).TraceContext()
		return mcp.TextResult(tp), nil
	}))
	assert.Equal(t, "a", c.call(fmt.Sprintf(frame, "a")).text(t))
	assert.Equal(t, "b", c.call(fmt.Sprintf(frame, "b")).text(t))
}

// TestStatelessListenUnsupportedKinds acknowledges only the kinds the server
// serves: the rest are left out, as the revision says, and never sent.
func TestStatelessListenUnsupportedKinds(t *testing.T) {
	srv := engine.New(engine.Options{ListChangedDelay: time.Millisecond})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	require.NoError(t, srv.Registry().AddTool(&mcp.Tool{Name: "only"}, func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.TextResult("x"), nil
	}))
	sink := newChanSink()
	conn := srv.Open(sink)
	require.Empty(t, conn.HandleFrame([]byte(req26(1, "subscriptions/listen", `"notifications":{"toolsListChanged":true,"promptsListChanged":true,"resourcesListChanged":true,"resourceSubscriptions":["mem://x"]}`, `{}`)), nil))
	ack := sink.next(t)
	require.Equal(t, mcp.NotificationSubscriptionsAcked, ack.Method)
	var p struct {
		Notifications map[string]any `json:"notifications"`
	}
	require.NoError(t, codec.Unmarshal(ack.Params, &p))
	assert.Equal(t, map[string]any{"toolsListChanged": true}, p.Notifications)
}

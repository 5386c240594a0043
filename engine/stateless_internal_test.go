package engine

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStatelessTail completes results as 2026-07-28 requires, whatever their
// shape, and leaves errors alone.
func TestStatelessTail(t *testing.T) {
	s := New(Options{Name: "srv", Version: "9"})
	t.Cleanup(func() { s.pool.Release() })
	info := `"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"srv","version":"9"}}`
	hint := &handlers.CacheHint{TTL: 1500 * time.Millisecond, Public: true}
	tests := []struct {
		name, in string
		hint     *handlers.CacheHint
		want     string
	}{
		{"empty result", `{"jsonrpc":"2.0","id":1,"result":{}}`, nil,
			`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete",` + info + `}}`},
		{"result", `{"jsonrpc":"2.0","id":1,"result":{"a":1}}`, nil,
			`{"jsonrpc":"2.0","id":1,"result":{"a":1,"resultType":"complete",` + info + `}}`},
		{"cacheable", `{"jsonrpc":"2.0","id":"x","result":{"tools":[]}}`, hint,
			`{"jsonrpc":"2.0","id":"x","result":{"tools":[],"resultType":"complete","ttlMs":1500,"cacheScope":"public",` + info + `}}`},
		{"own hints kept", `{"jsonrpc":"2.0","id":1,"result":{"ttlMs":5,"cacheScope":"private"}}`, hint,
			`{"jsonrpc":"2.0","id":1,"result":{"ttlMs":5,"cacheScope":"private","resultType":"complete",` + info + `}}`},
		{"own resultType kept", `{"jsonrpc":"2.0","id":1,"result":{"resultType":"task","taskId":"t"}}`, nil,
			`{"jsonrpc":"2.0","id":1,"result":{"resultType":"task","taskId":"t",` + info + `}}`},
		{"empty _meta", `{"jsonrpc":"2.0","id":1,"result":{"_meta":{},"x":2}}`, nil,
			`{"jsonrpc":"2.0","id":1,"result":{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"srv","version":"9"}},"x":2,"resultType":"complete"}}`},
		{"own _meta", `{"jsonrpc":"2.0","id":1,"result":{"_meta":{"k":"v"}}}`, nil,
			`{"jsonrpc":"2.0","id":1,"result":{"_meta":{"k":"v","io.modelcontextprotocol/serverInfo":{"name":"srv","version":"9"}},"resultType":"complete"}}`},
		{"own serverInfo kept", `{"jsonrpc":"2.0","id":1,"result":{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"x","version":"1"}}}}`, nil,
			`{"jsonrpc":"2.0","id":1,"result":{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"x","version":"1"}},"resultType":"complete"}}`},
		{"error", `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}`, hint,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix := `{"earlier":"answer"}`
			got := s.statelessTail([]byte(prefix+tt.in), len(prefix), tt.hint)
			require.True(t, strings.HasPrefix(string(got), prefix), "earlier output changed: %s", got)
			assert.Equal(t, tt.want, string(got[len(prefix):]))
			assert.True(t, json.Valid(got[len(prefix):]), "invalid JSON: %s", got)
		})
	}
}

// TestRequestState holds requestState to its request, its age and its
// keys: a rotated key still verifies until dropped.
func TestRequestState(t *testing.T) {
	k1, k2 := []byte("key-one-0123456789abcdef01234567"), []byte("key-two-0123456789abcdef01234567")
	a := New(Options{StateKeys: [][]byte{k1}})
	rotated := New(Options{StateKeys: [][]byte{k2, k1}})
	dropped := New(Options{StateKeys: [][]byte{k2}})
	for _, s := range []*Server{a, rotated, dropped} {
		t.Cleanup(s.pool.Release)
	}
	answers := map[string]json.RawMessage{"user_name": json.RawMessage(`{"action":"accept","content":{"name":"Alice"}}`)}
	tok, err := a.sealState("tools/call", "digest", answers)
	require.NoError(t, err)

	got, err := a.openState(tok, "tools/call", "digest")
	require.NoError(t, err)
	assert.JSONEq(t, string(answers["user_name"]), string(got["user_name"]))
	_, err = rotated.openState(tok, "tools/call", "digest")
	assert.NoError(t, err, "a state signed with the previous key verifies after rotation")

	expired, _ := json.Marshal(statePayload{Method: "tools/call", Digest: "digest", Expires: time.Now().Add(-time.Minute).Unix()})
	tests := []struct {
		name string
		s    *Server
		tok  string
		want error
	}{
		{"tampered", a, tok + "-TAMPERED", errStateSignature},
		{"tampered signature", a, tok[:len(tok)-2] + "AA", errStateSignature},
		{"tampered payload", a, "x" + tok[1:], errStateSignature},
		{"no signature", a, strings.Split(tok, ".")[0], errStateMalformed},
		{"dropped key", dropped, tok, errStateSignature},
		{"expired", a, a.signState(expired), errStateExpired},
		{"too large", a, strings.Repeat("A", maxStateBytes+1), errStateTooBig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.s.openState(tt.tok, "tools/call", "digest")
			assert.ErrorIs(t, err, tt.want)
		})
	}
	t.Run("another request", func(t *testing.T) {
		_, err := a.openState(tok, "tools/call", "other")
		assert.ErrorIs(t, err, errStateRequest)
		_, err = a.openState(tok, "prompts/get", "digest")
		assert.ErrorIs(t, err, errStateRequest)
	})
}

// TestTailByShape: the tail a result the engine encoded gets from its
// shape, without a scan (appendTail), is byte for byte what scanning it
// gives (statelessTail), for every shape of result and _meta.
func TestTailByShape(t *testing.T) {
	s := New(Options{Name: "srv", Version: "9"})
	t.Cleanup(func() { s.pool.Release() })
	hint := handlers.CacheHint{TTL: 1500 * time.Millisecond, Public: true}
	metas := []string{"", `{}`, `{"k":"v"}`, ` { "k" : 1 } `, `{"io.modelcontextprotocol/serverInfo":{"name":"x"}}`, `null`, `{ }`}
	type enc func(r *request, meta string, dst []byte) ([]byte, error)
	kinds := map[string]enc{
		"tool": func(r *request, meta string, dst []byte) ([]byte, error) {
			return s.appendToolResult(r, &mcp.CallToolResult{Content: []mcp.Content{{Type: "text", Text: "hi"}}, Meta: mcp.Meta(meta)}, dst)
		},
		"resource": func(r *request, meta string, dst []byte) ([]byte, error) {
			r.msg.Method, r.hint, r.hintSet = mcp.MethodResourcesRead, hint, true
			res := &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: "a://b", Text: "x"}}, Meta: mcp.Meta(meta)}
			s.resultMeta(r, &res.Meta)
			return appendJSON(dst, res)
		},
		"prompt": func(r *request, meta string, dst []byte) ([]byte, error) {
			res := &mcp.GetPromptResult{Messages: []mcp.PromptMessage{}, Meta: mcp.Meta(meta)}
			s.resultMeta(r, &res.Meta)
			return appendJSON(dst, res)
		},
	}
	for kind, encode := range kinds {
		for _, meta := range metas {
			t.Run(kind+"/"+meta, func(t *testing.T) {
				if meta != "" && !json.Valid([]byte(meta)) {
					t.Skip()
				}
				// What the scan completes: the result as encoded without
				// the revision's additions.
				plain := &request{s: s}
				plain.msg.ID = []byte("7")
				start := []byte(`{"earlier":1}`)
				ans := codec.AppendResultStart(append([]byte(nil), start...), plain.msg.ID)
				ans, err := encode(plain, meta, ans)
				require.NoError(t, err)
				ans = append(ans, '}')
				want := s.statelessTail(ans, len(start), plain.cacheHint())

				r := &request{s: s}
				r.msg.ID = []byte("7")
				r.stateless.on = true
				dst := codec.AppendResultStart(append([]byte(nil), start...), r.msg.ID)
				body := len(dst)
				dst, err = encode(r, meta, dst)
				require.NoError(t, err)
				require.NotEqual(t, shapeUnknown, r.shape)
				got, code := s.finishStateless(r, dst, len(start), body, nil)
				assert.Equal(t, 0, code)
				assert.Equal(t, string(want), string(got))
				assert.True(t, json.Valid(got[len(start):]), "%s", got)
			})
		}
	}
	t.Run("task", func(t *testing.T) {
		creation := `{"resultType":"task","taskId":"a.b","status":"working"}`
		want := s.statelessTail([]byte(`{"jsonrpc":"2.0","id":7,"result":`+creation+`}`), 0, nil)
		r := &request{s: s, shape: shapeTyped}
		r.msg.ID = []byte("7")
		r.stateless.on = true
		dst := codec.AppendResultStart(nil, r.msg.ID)
		body := len(dst)
		got, _ := s.finishStateless(r, append(dst, creation...), 0, body, nil)
		assert.Equal(t, string(want), string(got))
	})
	t.Run("list page", func(t *testing.T) {
		m := &codec.Message{ID: []byte(`"p"`), Method: mcp.MethodToolsList}
		scanned, _ := s.listPage(handlers.ListNameTools, m, nil, nil, nil)
		want := s.statelessTail(scanned, 0, &hint)
		got, code := s.listPage(handlers.ListNameTools, m, nil, nil, &hint)
		assert.Equal(t, 0, code)
		assert.Equal(t, string(want), string(got))
	})
}

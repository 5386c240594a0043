package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// statelessMeta is the _meta of a 2026-07-28 request declaring caps.
func statelessMeta(caps string) string {
	return `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `}`
}

// TestRawHandlers: raw items are served with the handler's bytes as the
// result, unchecked and unchanged in the session revisions, and
// completed once in 2026-07-28; their requests reach the handler as they
// came, input rounds included.
func TestRawHandlers(t *testing.T) {
	f := newFixture(t, engine.Options{})
	reg := f.srv.Registry()
	var seen []string // params the raw handlers got
	raw := func(res string) handlers.RawHandler {
		return func(_ context.Context, req *handlers.RawRequest, dst []byte) ([]byte, error) {
			seen = append(seen, req.Method+" "+req.Name+" "+string(req.Params))
			return append(dst, res...), nil
		}
	}
	require.NoError(t, reg.AddRawTool([]byte(`{"name":"r","inputSchema":{"type":"object","required":["x"]}}`), raw(`{"content":[{"type":"text","text":"raw"}],"extra":1}`)))
	require.NoError(t, reg.AddRawTool([]byte(`{"name":"done","inputSchema":{"type":"object"}}`), raw(`{"content":[],"resultType":"complete","_meta":{"k":1}}`)))
	require.NoError(t, reg.AddRawResource([]byte(`{"uri":"raw://a","name":"a"}`), raw(`{"contents":[{"uri":"raw://a","text":"A"}]}`)))
	require.NoError(t, reg.AddRawResourceTemplate([]byte(`{"uriTemplate":"raw://t/{id}","name":"t"}`), raw(`{"contents":[]}`), handlers.RawOptions{Completions: true}))
	require.NoError(t, reg.AddRawPrompt([]byte(`{"name":"p","arguments":[{"name":"a","required":true}]}`), raw(`{"messages":[]}`), handlers.RawOptions{Completions: true}))
	require.NoError(t, reg.AddRawResource([]byte(`{"uri":"raw://gone","name":"g"}`), func(context.Context, *handlers.RawRequest, []byte) ([]byte, error) {
		return nil, &codec.Error{Code: codec.CodeResourceNotFound, Message: "gone"}
	}))

	c := f.ready(t, `{}`)
	t.Run("session", func(t *testing.T) {
		tests := []struct{ frame, result, seen string }{
			{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"r","arguments":{}}}`, `{"content":[{"type":"text","text":"raw"}],"extra":1}`, `tools/call r {"name":"r","arguments":{}}`},
			{`{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"raw://a"}}`, `{"contents":[{"uri":"raw://a","text":"A"}]}`, `resources/read raw://a {"uri":"raw://a"}`},
			{`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"raw://t/7"}}`, `{"contents":[]}`, `resources/read raw://t/7 {"uri":"raw://t/7"}`},
			{`{"jsonrpc":"2.0","id":4,"method":"prompts/get","params":{"name":"p"}}`, `{"messages":[]}`, `prompts/get p {"name":"p"}`},
			{`{"jsonrpc":"2.0","id":5,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":""}}}`, `{"messages":[]}`, `completion/complete p {"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":""}}`},
			{`{"jsonrpc":"2.0","id":6,"method":"completion/complete","params":{"ref":{"type":"ref/resource","uri":"raw://t/{id}"},"argument":{"name":"id","value":""}}}`, `{"contents":[]}`, `completion/complete raw://t/{id} {"ref":{"type":"ref/resource","uri":"raw://t/{id}"},"argument":{"name":"id","value":""}}`},
		}
		for _, tt := range tests {
			seen = nil
			m := c.call(tt.frame)
			require.Nil(t, m.Error, tt.frame)
			assert.Equal(t, tt.result, string(m.Result), "passed through as it came")
			assert.Equal(t, []string{tt.seen}, seen, "the request as it came: no schema, no required argument checked")
		}
		m := c.call(`{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{"uri":"raw://gone"}}`)
		requireError(t, m, "7", codec.CodeResourceNotFound)
	})
	t.Run("2026-07-28", func(t *testing.T) {
		m2 := f.client(t) // not initialized: stateless requests
		seen = nil
		m := m2.call(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"r","arguments":{},"requestState":"not-ours","inputResponses":{"k":{}},` + statelessMeta(`{}`) + `}}`)
		require.Nil(t, m.Error)
		res := string(m.Result)
		assert.Equal(t, 1, strings.Count(res, `"resultType":"complete"`), res)
		assert.Contains(t, res, `"`+mcp.MetaServerInfo+`"`)
		require.Len(t, seen, 1)
		assert.Contains(t, seen[0], `"requestState":"not-ours"`, "input rounds are the raw handler's server's")

		m = m2.call(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"done",` + statelessMeta(`{}`) + `}}`)
		require.Nil(t, m.Error)
		res = string(m.Result)
		assert.Equal(t, 1, strings.Count(res, `"resultType"`), "kept, not added twice: %s", res)
		assert.Contains(t, res, `"k":1`)
		assert.Equal(t, 1, strings.Count(res, mcp.MetaServerInfo), res)

		m = m2.call(`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"raw://gone",` + statelessMeta(`{}`) + `}}`)
		requireError(t, m, "3", codec.CodeInvalidParams)
	})
}

// TestForeignTasks: tasks/get, tasks/update and tasks/cancel of a task
// the engine does not hold go to the foreign tasks handler, for clients
// that declared the tasks extension.
func TestForeignTasks(t *testing.T) {
	f := newFixture(t, engine.Options{})
	var got []string
	f.srv.Registry().SetForeignTasks(func(_ context.Context, req *handlers.RawRequest, dst []byte) ([]byte, error) {
		got = append(got, req.Method+" "+req.Name)
		return append(dst, `{"resultType":"complete","taskId":"up-1","status":"working"}`...), nil
	})
	c := f.client(t)
	ext := `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`
	m := c.call(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"up-1",` + statelessMeta(ext) + `}}`)
	require.Nil(t, m.Error)
	assert.Contains(t, string(m.Result), `"status":"working"`)
	m = c.call(`{"jsonrpc":"2.0","id":2,"method":"tasks/cancel","params":{"taskId":"up-1",` + statelessMeta(ext) + `}}`)
	require.Nil(t, m.Error)
	assert.Equal(t, []string{"tasks/get up-1", "tasks/cancel up-1"}, got)
	m = c.call(`{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"up-1",` + statelessMeta(`{}`) + `}}`)
	requireError(t, m, "3", mcp.CodeMissingClientCapability)
}

// TestRelatedRequest: a client that declares the related-request key
// gets it in the messages its requests cause; others do not.
func TestRelatedRequest(t *testing.T) {
	f := newFixture(t, engine.Options{})
	require.NoError(t, f.srv.Registry().AddTool(&mcp.Tool{Name: "chatty"}, func(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		_ = req.Peer.Progress(1, 2, "half")
		_ = req.Peer.Log("error", "t", "oops")
		if req.Peer.ClientCapabilities().Elicitation != nil {
			if _, err := req.Peer.Elicit(ctx, &mcp.ElicitParams{Message: "?", RequestedSchema: codec.RawJSON(`{"type":"object"}`), Meta: codec.RawJSON(`{"x":1}`)}); err != nil {
				return nil, err
			}
		}
		return mcp.TextResult("ok"), nil
	}))
	for _, linked := range []bool{true, false} {
		caps := `{"elicitation":{}}`
		if linked {
			caps = `{"elicitation":{},"experimental":{"` + mcp.MetaRelatedRequest + `":{}}}`
		}
		c := f.ready(t, caps)
		require.NoError(t, codec.Unmarshal([]byte(`{}`), new(struct{})))
		c.handle(`{"jsonrpc":"2.0","id":"r1","method":"tools/call","params":{"name":"chatty","_meta":{"progressToken":5}}}`)
		link := `"` + mcp.MetaRelatedRequest + `":{"requestId":"r1"}`
		for _, method := range []string{"notifications/progress", "notifications/message", "elicitation/create"} {
			m := c.sink.next(t)
			require.Equal(t, method, m.Method)
			if linked {
				assert.Contains(t, string(m.Params), link, method)
			} else {
				assert.NotContains(t, string(m.Params), mcp.MetaRelatedRequest, method)
			}
			if method == "elicitation/create" {
				assert.Contains(t, string(m.Params), `"x":1`, "the handler's _meta kept")
				c.notify(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"action":"decline"}}`)
			}
		}
		assert.Equal(t, "ok", c.sink.next(t).text(t))
	}
}

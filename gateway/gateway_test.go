package gateway_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/client"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/gateway"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func toolNames(t *testing.T, c *client.Client) []string {
	t.Helper()
	tools, err := c.AllTools(testCtx(t))
	require.NoError(t, err)
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name)
	}
	return names
}

func text(t *testing.T, r *mcp.CallToolResult) string {
	t.Helper()
	require.NotNil(t, r)
	require.NotEmpty(t, r.Content)
	return r.Content[0].Text
}

// TestThroughGateway drives one session through a gateway fronting an
// mcpedge with the conformance handlers over stdio: every kind of item,
// and everything an upstream sends during a call, relayed.
func TestThroughGateway(t *testing.T) {
	f := startFront(t, gateway.Options{Upstreams: []gateway.Upstream{selfUpstream("x", "conformance")}})
	var mu sync.Mutex
	var logs []string
	c := f.dial(t, client.Options{
		OnElicitation: func(_ context.Context, _ *client.ServerRequest, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			assert.Empty(t, p.Meta, "the gateway's link keys do not reach the client")
			return &mcp.ElicitResult{Action: "accept", Content: codec.RawJSON(`{"username":"ada","email":"ada@example.com"}`)}, nil
		},
		OnSampling: func(context.Context, *client.ServerRequest, *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Content: codec.RawJSON(`{"type":"text","text":"hi there"}`), Model: "m"}, nil
		},
		OnLog: func(p *mcp.LoggingMessageParams) {
			mu.Lock()
			logs = append(logs, string(p.Data))
			mu.Unlock()
		},
	})
	ctx := testCtx(t)
	names := toolNames(t, c)
	assert.Contains(t, names, "test_simple_text", "one upstream: names unchanged")
	assert.Contains(t, names, "test_elicitation")

	t.Run("call", func(t *testing.T) {
		r, err := c.CallTool(ctx, "test_simple_text", map[string]any{})
		require.NoError(t, err)
		assert.Equal(t, "This is a simple text response for testing.", text(t, r))
	})
	t.Run("elicitation", func(t *testing.T) {
		r, err := c.CallTool(ctx, "test_elicitation", map[string]any{"message": "who?"})
		require.NoError(t, err)
		assert.Contains(t, text(t, r), `action=accept`)
		assert.Contains(t, text(t, r), `ada@example.com`)
	})
	t.Run("sampling", func(t *testing.T) {
		r, err := c.CallTool(ctx, "test_sampling", map[string]any{"prompt": "hello"})
		require.NoError(t, err)
		assert.Equal(t, "LLM response: hi there", text(t, r))
	})
	t.Run("progress", func(t *testing.T) {
		var steps []float64
		r, err := c.CallTool(ctx, "test_tool_with_progress", map[string]any{},
			client.WithProgress(func(p, _ float64, _ string) { steps = append(steps, p) }))
		require.NoError(t, err)
		assert.Equal(t, []float64{0, 50, 100}, steps)
		assert.NotContains(t, text(t, r), "\"", "the upstream saw a numeric token of the gateway's")
	})
	t.Run("logging", func(t *testing.T) {
		require.NoError(t, c.SetLogLevel(ctx, "info"))
		_, err := c.CallTool(ctx, "test_tool_with_logging", map[string]any{})
		require.NoError(t, err)
		// The client runs its callbacks on a goroutine of its own.
		want := []string{`"Tool execution started"`, `"Tool processing data"`, `"Tool execution completed"`}
		assert.Eventually(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return slices.Equal(want, logs)
		}, 5*time.Second, time.Millisecond)
	})
	t.Run("resources", func(t *testing.T) {
		r, err := c.ReadResource(ctx, "test://static-text")
		require.NoError(t, err)
		require.Len(t, r.Contents, 1)
		assert.Equal(t, "This is the content of the static text resource.", r.Contents[0].Text)
		r, err = c.ReadResource(ctx, "test://template/42/data")
		require.NoError(t, err)
		assert.Contains(t, r.Contents[0].Text, "42")
		_, err = c.ReadResource(ctx, "test://nowhere")
		var ce *codec.Error
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, codec.CodeResourceNotFound, ce.Code)
	})
	t.Run("prompts", func(t *testing.T) {
		r, err := c.GetPrompt(ctx, "test_prompt_with_arguments", map[string]string{"arg1": "a", "arg2": "b"})
		require.NoError(t, err)
		require.NotEmpty(t, r.Messages)
		_, err = c.GetPrompt(ctx, "test_prompt_with_arguments", map[string]string{})
		var ce *codec.Error
		require.ErrorAs(t, err, &ce, "the upstream checks required arguments")
		assert.Equal(t, codec.CodeInvalidParams, ce.Code)
	})
	t.Run("completion", func(t *testing.T) {
		p := &mcp.CompleteParams{Ref: mcp.CompleteReference{Type: "ref/prompt", Name: "test_prompt_with_arguments"}}
		p.Argument.Name, p.Argument.Value = "arg1", "te"
		r, err := c.Complete(ctx, p)
		require.NoError(t, err)
		assert.Equal(t, []string{"test", "testValue1", "testing"}, r.Completion.Values)
	})
}

// TestPrefixes serves two upstreams: each one's names get its prefix,
// and each call reaches its own upstream.
func TestPrefixes(t *testing.T) {
	f := startFront(t, gateway.Options{Upstreams: []gateway.Upstream{selfUpstream("a", "conformance"), selfUpstream("b", "demo")}})
	c := f.dial(t, client.Options{})
	names := toolNames(t, c)
	assert.Contains(t, names, "a_test_simple_text")
	assert.NotContains(t, names, "test_simple_text")
	assert.True(t, slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "b_") }), names)
	r, err := c.CallTool(testCtx(t), "a_test_simple_text", map[string]any{})
	require.NoError(t, err)
	assert.Equal(t, "This is a simple text response for testing.", text(t, r))
	pr, err := c.GetPrompt(testCtx(t), "a_test_simple_prompt", nil)
	require.NoError(t, err)
	assert.NotEmpty(t, pr.Messages)
}

// TestCollision: two upstreams whose names are the same even with
// their prefixes is a start-up error naming both.
func TestCollision(t *testing.T) {
	empty := ""
	a, b := selfUpstream("a", "conformance"), selfUpstream("b", "conformance")
	a.Prefix, b.Prefix = &empty, &empty
	_, err := tryFront(t, gateway.Options{Upstreams: []gateway.Upstream{a, b}})
	require.Error(t, err)
	assert.ErrorIs(t, err, gateway.ErrConfig)
	assert.Contains(t, err.Error(), `upstream "a"`)
	assert.Contains(t, err.Error(), `upstream "b"`)
	assert.Contains(t, err.Error(), `test_simple_text`)
}

// TestToolFilters: tools.allow, tools.deny and tools.rename.
func TestToolFilters(t *testing.T) {
	u := selfUpstream("x", "conformance")
	u.Allow = []string{"test_*"}
	u.Deny = []string{"test_error*", "test_sampling"}
	u.Rename = map[string]string{"test_simple_text": "simple"}
	f := startFront(t, gateway.Options{Upstreams: []gateway.Upstream{u}})
	c := f.dial(t, client.Options{})
	names := toolNames(t, c)
	assert.Contains(t, names, "simple")
	assert.NotContains(t, names, "test_simple_text")
	assert.NotContains(t, names, "test_error_handling")
	assert.NotContains(t, names, "test_sampling")
	assert.NotContains(t, names, "json_schema_2020_12_tool", "not allowed")
	r, err := c.CallTool(testCtx(t), "simple", map[string]any{})
	require.NoError(t, err)
	assert.Equal(t, "This is a simple text response for testing.", text(t, r))
}

// TestInstructionsMerged: with one upstream and no instructions of its
// own, the gateway passes the upstream's; with several, each upstream's
// follow the gateway's own, under a line naming the upstream and its
// prefix. The gateway's identity stays its own.
func TestInstructionsMerged(t *testing.T) {
	t.Run("one upstream", func(t *testing.T) {
		f := startFront(t, gateway.Options{Upstreams: []gateway.Upstream{selfUpstream("x", "fake")}})
		c := f.dial(t, client.Options{})
		assert.Equal(t, "Call echo to hear yourself.", c.Instructions())
		assert.Equal(t, "mcpedge", c.ServerInfo().Name)
	})
	t.Run("several", func(t *testing.T) {
		f := startFront(t, gateway.Options{Upstreams: []gateway.Upstream{selfUpstream("x", "fake"), selfUpstream("y", "conformance")}})
		c := f.dial(t, client.Options{})
		assert.Equal(t, "From the server \"x\" (its tools and prompts are named x_...):\nCall echo to hear yourself.", c.Instructions(),
			"y gives none")
	})
}

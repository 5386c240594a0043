package handlers_test

import (
	"context"
	"errors"
	"testing"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func rawResult(res string) handlers.RawHandler {
	return func(_ context.Context, _ *handlers.RawRequest, dst []byte) ([]byte, error) {
		return append(dst, res...), nil
	}
}

// TestRawRegistration: a raw descriptor is listed as given, and misuse
// is an error wrapping the kind's sentinel.
func TestRawRegistration(t *testing.T) {
	r := handlers.NewRegistry(handlers.Options{})
	h := rawResult(`{}`)
	bad := []struct {
		name string
		err  error
		add  func() error
	}{
		{"tool not an object", handlers.ErrInvalidTool, func() error { return r.AddRawTool([]byte(`[1]`), h) }},
		{"tool without a name", handlers.ErrInvalidTool, func() error { return r.AddRawTool([]byte(`{"inputSchema":{}}`), h) }},
		{"tool with an empty name", handlers.ErrInvalidTool, func() error { return r.AddRawTool([]byte(`{"name":""}`), h) }},
		{"tool without a handler", handlers.ErrInvalidTool, func() error { return r.AddRawTool([]byte(`{"name":"t"}`), nil) }},
		{"tool with a bad task support", handlers.ErrInvalidTool, func() error {
			return r.AddRawTool([]byte(`{"name":"t","execution":{"taskSupport":"sometimes"}}`), h)
		}},
		{"tool with a bad x-mcp-header", handlers.ErrInvalidTool, func() error {
			return r.AddRawTool([]byte(`{"name":"t","inputSchema":{"type":"object","properties":{"a":{"type":"object","x-mcp-header":"A"}}}}`), h)
		}},
		{"resource without a uri", handlers.ErrInvalidResource, func() error { return r.AddRawResource([]byte(`{"name":"x"}`), h) }},
		{"template that does not parse", handlers.ErrInvalidTemplate, func() error {
			return r.AddRawResourceTemplate([]byte(`{"uriTemplate":"x://{a"}`), h, handlers.RawOptions{})
		}},
		{"prompt not JSON", handlers.ErrInvalidPrompt, func() error { return r.AddRawPrompt([]byte(`{"name":`), h, handlers.RawOptions{}) }},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			assert.ErrorIs(t, tt.add(), tt.err)
		})
	}
	assert.False(t, r.HasRaw(), "nothing registered")

	desc := `{"name":"t", "inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"},"x-vendor":1}`
	require.NoError(t, r.AddRawTool([]byte(desc), h))
	page, err := r.ListPage(handlers.ListNameTools, "")
	require.NoError(t, err)
	assert.Equal(t, `{"tools":[`+desc+`]}`, string(page), "listed as given")
	o, ok := r.ToolOptionsOf("t")
	require.True(t, ok)
	assert.Equal(t, mcp.TaskOptional, o.TaskSupport)
	assert.Empty(t, o.Upstream)
	require.NoError(t, r.AddRawTool([]byte(`{"name":"u"}`), h, handlers.RawOptions{Upstream: "up"}))
	o, ok = r.ToolOptionsOf("u")
	require.True(t, ok)
	assert.Equal(t, "up", o.Upstream, "a gateway's tool names its upstream")
	_, ok = r.RawTool("t")
	assert.True(t, ok)
	assert.True(t, r.HasRaw())

	require.NoError(t, r.AddRawResourceTemplate([]byte(`{"uriTemplate":"x://t/{id}","name":"t"}`), h, handlers.RawOptions{Completions: true}))
	_, ok = r.RawResource("x://t/3")
	assert.True(t, ok)
	_, ok = r.RawResource("x://u/3")
	assert.False(t, ok)
	_, ok = r.RawCompletion("ref/resource", "x://t/{id}")
	assert.True(t, ok)
	assert.True(t, r.HasCompletions())
}

// TestRawTyped: the typed API serves raw items too (the engine's tasks
// call tools through it): params encoded, the result decoded.
func TestRawTyped(t *testing.T) {
	r := handlers.NewRegistry(handlers.Options{})
	var got string
	require.NoError(t, r.AddRawTool([]byte(`{"name":"t"}`), func(_ context.Context, req *handlers.RawRequest, dst []byte) ([]byte, error) {
		got = string(req.Params)
		return append(dst, `{"content":[{"type":"text","text":"hi"}],"isError":true}`...), nil
	}))
	res, err := r.CallTool(context.Background(), &handlers.CallToolRequest{Params: &mcp.CallToolParams{Name: "t", Arguments: codec.RawJSON(`{"a":1}`)}})
	require.NoError(t, err)
	assert.True(t, res.IsError)
	assert.Equal(t, "hi", res.Content[0].Text)
	assert.JSONEq(t, `{"name":"t","arguments":{"a":1}}`, got)

	require.NoError(t, r.AddRawPrompt([]byte(`{"name":"p"}`), func(context.Context, *handlers.RawRequest, []byte) ([]byte, error) {
		return nil, &codec.Error{Code: -32602, Message: "nope"}
	}, handlers.RawOptions{}))
	_, err = r.GetPrompt(context.Background(), &handlers.GetPromptRequest{Params: &mcp.GetPromptParams{Name: "p"}})
	var ce *codec.Error
	require.True(t, errors.As(err, &ce))
	assert.Equal(t, "nope", ce.Message)
}

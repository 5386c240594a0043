package handlers

import (
	"context"
	"testing"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func greetPrompt(ctx context.Context, req *GetPromptRequest) (*mcp.GetPromptResult, error) {
	return &mcp.GetPromptResult{Messages: []mcp.PromptMessage{{
		Role: "user", Content: mcp.Content{Type: mcp.ContentText, Text: "hello " + req.Params.Arguments["name"] + req.Params.Arguments["suffix"]},
	}}}, nil
}

func TestAddPromptErrors(t *testing.T) {
	tests := []struct {
		name string
		p    *mcp.Prompt
		h    PromptHandler
	}{
		{"nil prompt", nil, greetPrompt},
		{"empty name", &mcp.Prompt{}, greetPrompt},
		{"nil handler", &mcp.Prompt{Name: "p"}, nil},
		{"unnamed argument", &mcp.Prompt{Name: "p", Arguments: []mcp.PromptArgument{{Required: true}}}, greetPrompt},
		{"bad meta", &mcp.Prompt{Name: "p", Meta: mcp.Meta(`[`)}, greetPrompt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRegistry(Options{})
			assert.ErrorIs(t, r.AddPrompt(tt.p, tt.h), ErrInvalidPrompt)
			assert.Equal(t, 0, r.Len(ListNamePrompts))
		})
	}
}

func TestGetPrompt(t *testing.T) {
	r := NewRegistry(Options{})
	require.NoError(t, r.AddPrompt(&mcp.Prompt{Name: "greet", Arguments: []mcp.PromptArgument{
		{Name: "name", Required: true}, {Name: "suffix"}, {Name: "lang", Required: true},
	}}, greetPrompt))
	require.NoError(t, r.AddPrompt(&mcp.Prompt{Name: "empty"}, func(context.Context, *GetPromptRequest) (*mcp.GetPromptResult, error) {
		return nil, nil
	}))
	require.NoError(t, r.AddPrompt(&mcp.Prompt{Name: "fails"}, func(context.Context, *GetPromptRequest) (*mcp.GetPromptResult, error) {
		return nil, &codec.Error{Code: codec.CodeInvalidParams, Message: "bad lang"}
	}))

	tests := []struct {
		name    string
		prompt  string
		args    map[string]string
		wantErr string // message of a -32602 error
		text    string
		n       int
	}{
		{name: "unknown", prompt: "nope", wantErr: "unknown prompt: nope"},
		{name: "all required missing", prompt: "greet", wantErr: "prompt greet: missing required arguments: name, lang"},
		{name: "one required missing", prompt: "greet", args: map[string]string{"name": "bob", "suffix": "!"}, wantErr: "prompt greet: missing required argument: lang"},
		{name: "required present", prompt: "greet", args: map[string]string{"name": "bob", "lang": "en"}, text: "hello bob", n: 1},
		{name: "empty value counts as present", prompt: "greet", args: map[string]string{"name": "", "lang": "", "suffix": "!"}, text: "hello !", n: 1},
		{name: "nil result is empty", prompt: "empty", n: 0},
		{name: "handler error", prompt: "fails", wantErr: "bad lang"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := r.GetPrompt(context.Background(), &GetPromptRequest{Params: &mcp.GetPromptParams{Name: tt.prompt, Arguments: tt.args}})
			if tt.wantErr != "" {
				ce := requireCodeErr(t, err, codec.CodeInvalidParams, tt.wantErr)
				assert.Equal(t, tt.wantErr, ce.Message)
				return
			}
			require.NoError(t, err)
			require.NotNil(t, res.Messages)
			require.Len(t, res.Messages, tt.n)
			if tt.n > 0 {
				assert.Equal(t, tt.text, res.Messages[0].Content.Text)
			}
		})
	}

	_, err := r.GetPrompt(context.Background(), &GetPromptRequest{})
	requireCodeErr(t, err, codec.CodeInvalidParams, "missing params")

	assert.Equal(t, 2, r.RemovePrompts("empty", "fails", "nope"))
	_, err = r.GetPrompt(context.Background(), &GetPromptRequest{Params: &mcp.GetPromptParams{Name: "empty"}})
	requireCodeErr(t, err, codec.CodeInvalidParams, "unknown prompt: empty")
	b, err := r.ListPage(ListNamePrompts, "")
	require.NoError(t, err)
	assert.Equal(t, `{"prompts":[{"name":"greet","arguments":[{"name":"name","required":true},{"name":"suffix"},{"name":"lang","required":true}]}]}`, string(b))
}

package handlers

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// prefixCompleter proposes the values among n generated ones ("v0".."vN-1")
// that start with the argument's value, reporting total when it is not nil.
func prefixCompleter(n int, total *int) CompletionHandler {
	return func(ctx context.Context, req *CompleteRequest) (*mcp.CompleteResult, error) {
		var vs []string
		for i := range n {
			if v := "v" + strconv.Itoa(i); strings.HasPrefix(v, req.Params.Argument.Value) {
				vs = append(vs, v)
			}
		}
		return &mcp.CompleteResult{Completion: mcp.Completion{Values: vs, Total: total}}, nil
	}
}

func TestComplete(t *testing.T) {
	r := NewRegistry(Options{})
	assert.False(t, r.HasCompletions())
	require.NoError(t, r.AddPrompt(&mcp.Prompt{Name: "p", Arguments: []mcp.PromptArgument{{Name: "big"}, {Name: "small"}, {Name: "none"}}}, greetPrompt))
	require.NoError(t, r.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "users://{user}/posts/{post}"}, varsHandler("u")))
	require.NoError(t, r.AddStaticResource(&mcp.Resource{URI: "s://static"}))
	thousand := 1000
	require.NoError(t, r.AddPromptCompletion("p", "big", prefixCompleter(250, nil)))
	require.NoError(t, r.AddPromptCompletion("p", "small", prefixCompleter(3, nil)))
	require.NoError(t, r.AddPromptCompletion("p", "known", prefixCompleter(150, &thousand)))
	require.NoError(t, r.AddPromptCompletion("p", "nil", func(context.Context, *CompleteRequest) (*mcp.CompleteResult, error) { return nil, nil }))
	require.NoError(t, r.AddPromptCompletion("p", "err", func(context.Context, *CompleteRequest) (*mcp.CompleteResult, error) {
		return nil, &codec.Error{Code: codec.CodeInvalidParams, Message: "no way"}
	}))
	require.NoError(t, r.AddTemplateCompletion("users://{user}/posts/{post}", "user", prefixCompleter(12, nil)))
	require.NoError(t, r.AddPromptCompletion("gone", "x", prefixCompleter(3, nil)))
	assert.True(t, r.HasCompletions())

	ref := func(typ, name, uri string) mcp.CompleteReference {
		return mcp.CompleteReference{Type: typ, Name: name, URI: uri}
	}
	tests := []struct {
		name     string
		ref      mcp.CompleteReference
		arg, val string
		wantErr  string
		n        int
		first    string
		total    int
		hasMore  bool
	}{
		{name: "capped at 100", ref: ref("ref/prompt", "p", ""), arg: "big", n: 100, first: "v0", total: 250, hasMore: true},
		{name: "filtered under the cap", ref: ref("ref/prompt", "p", ""), arg: "big", val: "v2", n: 61, first: "v2", total: 61},
		{name: "small", ref: ref("ref/prompt", "p", ""), arg: "small", n: 3, first: "v0", total: 3},
		{name: "handler total kept", ref: ref("ref/prompt", "p", ""), arg: "known", n: 100, first: "v0", total: 1000, hasMore: true},
		{name: "handler total under cap", ref: ref("ref/prompt", "p", ""), arg: "known", val: "v14", n: 11, first: "v14", total: 1000, hasMore: true},
		{name: "no handler", ref: ref("ref/prompt", "p", ""), arg: "none", n: 0},
		{name: "nil result", ref: ref("ref/prompt", "p", ""), arg: "nil", n: 0, total: 0},
		{name: "handler error", ref: ref("ref/prompt", "p", ""), arg: "err", wantErr: "no way"},
		{name: "template variable", ref: ref("ref/resource", "", "users://{user}/posts/{post}"), arg: "user", val: "v1", n: 3, first: "v1", total: 3},
		{name: "template variable without handler", ref: ref("ref/resource", "", "users://{user}/posts/{post}"), arg: "post", n: 0},
		{name: "static resource", ref: ref("ref/resource", "", "s://static"), arg: "x", n: 0},
		{name: "unknown prompt", ref: ref("ref/prompt", "gone", ""), arg: "x", wantErr: "unknown prompt: gone"},
		{name: "unknown template", ref: ref("ref/resource", "", "nope://{x}"), arg: "x", wantErr: "unknown resource template: nope://{x}"},
		{name: "unknown ref type", ref: ref("ref/tool", "p", ""), arg: "x", wantErr: "invalid completion reference type: ref/tool"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &mcp.CompleteParams{Ref: tt.ref}
			p.Argument.Name, p.Argument.Value = tt.arg, tt.val
			res, err := r.Complete(context.Background(), &CompleteRequest{Params: p})
			if tt.wantErr != "" {
				requireCodeErr(t, err, codec.CodeInvalidParams, tt.wantErr)
				return
			}
			require.NoError(t, err)
			c := res.Completion
			require.NotNil(t, c.Values)
			require.Len(t, c.Values, tt.n)
			if tt.n > 0 {
				assert.Equal(t, tt.first, c.Values[0])
			}
			if tt.total > 0 {
				require.NotNil(t, c.Total)
				assert.Equal(t, tt.total, *c.Total)
			}
			assert.Equal(t, tt.hasMore, c.HasMore)
			b, err := codec.Marshal(res)
			require.NoError(t, err)
			assert.Contains(t, string(b), `"values":[`)
		})
	}

	_, err := r.Complete(context.Background(), &CompleteRequest{})
	requireCodeErr(t, err, codec.CodeInvalidParams, "missing params")
	assert.ErrorIs(t, r.AddPromptCompletion("p", "x", nil), ErrInvalidCompletion)
	assert.ErrorIs(t, r.AddTemplateCompletion("t://{x}", "", prefixCompleter(1, nil)), ErrInvalidCompletion)
	assert.ErrorIs(t, r.AddPromptCompletion("", "x", prefixCompleter(1, nil)), ErrInvalidCompletion)
}

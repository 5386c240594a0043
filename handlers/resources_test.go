package handlers

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// varsHandler answers with one text content listing the request's
// variables as k=v, sorted.
func varsHandler(tag string) ResourceHandler {
	return func(ctx context.Context, req *ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		kv := make([]string, 0, len(req.Vars))
		for k, v := range req.Vars {
			kv = append(kv, k+"="+v)
		}
		sort.Strings(kv)
		return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{
			URI: req.Params.URI, Text: tag + ":" + strings.Join(kv, ","),
		}}}, nil
	}
}

func TestAddResourceErrors(t *testing.T) {
	h := varsHandler("x")
	tests := []struct {
		name string
		add  func(r *Registry) error
		want error
	}{
		{"nil resource", func(r *Registry) error { return r.AddResource(nil, h) }, ErrInvalidResource},
		{"empty uri", func(r *Registry) error { return r.AddResource(&mcp.Resource{Name: "n"}, h) }, ErrInvalidResource},
		{"nil handler", func(r *Registry) error { return r.AddResource(&mcp.Resource{URI: "a://b"}, nil) }, ErrInvalidResource},
		{"static nil resource", func(r *Registry) error { return r.AddStaticResource(nil) }, ErrInvalidResource},
		{"static empty uri", func(r *Registry) error { return r.AddStaticResource(&mcp.Resource{}) }, ErrInvalidResource},
		{"static bad meta", func(r *Registry) error {
			return r.AddStaticResource(&mcp.Resource{URI: "a://b"}, mcp.ResourceContents{Meta: mcp.Meta(`{`)})
		}, ErrInvalidResource},
		{"nil template", func(r *Registry) error { return r.AddResourceTemplate(nil, h) }, ErrInvalidTemplate},
		{"empty template", func(r *Registry) error { return r.AddResourceTemplate(&mcp.ResourceTemplate{}, h) }, ErrInvalidTemplate},
		{"bad template", func(r *Registry) error { return r.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "a://{x"}, h) }, ErrInvalidTemplate},
		{"template nil handler", func(r *Registry) error {
			return r.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "a://{x}"}, nil)
		}, ErrInvalidTemplate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRegistry(Options{})
			err := tt.add(r)
			assert.ErrorIs(t, err, tt.want)
			assert.Equal(t, 0, r.Len(ListNameResources)+r.Len(ListNameTemplates))
		})
	}
}

func TestReadResource(t *testing.T) {
	r := NewRegistry(Options{})
	require.NoError(t, r.AddStaticResource(&mcp.Resource{URI: "test://static/readme", Name: "readme", MimeType: "text/plain"},
		mcp.ResourceContents{Text: "hello\nworld"},
		mcp.ResourceContents{URI: "test://static/readme#2", Blob: "AAE="}))
	require.NoError(t, r.AddResource(&mcp.Resource{URI: "test://dynamic"}, varsHandler("dynamic")))
	for _, tmpl := range []string{"file:///{path}", "file:///dir/{+rest}", "test://template/{id}/data", "users://{user}/posts/{post}", "search://q{?term,limit}"} {
		require.NoError(t, r.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: tmpl}, varsHandler(tmpl)))
	}
	// A static URI that a template also matches: the static one wins.
	require.NoError(t, r.AddStaticResource(&mcp.Resource{URI: "test://template/7/data"}, mcp.ResourceContents{Text: "static seven"}))
	require.NoError(t, r.AddResource(&mcp.Resource{URI: "test://nil"}, func(context.Context, *ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return nil, nil
	}))

	tests := []struct {
		uri     string
		text    string // first content's text
		n       int    // contents
		missing bool
	}{
		{uri: "test://static/readme", text: "hello\nworld", n: 2},
		{uri: "test://dynamic", text: "dynamic:", n: 1},
		{uri: "file:///README.md", text: "file:///{path}:path=README.md", n: 1},
		{uri: "file:///a%20b.txt", text: "file:///{path}:path=a b.txt", n: 1},
		{uri: "file:///dir/a/b/c.go", text: "file:///dir/{+rest}:rest=a/b/c.go", n: 1},
		{uri: "test://template/42/data", text: "test://template/{id}/data:id=42", n: 1},
		{uri: "test://template/7/data", text: "static seven", n: 1},
		{uri: "users://alice/posts/99", text: "users://{user}/posts/{post}:post=99,user=alice", n: 1},
		{uri: "search://q?term=go&limit=5", text: "search://q{?term,limit}:limit=5,term=go", n: 1},
		{uri: "test://nil", n: 0},
		{uri: "test://template/42/other", missing: true},
		{uri: "users://alice/comments/1", missing: true},
		{uri: "nothing://here", missing: true},
	}
	for _, tt := range tests {
		t.Run(tt.uri, func(t *testing.T) {
			res, err := r.ReadResource(context.Background(), &ReadResourceRequest{Params: &mcp.ReadResourceParams{URI: tt.uri}})
			if tt.missing {
				ce := requireCodeErr(t, err, codec.CodeResourceNotFound, "resource not found: "+tt.uri)
				assert.JSONEq(t, fmt.Sprintf(`{"uri":%q}`, tt.uri), string(ce.Data))
				return
			}
			require.NoError(t, err)
			require.NotNil(t, res.Contents)
			require.Len(t, res.Contents, tt.n)
			if tt.n > 0 {
				assert.Equal(t, tt.text, res.Contents[0].Text)
			}
		})
	}

	_, err := r.ReadResource(context.Background(), &ReadResourceRequest{})
	requireCodeErr(t, err, codec.CodeInvalidParams, "missing params")
}

func TestTemplatesInRegistrationOrder(t *testing.T) {
	r := NewRegistry(Options{})
	require.NoError(t, r.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "x://{a}"}, varsHandler("first")))
	require.NoError(t, r.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "x://{b}"}, varsHandler("second")))
	read := func() string {
		res, err := r.ReadResource(context.Background(), &ReadResourceRequest{Params: &mcp.ReadResourceParams{URI: "x://v"}})
		require.NoError(t, err)
		return res.Contents[0].Text
	}
	assert.Equal(t, "first:a=v", read())
	// Replacing keeps the position, so the replacement still matches first.
	require.NoError(t, r.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "x://{a}"}, varsHandler("replaced")))
	assert.Equal(t, "replaced:a=v", read())
	assert.Equal(t, 1, r.RemoveResourceTemplates("x://{a}", "x://{zz}"))
	assert.Equal(t, "second:b=v", read())
	assert.Equal(t, 0, r.RemoveResourceTemplates("x://{a}"))
}

func TestStaticResourceResult(t *testing.T) {
	r := NewRegistry(Options{})
	require.NoError(t, r.AddStaticResource(&mcp.Resource{URI: "s://1", Name: "one"},
		mcp.ResourceContents{MimeType: "text/plain", Text: "a \"b\"\n"}))
	require.NoError(t, r.AddStaticResource(&mcp.Resource{URI: "s://empty"}))
	require.NoError(t, r.AddStaticResource(&mcp.Resource{URI: "s://blob"}, mcp.ResourceContents{Blob: "AAE="}))
	require.NoError(t, r.AddResource(&mcp.Resource{URI: "d://1"}, varsHandler("d")))

	tests := []struct {
		uri  string
		want string
		ok   bool
	}{
		{"s://1", `{"contents":[{"uri":"s://1","mimeType":"text/plain","text":"a \"b\"\n"}]}`, true},
		{"s://empty", `{"contents":[]}`, true},
		{"s://blob", `{"contents":[{"uri":"s://blob","blob":"AAE="}]}`, true},
		{"d://1", "", false},
		{"nope://", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.uri, func(t *testing.T) {
			b, ok := r.StaticResourceResult(tt.uri)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, string(b))
		})
	}

	// Replacing a static resource by a dynamic one withdraws its result.
	require.NoError(t, r.AddResource(&mcp.Resource{URI: "s://1"}, varsHandler("now dynamic")))
	_, ok := r.StaticResourceResult("s://1")
	assert.False(t, ok)
	assert.Equal(t, 1, r.RemoveResources("s://blob", "s://nope"))
	_, ok = r.StaticResourceResult("s://blob")
	assert.False(t, ok)
	assert.Equal(t, 3, r.Len(ListNameResources))
}

func TestResourceListsDefaults(t *testing.T) {
	r := NewRegistry(Options{})
	require.NoError(t, r.AddStaticResource(&mcp.Resource{URI: "s://1"}))
	require.NoError(t, r.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "t://{x}", MimeType: "text/plain"}, varsHandler("t")))
	b, err := r.ListPage(ListNameResources, "")
	require.NoError(t, err)
	assert.Equal(t, `{"resources":[{"uri":"s://1","name":"s://1"}]}`, string(b))
	b, err = r.ListPage(ListNameTemplates, "")
	require.NoError(t, err)
	assert.Equal(t, `{"resourceTemplates":[{"uriTemplate":"t://{x}","name":"t://{x}","mimeType":"text/plain"}]}`, string(b))
}

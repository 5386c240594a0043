package handlers

import (
	"context"
	"encoding/base64"
	"fmt"
	"testing"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pageOf decodes a list page into its item keys and next cursor.
func pageOf(t *testing.T, list ListName, b []byte) (keys []string, next string) {
	t.Helper()
	var raw map[string]codec.RawJSON
	require.NoError(t, codec.Unmarshal(b, &raw), string(b))
	if c, ok := raw["nextCursor"]; ok {
		require.NoError(t, codec.Unmarshal(c, &next))
		require.NotEmpty(t, next)
	}
	items, ok := raw[list.String()]
	require.True(t, ok, "page %s lacks %q", b, list.String())
	var objs []map[string]any
	require.NoError(t, codec.Unmarshal(items, &objs))
	require.NotNil(t, objs, "items must be [] not null")
	for _, o := range objs {
		key := o["name"]
		switch list {
		case ListNameResources:
			key = o["uri"]
		case ListNameTemplates:
			key = o["uriTemplate"]
		}
		keys = append(keys, key.(string))
	}
	return keys, next
}

// walk follows cursors from the first page and returns the pages' keys.
func walk(t *testing.T, r *Registry, list ListName) [][]string {
	t.Helper()
	var pages [][]string
	cursor := ""
	for i := 0; ; i++ {
		require.Less(t, i, 100, "cursor loop")
		b, err := r.ListPage(list, cursor)
		require.NoError(t, err)
		keys, next := pageOf(t, list, b)
		pages = append(pages, keys)
		if next == "" {
			return pages
		}
		cursor = next
	}
}

// adders register one item named n in each list.
var adders = map[ListName]func(r *Registry, n string) error{
	ListNameTools: func(r *Registry, n string) error { return r.AddTool(&mcp.Tool{Name: n}, echoTool) },
	ListNameResources: func(r *Registry, n string) error {
		return r.AddStaticResource(&mcp.Resource{URI: n}, mcp.ResourceContents{Text: n})
	},
	ListNameTemplates: func(r *Registry, n string) error {
		return r.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: n}, varsHandler(n))
	},
	ListNamePrompts: func(r *Registry, n string) error { return r.AddPrompt(&mcp.Prompt{Name: n}, greetPrompt) },
}

var removers = map[ListName]func(r *Registry, n ...string) int{
	ListNameTools:     (*Registry).RemoveTools,
	ListNameResources: (*Registry).RemoveResources,
	ListNameTemplates: (*Registry).RemoveResourceTemplates,
	ListNamePrompts:   (*Registry).RemovePrompts,
}

func TestPagination(t *testing.T) {
	for _, list := range []ListName{ListNameTools, ListNameResources, ListNameTemplates, ListNamePrompts} {
		t.Run(list.String(), func(t *testing.T) {
			r := NewRegistry(Options{PageSize: 2})
			b, err := r.ListPage(list, "")
			require.NoError(t, err)
			assert.Equal(t, `{"`+list.String()+`":[]}`, string(b))

			names := []string{"i1", "i2", "i3", "i4", "i5"}
			for _, n := range names {
				require.NoError(t, adders[list](r, n))
			}
			assert.Equal(t, 5, r.Len(list))
			assert.Equal(t, [][]string{{"i1", "i2"}, {"i3", "i4"}, {"i5"}}, walk(t, r, list))

			// Replacing keeps the position.
			require.NoError(t, adders[list](r, "i2"))
			assert.Equal(t, [][]string{{"i1", "i2"}, {"i3", "i4"}, {"i5"}}, walk(t, r, list))

			// Changes between pages: the cursor names the last item seen.
			_, c1 := pageOf(t, list, must(r.ListPage(list, "")))
			require.Equal(t, 1, removers[list](r, "i3"))
			require.NoError(t, adders[list](r, "i6"))
			keys, c2 := pageOf(t, list, must(r.ListPage(list, c1)))
			assert.Equal(t, []string{"i4", "i5"}, keys)
			keys, c3 := pageOf(t, list, must(r.ListPage(list, c2)))
			assert.Equal(t, []string{"i6"}, keys)
			assert.Empty(t, c3)

			// A cursor whose successor moved off a page boundary.
			require.Equal(t, 1, removers[list](r, "i1"))
			keys, c2 = pageOf(t, list, must(r.ListPage(list, c1)))
			assert.Equal(t, []string{"i4", "i5"}, keys)
			keys, _ = pageOf(t, list, must(r.ListPage(list, c2)))
			assert.Equal(t, []string{"i6"}, keys)
			assert.Equal(t, [][]string{{"i2", "i4"}, {"i5", "i6"}}, walk(t, r, list))

			// A cursor past everything left: an empty last page.
			_, c := pageOf(t, list, must(r.ListPage(list, "")))
			require.Equal(t, 3, removers[list](r, "i4", "i5", "i6"))
			b, err = r.ListPage(list, c)
			require.NoError(t, err)
			assert.Equal(t, `{"`+list.String()+`":[]}`, string(b))
		})
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func TestInvalidCursor(t *testing.T) {
	r := NewRegistry(Options{PageSize: 1})
	for _, n := range []string{"a", "b", "c"} {
		require.NoError(t, adders[ListNameTools](r, n))
		require.NoError(t, adders[ListNamePrompts](r, n))
	}
	_, toolCursor := pageOf(t, ListNameTools, must(r.ListPage(ListNameTools, "")))
	raw := func(b ...byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	tests := []struct {
		name   string
		list   ListName
		cursor string
	}{
		{"garbage", ListNameTools, "not a cursor!"},
		{"bad base64 of right length", ListNameTools, "!!!!!!!!!!!!"},
		{"padded", ListNameTools, raw(0, 0, 0, 0, 0, 0, 0, 0, 1)[:11] + "="},
		{"short", ListNameTools, raw(0, 0, 0, 0, 0, 0, 0, 1)},
		{"long", ListNameTools, toolCursor + "AA"},
		{"other list", ListNamePrompts, toolCursor},
		{"seq zero", ListNameTools, raw(byte(ListNameTools), 0, 0, 0, 0, 0, 0, 0, 0)},
		{"seq never issued", ListNameTools, raw(byte(ListNameTools), 0, 0, 0, 0, 0, 0, 0, 4)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := r.ListPage(tt.list, tt.cursor)
			assert.Nil(t, b)
			ce := requireCodeErr(t, err, codec.CodeInvalidParams, "invalid cursor")
			assert.Equal(t, "invalid cursor", ce.Message)
		})
	}
	// The highest issued seq is valid (last page's successor: empty).
	b, err := r.ListPage(ListNameTools, raw(byte(ListNameTools), 0, 0, 0, 0, 0, 0, 0, 3))
	require.NoError(t, err)
	assert.Equal(t, `{"tools":[]}`, string(b))

	_, err = r.ListPage(ListName(9), "")
	assert.ErrorIs(t, err, ErrUnknownList)
	assert.Equal(t, 0, r.Len(ListName(9)))
}

func TestListPageZeroAllocs(t *testing.T) {
	r := NewRegistry(Options{PageSize: 10})
	for i := range 35 {
		require.NoError(t, r.AddTool(&mcp.Tool{Name: fmt.Sprintf("tool%02d", i), Description: "d"}, echoTool))
	}
	require.NoError(t, r.AddStaticResource(&mcp.Resource{URI: "s://x"}, mcp.ResourceContents{Text: "x"}))
	first := must(r.ListPage(ListNameTools, ""))
	_, c := pageOf(t, ListNameTools, first)
	second := must(r.ListPage(ListNameTools, c))

	tests := []struct {
		name string
		fn   func()
	}{
		{"first page", func() {
			if b, err := r.ListPage(ListNameTools, ""); err != nil || &b[0] != &first[0] {
				panic("first page not cached")
			}
		}},
		{"later page", func() {
			if b, err := r.ListPage(ListNameTools, c); err != nil || &b[0] != &second[0] {
				panic("later page not cached")
			}
		}},
		{"tool lookup", func() {
			if _, ok := r.Tool("tool17"); !ok {
				panic("tool17")
			}
		}},
		{"static resource", func() {
			if _, ok := r.StaticResourceResult("s://x"); !ok {
				panic("s://x")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Zero(t, testing.AllocsPerRun(1000, tt.fn))
		})
	}

	// Any change invalidates the cache.
	require.NoError(t, r.AddTool(&mcp.Tool{Name: "tool00", Description: "changed"}, echoTool))
	b := must(r.ListPage(ListNameTools, ""))
	assert.NotEqual(t, string(first), string(b))
	assert.Contains(t, string(b), `"description":"changed"`)
}

func TestListPageFirstPageDefaultSize(t *testing.T) {
	r := NewRegistry(Options{PageSize: -1})
	for i := range DefaultPageSize + 1 {
		require.NoError(t, r.AddPrompt(&mcp.Prompt{Name: fmt.Sprint("p", i)}, greetPrompt))
	}
	pages := walk(t, r, ListNamePrompts)
	require.Len(t, pages, 2)
	assert.Len(t, pages[0], DefaultPageSize)
	assert.Equal(t, []string{fmt.Sprint("p", DefaultPageSize)}, pages[1])

	_, err := r.GetPrompt(context.Background(), &GetPromptRequest{Params: &mcp.GetPromptParams{Name: "p7"}})
	require.NoError(t, err)
}

package handlers

import (
	"context"
	"fmt"
	"testing"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
)

// benchRegistry holds 250 tools (pages of 100) and one static resource.
func benchRegistry(b *testing.B) (r *Registry, laterCursor string) {
	b.Helper()
	r = NewRegistry(Options{})
	for i := range 250 {
		t := &mcp.Tool{
			Name:        fmt.Sprintf("tool_%03d", i),
			Description: "Adds two numbers and returns their sum.",
			InputSchema: codec.RawJSON(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`),
		}
		if err := r.AddTool(t, echoTool); err != nil {
			b.Fatal(err)
		}
	}
	if err := r.AddStaticResource(&mcp.Resource{URI: "test://static/readme", Name: "readme"}, mcp.ResourceContents{Text: "hello"}); err != nil {
		b.Fatal(err)
	}
	page, err := r.ListPage(ListNameTools, "")
	if err != nil {
		b.Fatal(err)
	}
	var res mcp.ListToolsResult
	if err := codec.Unmarshal(page, &res); err != nil || res.NextCursor == "" {
		b.Fatal("no next cursor", err)
	}
	if _, err := r.ListPage(ListNameTools, res.NextCursor); err != nil {
		b.Fatal(err)
	}
	return r, res.NextCursor
}

func BenchmarkToolLookup(b *testing.B) {
	r, _ := benchRegistry(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := r.Tool("tool_123"); !ok {
			b.Fatal("missing")
		}
	}
}

func BenchmarkListPage(b *testing.B) {
	r, later := benchRegistry(b)
	for _, bc := range []struct{ name, cursor string }{{"first", ""}, {"later", later}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.ListPage(ListNameTools, bc.cursor); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkStaticResource(b *testing.B) {
	r, _ := benchRegistry(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := r.StaticResourceResult("test://static/readme"); !ok {
			b.Fatal("missing")
		}
	}
}

func BenchmarkParallelReads(b *testing.B) {
	r, later := benchRegistry(b)
	cases := []struct {
		name string
		fn   func() bool
	}{
		{"ToolLookup", func() bool { _, ok := r.Tool("tool_123"); return ok }},
		{"ListPageFirst", func() bool { _, err := r.ListPage(ListNameTools, ""); return err == nil }},
		{"ListPageLater", func() bool { _, err := r.ListPage(ListNameTools, later); return err == nil }},
		{"StaticResource", func() bool { _, ok := r.StaticResourceResult("test://static/readme"); return ok }},
	}
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if !bc.fn() {
						b.Error("read failed")
						return
					}
				}
			})
		})
	}
}

func BenchmarkCallTool(b *testing.B) {
	r, _ := benchRegistry(b)
	if err := r.AddTool(&mcp.Tool{Name: "any"}, echoTool); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, bc := range []struct{ name, tool string }{{"schema", "tool_007"}, {"anyObject", "any"}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			p := &mcp.CallToolParams{Name: bc.tool}
			req := &CallToolRequest{Params: p}
			args := codec.RawJSON(`{"a":1,"b":2}`)
			for b.Loop() {
				p.Arguments = args
				if res, err := r.CallTool(ctx, req); err != nil || res.IsError {
					b.Fatal(err, res)
				}
			}
		})
	}
}

// BenchmarkAddTool measures a change: compiling the schema, encoding the
// descriptor and publishing a snapshot of a 250-tool list.
func BenchmarkAddTool(b *testing.B) {
	r, _ := benchRegistry(b)
	t := &mcp.Tool{Name: "tool_100", InputSchema: codec.RawJSON(`{"type":"object","properties":{"a":{"type":"number"}}}`)}
	b.ReportAllocs()
	for b.Loop() {
		if err := r.AddTool(t, echoTool); err != nil {
			b.Fatal(err)
		}
	}
}

package handlers

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOnChange(t *testing.T) {
	r := NewRegistry(Options{})
	var mu sync.Mutex
	var got1, got2 []ListKind
	r.OnChange(func(k ListKind) {
		// Runs outside the registry's lock: a change from here would
		// deadlock otherwise. This one changes nothing, so it is silent.
		assert.Equal(t, 0, r.RemoveTools("never-registered"))
		mu.Lock()
		got1 = append(got1, k)
		mu.Unlock()
	})
	r.OnChange(func(k ListKind) {
		mu.Lock()
		got2 = append(got2, k)
		mu.Unlock()
	})
	assert.Panics(t, func() { r.OnChange(nil) })

	steps := []struct {
		name string
		do   func()
		want []ListKind // kinds announced
	}{
		{"add tool", func() { require.NoError(t, r.AddTool(&mcp.Tool{Name: "t"}, echoTool)) }, []ListKind{ListTools}},
		{"replace tool", func() { require.NoError(t, r.AddTool(&mcp.Tool{Name: "t"}, echoTool)) }, []ListKind{ListTools}},
		{"failed add", func() { require.Error(t, r.AddTool(&mcp.Tool{}, echoTool)) }, nil},
		{"typed add", func() {
			require.NoError(t, AddTool(r, &mcp.Tool{Name: "typed"}, func(context.Context, *CallToolRequest, addIn) (*mcp.CallToolResult, addOut, error) {
				return nil, addOut{}, nil
			}))
		}, []ListKind{ListTools}},
		{"remove tools", func() { r.RemoveTools("t", "typed") }, []ListKind{ListTools}},
		{"remove nothing", func() { r.RemoveTools("t") }, nil},
		{"add resource", func() { require.NoError(t, r.AddResource(&mcp.Resource{URI: "a://"}, varsHandler(""))) }, []ListKind{ListResources}},
		{"add static resource", func() { require.NoError(t, r.AddStaticResource(&mcp.Resource{URI: "b://"})) }, []ListKind{ListResources}},
		{"add template", func() {
			require.NoError(t, r.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "c://{x}"}, varsHandler("")))
		}, []ListKind{ListResources}},
		{"remove resources", func() { r.RemoveResources("a://", "b://") }, []ListKind{ListResources}},
		{"remove templates", func() { r.RemoveResourceTemplates("c://{x}") }, []ListKind{ListResources}},
		{"remove no templates", func() { r.RemoveResourceTemplates("c://{x}") }, nil},
		{"add prompt", func() { require.NoError(t, r.AddPrompt(&mcp.Prompt{Name: "p"}, greetPrompt)) }, []ListKind{ListPrompts}},
		{"remove prompt", func() { r.RemovePrompts("p") }, []ListKind{ListPrompts}},
		{"completion", func() { require.NoError(t, r.AddPromptCompletion("p", "a", prefixCompleter(1, nil))) }, nil},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			mu.Lock()
			got1, got2 = nil, nil
			mu.Unlock()
			s.do()
			mu.Lock()
			defer mu.Unlock()
			assert.Equal(t, s.want, got1)
			assert.Equal(t, s.want, got2)
		})
	}
}

// TestConcurrentChanges registers and removes items while readers serve
// lookups, pages, calls and reads; run it with -race.
func TestConcurrentChanges(t *testing.T) {
	r := NewRegistry(Options{PageSize: 3})
	var changes atomic.Int64
	r.OnChange(func(ListKind) { changes.Add(1) })
	for i := range 5 {
		require.NoError(t, r.AddTool(&mcp.Tool{Name: fmt.Sprint("stable", i)}, echoTool))
	}
	require.NoError(t, r.AddStaticResource(&mcp.Resource{URI: "s://stable"}, mcp.ResourceContents{Text: "x"}))

	const writers, readers, rounds = 4, 4, 60
	var wwg, rwg sync.WaitGroup
	stop := make(chan struct{})
	for w := range writers {
		wwg.Go(func() {
			for i := range rounds {
				n := fmt.Sprintf("w%d-%d", w, i%7)
				assert.NoError(t, r.AddTool(&mcp.Tool{Name: n}, echoTool))
				assert.NoError(t, r.AddStaticResource(&mcp.Resource{URI: "s://" + n}, mcp.ResourceContents{Text: n}))
				assert.NoError(t, r.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "t://" + n + "/{x}"}, varsHandler(n)))
				assert.NoError(t, r.AddPrompt(&mcp.Prompt{Name: n}, greetPrompt))
				assert.NoError(t, r.AddPromptCompletion(n, "a", prefixCompleter(2, nil)))
				if i%3 == 0 {
					r.RemoveTools(n)
					r.RemoveResources("s://" + n)
					r.RemoveResourceTemplates("t://" + n + "/{x}")
					r.RemovePrompts(n)
				}
			}
		})
	}
	var reads atomic.Int64
	for range readers {
		rwg.Go(func() {
			ctx := context.Background()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, ok := r.Tool("stable3"); !ok {
					t.Error("stable tool vanished")
					return
				}
				if _, ok := r.StaticResourceResult("s://stable"); !ok {
					t.Error("stable resource vanished")
					return
				}
				for _, list := range []ListName{ListNameTools, ListNameResources, ListNameTemplates, ListNamePrompts} {
					cursor := ""
					for range 100 {
						b, err := r.ListPage(list, cursor)
						if !assert.NoError(t, err) {
							return
						}
						var page struct {
							NextCursor string `json:"nextCursor"`
						}
						if !assert.NoError(t, codec.Unmarshal(b, &page)) || page.NextCursor == "" {
							break
						}
						cursor = page.NextCursor
					}
				}
				res, err := r.CallTool(ctx, &CallToolRequest{Params: &mcp.CallToolParams{Name: "stable0"}})
				if assert.NoError(t, err) {
					assert.False(t, res.IsError)
				}
				_, _ = r.ReadResource(ctx, &ReadResourceRequest{Params: &mcp.ReadResourceParams{URI: "t://w0-1/v"}})
				_ = r.HasCompletions()
				reads.Add(1)
			}
		})
	}
	wwg.Wait()
	close(stop)
	rwg.Wait()
	assert.Positive(t, reads.Load())
	// Every add announces a change (the 6 stable items too); so does every
	// removal, as each item removed here was just added.
	assert.Equal(t, int64(6+writers*rounds*4+writers*((rounds+2)/3)*4), changes.Load())
	assert.Equal(t, 5, countPrefix(r, "stable"))
}

func countPrefix(r *Registry, prefix string) int {
	n := 0
	for _, e := range r.snap.Load().tools.items {
		if len(e.key) >= len(prefix) && e.key[:len(prefix)] == prefix {
			n++
		}
	}
	return n
}

package handlers

import (
	"context"
	"encoding/json"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
)

// prefixClass allows the items whose key starts with one of its
// prefixes, and counts the questions asked.
type prefixClass struct {
	prefixes []string
	asked    atomic.Int64
	// gate, when set, holds the first Allows after it was set until it
	// is closed (TestViewsWarmedAfterBurst).
	gate   chan struct{}
	gated  atomic.Bool
	inGate chan struct{}
}

func (c *prefixClass) Allows(_ ListName, key string) bool {
	c.asked.Add(1)
	if c.gate != nil && c.gated.CompareAndSwap(false, true) {
		close(c.inGate)
		<-c.gate
	}
	for _, p := range c.prefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

func noopTool(context.Context, *CallToolRequest) (*mcp.CallToolResult, error) {
	return mcp.TextResult("ok"), nil
}

// viewRegistry has tools a0..a4 and b0..b4, registered alternately, in
// pages of 2.
func viewRegistry(t testing.TB) *Registry {
	t.Helper()
	r := NewRegistry(Options{PageSize: 2})
	for i := range 5 {
		for _, p := range []string{"a", "b"} {
			require.NoError(t, r.AddTool(&mcp.Tool{Name: p + strconv.Itoa(i)}, noopTool))
		}
	}
	return r
}

// pageNames follows the cursors of the tools list as c sees it.
func pageNames(t *testing.T, r *Registry, c Class) (names []string, pages int) {
	t.Helper()
	cursor := ""
	for {
		b, err := r.ListPageFor(c, ListNameTools, cursor)
		require.NoError(t, err)
		var p struct {
			Tools      []mcp.Tool `json:"tools"`
			NextCursor string     `json:"nextCursor"`
		}
		require.NoError(t, json.Unmarshal(b, &p))
		for _, tool := range p.Tools {
			names = append(names, tool.Name)
		}
		pages++
		if cursor = p.NextCursor; cursor == "" {
			return names, pages
		}
	}
}

func TestListPageForClass(t *testing.T) {
	r := viewRegistry(t)
	for _, tc := range []struct {
		name  string
		class Class
		want  []string
		pages int
	}{
		{"nil: everything", nil, []string{"a0", "b0", "a1", "b1", "a2", "b2", "a3", "b3", "a4", "b4"}, 5},
		{"a", &prefixClass{prefixes: []string{"a"}}, []string{"a0", "a1", "a2", "a3", "a4"}, 3},
		{"b and a4", &prefixClass{prefixes: []string{"b", "a4"}}, []string{"b0", "b1", "b2", "b3", "b4", "a4"}, 3},
		{"nothing", &prefixClass{}, nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			names, pages := pageNames(t, r, tc.class)
			if tc.name == "b and a4" { // registration order, not the class's
				tc.want = []string{"b0", "b1", "b2", "b3", "a4", "b4"}
			}
			assert.Equal(t, tc.want, names)
			assert.Equal(t, tc.pages, pages)
			for _, n := range []string{"a0", "b3", "zz"} {
				allowed := n != "zz" && (tc.class == nil || tc.class.Allows(ListNameTools, n))
				assert.Equal(t, allowed, r.Allowed(tc.class, ListNameTools, n), n)
				if allowed {
					assert.NoError(t, r.Check(tc.class, ListNameTools, n))
				} else if tc.class != nil {
					assert.Equal(t, &codec.Error{Code: codec.CodeInvalidParams, Message: "unknown tool: " + n}, r.Check(tc.class, ListNameTools, n))
				}
			}
		})
	}

	// Another caller's cursor opens the next page of what this class sees.
	all, err := r.ListPage(ListNameTools, "")
	require.NoError(t, err)
	var first struct {
		NextCursor string `json:"nextCursor"`
	}
	require.NoError(t, json.Unmarshal(all, &first)) // after b0
	b, err := r.ListPageFor(&prefixClass{prefixes: []string{"a"}}, ListNameTools, first.NextCursor)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"name":"a1"`)
	assert.NotContains(t, string(b), `"name":"a0"`)
	_, err = r.ListPageFor(&prefixClass{prefixes: []string{"a"}}, ListNameTools, "garbage")
	assert.Error(t, err)
}

// Classes that allow the same items share their pages; a class that
// allows every item gets the list's own pages.
func TestViewsShared(t *testing.T) {
	r := viewRegistry(t)
	c1, c2 := &prefixClass{prefixes: []string{"a"}}, &prefixClass{prefixes: []string{"a0", "a1", "a2", "a3", "a4"}}
	p1, err := r.ListPageFor(c1, ListNameTools, "")
	require.NoError(t, err)
	p2, err := r.ListPageFor(c2, ListNameTools, "")
	require.NoError(t, err)
	assert.Equal(t, unsafe.SliceData(p1), unsafe.SliceData(p2), "one encoding for both classes")

	all, err := r.ListPage(ListNameTools, "")
	require.NoError(t, err)
	everything := &prefixClass{prefixes: []string{""}}
	pe, err := r.ListPageFor(everything, ListNameTools, "")
	require.NoError(t, err)
	assert.Equal(t, unsafe.SliceData(all), unsafe.SliceData(pe))

	// A class is asked once per item and list change.
	asked := c1.asked.Load()
	assert.Equal(t, int64(10), asked)
	for range 3 {
		_, _ = r.ListPageFor(c1, ListNameTools, "")
		r.Allowed(c1, ListNameTools, "a1")
	}
	assert.Equal(t, asked, c1.asked.Load(), "the view is kept")
	require.NoError(t, r.AddTool(&mcp.Tool{Name: "a9"}, noopTool))
	r.waitWarm()
	assert.Equal(t, asked+11, c1.asked.Load(), "asked again, once per item, after the change")
	names, _ := pageNames(t, r, c1)
	assert.Equal(t, []string{"a0", "a1", "a2", "a3", "a4", "a9"}, names, "a change of the list is seen")
	assert.Equal(t, asked+11, c1.asked.Load(), "the view was made after the change, not by the request")
	assert.Equal(t, int64(0), (&prefixClass{}).asked.Load())
}

// The views kept per list are bounded: past the bound the class used
// least recently loses its view, made again when it comes back.
func TestViewsBounded(t *testing.T) {
	r := viewRegistry(t)
	r.SetMaxClasses(2)
	a, b, c := &prefixClass{prefixes: []string{"a"}}, &prefixClass{prefixes: []string{"b"}}, &prefixClass{prefixes: []string{"a1"}}
	use := func(cl *prefixClass) int64 {
		before := cl.asked.Load()
		_, err := r.ListPageFor(cl, ListNameTools, "")
		require.NoError(t, err)
		return cl.asked.Load() - before
	}
	assert.Equal(t, int64(10), use(a))
	assert.Equal(t, int64(10), use(b))
	assert.Equal(t, int64(10), use(c)) // drops a, the oldest
	assert.Equal(t, int64(0), use(c))
	assert.Equal(t, int64(10), use(a), "a's view was dropped") // drops b: c was used since
	assert.Equal(t, int64(0), use(c))
	assert.Equal(t, int64(0), use(a))
	assert.Equal(t, int64(10), use(b), "b's view was dropped")
	vs := r.snap.Load().tools.views.Load()
	assert.Len(t, *vs.classes.Load(), 2)
	vs.mu.Lock()
	n := 0
	for _, l := range vs.shared {
		n += len(l)
	}
	vs.mu.Unlock()
	assert.Equal(t, 2, n, "a set no class uses is forgotten")
}

// Check, CheckRead and CheckComplete answer an item hidden as the
// Registry answers one it does not have.
func TestCheckHiddenAsMissing(t *testing.T) {
	r := NewRegistry(Options{})
	require.NoError(t, r.AddStaticResource(&mcp.Resource{URI: "mem://open/a"}, mcp.ResourceContents{Text: "a"}))
	require.NoError(t, r.AddStaticResource(&mcp.Resource{URI: "mem://shut/a"}, mcp.ResourceContents{Text: "b"}))
	read := func(context.Context, *ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{}, nil
	}
	require.NoError(t, r.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "mem://shut/{x}"}, read))
	require.NoError(t, r.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "mem://open/{x}"}, read))
	prompt := func(context.Context, *GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{}, nil
	}
	require.NoError(t, r.AddPrompt(&mcp.Prompt{Name: "shut_p"}, prompt))
	require.NoError(t, r.AddTool(&mcp.Tool{Name: "shut_t"}, noopTool))
	c := &prefixClass{prefixes: []string{"mem://open/", "open"}}
	ctx := context.Background()

	_, missingTool := r.CallTool(ctx, &CallToolRequest{Params: &mcp.CallToolParams{Name: "none"}})
	assert.Equal(t, strings.Replace(missingTool.Error(), "none", "shut_t", 1), r.Check(c, ListNameTools, "shut_t").Error())
	_, missingPrompt := r.GetPrompt(ctx, &GetPromptRequest{Params: &mcp.GetPromptParams{Name: "none"}})
	assert.Equal(t, strings.Replace(missingPrompt.Error(), "none", "shut_p", 1), r.Check(c, ListNamePrompts, "shut_p").Error())

	_, missingRead := r.ReadResource(ctx, &ReadResourceRequest{Params: &mcp.ReadResourceParams{URI: "nothing://x"}})
	want := func(uri string) error {
		e := *missingRead.(*codec.Error)
		e.Message = strings.Replace(e.Message, "nothing://x", uri, 1)
		e.Data = codec.RawJSON(strings.Replace(string(e.Data), "nothing://x", uri, 1))
		return &e
	}
	for _, tc := range []struct {
		uri string
		ok  bool
	}{
		{"mem://open/a", true},  // a resource allowed
		{"mem://shut/a", false}, // a resource hidden: not read by a template either
		{"mem://shut/b", false}, // the first matching template is hidden
		{"mem://open/b", true},  // the first matching template is allowed
		{"nothing://x", false},  // nothing serves it
	} {
		err := r.CheckRead(c, tc.uri)
		if tc.ok {
			assert.NoError(t, err, tc.uri)
		} else {
			assert.Equal(t, want(tc.uri), err, tc.uri)
		}
		assert.NoError(t, r.CheckRead(nil, tc.uri))
	}

	complete := func(typ, name, uri string) *mcp.CompleteParams {
		p := &mcp.CompleteParams{}
		p.Ref.Type, p.Ref.Name, p.Ref.URI = typ, name, uri
		return p
	}
	_, missingRef := r.Complete(ctx, &CompleteRequest{Params: complete("ref/resource", "", "mem://none/{x}")})
	assert.Equal(t, strings.Replace(missingRef.Error(), "mem://none/{x}", "mem://shut/{x}", 1),
		r.CheckComplete(c, complete("ref/resource", "", "mem://shut/{x}")).Error())
	assert.NoError(t, r.CheckComplete(c, complete("ref/resource", "", "mem://open/{x}")))
	assert.NoError(t, r.CheckComplete(c, complete("ref/resource", "", "mem://open/a")))
	assert.Error(t, r.CheckComplete(c, complete("ref/prompt", "shut_p", "")))
}

// Serving a class's page and checking an item in its view allocate
// nothing once the view is made.
func TestViewsZeroAlloc(t *testing.T) {
	r := viewRegistry(t)
	c := &prefixClass{prefixes: []string{"a"}}
	_, _ = r.ListPageFor(c, ListNameTools, "")
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		if _, err := r.ListPageFor(c, ListNameTools, ""); err != nil {
			t.Fatal(err)
		}
		if !r.Allowed(c, ListNameTools, "a3") || r.Check(c, ListNameTools, "a3") != nil {
			t.Fatal("a3 not allowed")
		}
	}))
}

// Views are made, used and dropped concurrently with changes of the list
// (go test -race).
func TestViewsConcurrent(t *testing.T) {
	r := viewRegistry(t)
	r.SetMaxClasses(3)
	classes := []*prefixClass{{prefixes: []string{"a"}}, {prefixes: []string{"b"}}, {prefixes: []string{"a1", "b"}}, {prefixes: []string{"c"}}, {}}
	done := make(chan struct{})
	for g := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 300 {
				c := classes[(g+i)%len(classes)]
				b, err := r.ListPageFor(c, ListNameTools, "")
				if err != nil || len(b) == 0 {
					t.Error(err)
					return
				}
				r.Allowed(c, ListNameTools, "a1")
			}
		}()
	}
	for i := range 50 {
		require.NoError(t, r.AddTool(&mcp.Tool{Name: "c" + strconv.Itoa(i)}, noopTool))
	}
	for range 4 {
		<-done
	}
	names, _ := pageNames(t, r, classes[3])
	assert.Len(t, names, 50)
}

// BenchmarkViews measures what a class costs a request: a list page
// without a class (ListPage) and with one (its view looked up), and the
// check of a tool a call names (Allowed).
func BenchmarkViews(b *testing.B) {
	r := viewRegistry(b)
	c := &prefixClass{prefixes: []string{"a"}}
	for _, bc := range []struct {
		name  string
		class Class
	}{{"no-class", nil}, {"class", c}} {
		b.Run("list/"+bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.ListPageFor(bc.class, ListNameTools, ""); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("check/"+bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if r.Check(bc.class, ListNameTools, "a3") != nil {
					b.Fatal("refused")
				}
			}
		})
	}
}

// waitWarm waits for the views' goroutine (warmViews) to end.
func (r *Registry) waitWarm() {
	for {
		r.warmMu.Lock()
		w := r.warming
		r.warmMu.Unlock()
		if !w {
			return
		}
		runtime.Gosched()
	}
}

// A burst of changes is caught up with: each class ends with its view of
// the last list, made by the views' goroutine, in a few passes, not one
// per change. The first pass is held (a's gate) while the other 199
// changes are made, so that the count does not depend on the scheduler.
func TestViewsWarmedAfterBurst(t *testing.T) {
	r := viewRegistry(t)
	a, b := &prefixClass{prefixes: []string{"a"}}, &prefixClass{prefixes: []string{"b"}}
	_, _ = r.ListPageFor(a, ListNameTools, "")
	_, _ = r.ListPageFor(b, ListNameTools, "")
	a.gate, a.inGate = make(chan struct{}), make(chan struct{})
	before := a.asked.Load()
	require.NoError(t, r.AddTool(&mcp.Tool{Name: "a10"}, noopTool))
	<-a.inGate // the views' goroutine is in its first pass
	for i := 1; i < 200; i++ {
		require.NoError(t, r.AddTool(&mcp.Tool{Name: "a1" + strconv.Itoa(i)}, noopTool))
	}
	close(a.gate)
	r.waitWarm()
	asked := a.asked.Load()
	names, _ := pageNames(t, r, a)
	assert.Len(t, names, 205)
	assert.Equal(t, asked, a.asked.Load(), "a's view of the last list was made")
	// The held pass over 11 tools, then one over the last list (205 of
	// a's and b's 210): 221 questions, where a pass per change would
	// have asked 22,100.
	assert.LessOrEqual(t, asked-before, int64(11+210), "two passes, not one per change")

	// Without classes, no goroutine.
	plain := viewRegistry(t)
	require.NoError(t, plain.AddTool(&mcp.Tool{Name: "z"}, noopTool))
	plain.warmMu.Lock()
	assert.False(t, plain.warming)
	plain.warmMu.Unlock()
}

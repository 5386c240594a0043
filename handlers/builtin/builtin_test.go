package builtin_test

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/handlers/builtin"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// peer records what a handler sends to its client.
type peer struct {
	mu       sync.Mutex
	progress []float64
	messages []string
}

func (p *peer) SessionID() string                           { return "s" }
func (p *peer) ProtocolVersion() string                     { return mcp.LatestVersion }
func (p *peer) ClientInfo() mcp.Implementation              { return mcp.Implementation{Name: "test"} }
func (p *peer) ClientCapabilities() *mcp.ClientCapabilities { return &mcp.ClientCapabilities{} }
func (p *peer) Progress(progress, total float64, message string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.progress = append(p.progress, progress)
	p.messages = append(p.messages, message)
	return nil
}
func (p *peer) Log(string, string, any) error { return nil }
func (p *peer) CreateMessage(context.Context, *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	return nil, context.Canceled
}
func (p *peer) Elicit(context.Context, *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	return nil, context.Canceled
}
func (p *peer) ListRoots(context.Context) (*mcp.ListRootsResult, error) { return nil, context.Canceled }
func (p *peer) CloseStream()                                            {}

var _ handlers.Peer = (*peer)(nil)

// sessPeer is a peer with a session of its own: it implements
// handlers.SessionScope, and close runs its close hooks.
type sessPeer struct {
	peer
	id         string
	hooks      []func()
	closed     bool
	subscribed map[string]bool
	notified   []string
}

func newSessPeer(id string) *sessPeer { return &sessPeer{id: id, subscribed: map[string]bool{}} }

func (p *sessPeer) SessionID() string { return p.id }
func (p *sessPeer) OnSessionClose(fn func()) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		fn()
		return
	}
	p.hooks = append(p.hooks, fn)
	p.mu.Unlock()
}
func (p *sessPeer) NotifyResourceUpdated(uri string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.subscribed[uri] {
		p.notified = append(p.notified, uri)
	}
	return nil
}
func (p *sessPeer) close() {
	p.mu.Lock()
	hooks := p.hooks
	p.hooks, p.closed = nil, true
	p.mu.Unlock()
	for _, fn := range hooks {
		fn()
	}
}

var _ handlers.SessionScope = (*sessPeer)(nil)

func complete(t *testing.T, r *handlers.Registry, p handlers.Peer, tmpl, prefix string) []string {
	t.Helper()
	cp := &mcp.CompleteParams{Ref: mcp.CompleteReference{Type: "ref/resource", URI: tmpl}}
	cp.Argument.Name, cp.Argument.Value = "name", prefix
	cr, err := r.Complete(context.Background(), &handlers.CompleteRequest{Peer: p, Params: cp})
	require.NoError(t, err)
	return cr.Completion.Values
}

func install(t *testing.T, set string, env builtin.Env) *handlers.Registry {
	t.Helper()
	r := handlers.NewRegistry(handlers.Options{})
	require.NoError(t, builtin.Install(set, r, env))
	return r
}

func callTool(t *testing.T, r *handlers.Registry, p handlers.Peer, name, args string) *mcp.CallToolResult {
	t.Helper()
	res, err := r.CallTool(context.Background(), &handlers.CallToolRequest{Peer: p, Params: &mcp.CallToolParams{Name: name, Arguments: codec.RawJSON(args)}})
	require.NoError(t, err)
	require.NotNil(t, res)
	return res
}

func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	require.NotEmpty(t, res.Content)
	return res.Content[0].Text
}

func TestNamesAndInstall(t *testing.T) {
	names := builtin.Names()
	assert.Subset(t, names, []string{"bench", "demo"})
	assert.IsNonDecreasing(t, names)
	err := builtin.Install("nope", handlers.NewRegistry(handlers.Options{}), builtin.Env{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"nope"`)
	for _, n := range names {
		t.Run(n, func(t *testing.T) { install(t, n, builtin.Env{}) })
	}
}

func TestBench(t *testing.T) {
	r := install(t, "bench", builtin.Env{})
	assert.Equal(t, 2, r.Len(handlers.ListNameTools))
	assert.Equal(t, 1, r.Len(handlers.ListNameResources))
	assert.Equal(t, 1, r.Len(handlers.ListNamePrompts))

	echo, ok := r.Tool("echo")
	require.True(t, ok)
	assert.JSONEq(t, builtin.EchoSchema, string(echo.InputSchema))
	add, ok := r.Tool("add")
	require.True(t, ok)
	assert.JSONEq(t, builtin.AddSchema, string(add.InputSchema))

	p := &peer{}
	for _, s := range []string{"", "hello", `quote " and \ backslash`, "ünïcödé ✓", strings.Repeat("x", 10000)} {
		got := callTool(t, r, p, "echo", `{"text":`+string(codec.AppendString(nil, s))+`}`)
		assert.False(t, got.IsError)
		assert.Equal(t, s, text(t, got))
	}
	for _, tc := range []struct{ args, want string }{
		{`{"a":2,"b":3}`, "5"},
		{`{"a":0.5,"b":0.25}`, "0.75"},
		{`{"a":-1,"b":1}`, "0"},
		{`{"a":0.1,"b":0.2}`, "0.30000000000000004"},
		{`{"a":1e20,"b":1}`, "100000000000000000000"},
		{`{"a":-2.5,"b":-2.5}`, "-5"},
	} {
		t.Run(tc.args, func(t *testing.T) {
			got := callTool(t, r, p, "add", tc.args)
			assert.False(t, got.IsError)
			assert.Equal(t, tc.want, text(t, got))
		})
	}
	// Arguments that fail the schema are a tool error, not a protocol error.
	for _, bad := range []string{`{"a":"2","b":3}`, `{"a":2}`, `{}`} {
		assert.True(t, callTool(t, r, p, "add", bad).IsError, bad)
	}
	assert.True(t, callTool(t, r, p, "echo", `{"text":5}`).IsError)

	res, ok := r.StaticResourceResult("mem://hello")
	require.True(t, ok)
	var rr mcp.ReadResourceResult
	require.NoError(t, codec.Unmarshal(res, &rr))
	require.Len(t, rr.Contents, 1)
	assert.Equal(t, "hello", rr.Contents[0].Text)
	assert.Equal(t, "text/plain", rr.Contents[0].MimeType)

	gp, err := r.GetPrompt(context.Background(), &handlers.GetPromptRequest{Peer: p, Params: &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"name": "Ada"}}})
	require.NoError(t, err)
	require.Len(t, gp.Messages, 1)
	assert.Equal(t, "user", gp.Messages[0].Role)
	assert.Contains(t, gp.Messages[0].Content.Text, "Ada")
	_, err = r.GetPrompt(context.Background(), &handlers.GetPromptRequest{Peer: p, Params: &mcp.GetPromptParams{Name: "greet"}})
	assert.Error(t, err, "name is required")
}

func TestDemoTools(t *testing.T) {
	var mu sync.Mutex
	var updated []string
	r := install(t, "demo", builtin.Env{ResourceUpdated: func(uri string) {
		mu.Lock()
		updated = append(updated, uri)
		mu.Unlock()
	}})
	p := &peer{}
	for _, name := range []string{"echo", "add", "time", "hash", "count", "note_write", "board_write"} {
		_, ok := r.Tool(name)
		assert.True(t, ok, name)
	}

	t.Run("time", func(t *testing.T) {
		res := callTool(t, r, p, "time", `{}`)
		require.False(t, res.IsError)
		var out struct {
			Time string `json:"time"`
			Zone string `json:"zone"`
			Unix int64  `json:"unix"`
		}
		require.NoError(t, codec.Unmarshal(res.StructuredContent, &out))
		assert.Equal(t, "UTC", out.Zone)
		ts, err := time.Parse(time.RFC3339, out.Time)
		require.NoError(t, err)
		assert.WithinDuration(t, time.Now(), ts, time.Minute)
		assert.InDelta(t, time.Now().Unix(), out.Unix, 60)
		assert.True(t, callTool(t, r, p, "time", `{"zone":"Mars/Olympus"}`).IsError)
	})

	t.Run("hash", func(t *testing.T) {
		s256 := sha256.Sum256([]byte("abc"))
		m5 := md5.Sum([]byte("abc"))
		assert.Equal(t, hex.EncodeToString(s256[:]), text(t, callTool(t, r, p, "hash", `{"text":"abc"}`)))
		assert.Equal(t, hex.EncodeToString(m5[:]), text(t, callTool(t, r, p, "hash", `{"text":"abc","algorithm":"MD5"}`)))
		assert.Len(t, text(t, callTool(t, r, p, "hash", `{"text":"abc","algorithm":"sha512"}`)), 128)
		assert.Len(t, text(t, callTool(t, r, p, "hash", `{"text":"abc","algorithm":"sha1"}`)), 40)
		assert.True(t, callTool(t, r, p, "hash", `{"text":"abc","algorithm":"crc"}`).IsError)
	})

	t.Run("count", func(t *testing.T) {
		p := &peer{}
		res := callTool(t, r, p, "count", `{"n":3,"delayMs":1}`)
		require.False(t, res.IsError)
		assert.Equal(t, "counted to 3", text(t, res))
		assert.Equal(t, []float64{1, 2, 3}, p.progress)
		assert.Equal(t, "step 3 of 3", p.messages[2])
		for _, bad := range []string{`{"n":0}`, `{"n":101}`, `{"n":1,"delayMs":-1}`, `{"n":1,"delayMs":1001}`} {
			assert.True(t, callTool(t, r, p, "count", bad).IsError, bad)
		}
		// A cancelled call stops counting.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := r.CallTool(ctx, &handlers.CallToolRequest{Peer: p, Params: &mcp.CallToolParams{Name: "count", Arguments: codec.RawJSON(`{"n":100,"delayMs":1000}`)}})
		assert.ErrorIs(t, err, context.Canceled)
	})

	t.Run("notes", func(t *testing.T) {
		p := newSessPeer("n1")
		read := func(uri string) (*mcp.ReadResourceResult, error) {
			return r.ReadResource(context.Background(), &handlers.ReadResourceRequest{Peer: p, Params: &mcp.ReadResourceParams{URI: uri}})
		}
		rr, err := read("mem://notes/todo")
		require.NoError(t, err)
		assert.Contains(t, rr.Contents[0].Text, "mcpedge")

		p.subscribed["mem://notes/groceries"] = true
		res := callTool(t, r, p, "note_write", `{"name":"groceries","text":"milk"}`)
		require.False(t, res.IsError)
		rr, err = read("mem://notes/groceries")
		require.NoError(t, err)
		assert.Equal(t, "milk", rr.Contents[0].Text)
		// The notice goes to the writing session only, not to everyone.
		assert.Equal(t, []string{"mem://notes/groceries"}, p.notified)
		mu.Lock()
		assert.Empty(t, updated)
		mu.Unlock()

		for _, bad := range []string{`{"name":"","text":"x"}`, `{"name":"a/b","text":"x"}`, `{"name":"a?b","text":"x"}`} {
			assert.True(t, callTool(t, r, p, "note_write", bad).IsError, bad)
		}
		_, err = read("mem://notes/absent")
		var ce *codec.Error
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, codec.CodeResourceNotFound, ce.Code)

		assert.Equal(t, []string{"groceries"}, complete(t, r, p, "mem://notes/{name}", "g"))
		assert.Equal(t, []string{"todo"}, complete(t, r, p, "mem://notes/{name}", "t"))
	})

	t.Run("summarize", func(t *testing.T) {
		gp, err := r.GetPrompt(context.Background(), &handlers.GetPromptRequest{Peer: p, Params: &mcp.GetPromptParams{Name: "summarize", Arguments: map[string]string{"text": "a long story"}}})
		require.NoError(t, err)
		require.Len(t, gp.Messages, 1)
		assert.Contains(t, gp.Messages[0].Content.Text, "a long story")
		assert.Contains(t, gp.Messages[0].Content.Text, "brief")
	})
}

func TestConcurrentNotes(t *testing.T) {
	r := install(t, "demo", builtin.Env{})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := newSessPeer(string(rune('a' + i%3))) // sessions shared by a few writers
			for j := range 50 {
				name := string(rune('a'+i)) + strings.Repeat("x", j%3)
				callTool(t, r, p, "note_write", `{"name":"`+name+`","text":"t"}`)
				_, err := r.ReadResource(context.Background(), &handlers.ReadResourceRequest{Peer: p, Params: &mcp.ReadResourceParams{URI: "mem://notes/" + name}})
				assert.NoError(t, err)
				callTool(t, r, p, "board_write", `{"name":"`+name+`","text":"t"}`)
			}
		}()
	}
	wg.Wait()
}

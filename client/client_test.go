package client_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/client"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// exerciseDemo runs every client-to-server method against mcpedge's demo
// handler set through c.
func exerciseDemo(t *testing.T, c *client.Client) {
	ctx := testCtx(t)
	require.Equal(t, client.StateReady, c.State())
	res := c.InitializeResult()
	require.NotNil(t, res)
	assert.Equal(t, "mcpedge", res.ServerInfo.Name)
	assert.Equal(t, mcp.LatestVersion, c.ProtocolVersion())

	require.NoError(t, c.Ping(ctx))

	t.Run("tools", func(t *testing.T) {
		tools, err := c.AllTools(ctx)
		require.NoError(t, err)
		var names []string
		for _, tl := range tools {
			names = append(names, tl.Name)
		}
		for _, want := range []string{"echo", "add", "time", "hash", "count", "note_write"} {
			assert.Contains(t, names, want)
		}
		r, err := c.CallTool(ctx, "echo", map[string]any{"text": "hi there"})
		require.NoError(t, err)
		require.Len(t, r.Content, 1)
		assert.Equal(t, "hi there", r.Content[0].Text)

		raw, err := c.CallRaw(ctx, mcp.MethodToolsCall, []byte(`{"name":"add","arguments":{"a":2,"b":3}}`))
		require.NoError(t, err)
		assert.Contains(t, string(raw), `"text":"5"`)

		r, err = c.CallTool(ctx, "time", map[string]any{"zone": "UTC"}, client.WithOutputValidation())
		require.NoError(t, err)
		assert.False(t, r.IsError)
		assert.NotEmpty(t, r.StructuredContent)
	})

	t.Run("progress", func(t *testing.T) {
		var mu sync.Mutex
		var steps []float64
		r, err := c.CallTool(ctx, "count", map[string]any{"n": 3, "delayMs": 5}, client.WithProgress(func(p, total float64, msg string) {
			mu.Lock()
			steps = append(steps, p)
			mu.Unlock()
			assert.Equal(t, 3.0, total)
		}))
		require.NoError(t, err)
		assert.Equal(t, "counted to 3", r.Content[0].Text)
		mu.Lock()
		assert.Equal(t, []float64{1, 2, 3}, steps, "every progress notification arrives before the result")
		mu.Unlock()
	})

	t.Run("resources", func(t *testing.T) {
		rs, err := c.AllResources(ctx)
		require.NoError(t, err)
		require.True(t, slices.ContainsFunc(rs, func(r mcp.Resource) bool { return r.URI == "mem://hello" }))
		rr, err := c.ReadResource(ctx, "mem://hello")
		require.NoError(t, err)
		require.Len(t, rr.Contents, 1)
		assert.Equal(t, "hello", rr.Contents[0].Text)

		tpls, err := c.AllResourceTemplates(ctx)
		require.NoError(t, err)
		require.True(t, slices.ContainsFunc(tpls, func(r mcp.ResourceTemplate) bool { return r.URITemplate == "mem://notes/{name}" }))

		_, err = c.ReadResource(ctx, "mem://missing")
		var ce *codec.Error
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, codec.CodeResourceNotFound, ce.Code)
	})

	t.Run("subscribe", func(t *testing.T) {
		uri := "mem://notes/sub-" + strings.ReplaceAll(t.Name(), "/", "-")
		got := make(chan string, 4)
		require.NoError(t, c.Subscribe(ctx, uri, func(u string) { got <- u }))
		_, err := c.CallTool(ctx, "note_write", map[string]any{"name": strings.TrimPrefix(uri, "mem://notes/"), "text": "x"})
		require.NoError(t, err)
		select {
		case u := <-got:
			assert.Equal(t, uri, u)
		case <-time.After(5 * time.Second):
			t.Fatal("no resources/updated for the subscribed URI")
		}
		require.NoError(t, c.Unsubscribe(ctx, uri))
		rr, err := c.ReadResource(ctx, uri)
		require.NoError(t, err)
		assert.Equal(t, "x", rr.Contents[0].Text)
	})

	t.Run("prompts", func(t *testing.T) {
		ps, err := c.AllPrompts(ctx)
		require.NoError(t, err)
		require.True(t, slices.ContainsFunc(ps, func(p mcp.Prompt) bool { return p.Name == "greet" }))
		gp, err := c.GetPrompt(ctx, "greet", map[string]string{"name": "Ada"})
		require.NoError(t, err)
		require.Len(t, gp.Messages, 1)
		assert.Contains(t, gp.Messages[0].Content.Text, "Ada")
	})

	t.Run("completion", func(t *testing.T) {
		p := &mcp.CompleteParams{Ref: mcp.CompleteReference{Type: "ref/resource", URI: "mem://notes/{name}"}}
		p.Argument.Name, p.Argument.Value = "name", "to"
		r, err := c.Complete(ctx, p)
		require.NoError(t, err)
		assert.Contains(t, r.Completion.Values, "todo")
	})

	t.Run("logging and errors", func(t *testing.T) {
		require.NoError(t, c.SetLogLevel(ctx, "debug"))
		_, err := c.Call(ctx, "no/such/method", nil)
		var ce *codec.Error
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, codec.CodeMethodNotFound, ce.Code)
	})
}

func TestTCP(t *testing.T) {
	srv := newEngine(t, "demo", engine.Options{})
	addr, _ := serveTCP(t, srv)
	c := dial(t, &client.TCPTransport{Addr: addr}, client.Options{Era: client.EraLegacy})
	exerciseDemo(t, c)
}

func TestTCPContentLength(t *testing.T) {
	srv := newEngine(t, "demo", engine.Options{})
	ts := newTCPFramed(t, srv)
	c := dial(t, &client.TCPTransport{Addr: ts, Framer: codec.ContentLengthFramer{}}, client.Options{Era: client.EraLegacy})
	exerciseDemo(t, c)
}

func TestStdioPipes(t *testing.T) {
	srv := newEngine(t, "demo", engine.Options{})
	c := dial(t, pipeTransport(t, srv), client.Options{Era: client.EraLegacy})
	exerciseDemo(t, c)
}

// mcpedgeBin builds bin/mcpedge once per test binary.
var mcpedgeBin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "mcpedge-bin")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "mcpedge")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/mcpedge/mcpedge/cmd/mcpedge")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", errors.New(string(out))
	}
	return bin, nil
})

func TestStdioSubprocess(t *testing.T) {
	bin, err := mcpedgeBin()
	require.NoError(t, err)
	var lines atomic.Int64
	log := newCountingLogger(&lines)
	c := dial(t, &client.StdioTransport{Command: bin, Args: []string{"-stdio", "-handlers", "demo", "-log-level", "debug"}, Stderr: log}, client.Options{Era: client.EraLegacy})
	exerciseDemo(t, c)
	require.NoError(t, c.Close())
	assert.Positive(t, lines.Load(), "the server's stderr reaches the logger")
	assert.Equal(t, client.StateClosed, c.State())
}

func TestCallsBeforeReady(t *testing.T) {
	srv := newEngine(t, "demo", engine.Options{})
	addr, _ := serveTCP(t, srv)
	c := client.New(&client.TCPTransport{Addr: addr}, client.Options{Era: client.EraLegacy})
	err := c.Ping(context.Background())
	require.ErrorIs(t, err, client.ErrNotReady)
	assert.Contains(t, err.Error(), "idle")
	require.NoError(t, c.Connect(testCtx(t)))
	require.ErrorIs(t, c.Connect(testCtx(t)), client.ErrAlreadyConnected)
	require.NoError(t, c.Ping(testCtx(t)))
	require.NoError(t, c.Close())
	require.ErrorIs(t, c.Ping(context.Background()), client.ErrClientClosed)
	select {
	case <-c.Done():
	default:
		t.Fatal("Done not closed after Close")
	}
}

func TestManyConcurrentCalls(t *testing.T) {
	srv := newEngine(t, "demo", engine.Options{})
	addr, _ := serveTCP(t, srv)
	c := dial(t, &client.TCPTransport{Addr: addr}, client.Options{Era: client.EraLegacy})
	ctx := testCtx(t)
	var wg sync.WaitGroup
	var failures atomic.Int64
	for g := range 4 * runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				want := strings.Repeat("x", g) + "-" + string(rune('a'+i%26))
				r, err := c.CallTool(ctx, "echo", map[string]any{"text": want})
				if err != nil || r.Content[0].Text != want {
					failures.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	assert.Zero(t, failures.Load())
	assert.Zero(t, c.InFlight())
}

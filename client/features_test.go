package client_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/client"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestServerRequests(t *testing.T) {
	srv := newEngine(t, "conformance", engine.Options{})
	require.NoError(t, srv.Registry().AddTool(&mcp.Tool{Name: "roots", InputSchema: codec.RawJSON(`{"type":"object"}`)},
		func(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
			r, err := req.Peer.ListRoots(ctx)
			if err != nil {
				return nil, err
			}
			return mcp.TextResult(fmt.Sprintf("%d:%s", len(r.Roots), r.Roots[0].URI)), nil
		}))
	addr, _ := serveTCP(t, srv)

	var logs atomic.Int64
	serverCancels := make(chan *mcp.CancelledParams, 4)
	elicitCtx := make(chan context.Context, 1)
	c := dial(t, &client.TCPTransport{Addr: addr}, client.Options{
		Era: client.EraLegacy,
		OnSampling: func(ctx context.Context, _ *client.ServerRequest, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
			var in mcp.Content
			if err := codec.Unmarshal(p.Messages[0].Content, &in); err != nil {
				return nil, err
			}
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: codec.RawJSON(`{"type":"text","text":"echo ` + in.Text + `"}`)}, nil
		},
		// Elicitation answers later, from another goroutine, unless the
		// message asks to wait for cancellation.
		OnElicitation: func(ctx context.Context, req *client.ServerRequest, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			if p.Message == "wait" {
				elicitCtx <- ctx
				<-ctx.Done()
				return nil, context.Cause(ctx)
			}
			// Reply from another goroutine, before or after the handler
			// has returned: the client answers once either way.
			go func() {
				_ = req.Reply(&mcp.ElicitResult{Action: "accept", Content: codec.RawJSON(`{"name":"Ada"}`)})
				assert.ErrorIs(t, req.Reply(&mcp.ElicitResult{Action: "decline"}), client.ErrAlreadyReplied)
			}()
			return nil, client.ErrReplyLater
		},
		OnRoots: func(ctx context.Context, _ *client.ServerRequest) (*mcp.ListRootsResult, error) {
			return &mcp.ListRootsResult{Roots: []mcp.Root{{URI: "file:///work", Name: "work"}}}, nil
		},
		OnLog:       func(*mcp.LoggingMessageParams) { logs.Add(1) },
		OnCancelled: func(p *mcp.CancelledParams) { serverCancels <- p },
	})
	caps := c.InitializeResult()
	require.NotNil(t, caps)
	ctx := testCtx(t)

	r, err := c.CallTool(ctx, "test_sampling", map[string]any{"prompt": "hello"})
	require.NoError(t, err)
	assert.Equal(t, "LLM response: echo hello", r.Content[0].Text)

	r, err = c.CallTool(ctx, "test_elicitation", map[string]any{"message": "name?"})
	require.NoError(t, err)
	assert.Contains(t, r.Content[0].Text, "accept")

	r, err = c.CallTool(ctx, "roots", nil)
	require.NoError(t, err)
	assert.Equal(t, "1:file:///work", r.Content[0].Text)

	require.NoError(t, c.SetLogLevel(ctx, "debug"))
	_, err = c.CallTool(ctx, "test_tool_with_logging", nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return logs.Load() > 0 }, 5*time.Second, 5*time.Millisecond)

	// Cancelling the tool call cancels the server's elicitation, and so
	// the handler's context.
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := c.CallTool(cctx, "test_elicitation", map[string]any{"message": "wait"})
		done <- err
	}()
	hctx := <-elicitCtx
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	select {
	case <-hctx.Done():
		assert.ErrorIs(t, context.Cause(hctx), client.ErrServerCancelled)
	case <-time.After(5 * time.Second):
		t.Fatal("the server's cancellation did not reach the handler")
	}
	select {
	case p := <-serverCancels:
		assert.NotEmpty(t, p.RequestID)
	case <-time.After(5 * time.Second):
		t.Fatal("OnCancelled not called")
	}
}

func TestListChanged(t *testing.T) {
	srv := newEngine(t, "demo", engine.Options{ListChangedDelay: time.Millisecond})
	addr, _ := serveTCP(t, srv)
	changed := make(chan struct{}, 4)
	c := dial(t, &client.TCPTransport{Addr: addr}, client.Options{Era: client.EraLegacy, OnToolListChanged: func() { changed <- struct{}{} }})
	ctx := testCtx(t)
	before, err := c.AllTools(ctx)
	require.NoError(t, err)
	require.NoError(t, srv.Registry().AddTool(&mcp.Tool{Name: "late", InputSchema: codec.RawJSON(`{"type":"object"}`)},
		func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.TextResult("late"), nil
		}))
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("no tools/list_changed callback")
	}
	after, err := c.AllTools(ctx)
	require.NoError(t, err)
	assert.Len(t, after, len(before)+1)
	// The output check finds the new tool in the refreshed cache.
	r, err := c.CallTool(ctx, "late", nil, client.WithOutputValidation())
	require.NoError(t, err)
	assert.Equal(t, "late", r.Content[0].Text)
}

// TestOutputValidation uses a fake server, since mcpedge checks its own
// tools' output.
func TestOutputValidation(t *testing.T) {
	addr := scripted(t, func(r fakeReq, w io.Writer) bool {
		switch r.Method {
		case "tools/list":
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"liar","inputSchema":{"type":"object"},"outputSchema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}},{"name":"plain","inputSchema":{"type":"object"}}]}}`+"\n", r.ID)
		case "tools/call":
			sc := `{"n":3}`
			switch {
			case strings.Contains(r.Line, `"bad"`):
				sc = `{"n":"three"}`
			case strings.Contains(r.Line, `"none"`):
				sc = ``
			}
			res := `{"content":[{"type":"text","text":"x"}]`
			if sc != "" {
				res += `,"structuredContent":` + sc
			}
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}}`+"\n", r.ID, res)
		}
		return true
	})
	c := dial(t, &client.TCPTransport{Addr: addr}, client.Options{Era: client.EraLegacy})
	ctx := testCtx(t)
	_, err := c.CallTool(ctx, "liar", map[string]any{"mode": "good"}, client.WithOutputValidation())
	require.NoError(t, err)
	r, err := c.CallTool(ctx, "liar", map[string]any{"mode": "bad"}, client.WithOutputValidation())
	require.ErrorIs(t, err, client.ErrOutputSchema)
	require.NotNil(t, r, "the result comes with the error")
	_, err = c.CallTool(ctx, "liar", map[string]any{"mode": "none"}, client.WithOutputValidation())
	require.ErrorIs(t, err, client.ErrOutputSchema)
	_, err = c.CallTool(ctx, "liar", map[string]any{"mode": "bad"})
	require.NoError(t, err, "no check unless asked")
	_, err = c.CallTool(ctx, "plain", map[string]any{"mode": "none"}, client.WithOutputValidation())
	require.NoError(t, err, "no outputSchema, no check")
	_, err = c.CallTool(ctx, "nope", nil, client.WithOutputValidation())
	require.ErrorIs(t, err, client.ErrUnknownTool)
}

func TestReconnectDelay(t *testing.T) {
	p := &client.ReconnectPolicy{MinDelay: 100 * time.Millisecond, MaxDelay: time.Second}
	for n, base := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		base *= time.Millisecond
		for range 50 {
			d := p.Delay(n + 1)
			assert.GreaterOrEqual(t, d, base*8/10, "attempt %d", n+1)
			assert.LessOrEqual(t, d, base*12/10, "attempt %d", n+1)
		}
	}
	exact := &client.ReconnectPolicy{MinDelay: time.Millisecond, Multiplier: 3, Jitter: -1}
	assert.Equal(t, 9*time.Millisecond, exact.Delay(3))
}

func TestNoHandler(t *testing.T) {
	srv := newEngine(t, "conformance", engine.Options{})
	addr, _ := serveTCP(t, srv)
	// Declaring the capability without a handler: the request is answered
	// "method not found", and the tool reports the failure.
	c := dial(t, &client.TCPTransport{Addr: addr}, client.Options{Era: client.EraLegacy, Capabilities: &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapability{}}})
	r, err := c.CallTool(testCtx(t), "test_sampling", map[string]any{"prompt": "x"})
	require.NoError(t, err)
	assert.True(t, r.IsError)
	assert.Contains(t, r.Content[0].Text, "method not found")
}

func TestTasks(t *testing.T) {
	srv := newEngine(t, "demo", engine.Options{})
	require.NoError(t, srv.Registry().AddTool(&mcp.Tool{
		Name: "slow", InputSchema: codec.RawJSON(`{"type":"object"}`),
		Execution: &mcp.ToolExecution{TaskSupport: mcp.TaskOptional},
	}, func(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		select {
		case <-time.After(50 * time.Millisecond):
			return mcp.TextResult("slow done"), nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}))
	addr, _ := serveTCP(t, srv)
	c := dial(t, &client.TCPTransport{Addr: addr}, client.Options{Era: client.EraLegacy})
	ctx := testCtx(t)

	ct, err := c.CallToolAsTask(ctx, "slow", nil, time.Minute)
	require.NoError(t, err)
	require.NotEmpty(t, ct.Task.TaskID)
	task, err := c.GetTask(ctx, ct.Task.TaskID)
	require.NoError(t, err)
	assert.Equal(t, ct.Task.TaskID, task.TaskID)
	res, err := c.ToolTaskResult(ctx, ct.Task.TaskID)
	require.NoError(t, err)
	assert.Equal(t, "slow done", res.Content[0].Text)
	tasks, err := c.AllTasks(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, tasks)

	ct2, err := c.CallToolAsTask(ctx, "slow", nil, 0)
	require.NoError(t, err)
	cancelled, err := c.CancelTask(ctx, ct2.Task.TaskID)
	require.NoError(t, err)
	assert.Equal(t, mcp.TaskCancelled, cancelled.Status)

	_, err = c.CallToolAsTask(ctx, "echo", map[string]any{"text": "x"}, 0)
	var ce *codec.Error
	require.ErrorAs(t, err, &ce, "echo does not support tasks")
}

// cutter is a TCP proxy whose connections can be cut.
type cutter struct {
	mu    sync.Mutex
	conns []net.Conn
	n     atomic.Int64
}

func (p *cutter) start(t *testing.T, target string) string {
	return fakeServerAsync(t, func(c net.Conn) {
		up, err := net.Dial("tcp", target)
		if err != nil {
			c.Close()
			return
		}
		p.n.Add(1)
		p.mu.Lock()
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		go func() { io.Copy(up, c); up.Close() }()
		io.Copy(c, up)
		c.Close()
	})
}

func (p *cutter) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// fakeServerAsync serves each accepted connection on its own goroutine.
func fakeServerAsync(t *testing.T, fn func(c net.Conn)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				fn(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return ln.Addr().String()
}

func TestReconnect(t *testing.T) {
	srv := newEngine(t, "demo", engine.Options{})
	addr, _ := serveTCP(t, srv)
	var p cutter
	t.Cleanup(p.cut)
	paddr := p.start(t, addr)

	lost := make(chan error, 4)
	back := make(chan struct{}, 4)
	updates := make(chan string, 16)
	c := dial(t, &client.TCPTransport{Addr: paddr}, client.Options{
		Era:              client.EraLegacy,
		Reconnect:        &client.ReconnectPolicy{MinDelay: 10 * time.Millisecond, MaxDelay: 100 * time.Millisecond},
		OnConnectionLost: func(err error) { lost <- err },
		OnReconnected:    func() { back <- struct{}{} },
	})
	ctx := testCtx(t)
	require.NoError(t, c.Subscribe(ctx, "mem://notes/re", func(u string) { updates <- u }))

	// A call in flight when the connection drops fails with the cause.
	errc := make(chan error, 1)
	go func() {
		_, err := c.CallTool(ctx, "count", map[string]any{"n": 50, "delayMs": 20})
		errc <- err
	}()
	require.Eventually(t, func() bool { return srv.Active() > 0 }, 5*time.Second, time.Millisecond, "the call is in flight")
	p.cut()
	require.ErrorIs(t, <-errc, client.ErrConnectionLost)
	require.ErrorIs(t, <-lost, client.ErrConnectionLost)
	select {
	case <-back:
	case <-time.After(5 * time.Second):
		t.Fatal("not reconnected")
	}
	assert.Equal(t, client.StateReady, c.State())
	assert.Equal(t, int64(2), p.n.Load(), "a second connection, initialized again")

	// The subscription was renewed on the new connection.
	_, err := c.CallTool(ctx, "note_write", map[string]any{"name": "re", "text": "again"})
	require.NoError(t, err)
	select {
	case u := <-updates:
		assert.Equal(t, "mem://notes/re", u)
	case <-time.After(5 * time.Second):
		t.Fatal("no update after reconnection: not re-subscribed")
	}
}

func TestReconnectGivesUp(t *testing.T) {
	noLeaks(t)
	var p cutter
	srv := newEngine(t, "demo", engine.Options{})
	addr, _ := serveTCP(t, srv)
	var refuse atomic.Bool
	paddr := fakeServerAsync(t, func(c net.Conn) {
		if refuse.Load() {
			c.Close()
			return
		}
		up, _ := net.Dial("tcp", addr)
		p.mu.Lock()
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		go func() { io.Copy(up, c); up.Close() }()
		io.Copy(c, up)
		c.Close()
	})
	c := dial(t, &client.TCPTransport{Addr: paddr}, client.Options{
		Era:       client.EraLegacy,
		Reconnect: &client.ReconnectPolicy{MaxAttempts: 3, MinDelay: time.Millisecond},
	})
	refuse.Store(true)
	p.cut()
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the client did not give up")
	}
	require.ErrorIs(t, c.Err(), client.ErrReconnectFailed)
	require.ErrorIs(t, c.Ping(context.Background()), client.ErrClientClosed)
	require.NoError(t, c.Close())
}

func TestKeepAlive(t *testing.T) {
	noLeaks(t)
	var pings atomic.Int64
	addr := scripted(t, func(r fakeReq, w io.Writer) bool {
		if r.Method == "ping" && pings.Add(1) <= 2 {
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{}}`+"\n", r.ID)
		}
		return true
	})
	c := dial(t, &client.TCPTransport{Addr: addr}, client.Options{Era: client.EraLegacy, KeepAlive: 30 * time.Millisecond, KeepAliveMisses: 2})
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("keep-alive did not declare the connection dead")
	}
	require.ErrorIs(t, c.Err(), client.ErrKeepAlive)
	assert.GreaterOrEqual(t, pings.Load(), int64(4))
	require.NoError(t, c.Close())
}

func TestPool(t *testing.T) {
	srv := newEngine(t, "demo", engine.Options{})
	addr, _ := serveTCP(t, srv)
	dialer := func(ctx context.Context) (*client.Client, error) {
		return client.Dial(ctx, &client.TCPTransport{Addr: addr}, client.Options{Era: client.EraLegacy})
	}
	for _, s := range []struct {
		name string
		s    client.Strategy
	}{{"round-robin", client.RoundRobin}, {"random", client.Random}, {"least-busy", client.LeastBusy}} {
		t.Run(s.name, func(t *testing.T) {
			p, err := client.NewPool(testCtx(t), dialer, client.PoolOptions{Size: 4, Strategy: s.s, HealthInterval: 50 * time.Millisecond})
			require.NoError(t, err)
			defer p.Close()
			var mu sync.Mutex
			used := map[*client.Client]int{}
			var wg sync.WaitGroup
			var failures atomic.Int64
			for range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 100 {
						err := p.Do(testCtx(t), func(ctx context.Context, c *client.Client) error {
							mu.Lock()
							used[c]++
							mu.Unlock()
							_, err := c.CallTool(ctx, "add", map[string]any{"a": 1, "b": 2})
							return err
						})
						if err != nil {
							failures.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			assert.Zero(t, failures.Load())
			if s.s == client.LeastBusy {
				assert.GreaterOrEqual(t, len(used), 2)
			} else {
				assert.Len(t, used, 4, "every member carries calls")
			}
			if s.s == client.RoundRobin {
				for _, n := range used {
					assert.InDelta(t, 400, n, 40)
				}
			}

			// A member that dies is replaced by the health check.
			victim, err := p.Get()
			require.NoError(t, err)
			victim.Close()
			require.Eventually(t, func() bool { return p.Healthy() == 4 }, 5*time.Second, 10*time.Millisecond)
		})
	}
}

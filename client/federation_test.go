package client_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/client"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/internal/testserver"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
	mcphttp "github.com/mcpedge/mcpedge/transport/http"
	"github.com/mcpedge/mcpedge/transport/tcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// fedNoLeaks is noLeaks for tests that serve HTTP: fasthttp's process-wide
// date updater and its idle-worker cleaners end after their own sleep.
func fedNoLeaks(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		goleak.VerifyNone(t, opt,
			goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
			goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
			goleak.IgnoreAnyFunction("github.com/panjf2000/ants/v2.(*poolCommon).purgeStaleWorkers"),
			goleak.IgnoreAnyFunction("github.com/panjf2000/ants/v2.(*poolCommon).ticktock"),
		)
	})
}

// whoami adds tool "whoami", answering name, to srv.
func whoami(t *testing.T, srv *engine.Server, name string) {
	t.Helper()
	require.NoError(t, srv.Registry().AddTool(&mcp.Tool{
		Name: "whoami", InputSchema: codec.RawJSON(`{"type":"object"}`),
	}, func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.TextResult(name), nil
	}))
}

// fedEnv is three servers, a over TCP, b over Streamable HTTP and c over
// stdio framing (in-process pipes), in one federation.
type fedEnv struct {
	fed   *client.Federation
	srvs  map[string]*engine.Server
	aAddr string
	aTCP  *tcp.Server
	notes chan [2]string // server, method
}

func newFedEnv(t *testing.T, opts client.FederationOptions) *fedEnv {
	t.Helper()
	e := &fedEnv{srvs: map[string]*engine.Server{}, notes: make(chan [2]string, 64)}
	for _, n := range []string{"a", "b", "c"} {
		set := "bench"
		if n == "b" {
			set = "demo"
		}
		e.srvs[n] = newEngine(t, set, engine.Options{ListChangedDelay: 5 * time.Millisecond})
		whoami(t, e.srvs[n], n)
	}
	e.aAddr, e.aTCP = testserver.TCP(t, e.srvs["a"], tcp.Options{Loops: 1})
	bURL, _ := testserver.HTTP(t, e.srvs["b"], mcphttp.Options{})
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)

	if opts.OnNotification == nil {
		opts.OnNotification = func(server string, n client.Notification) {
			select {
			case e.notes <- [2]string{server, n.Method}:
			default:
			}
		}
	}
	if opts.Reconnect == nil {
		opts.Reconnect = &client.ReconnectPolicy{MinDelay: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond}
	}
	e.fed = client.NewFederation(opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, e.fed.Close(ctx))
	})
	ctx := testCtx(t)
	require.NoError(t, e.fed.Add(ctx, "a", &client.TCPTransport{Addr: e.aAddr}, client.Options{Era: client.EraLegacy}))
	require.NoError(t, e.fed.Add(ctx, "b", &client.HTTPTransport{URL: bURL + "/mcp", Client: hc}, client.Options{Era: client.EraLegacy}))
	require.NoError(t, e.fed.Add(ctx, "c", pipeTransport(t, e.srvs["c"]), client.Options{Era: client.EraLegacy}))
	return e
}

func toolNames(ts []client.ServerTool) []string {
	var names []string
	for _, tl := range ts {
		names = append(names, tl.Name())
	}
	return names
}

func TestFederationNamespacing(t *testing.T) {
	fedNoLeaks(t)
	e := newFedEnv(t, client.FederationOptions{})
	ctx := testCtx(t)
	f := e.fed
	assert.Equal(t, []string{"a", "b", "c"}, f.Names())

	tools, err := f.AllTools(ctx)
	require.NoError(t, err)
	names := toolNames(tools)
	for _, want := range []string{"a/echo", "a/add", "a/whoami", "b/echo", "b/hash", "b/whoami", "c/echo", "c/whoami"} {
		assert.Contains(t, names, want)
	}
	assert.NotContains(t, names, "a/hash", "a serves the bench set, not demo")
	assert.True(t, slices.IsSortedFunc(tools, func(x, y client.ServerTool) int {
		return compareStrings(x.Server, y.Server)
	}), "servers in name order")
	for _, tl := range tools {
		assert.NotContains(t, tl.Tool.Name, client.Separator, "the server's own name is kept")
	}

	// Calls go to the server the prefix names.
	for _, s := range []string{"a", "b", "c"} {
		r, err := f.CallTool(ctx, s+"/whoami", nil)
		require.NoError(t, err)
		assert.Equal(t, s, r.Content[0].Text)
	}
	r, err := f.CallTool(ctx, "c/echo", map[string]any{"text": "hi"})
	require.NoError(t, err)
	assert.Equal(t, "hi", r.Content[0].Text)

	// A server's error names the server.
	_, err = f.CallTool(ctx, "a/hash", map[string]any{"text": "x"})
	var se *client.ServerError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "a", se.Server)
	var ce *codec.Error
	require.ErrorAs(t, err, &ce)

	_, err = f.CallTool(ctx, "echo", nil)
	require.ErrorIs(t, err, client.ErrUnqualified)
	_, err = f.CallTool(ctx, "zz/echo", nil)
	require.ErrorIs(t, err, client.ErrUnknownServer)

	prompts, err := f.AllPrompts(ctx)
	require.NoError(t, err)
	var pnames []string
	for _, p := range prompts {
		pnames = append(pnames, p.Name())
	}
	assert.Contains(t, pnames, "a/greet")
	assert.Contains(t, pnames, "c/greet")
	gp, err := f.GetPrompt(ctx, "a/greet", map[string]string{"name": "Ada"})
	require.NoError(t, err)
	assert.NotEmpty(t, gp.Messages)

	res, err := f.AllResources(ctx)
	require.NoError(t, err)
	var hello []string
	for _, r := range res {
		if r.Resource.URI == "mem://hello" {
			hello = append(hello, r.Server)
		}
	}
	assert.Subset(t, hello, []string{"a", "c"}, "a and c serve mem://hello")
	rr, err := f.ReadResource(ctx, "c", "mem://hello")
	require.NoError(t, err)
	assert.Equal(t, "hello", rr.Contents[0].Text)

	c, err := f.Get("b")
	require.NoError(t, err)
	assert.Equal(t, client.StateReady, c.State())
	_, err = f.Get("nope")
	require.ErrorIs(t, err, client.ErrUnknownServer)
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestFederationRegistry(t *testing.T) {
	fedNoLeaks(t)
	srv := newEngine(t, "bench", engine.Options{})
	addr, _ := serveTCP(t, srv)
	f := client.NewFederation(client.FederationOptions{})
	ctx := testCtx(t)
	tr := &client.TCPTransport{Addr: addr}

	for _, bad := range []string{"", "a/b", "a b", "é", string(make([]byte, 65))} {
		require.ErrorIs(t, f.Add(ctx, bad, tr, client.Options{Era: client.EraLegacy}), client.ErrServerName, "%q", bad)
	}
	require.ErrorIs(t, f.Add(ctx, "x", nil, client.Options{Era: client.EraLegacy}), client.ErrTarget)

	// Concurrent Adds of one name: exactly one wins.
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = f.Add(ctx, "one", tr, client.Options{Era: client.EraLegacy}) })
	}
	wg.Wait()
	var ok int
	for _, err := range errs {
		if err == nil {
			ok++
		} else {
			require.ErrorIs(t, err, client.ErrServerExists)
		}
	}
	assert.Equal(t, 1, ok)
	require.NoError(t, f.Add(ctx, "two.v2_x-y", tr, client.Options{Era: client.EraLegacy}))
	assert.Equal(t, []string{"one", "two.v2_x-y"}, f.Names())

	// A server that cannot be reached is not added.
	err := f.Add(ctx, "down", &client.TCPTransport{Addr: "127.0.0.1:1"}, client.Options{Era: client.EraLegacy})
	require.Error(t, err)
	assert.NotContains(t, f.Names(), "down")

	c, err := f.Get("one")
	require.NoError(t, err)
	require.NoError(t, f.Remove("one"))
	assert.Equal(t, client.StateClosed, c.State())
	require.ErrorIs(t, f.Remove("one"), client.ErrUnknownServer)
	_, err = f.CallTool(ctx, "one/echo", map[string]any{"text": "x"})
	require.ErrorIs(t, err, client.ErrUnknownServer)

	require.NoError(t, f.Close(ctx))
	require.NoError(t, f.Close(ctx), "idempotent")
	require.ErrorIs(t, f.Add(ctx, "three", tr, client.Options{Era: client.EraLegacy}), client.ErrFederationClosed)
	_, err = f.Get("two.v2_x-y")
	require.ErrorIs(t, err, client.ErrFederationClosed)
	_, err = f.AllTools(ctx)
	require.ErrorIs(t, err, client.ErrFederationClosed)
	assert.Empty(t, f.Names())
}

func TestFederationNotifications(t *testing.T) {
	fedNoLeaks(t)
	var mu sync.Mutex
	var userNotes []string
	e := newFedEnv(t, client.FederationOptions{})
	ctx := testCtx(t)
	// Per-server Options callbacks still run.
	srv := newEngine(t, "bench", engine.Options{ListChangedDelay: 5 * time.Millisecond})
	dAddr, _ := serveTCP(t, srv)
	require.NoError(t, e.fed.Add(ctx, "d", &client.TCPTransport{Addr: dAddr}, client.Options{
		Era: client.EraLegacy,
		OnToolListChanged: func() {
			mu.Lock()
			userNotes = append(userNotes, "tools")
			mu.Unlock()
		},
	}))

	tools, err := e.fed.AllTools(ctx)
	require.NoError(t, err)
	require.NotContains(t, toolNames(tools), "b/fresh")

	// b's list changes: the callback hears it from b, and b's cached list
	// is dropped.
	require.NoError(t, e.srvs["b"].Registry().AddTool(&mcp.Tool{Name: "fresh", InputSchema: codec.RawJSON(`{"type":"object"}`)},
		func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.TextResult("new"), nil
		}))
	waitNote(t, e.notes, "b", mcp.NotificationToolListChanged)
	tools, err = e.fed.AllTools(ctx)
	require.NoError(t, err)
	assert.Contains(t, toolNames(tools), "b/fresh")
	r, err := e.fed.CallTool(ctx, "b/fresh", nil)
	require.NoError(t, err)
	assert.Equal(t, "new", r.Content[0].Text)

	// Same over stdio framing (c) and TCP (d), whose own callback runs too.
	require.Equal(t, 1, e.srvs["c"].Registry().RemoveTools("whoami"))
	waitNote(t, e.notes, "c", mcp.NotificationToolListChanged)
	require.Equal(t, 1, srv.Registry().RemoveTools("add"))
	waitNote(t, e.notes, "d", mcp.NotificationToolListChanged)
	tools, err = e.fed.AllTools(ctx)
	require.NoError(t, err)
	names := toolNames(tools)
	assert.NotContains(t, names, "c/whoami")
	assert.NotContains(t, names, "d/add")
	assert.Contains(t, names, "a/whoami", "a's list unchanged")
	mu.Lock()
	assert.Equal(t, []string{"tools"}, userNotes)
	mu.Unlock()
}

// waitNote waits for notification method from server.
func waitNote(t *testing.T, notes <-chan [2]string, server, method string) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case n := <-notes:
			if n == [2]string{server, method} {
				return
			}
		case <-deadline:
			t.Fatalf("no %s from %s", method, server)
		}
	}
}

func TestFederationServerDownUp(t *testing.T) {
	fedNoLeaks(t)
	e := newFedEnv(t, client.FederationOptions{})
	ctx := testCtx(t)
	a, err := e.fed.Get("a")
	require.NoError(t, err)
	_, err = e.fed.AllTools(ctx)
	require.NoError(t, err)

	// a goes down: the others still list and answer; a's failure is
	// reported by name.
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	require.NoError(t, e.aTCP.Shutdown(sctx))
	cancel()
	require.Eventually(t, func() bool { return a.State() != client.StateReady }, 5*time.Second, 5*time.Millisecond)
	tools, err := e.fed.AllTools(ctx)
	require.ErrorIs(t, err, client.ErrPartial)
	require.ErrorIs(t, err, client.ErrNotReady)
	var pe *client.PartialError
	require.ErrorAs(t, err, &pe)
	require.Len(t, pe.Errors, 1)
	assert.Equal(t, "a", pe.Errors[0].Server)
	require.Error(t, client.ServerFailed(err, "a"))
	require.NoError(t, client.ServerFailed(err, "b"))
	names := toolNames(tools)
	assert.Contains(t, names, "b/whoami")
	assert.Contains(t, names, "c/whoami")
	assert.NotContains(t, names, "a/whoami")
	_, err = e.fed.CallTool(ctx, "a/whoami", nil)
	require.ErrorIs(t, err, client.ErrNotReady)
	r, err := e.fed.CallTool(ctx, "b/whoami", nil)
	require.NoError(t, err)
	assert.Equal(t, "b", r.Content[0].Text)

	// a comes back on its address, with a new tool: the client
	// reconnects and a's list is fetched anew.
	whoamiToo(t, e.srvs["a"])
	testserver.TCP(t, e.srvs["a"], tcp.Options{Addr: e.aAddr, Loops: 1})
	require.Eventually(t, func() bool { return a.State() == client.StateReady }, 10*time.Second, 5*time.Millisecond)
	tools, err = e.fed.AllTools(ctx)
	require.NoError(t, err)
	names = toolNames(tools)
	assert.Contains(t, names, "a/whoami")
	assert.Contains(t, names, "a/whoami2")
	r, err = e.fed.CallTool(ctx, "a/whoami2", nil)
	require.NoError(t, err)
	assert.Equal(t, "a2", r.Content[0].Text)
}

// whoamiToo adds tool whoami2 to srv.
func whoamiToo(t *testing.T, srv *engine.Server) {
	t.Helper()
	require.NoError(t, srv.Registry().AddTool(&mcp.Tool{
		Name: "whoami2", InputSchema: codec.RawJSON(`{"type":"object"}`),
	}, func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.TextResult("a2"), nil
	}))
}

func TestFederationCloseAbortsAdd(t *testing.T) {
	noLeaks(t)
	// A server that accepts and never answers initialize.
	accepted := make(chan struct{}, 1)
	addr := fakeServer(t, func(c net.Conn) {
		accepted <- struct{}{}
		_, _ = io.Copy(io.Discard, c)
	})
	f := client.NewFederation(client.FederationOptions{})
	errc := make(chan error, 1)
	go func() {
		errc <- f.Add(context.Background(), "slow", &client.TCPTransport{Addr: addr}, client.Options{Era: client.EraLegacy})
	}()
	select {
	case <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("Add did not dial")
	}
	require.ErrorIs(t, f.Add(testCtx(t), "slow", &client.TCPTransport{Addr: addr}, client.Options{Era: client.EraLegacy}), client.ErrServerExists,
		"a name being dialed is taken")
	assert.Empty(t, f.Names(), "not listed before it is up")
	require.NoError(t, f.Close(testCtx(t)))
	select {
	case err := <-errc:
		require.ErrorIs(t, err, client.ErrFederationClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not abort Add")
	}
}

func TestParseTarget(t *testing.T) {
	for target, want := range map[string]client.Transport{
		"tcp://127.0.0.1:7400":      &client.TCPTransport{Addr: "127.0.0.1:7400"},
		"tcps://127.0.0.1:7400":     &client.TCPTransport{Addr: "127.0.0.1:7400", TLS: &tls.Config{MinVersion: tls.VersionTLS12}},
		"http://127.0.0.1:7401":     &client.HTTPTransport{URL: "http://127.0.0.1:7401/mcp"},
		"https://h.example/x/mcp":   &client.HTTPTransport{URL: "https://h.example/x/mcp"},
		"sse+http://127.0.0.1:7401": &client.SSETransport{URL: "http://127.0.0.1:7401/sse"},
		"stdio:bin/mcpedge -stdio":  &client.StdioTransport{Command: "bin/mcpedge", Args: []string{"-stdio"}},
	} {
		got, err := client.ParseTarget(target)
		require.NoError(t, err, target)
		assert.Equal(t, want, got, target)
	}
	for _, bad := range []string{"", "stdio:", "tcp://nohost", "tcps://nohost", "tcp:127.0.0.1:1", "http://", "ftp://x"} {
		_, err := client.ParseTarget(bad)
		require.ErrorIs(t, err, client.ErrTarget, "%q", bad)
	}
}

func TestFederationCachesLists(t *testing.T) {
	noLeaks(t)
	var lists atomic.Int64
	addr := scripted(t, func(r fakeReq, w io.Writer) bool {
		switch r.Method {
		case mcp.MethodToolsList:
			n := lists.Add(1)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"t%d","inputSchema":{"type":"object"}}]}}`+"\n", r.ID, n)
		case mcp.MethodPing:
			// The list changes: say so before answering.
			fmt.Fprintf(w, `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`+"\n")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{}}`+"\n", r.ID)
		}
		return true
	})
	changed := make(chan string, 4)
	f := client.NewFederation(client.FederationOptions{OnNotification: func(server string, n client.Notification) {
		changed <- server + " " + n.Method
	}})
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	ctx := testCtx(t)
	require.NoError(t, f.Add(ctx, "s", &client.TCPTransport{Addr: addr}, client.Options{Era: client.EraLegacy}))
	for range 3 {
		tools, err := f.AllTools(ctx)
		require.NoError(t, err)
		assert.Equal(t, []string{"s/t1"}, toolNames(tools))
	}
	assert.Equal(t, int64(1), lists.Load(), "served from the cache")

	c, err := f.Get("s")
	require.NoError(t, err)
	require.NoError(t, c.Ping(ctx))
	select {
	case n := <-changed:
		assert.Equal(t, "s notifications/tools/list_changed", n)
	case <-time.After(5 * time.Second):
		t.Fatal("no list_changed")
	}
	tools, err := f.AllTools(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"s/t2"}, toolNames(tools))
	assert.Equal(t, int64(2), lists.Load())
}

func TestFederationStdioSubprocess(t *testing.T) {
	bin, err := mcpedgeBin()
	require.NoError(t, err)
	srv := newEngine(t, "bench", engine.Options{})
	addr, _ := serveTCP(t, srv)
	f := client.NewFederation(client.FederationOptions{})
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	ctx := testCtx(t)
	require.NoError(t, f.Add(ctx, "proc", &client.StdioTransport{Command: bin, Args: []string{"-stdio", "-handlers", "demo"}}, client.Options{Era: client.EraLegacy}))
	tr, err := client.ParseTarget("tcp://" + addr)
	require.NoError(t, err)
	require.NoError(t, f.Add(ctx, "net", tr, client.Options{Era: client.EraLegacy}))

	tools, err := f.AllTools(ctx)
	require.NoError(t, err)
	names := toolNames(tools)
	assert.Contains(t, names, "proc/hash")
	assert.Contains(t, names, "net/add")
	r, err := f.CallTool(ctx, "proc/echo", map[string]any{"text": "from a child"})
	require.NoError(t, err)
	assert.Equal(t, "from a child", r.Content[0].Text)

	c, err := f.Get("proc")
	require.NoError(t, err)
	require.NoError(t, f.Remove("proc"))
	assert.Equal(t, client.StateClosed, c.State())
	tools, err = f.AllTools(ctx)
	require.NoError(t, err)
	assert.NotContains(t, toolNames(tools), "proc/hash")
}

// TestFederationModernLists: a server of 2026-07-28 is cached by its
// lists' ttlMs (0, the default, is stale at once), and a list change its
// listen stream carries invalidates its cached list.
func TestFederationModernLists(t *testing.T) {
	fedNoLeaks(t)
	lists := &listCounter{}
	srv := newEngine(t, "bench", engine.Options{ListChangedDelay: 5 * time.Millisecond, Observer: lists})
	addr, _ := serveTCP(t, srv)
	changed := make(chan string, 16)
	f := client.NewFederation(client.FederationOptions{OnNotification: func(server string, n client.Notification) {
		select {
		case changed <- n.Method:
		default:
		}
	}})
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	ctx := testCtx(t)
	require.NoError(t, f.Add(ctx, "m", &client.TCPTransport{Addr: addr}, client.Options{}))
	c, err := f.Get("m")
	require.NoError(t, err)
	require.True(t, c.Modern())

	fetches := func() int64 {
		t.Helper()
		before := lists.Load()
		for range 3 {
			_, err := f.AllTools(ctx)
			require.NoError(t, err)
		}
		return lists.Load() - before
	}
	assert.EqualValues(t, 3, fetches(), "ttlMs 0: stale at once")

	srv.Registry().SetListCacheHint(handlers.ListNameTools, handlers.CacheHint{TTL: time.Hour})
	assert.EqualValues(t, 1, fetches(), "fresh for its ttlMs")

	whoami(t, srv, "m")
	for got := ""; got != mcp.NotificationToolListChanged; {
		select {
		case got = <-changed:
		case <-ctx.Done():
			t.Fatal("no tools/list_changed on the listen stream")
		}
	}
	tools, err := f.AllTools(ctx)
	require.NoError(t, err)
	assert.Contains(t, toolNames(tools), "m/whoami", "the change invalidated the cached list")
	assert.EqualValues(t, 0, fetches(), "and the new list is cached")
}

// listCounter counts the tools/list requests a server answers.
type listCounter struct{ atomic.Int64 }

func (l *listCounter) RequestDone(_ *session.Session, method string, _ int, _ time.Duration) {
	if method == mcp.MethodToolsList {
		l.Add(1)
	}
}
func (*listCounter) Refused(*session.Session, string)      {}
func (*listCounter) SessionClosed(*session.Session, error) {}

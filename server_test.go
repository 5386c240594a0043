package mcpedge_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge"
	"github.com/mcpedge/mcpedge/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

const wait = 10 * time.Second

type echoArgs struct {
	Text string `json:"text"`
}

// newServer returns a server with the tools echo and block: block signals
// started, then waits for release (or its context) and answers "released".
func newServer(t *testing.T, opts mcpedge.Options) (srv *mcpedge.Server, started, release chan struct{}) {
	t.Helper()
	srv = mcpedge.New(opts)
	started, release = make(chan struct{}, 4), make(chan struct{})
	require.NoError(t, mcpedge.AddTool(srv, &mcpedge.Tool{Name: "echo"},
		func(_ context.Context, _ *mcpedge.CallToolRequest, in echoArgs) (*mcpedge.CallToolResult, any, error) {
			return mcpedge.TextResult(in.Text), nil, nil
		}))
	require.NoError(t, mcpedge.AddTool(srv, &mcpedge.Tool{Name: "block"},
		func(ctx context.Context, _ *mcpedge.CallToolRequest, _ struct{}) (*mcpedge.CallToolResult, any, error) {
			started <- struct{}{}
			select {
			case <-release:
				return mcpedge.TextResult("released"), nil, nil
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		}))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return srv, started, release
}

// serve runs srv.Serve(ctx) and returns its result channel.
func serve(ctx context.Context, srv *mcpedge.Server) chan error {
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	return served
}

func result(t *testing.T, c chan error) error {
	t.Helper()
	select {
	case err := <-c:
		return err
	case <-time.After(wait):
		t.Fatal("no return")
		return nil
	}
}

// rawConn is a newline-framed TCP client, initialized.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
}

type message struct {
	ID     json.RawMessage `json:"id"`
	Result struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
	Error *struct {
		Code int             `json:"code"`
		Data json.RawMessage `json:"data"`
	} `json:"error"`
}

func dialRaw(t *testing.T, addr net.Addr) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr.String())
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	require.NoError(t, nc.SetDeadline(time.Now().Add(wait)))
	c := &rawConn{t: t, nc: nc, r: bufio.NewReader(nc)}
	c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	require.Nil(t, c.read().Error)
	return c
}

func (c *rawConn) send(lines ...string) {
	c.t.Helper()
	_, err := io.WriteString(c.nc, strings.Join(lines, "\n")+"\n")
	require.NoError(c.t, err)
}

func (c *rawConn) read() message {
	c.t.Helper()
	b, err := c.r.ReadBytes('\n')
	require.NoError(c.t, err)
	var m message
	require.NoError(c.t, json.Unmarshal(b, &m))
	return m
}

func TestServeTCPAndHTTP(t *testing.T) {
	srv, _, _ := newServer(t, mcpedge.Options{
		TCP: &mcpedge.TCPOptions{Addr: "127.0.0.1:0", Loops: 1},
		// A short write timeout bounds any stream still being written
		// when Shutdown waits for the connections.
		HTTP: &mcpedge.HTTPOptions{Addr: "127.0.0.1:0", WriteTimeout: 2 * time.Second},
	})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	served := serve(context.Background(), srv)

	tcpAddr, httpAddr := srv.TCPAddr(ctx), srv.HTTPAddr(ctx)
	require.NotNil(t, tcpAddr)
	require.NotNil(t, httpAddr)
	for _, tr := range []client.Transport{
		&client.TCPTransport{Addr: tcpAddr.String()},
		&client.HTTPTransport{URL: "http://" + httpAddr.String() + "/mcp"},
	} {
		c, err := client.Dial(ctx, tr, client.Options{})
		require.NoError(t, err)
		res, err := c.CallTool(ctx, "echo", map[string]any{"text": "hi"})
		require.NoError(t, err)
		assert.Equal(t, "hi", res.Content[0].Text)
		c.Close()
	}

	// Shutdown gets a context of its own: on a loaded machine the calls
	// above may have used much of ctx.
	sctx, scancel := context.WithTimeout(context.Background(), 3*wait)
	defer scancel()
	require.NoError(t, srv.Shutdown(sctx))
	assert.ErrorIs(t, result(t, served), mcpedge.ErrServerClosed)
	_, err := net.Dial("tcp", tcpAddr.String())
	assert.Error(t, err, "the TCP listener is closed")
	_, err = net.Dial("tcp", httpAddr.String())
	assert.Error(t, err, "the HTTP listener is closed")
	assert.ErrorIs(t, srv.Serve(ctx), mcpedge.ErrServerClosed, "Serve after Shutdown")
}

// TestShutdownOrder: the engine drains (a new request is refused
// with -32000 {"limit":"shutdown"} while the connection stays open, the
// request in flight is answered), then the listener and the connections
// close.
func TestShutdownOrder(t *testing.T) {
	srv, started, release := newServer(t, mcpedge.Options{TCP: &mcpedge.TCPOptions{Addr: "127.0.0.1:0", Loops: 1}})
	served := serve(context.Background(), srv)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	addr := srv.TCPAddr(ctx)
	require.NotNil(t, addr)
	c := dialRaw(t, addr)
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"block","arguments":{}}}`)
	<-started

	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(ctx) }()
	require.Eventually(t, srv.Engine().ShuttingDown, wait, time.Millisecond)

	// Draining: refused, the connection open.
	c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"late"}}}`)
	m := c.read()
	assert.JSONEq(t, "2", string(m.ID))
	require.NotNil(t, m.Error)
	assert.Equal(t, -32000, m.Error.Code)
	assert.Contains(t, string(m.Error.Data), `"shutdown"`)
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned with a request in flight: %v", err)
	default:
	}

	// The request in flight finishes and its answer is written.
	close(release)
	m = c.read()
	assert.JSONEq(t, "1", string(m.ID))
	require.Nil(t, m.Error)
	assert.Equal(t, "released", m.Result.Content[0].Text)

	require.NoError(t, result(t, shut))
	assert.ErrorIs(t, result(t, served), mcpedge.ErrServerClosed)
	_, err := c.r.ReadBytes('\n')
	assert.Error(t, err, "the connection is closed")
	_, err = net.Dial("tcp", addr.String())
	assert.Error(t, err, "the listener is closed")
}

// TestServeContextDrains: ending Serve's context is a graceful shutdown.
func TestServeContextDrains(t *testing.T) {
	srv, started, release := newServer(t, mcpedge.Options{TCP: &mcpedge.TCPOptions{Addr: "127.0.0.1:0", Loops: 1}})
	ctx, stop := context.WithCancel(context.Background())
	served := serve(ctx, srv)
	addr := srv.TCPAddr(ctx)
	require.NotNil(t, addr)
	c := dialRaw(t, addr)
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"block","arguments":{}}}`)
	<-started
	stop()
	require.Eventually(t, srv.Engine().ShuttingDown, wait, time.Millisecond)
	close(release)
	m := c.read()
	require.Nil(t, m.Error)
	assert.Equal(t, "released", m.Result.Content[0].Text)
	assert.NoError(t, result(t, served))
}

// TestServeDrainTimeout: a request that outlasts DrainTimeout is cancelled
// and Serve reports the timeout; the listener is closed all the same.
func TestServeDrainTimeout(t *testing.T) {
	srv, started, _ := newServer(t, mcpedge.Options{
		TCP:          &mcpedge.TCPOptions{Addr: "127.0.0.1:0", Loops: 1},
		DrainTimeout: 50 * time.Millisecond,
	})
	ctx, stop := context.WithCancel(context.Background())
	served := serve(ctx, srv)
	addr := srv.TCPAddr(ctx)
	require.NotNil(t, addr)
	c := dialRaw(t, addr)
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"block","arguments":{}}}`)
	<-started
	stop()
	err := result(t, served)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	var te *mcpedge.TransportError
	assert.False(t, errors.As(err, &te))
	_, err = net.Dial("tcp", addr.String())
	assert.Error(t, err, "the listener is closed")
}

// TestServeListenerFails: a transport that cannot listen ends Serve with a
// TransportError naming it, and the other transport is shut down.
func TestServeListenerFails(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	srv, _, _ := newServer(t, mcpedge.Options{
		TCP:  &mcpedge.TCPOptions{Addr: busy.Addr().String(), Loops: 1},
		HTTP: &mcpedge.HTTPOptions{Addr: "127.0.0.1:0"},
	})
	err = result(t, serve(context.Background(), srv))
	var te *mcpedge.TransportError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, "tcp", te.Transport)
	assert.Contains(t, err.Error(), "mcpedge: tcp: ")
	assert.Contains(t, err.Error(), busy.Addr().String())
	assert.True(t, srv.Engine().ShuttingDown())
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if a := srv.HTTPAddr(ctx); a != nil {
		_, err = net.Dial("tcp", a.String())
		assert.Error(t, err, "the HTTP listener is closed")
	}
}

func TestServeMisuse(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()

	srv := mcpedge.New(mcpedge.Options{})
	assert.ErrorIs(t, srv.Serve(ctx), mcpedge.ErrNoTransport)
	assert.Nil(t, srv.TCPAddr(ctx))
	assert.Nil(t, srv.HTTPAddr(ctx))
	require.NoError(t, srv.Shutdown(ctx))

	srv, _, _ = newServer(t, mcpedge.Options{TCP: &mcpedge.TCPOptions{Addr: "127.0.0.1:0", Loops: 1}})
	served := serve(ctx, srv)
	require.NotNil(t, srv.TCPAddr(ctx))
	assert.ErrorIs(t, srv.Serve(ctx), mcpedge.ErrServing)
	assert.Nil(t, srv.HTTPAddr(ctx), "HTTP is off")
	require.NoError(t, srv.Shutdown(ctx))
	require.NoError(t, srv.Shutdown(ctx), "a second Shutdown")
	assert.ErrorIs(t, result(t, served), mcpedge.ErrServerClosed)

	// Shutdown before Serve.
	srv, _, _ = newServer(t, mcpedge.Options{TCP: &mcpedge.TCPOptions{Addr: "127.0.0.1:0", Loops: 1}})
	require.NoError(t, srv.Shutdown(ctx))
	assert.ErrorIs(t, srv.Serve(ctx), mcpedge.ErrServerClosed)
	assert.Nil(t, srv.TCPAddr(ctx))
	assert.ErrorIs(t, srv.ServeStdio(ctx, strings.NewReader(""), io.Discard), mcpedge.ErrServerClosed)
}

func TestServeStdio(t *testing.T) {
	srv, _, _ := newServer(t, mcpedge.Options{})
	in := strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"over stdio"}}}
`)
	var out strings.Builder
	require.NoError(t, srv.ServeStdio(context.Background(), in, &out))
	assert.Contains(t, out.String(), `"over stdio"`)
	assert.True(t, srv.Engine().ShuttingDown(), "the input ended: the server is shut down")
}

// TestServeStdioShutdown: Shutdown drains the stdio session, then ends it.
func TestServeStdioShutdown(t *testing.T) {
	srv, started, release := newServer(t, mcpedge.Options{})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- srv.ServeStdio(context.Background(), inR, outW) }()
	r := bufio.NewReader(outR)
	_, err := io.WriteString(inW, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"block","arguments":{}}}
`)
	require.NoError(t, err)
	_, err = r.ReadBytes('\n') // initialize
	require.NoError(t, err)
	<-started

	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(ctx) }()
	require.Eventually(t, srv.Engine().ShuttingDown, wait, time.Millisecond)
	close(release)
	line, err := r.ReadBytes('\n')
	require.NoError(t, err)
	assert.Contains(t, string(line), `"released"`)
	require.NoError(t, result(t, shut))
	assert.ErrorIs(t, result(t, done), mcpedge.ErrServerClosed)
	inW.Close()
	outR.Close()
}

// TestShutdownLeavesNothing: after Serve and Shutdown, no goroutine of the
// server's remains.
func TestShutdownLeavesNothing(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(),
		// fasthttp's idle-worker cleaner notices Shutdown only after its
		// current sleep (MaxIdleWorkerDuration), as in transport/http's
		// tests.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"))
	srv := mcpedge.New(mcpedge.Options{
		TCP:  &mcpedge.TCPOptions{Addr: "127.0.0.1:0", Loops: 1},
		HTTP: &mcpedge.HTTPOptions{Addr: "127.0.0.1:0"},
	})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	served := serve(ctx, srv)
	require.NotNil(t, srv.TCPAddr(ctx))
	require.NotNil(t, srv.HTTPAddr(ctx))
	dialRaw(t, srv.TCPAddr(ctx)).nc.Close()
	require.NoError(t, srv.Shutdown(ctx))
	assert.ErrorIs(t, result(t, served), mcpedge.ErrServerClosed)
}

// TCP and HTTP served together share one budget of each kind of bytes
// clients make the server hold (-max-buffered, -max-outbound-total),
// unless they are given limits of their own.
func TestTransportsShareBudgets(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for _, tc := range []struct {
		name   string
		tcp    mcpedge.TCPOptions
		shared int
	}{
		{"defaults", mcpedge.TCPOptions{}, 1},
		{"limits of their own", mcpedge.TCPOptions{MaxBuffered: 1 << 20, MaxOutboundTotal: 1 << 20}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tcpOpts := tc.tcp
			tcpOpts.Addr, tcpOpts.Loops = "127.0.0.1:0", 1
			srv := mcpedge.New(mcpedge.Options{TCP: &tcpOpts, HTTP: &mcpedge.HTTPOptions{Addr: "127.0.0.1:0"}})
			buffered, outbound := srv.Budgets()
			assert.Len(t, buffered, tc.shared)
			assert.Len(t, outbound, tc.shared)
			assert.Zero(t, srv.BufferedBytes())
			assert.Zero(t, srv.OutboundBytes())
			require.NoError(t, srv.Shutdown(ctx))
		})
	}
}

package http

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/internal/connwatch"
	"github.com/mcpedge/mcpedge/transport/netlimit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// failingListener fails its first accepts with errs, in turn, then
// accepts from the listener it wraps.
type failingListener struct {
	net.Listener
	mu    sync.Mutex
	errs  []error
	calls int
}

func (l *failingListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	l.calls++
	if len(l.errs) > 0 {
		err := l.errs[0]
		l.errs = l.errs[1:]
		l.mu.Unlock()
		return nil, err
	}
	l.mu.Unlock()
	return l.Listener.Accept()
}

func acceptErr(errno syscall.Errno) error {
	return &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", errno)}
}

// TestAcceptErrorsDoNotStopServe: running out of descriptors, or a
// connection aborted before it is accepted, made fasthttp's Serve return,
// and the process exit. They are retried after a pause.
func TestAcceptErrorsDoNotStopServe(t *testing.T) {
	fl := &failingListener{errs: []error{
		acceptErr(syscall.EMFILE), acceptErr(syscall.EMFILE), acceptErr(syscall.ENFILE),
		acceptErr(syscall.ECONNABORTED), acceptErr(syscall.ENOBUFS), acceptErr(syscall.EMFILE),
	}}
	e := newEnv(t, envOpts{loopback: true, wrap: func(ln net.Listener) net.Listener {
		fl.Listener = ln
		return fl
	}})
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := e.try(ctx, req{body: initBody})
	require.NoError(t, err, "the server still accepts")
	assert.Equal(t, http.StatusOK, resp.StatusCode, body(t, resp))
	// Six failures: 5+10+20+40+80+160 ms of back-off.
	assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "accept backs off")
	fl.mu.Lock()
	assert.GreaterOrEqual(t, fl.calls, 7, "six failures, then connections")
	fl.mu.Unlock()
}

// TestAcceptBackoffEndsAtShutdown: a server backing off after an accept
// error stops at once when shut down.
func TestAcceptBackoffEndsAtShutdown(t *testing.T) {
	errs := make([]error, 20) // 5 ms doubling to 1 s: about 15 s of failures
	for i := range errs {
		errs[i] = acceptErr(syscall.EMFILE)
	}
	eng := engine.New(engine.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := New(eng, Options{})
	served := make(chan error, 1)
	fl := &failingListener{Listener: ln, errs: errs}
	go func() { served <- srv.Serve(context.Background(), fl) }()
	waitFor(t, 5*time.Second, "the server backing off", func() bool {
		fl.mu.Lock()
		defer fl.mu.Unlock()
		return fl.calls >= 4 // in the 40 ms pause after the fourth failure, or a later one
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	require.NoError(t, eng.Shutdown(ctx))
	require.NoError(t, srv.Shutdown(ctx))
	require.NoError(t, <-served)
	assert.Less(t, time.Since(start), 2*time.Second)
}

// TestPermanentAcceptErrorEndsServe: a listener that cannot accept at all
// ends Serve with its error.
func TestPermanentAcceptErrorEndsServe(t *testing.T) {
	eng := engine.New(engine.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	srv := New(eng, Options{})
	bad := &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EINVAL)}
	err = srv.Serve(context.Background(), &failingListener{Listener: ln, errs: []error{bad}})
	require.ErrorIs(t, err, syscall.EINVAL)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, eng.Shutdown(ctx))
	require.NoError(t, srv.Shutdown(ctx))
}

// rawResponse reads one HTTP response from r: the status line, the
// headers and the body (by Content-Length).
func rawResponse(t *testing.T, r *bufio.Reader) (status string, hdr http.Header, body string) {
	t.Helper()
	resp, err := http.ReadResponse(r, nil)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.Status, resp.Header, string(b)
}

func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	return c
}

// ping sends a ping on c and reads the answer's status.
func pingStatus(t *testing.T, c net.Conn, r *bufio.Reader, sid string) int {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	_, err := io.WriteString(c, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nMcp-Session-Id: "+sid+"\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
	require.NoError(t, err)
	resp, err := http.ReadResponse(r, nil)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestConnLimit: connections over Options.Conns are answered 503 with
// Retry-After and closed; closing one frees its place.
func TestConnLimit(t *testing.T) {
	lim := netlimit.New(2, 0)
	e := newEnv(t, envOpts{loopback: true, opts: Options{Conns: lim}})
	sid := e.initialize()
	e.hc.CloseIdleConnections()
	waitFor(t, 2*time.Second, "the client's connections to close", func() bool { return lim.Open() == 0 })
	addr := e.ln.Addr().String()

	var held []net.Conn
	for i := 0; i < 2; i++ {
		c := dialFrom(t, "127.0.0.1", addr)
		assert.Equal(t, http.StatusOK, pingStatus(t, c, bufio.NewReader(c), sid))
		held = append(held, c)
	}
	assert.EqualValues(t, 2, lim.Open())

	c := dialFrom(t, "127.0.0.1", addr)
	status, hdr, body := rawResponse(t, bufio.NewReader(c))
	assert.Equal(t, "503 Service Unavailable", status)
	assert.NotEmpty(t, hdr.Get("Retry-After"))
	code, msg, _ := rpcError(t, body)
	assert.Equal(t, codeTransport, code)
	assert.Contains(t, msg, "connection limit")
	_, err := c.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "the refused connection is closed")

	held[0].Close()
	waitFor(t, 2*time.Second, "the closed connection to be released", func() bool { return lim.Open() == 1 })
	c = dialFrom(t, "127.0.0.1", addr)
	assert.Equal(t, http.StatusOK, pingStatus(t, c, bufio.NewReader(c), sid))
}

// TestConnLimitPerIP: the per-address limit refuses one address and not
// another. 127.0.0.2 and 127.0.0.3 are distinct clients.
func TestConnLimitPerIP(t *testing.T) {
	lim := netlimit.New(0, 1)
	e := newEnv(t, envOpts{loopback: true, opts: Options{Conns: lim}})
	sid := e.initialize()
	addr := e.ln.Addr().String()

	a := dialFrom(t, "127.0.0.2", addr)
	assert.Equal(t, http.StatusOK, pingStatus(t, a, bufio.NewReader(a), sid))
	a2 := dialFrom(t, "127.0.0.2", addr)
	status, hdr, body := rawResponse(t, bufio.NewReader(a2))
	assert.Equal(t, "503 Service Unavailable", status)
	assert.NotEmpty(t, hdr.Get("Retry-After"))
	assert.Contains(t, body, "per-address connection limit")
	b := dialFrom(t, "127.0.0.3", addr)
	assert.Equal(t, http.StatusOK, pingStatus(t, b, bufio.NewReader(b), sid))
}

// TestListenErrorNamesAddress: a listen error names the address and the
// cause, and the listener sets SO_REUSEADDR.
func TestListenErrorNamesAddress(t *testing.T) {
	ln, err := listen("127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	rc, err := ln.(*net.TCPListener).SyscallConn()
	require.NoError(t, err)
	var v int
	var serr error
	require.NoError(t, rc.Control(func(fd uintptr) {
		v, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR)
	}))
	require.NoError(t, serr)
	assert.Equal(t, 1, v, "SO_REUSEADDR")

	addr := ln.Addr().String()
	eng := engine.New(engine.Options{})
	srv := New(eng, Options{Addr: addr})
	err = srv.ListenAndServe(context.Background())
	require.Error(t, err)
	assert.True(t, errors.Is(err, syscall.EADDRINUSE), "%v", err)
	assert.Equal(t, "mcphttp: listen tcp "+addr+": address already in use", err.Error())
	assert.Nil(t, srv.Addr(context.Background()))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, eng.Shutdown(ctx))
	require.NoError(t, srv.Shutdown(ctx))
}

// TestLimitedConnKeepsSocketMethods: a counted connection can still be
// watched for a client going away and half-closed.
func TestLimitedConnKeepsSocketMethods(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	cc, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer cc.Close()
	sc, err := ln.Accept()
	require.NoError(t, err)
	lim := netlimit.New(1, 1)
	ip := remoteIP(sc)
	require.NoError(t, lim.Acquire(ip))
	c := newLimitedConn(sc, lim, ip)
	gone := make(chan struct{})
	w := connwatch.Watch(c, func() { close(gone) })
	require.NotNil(t, w, "the watcher reaches the socket")
	require.NoError(t, c.SetKeepAlive(true))
	require.NoError(t, cc.Close())
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the client's close went unnoticed")
	}
	w.Stop()
	require.NoError(t, c.Close())
	_ = c.Close() // a second Close releases nothing more
	assert.Zero(t, lim.Open(), "released once")
}

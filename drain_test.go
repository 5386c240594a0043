package mcpedge_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// drainTimeout is the drain the tests give Shutdown; a drain with nothing
// left in flight must end well within half of it.
const drainTimeout = 10 * time.Second

// addSlow registers the tool slow: it answers "slow" after ms
// milliseconds.
func addSlow(t *testing.T, srv *mcpedge.Server) {
	t.Helper()
	type args struct {
		MS int `json:"ms"`
	}
	require.NoError(t, mcpedge.AddTool(srv, &mcpedge.Tool{Name: "slow"},
		func(ctx context.Context, _ *mcpedge.CallToolRequest, in args) (*mcpedge.CallToolResult, any, error) {
			select {
			case <-time.After(time.Duration(in.MS) * time.Millisecond):
				return mcpedge.TextResult("slow"), nil, nil
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		}))
}

// shutdown runs srv.Shutdown with the drain timeout in a goroutine and
// returns when it began and its result channel; mark, when not nil, gets
// the start first, before Shutdown is called.
func shutdown(srv *mcpedge.Server, mark ...*atomic.Pointer[time.Time]) (began time.Time, done chan error) {
	done = make(chan error, 1)
	began = time.Now()
	for _, m := range mark {
		m.Store(&began)
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
		defer cancel()
		done <- srv.Shutdown(ctx)
	}()
	return began, done
}

// TestDrainTCPSequence: readiness turns off, the listener refuses new
// connections, an idle connection is closed at once, the request in
// flight is answered, and Shutdown returns as soon as it is.
func TestDrainTCPSequence(t *testing.T) {
	var draining atomic.Int32
	srv, started, release := newServer(t, mcpedge.Options{
		TCP:        &mcpedge.TCPOptions{Addr: "127.0.0.1:0", Loops: 1},
		OnDraining: func() { draining.Add(1) },
	})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	assert.False(t, srv.Ready(), "not ready before Serve")
	served := serve(ctx, srv)
	addr := srv.TCPAddr(ctx)
	require.NotNil(t, addr)
	assert.True(t, srv.Ready())

	busy, idle := dialRaw(t, addr), dialRaw(t, addr)
	busy.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"block","arguments":{}}}`)
	<-started

	_, shut := shutdown(srv)
	require.Eventually(t, func() bool { return draining.Load() == 1 }, wait, time.Millisecond)
	assert.False(t, srv.Ready(), "readiness off once the drain begins")

	// The idle connection is closed at once: EOF, not the read deadline.
	_, err := idle.r.ReadBytes('\n')
	require.ErrorIs(t, err, io.EOF, "idle connection closed by the drain")

	// The listener refuses new connections while the request is in flight.
	nc, err := net.DialTimeout("tcp", addr.String(), time.Second)
	if err == nil {
		nc.Close()
	}
	require.Error(t, err, "the listener still accepts during the drain")
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned with a request in flight: %v", err)
	default:
	}

	close(release)
	m := busy.read()
	require.Nil(t, m.Error)
	assert.Equal(t, "released", m.Result.Content[0].Text)
	require.NoError(t, result(t, shut))
	assert.ErrorIs(t, result(t, served), mcpedge.ErrServerClosed)
	assert.EqualValues(t, 1, draining.Load(), "OnDraining called once")
}

// TestDrainTCPUnderLoad: clients keep sending while the server drains;
// every request written before the drain began is answered, and the drain
// ends promptly.
func TestDrainTCPUnderLoad(t *testing.T) {
	srv, _, _ := newServer(t, mcpedge.Options{TCP: &mcpedge.TCPOptions{Addr: "127.0.0.1:0", Loops: 2}})
	addSlow(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	serve(ctx, srv)
	addr := srv.TCPAddr(ctx)
	require.NotNil(t, addr)

	const clients = 8
	var began atomic.Pointer[time.Time]
	var answered, total atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	warm := make(chan struct{}, clients)
	for i := range clients {
		c := dialRaw(t, addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 1; ; n++ {
				line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"slow","arguments":{"ms":%d}}}`+"\n", n, 5*(i%3))
				_, werr := io.WriteString(c.nc, line)
				wrote := time.Now()
				var rerr error
				if werr == nil {
					_, rerr = c.r.ReadBytes('\n')
				}
				b := began.Load()
				before := b == nil || wrote.Before(*b)
				if werr != nil || rerr != nil {
					if before && werr == nil {
						errs <- fmt.Errorf("client %d: request %d written before the drain, no answer: %v", i, n, rerr)
					}
					return
				}
				total.Add(1)
				if before {
					answered.Add(1)
				}
				if n == 3 {
					warm <- struct{}{}
				}
			}
		}()
	}
	for range clients {
		<-warm
	}
	b, shut := shutdown(srv, &began)
	require.NoError(t, result(t, shut))
	elapsed := time.Since(b)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	assert.Less(t, elapsed, drainTimeout/2, "the drain waits for nothing idle")
	t.Logf("%d answers, %d to requests written before the drain; drain took %v", total.Load(), answered.Load(), elapsed)
}

// httpSession is a Streamable HTTP session on a keep-alive client.
type httpSession struct {
	t   *testing.T
	c   *http.Client
	url string
	id  string
}

func newHTTPSession(t *testing.T, c *http.Client, url string) *httpSession {
	t.Helper()
	s := &httpSession{t: t, c: c, url: url}
	resp, err := s.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	s.id = resp.Header.Get("Mcp-Session-Id")
	require.NotEmpty(t, s.id)
	resp, err = s.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	return s
}

// post sends body and reads the whole answer.
func (s *httpSession) post(body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, s.url, strings.NewReader(body))
	require.NoError(s.t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := s.c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp, nil
}

// answer returns the JSON-RPC answer in an HTTP response (JSON or SSE).
func answer(t *testing.T, resp *http.Response) message {
	t.Helper()
	b, _ := io.ReadAll(resp.Body)
	if i := bytes.Index(b, []byte("data: ")); i >= 0 {
		b = b[i+len("data: "):]
		if j := bytes.IndexByte(b, '\n'); j >= 0 {
			b = b[:j]
		}
	}
	var m message
	require.NoError(t, json.Unmarshal(b, &m), "body %q", b)
	return m
}

// TestDrainHTTPKeepAlive: keep-alive clients under load, and idle
// keep-alive connections: Shutdown ends well within the drain timeout
// (idle connections are closed at once, not waited for), and every
// request written before the drain began is answered.
func TestDrainHTTPKeepAlive(t *testing.T) {
	srv, _, _ := newServer(t, mcpedge.Options{HTTP: &mcpedge.HTTPOptions{Addr: "127.0.0.1:0"}})
	addSlow(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	serve(ctx, srv)
	addr := srv.HTTPAddr(ctx)
	require.NotNil(t, addr)
	url := "http://" + addr.String() + "/mcp"

	// Idle keep-alive connections: used once, then left open.
	idle := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	defer idle.CloseIdleConnections()
	for range 4 {
		newHTTPSession(t, idle, url)
	}

	const clients = 6
	var began atomic.Pointer[time.Time]
	var total atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	warm := make(chan struct{}, clients)
	for i := range clients {
		// The time of the last write to the socket: net/http's
		// WroteRequest trace comes before its flush.
		var wrote atomic.Pointer[time.Time]
		var d net.Dialer
		c := &http.Client{Timeout: wait, Transport: &http.Transport{
			MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				nc, err := d.DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return &timedConn{Conn: nc, wrote: &wrote}, nil
			},
		}}
		defer c.CloseIdleConnections()
		s := newHTTPSession(t, c, url)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 1; ; n++ {
				wrote.Store(nil)
				resp, err := s.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"slow","arguments":{"ms":%d}}}`, n, 5*(i%3)))
				b, w := began.Load(), wrote.Load()
				before := b == nil || (w != nil && w.Before(*b))
				if err != nil || (resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusServiceUnavailable) {
					if before {
						errs <- fmt.Errorf("client %d: request %d written before the drain, no answer: %v %v", i, n, err, resp)
					}
					return
				}
				if m := answer(t, resp); m.Error != nil && m.Error.Code != -32000 {
					errs <- fmt.Errorf("client %d: request %d: error %d", i, n, m.Error.Code)
				}
				total.Add(1)
				if b != nil {
					return // one answer past the drain's start is enough
				}
				if n == 3 {
					warm <- struct{}{}
				}
			}
		}()
	}
	for range clients {
		<-warm
	}
	b, shut := shutdown(srv, &began)
	require.NoError(t, result(t, shut))
	elapsed := time.Since(b)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	assert.Less(t, elapsed, drainTimeout/2, "Shutdown waited for idle keep-alive connections")
	t.Logf("%d answers; drain took %v", total.Load(), elapsed)
}

// TestDrainTimeoutCuts: a request that outlives the drain makes Shutdown
// report the deadline (the command then exits 1).
func TestDrainTimeoutCuts(t *testing.T) {
	srv, started, _ := newServer(t, mcpedge.Options{HTTP: &mcpedge.HTTPOptions{Addr: "127.0.0.1:0"}})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	serve(ctx, srv)
	addr := srv.HTTPAddr(ctx)
	require.NotNil(t, addr)
	c := &http.Client{Timeout: wait}
	defer c.CloseIdleConnections()
	s := newHTTPSession(t, c, "http://"+addr.String()+"/mcp")
	go func() {
		_, _ = s.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"block","arguments":{}}}`)
	}()
	<-started
	sctx, scancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer scancel()
	err := srv.Shutdown(sctx)
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
}

// TestLameDuckSpreads: with LameDuck set, idle connections are closed a
// few at a time across it, not all at once.
func TestLameDuckSpreads(t *testing.T) {
	const lame = 400 * time.Millisecond
	srv, _, _ := newServer(t, mcpedge.Options{
		TCP:      &mcpedge.TCPOptions{Addr: "127.0.0.1:0", Loops: 1},
		LameDuck: lame,
	})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	serve(ctx, srv)
	addr := srv.TCPAddr(ctx)
	require.NotNil(t, addr)
	const conns = 8
	closedAt := make(chan time.Time, conns)
	for range conns {
		c := dialRaw(t, addr)
		go func() {
			_, _ = c.r.ReadBytes('\n')
			closedAt <- time.Now()
		}()
	}
	b, shut := shutdown(srv)
	require.NoError(t, result(t, shut))
	var first, last time.Time
	for range conns {
		at := <-closedAt
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	// Spread: the first close comes after a share of the lame-duck time,
	// the last near its end.
	assert.GreaterOrEqual(t, last.Sub(first), lame/4, "closes not spread: first %v, last %v after the start", first.Sub(b), last.Sub(b))
	assert.GreaterOrEqual(t, time.Since(b), lame/2)
}

// TestDrainHTTPSequence: over HTTP, the listener refuses new connections
// during the drain, an idle keep-alive connection is closed at once, and
// the request in flight is answered before Shutdown returns.
func TestDrainHTTPSequence(t *testing.T) {
	srv, started, release := newServer(t, mcpedge.Options{HTTP: &mcpedge.HTTPOptions{Addr: "127.0.0.1:0"}})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	served := serve(ctx, srv)
	addr := srv.HTTPAddr(ctx)
	require.NotNil(t, addr)
	url := "http://" + addr.String() + "/mcp"

	// An idle keep-alive connection, watched for its close.
	idle, err := net.Dial("tcp", addr.String())
	require.NoError(t, err)
	defer idle.Close()
	require.NoError(t, idle.SetDeadline(time.Now().Add(wait)))
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	_, err = fmt.Fprintf(idle, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s", addr, len(init), init)
	require.NoError(t, err)
	buf := make([]byte, 4096)
	n, err := idle.Read(buf) // the answer: the connection is now idle
	require.NoError(t, err)
	require.Contains(t, string(buf[:n]), "200 OK")
	require.NoError(t, idle.SetReadDeadline(time.Now().Add(50*time.Millisecond)))
	for err == nil {
		_, err = idle.Read(buf) // the rest of the answer, if any, then the deadline
	}
	var ne net.Error
	require.True(t, errors.As(err, &ne) && ne.Timeout(), "the keep-alive connection stays open before the drain: %v", err)
	require.NoError(t, idle.SetReadDeadline(time.Now().Add(wait)))

	busy := newHTTPSession(t, &http.Client{Timeout: wait}, url)
	answered := make(chan message, 1)
	go func() {
		resp, err := busy.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"block","arguments":{}}}`)
		if err == nil {
			answered <- answer(t, resp)
		}
		close(answered)
	}()
	<-started

	_, shut := shutdown(srv)
	require.Eventually(t, func() bool { return !srv.Ready() }, wait, time.Millisecond)
	for {
		if _, err := idle.Read(buf); err != nil {
			require.ErrorIs(t, err, io.EOF, "idle keep-alive connection closed by the drain")
			break
		}
	}
	nc, err := net.DialTimeout("tcp", addr.String(), time.Second)
	if err == nil {
		nc.Close()
	}
	require.Error(t, err, "the listener still accepts during the drain")

	close(release)
	m, ok := <-answered
	require.True(t, ok, "the request in flight got no answer")
	require.Nil(t, m.Error)
	assert.Equal(t, "released", m.Result.Content[0].Text)
	require.NoError(t, result(t, shut))
	assert.ErrorIs(t, result(t, served), mcpedge.ErrServerClosed)
}

// TestDrainEndsListenStreams: a connection whose only business is a
// subscriptions/listen stream is not closed as idle: the stream ends with
// its empty result, then the connection closes.
func TestDrainEndsListenStreams(t *testing.T) {
	srv, _, _ := newServer(t, mcpedge.Options{TCP: &mcpedge.TCPOptions{Addr: "127.0.0.1:0", Loops: 1}})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	serve(ctx, srv)
	addr := srv.TCPAddr(ctx)
	require.NotNil(t, addr)
	nc, err := net.Dial("tcp", addr.String())
	require.NoError(t, err)
	defer nc.Close()
	require.NoError(t, nc.SetDeadline(time.Now().Add(wait)))
	c := &rawConn{t: t, nc: nc, r: bufioReader(nc)}
	c.send(`{"jsonrpc":"2.0","id":"sub","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	ack, err := c.r.ReadBytes('\n')
	require.NoError(t, err)
	require.Contains(t, string(ack), "notifications/subscriptions")

	_, shut := shutdown(srv)
	last, err := c.r.ReadBytes('\n')
	require.NoError(t, err, "the listen stream was cut without its result")
	assert.Contains(t, string(last), `"id":"sub"`)
	assert.Contains(t, string(last), `"result"`)
	_, err = c.r.ReadBytes('\n')
	assert.ErrorIs(t, err, io.EOF)
	require.NoError(t, result(t, shut))
}

func bufioReader(nc net.Conn) *bufio.Reader { return bufio.NewReader(nc) }

// timedConn records when its last write returned.
type timedConn struct {
	net.Conn
	wrote *atomic.Pointer[time.Time]
}

func (c *timedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if n > 0 {
		now := time.Now()
		c.wrote.Store(&now)
	}
	return n, err
}

package tcp_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/handlers/builtin"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/transport/tcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

const wait = 10 * time.Second

// bigText is the text of mem://big, a static resource whose answer is
// large, to fill outbound buffers quickly.
var bigText = strings.Repeat("0123456789abcdef", 4096) // 64 KiB

type server struct {
	eng  *engine.Server
	tcp  *tcp.Server
	addr string
	// started receives a value when the slow tool runs; release ends it.
	started chan struct{}
	release chan struct{}
}

// start serves the bench workload, a slow tool and mem://big on an
// ephemeral port; the server is shut down when the test ends.
func start(t *testing.T, eo engine.Options, to tcp.Options) *server {
	t.Helper()
	if eo.Logger == nil {
		lb := &logBuffer{}
		eo.Logger = slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelWarn}))
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("server log:\n%s", lb.String())
			}
		})
	}
	eng := engine.New(eo)
	require.NoError(t, builtin.Install("bench", eng.Registry(), builtin.Env{ResourceUpdated: eng.ResourceUpdated}))
	s := &server{eng: eng, started: make(chan struct{}, 16), release: make(chan struct{})}
	require.NoError(t, eng.Registry().AddStaticResource(&mcp.Resource{URI: "mem://big", Name: "big"}, mcp.ResourceContents{URI: "mem://big", Text: bigText}))
	require.NoError(t, eng.Registry().AddTool(&mcp.Tool{Name: "slow"}, func(ctx context.Context, _ *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		s.started <- struct{}{}
		select {
		case <-s.release:
			return mcp.TextResult("released"), nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}))
	// pecho is echo run on the worker pool (the bench echo runs inline on
	// the event loop).
	require.NoError(t, eng.Registry().AddTool(&mcp.Tool{Name: "pecho", InputSchema: codec.RawJSON(builtin.EchoSchema)},
		func(_ context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct {
				Text string `json:"text"`
			}
			if err := codec.Unmarshal(req.Params.Arguments, &in); err != nil {
				return nil, err
			}
			return mcp.TextResult(in.Text), nil
		}))
	if to.Addr == "" {
		to.Addr = "127.0.0.1:0"
	}
	s.tcp = tcp.New(eng, to)
	errc := make(chan error, 1)
	go func() { errc <- s.tcp.ListenAndServe(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	a := s.tcp.Addr(ctx)
	require.NotNil(t, a, "server did not start")
	s.addr = a.String()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		assert.NoError(t, eng.Shutdown(ctx))
		assert.NoError(t, s.tcp.Shutdown(ctx))
		select {
		case err := <-errc:
			assert.NoError(t, err)
		case <-ctx.Done():
			t.Error("ListenAndServe did not return")
		}
	})
	return s
}

// logBuffer keeps the server's log, shown when a test fails. It may be
// written after the test ends (gnet keeps the last logger it was given).
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type msg struct {
	ID     codec.RawJSON `json:"id"`
	Method string        `json:"method"`
	Result codec.RawJSON `json:"result"`
	Error  *codec.Error  `json:"error"`
}

func (m msg) text() (string, error) {
	if m.Error != nil {
		return "", m.Error
	}
	var r mcp.CallToolResult
	if err := codec.Unmarshal(m.Result, &r); err != nil {
		return "", err
	}
	if len(r.Content) == 0 {
		return "", fmt.Errorf("no content in %s", m.Result)
	}
	return r.Content[0].Text, nil
}

// conn is a newline-framed test client.
type conn struct {
	c net.Conn
	r *bufio.Reader
}

func dial(t testing.TB, addr string) *conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, wait)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(wait)))
	return &conn{c: c, r: bufio.NewReaderSize(c, 64<<10)}
}

func (c *conn) write(lines ...string) error {
	_, err := io.WriteString(c.c, strings.Join(lines, "\n")+"\n")
	return err
}

func (c *conn) read() (msg, error) {
	line, err := c.r.ReadBytes('\n')
	if err != nil {
		return msg{}, err
	}
	var m msg
	if err := codec.Unmarshal(line, &m); err != nil {
		return msg{}, fmt.Errorf("bad line %q: %w", line, err)
	}
	return m, nil
}

// closed reports whether the server closed the connection, reading and
// discarding whatever came before.
func (c *conn) closed() bool {
	_, err := io.Copy(io.Discard, c.r)
	return err == nil || errors.Is(err, net.ErrClosed) || isReset(err)
}

func isReset(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "broken pipe"))
}

const initLine = `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"tcp-test","version":"1"}}}`
const initializedLine = `{"jsonrpc":"2.0","method":"notifications/initialized"}`

func (c *conn) init(t testing.TB) {
	t.Helper()
	require.NoError(t, c.write(initLine, initializedLine))
	m, err := c.read()
	require.NoError(t, err)
	require.Nil(t, m.Error)
	require.Equal(t, `"init"`, string(m.ID))
}

func (c *conn) echo(t testing.TB, id int, text string) {
	t.Helper()
	require.NoError(t, c.write(echoLine(id, text)))
	m, err := c.read()
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(id), string(m.ID))
	got, err := m.text()
	require.NoError(t, err)
	require.Equal(t, text, got)
}

func echoLine(id int, text string) string { return toolEcho("echo", id, text) }

// pechoLine calls the echo that runs on the worker pool.
func pechoLine(id int, text string) string { return toolEcho("pecho", id, text) }

func toolEcho(tool string, id int, text string) string {
	return `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":{"text":` + strconv.Quote(text) + `}}}`
}

func addLine(id, a, b int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"add","arguments":{"a":%d,"b":%d}}}`, id, a, b)
}

// TestManyConnections runs 1,000 concurrent connections, each initializing
// and pipelining rounds of echo, add (both inline on the event loop) and
// pecho (on the worker pool) calls; every answer must be right and matched
// to its id.
func TestManyConnections(t *testing.T) {
	const conns, rounds, perRound = 1000, 3, 3 // perRound calls of each of 3 tools
	s := start(t, engine.Options{Workers: conns * perRound}, tcp.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var wg sync.WaitGroup
	var answered atomic.Int64
	errs := make(chan error, conns)
	for ci := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := manyConnClient(ctx, s.addr, ci, rounds, perRound, &answered); err != nil {
				errs <- fmt.Errorf("conn %d: %w", ci, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	n := 0
	for err := range errs {
		if n++; n <= 5 {
			t.Error(err)
		}
	}
	require.Zero(t, n, "%d connections failed", n)
	assert.Equal(t, int64(conns*rounds*perRound*3), answered.Load())
	require.Eventually(t, func() bool { return s.tcp.Conns() == 0 && s.eng.Sessions().Len() == 0 }, wait, 10*time.Millisecond,
		"closed connections leave the table: conns %d, sessions %d", s.tcp.Conns(), s.eng.Sessions().Len())
}

func manyConnClient(ctx context.Context, addr string, ci, rounds, perRound int, answered *atomic.Int64) error {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer nc.Close()
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	c := &conn{c: nc, r: bufio.NewReader(nc)}
	// initialize, initialized and the first round in one write.
	lines := []string{initLine, initializedLine}
	want := map[string]string{`"init"`: ""}
	id := 0
	for r := range rounds {
		for range perRound {
			id++
			text := fmt.Sprintf("conn %d call %d \"quoted\" ü", ci, id)
			lines = append(lines, echoLine(id, text))
			want[strconv.Itoa(id)] = text
			id++
			lines = append(lines, pechoLine(id, text+" pooled"))
			want[strconv.Itoa(id)] = text + " pooled"
			id++
			lines = append(lines, addLine(id, ci, id))
			want[strconv.Itoa(id)] = strconv.Itoa(ci + id)
		}
		if err := c.write(lines...); err != nil {
			return err
		}
		lines = lines[:0]
		for len(want) > 0 {
			m, err := c.read()
			if err != nil {
				return fmt.Errorf("round %d, %d answers missing: %w", r, len(want), err)
			}
			key := string(m.ID)
			exp, ok := want[key]
			if !ok {
				return fmt.Errorf("answer with unexpected id %s", key)
			}
			delete(want, key)
			if key == `"init"` {
				if m.Error != nil {
					return m.Error
				}
				continue
			}
			got, err := m.text()
			if err != nil {
				return fmt.Errorf("id %s: %w", key, err)
			}
			if got != exp {
				return fmt.Errorf("id %s: got %q, want %q", key, got, exp)
			}
			answered.Add(1)
		}
	}
	return nil
}

func TestContentLengthFraming(t *testing.T) {
	s := start(t, engine.Options{}, tcp.Options{Framer: codec.ContentLengthFramer{}})
	c := dial(t, s.addr)
	f := codec.ContentLengthFramer{}
	var buf []byte
	buf = f.AppendFrame(buf, []byte(initLine))
	buf = f.AppendFrame(buf, []byte(initializedLine))
	buf = append(buf, "\r\n"...) // a blank line between messages is tolerated
	buf = f.AppendFrame(buf, []byte(echoLine(1, "line one\nline two")))
	// A lower-case header with a Content-Type, "\n" line ends.
	body := addLine(2, 2, 3)
	buf = append(buf, "content-length: "+strconv.Itoa(len(body))+"\nContent-Type: application/json\n\n"+body...)
	// Write it in awkward pieces.
	for i := 0; i < len(buf); {
		n := min(7+i%13, len(buf)-i)
		_, err := c.c.Write(buf[i : i+n])
		require.NoError(t, err)
		i += n
	}
	read := func() msg {
		t.Helper()
		var hdr []byte
		for {
			line, err := c.r.ReadBytes('\n')
			require.NoError(t, err)
			if string(line) == "\r\n" {
				break
			}
			hdr = append(hdr, line...)
		}
		h := string(hdr)
		require.True(t, strings.HasPrefix(h, "Content-Length: "), "header %q", h)
		n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(h, "Content-Length: ")))
		require.NoError(t, err)
		body := make([]byte, n)
		_, err = io.ReadFull(c.r, body)
		require.NoError(t, err)
		var m msg
		require.NoError(t, codec.Unmarshal(body, &m))
		return m
	}
	got := map[string]msg{}
	for range 3 {
		m := read()
		got[string(m.ID)] = m
	}
	require.Nil(t, got[`"init"`].Error)
	txt, err := got["1"].text()
	require.NoError(t, err)
	assert.Equal(t, "line one\nline two", txt)
	txt, err = got["2"].text()
	require.NoError(t, err)
	assert.Equal(t, "5", txt)

	// A malformed header block is a parse error, then the connection closes.
	_, err = c.c.Write([]byte("Content-Length: x1\r\n\r\n{}"))
	require.NoError(t, err)
	m := read()
	require.NotNil(t, m.Error)
	assert.Equal(t, codec.CodeParseError, m.Error.Code)
	assert.Equal(t, "null", string(m.ID))
	assert.True(t, c.closed())
}

// TestOversizedMessage: a message over the limit is answered with a parse
// error, then that connection is closed; others keep working.
func TestOversizedMessage(t *testing.T) {
	s := start(t, engine.Options{MaxMessage: 1024}, tcp.Options{})
	other := dial(t, s.addr)
	other.init(t)
	for _, tc := range []struct {
		name    string
		payload string
	}{
		{"complete line", echoLine(1, strings.Repeat("x", 2000)) + "\n"},
		{"no line end yet", strings.Repeat("y", 4000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, s.addr)
			c.init(t)
			c.echo(t, 1, "small is fine")
			_, err := io.WriteString(c.c, tc.payload)
			require.NoError(t, err)
			m, err := c.read()
			require.NoError(t, err)
			require.NotNil(t, m.Error)
			assert.Equal(t, codec.CodeParseError, m.Error.Code)
			assert.Equal(t, "null", string(m.ID))
			assert.Contains(t, m.Error.Message, "size limit")
			assert.True(t, c.closed(), "the connection is closed after an oversized message")
			other.echo(t, 2, "unaffected")
		})
	}
	// Exactly at the limit is fine.
	c := dial(t, s.addr)
	c.init(t)
	line := echoLine(3, "")
	line = echoLine(3, strings.Repeat("z", 1024-len(line)))
	require.Len(t, line, 1024)
	require.NoError(t, c.write(line))
	m, err := c.read()
	require.NoError(t, err)
	assert.Nil(t, m.Error)
}

func TestBadInputDoesNotCloseConnection(t *testing.T) {
	s := start(t, engine.Options{}, tcp.Options{})
	c := dial(t, s.addr)
	c.init(t)
	for _, tc := range []struct {
		line string
		code int
	}{
		{`{"jsonrpc":"2.0","id":1,`, codec.CodeParseError},
		{`[1,2,3]`, codec.CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":2}`, codec.CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":3,"method":"no/such"}`, codec.CodeMethodNotFound},
		{`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":7}}`, codec.CodeInvalidParams},
	} {
		require.NoError(t, c.write(tc.line))
		m, err := c.read()
		require.NoError(t, err)
		require.NotNil(t, m.Error, "line %s", tc.line)
		assert.Equal(t, tc.code, m.Error.Code, "line %s", tc.line)
	}
	// Blank lines and CRLF are fine; an unknown response id is ignored.
	_, err := io.WriteString(c.c, "\n\r\n"+`{"jsonrpc":"2.0","id":777,"result":{}}`+"\r\n"+echoLine(5, "crlf")+"\r\n")
	require.NoError(t, err)
	m, err := c.read()
	require.NoError(t, err)
	assert.Equal(t, "5", string(m.ID))
}

// TestSlowConsumer: a client that sends many requests and never reads is
// closed once its queued answers pass MaxOutbound; others are unaffected.
func TestSlowConsumer(t *testing.T) {
	const maxOut = 256 << 10
	s := start(t, engine.Options{}, tcp.Options{MaxOutbound: maxOut})
	good := dial(t, s.addr)
	good.init(t)

	for _, tc := range []struct{ name, line string }{
		{"event-loop answers", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"mem://big"}}`},
		{"worker answers", pechoLine(1, bigText[:16<<10])},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := s.tcp.Conns()
			slow := dial(t, s.addr)
			slow.init(t)
			require.Eventually(t, func() bool { return s.tcp.Conns() == before+1 }, wait, time.Millisecond)
			batch := strings.Repeat(tc.line+"\n", 64)
			// Keep sending, never reading, until the server gives up on us.
			deadline := time.Now().Add(wait)
			sent := 0
			for s.tcp.Conns() > before && time.Now().Before(deadline) {
				slow.c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
				if _, err := io.WriteString(slow.c, batch); err != nil {
					var ne net.Error
					if errors.As(err, &ne) && ne.Timeout() {
						continue // our send buffer is full; the server must act on its own
					}
					break // reset by the server
				}
				sent += 64
			}
			require.Eventually(t, func() bool { return s.tcp.Conns() == before }, wait, 5*time.Millisecond,
				"slow consumer not closed after %d requests", sent)
			slow.c.SetDeadline(time.Now().Add(wait))
			assert.True(t, slow.closed())
			good.echo(t, 7, "unaffected")
		})
	}
}

func TestMaxConns(t *testing.T) {
	s := start(t, engine.Options{}, tcp.Options{MaxConns: 2})
	a := dial(t, s.addr)
	a.init(t)
	b := dial(t, s.addr)
	b.init(t)
	c := dial(t, s.addr)
	assert.True(t, c.closed(), "a connection over the limit is closed")
	a.echo(t, 1, "a")
	b.echo(t, 1, "b")

	require.NoError(t, a.c.Close())
	require.Eventually(t, func() bool { return s.tcp.Conns() == 1 }, wait, time.Millisecond)
	d := dial(t, s.addr)
	d.init(t)
	d.echo(t, 1, "d")
	assert.EqualValues(t, 2, s.tcp.Conns())
}

// TestClientVanishesMidCall: a connection closed while its call runs
// cancels the handler and closes the session.
func TestClientVanishesMidCall(t *testing.T) {
	s := start(t, engine.Options{}, tcp.Options{})
	c := dial(t, s.addr)
	c.init(t)
	require.NoError(t, c.write(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}`))
	select {
	case <-s.started:
	case <-time.After(wait):
		t.Fatal("slow tool did not start")
	}
	require.EqualValues(t, 1, s.eng.Active())
	require.NoError(t, c.c.Close())
	require.Eventually(t, func() bool { return s.eng.Active() == 0 && s.eng.Sessions().Len() == 0 && s.tcp.Conns() == 0 },
		wait, time.Millisecond)
}

// TestShutdownDrainsAndLeavesNothing: in-flight answers are written during
// a drain, and after Shutdown no goroutine is left.
func TestShutdownDrainsAndLeavesNothing(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	eng := engine.New(engine.Options{})
	require.NoError(t, builtin.Install("bench", eng.Registry(), builtin.Env{}))
	started, release := make(chan struct{}, 1), make(chan struct{})
	require.NoError(t, eng.Registry().AddTool(&mcp.Tool{Name: "slow"}, func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		started <- struct{}{}
		<-release
		return mcp.TextResult("drained"), nil
	}))
	srv := tcp.New(eng, tcp.Options{Addr: "127.0.0.1:0", Loops: 2})
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	a := srv.Addr(ctx)
	require.NotNil(t, a)

	nc, err := net.Dial("tcp", a.String())
	require.NoError(t, err)
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(wait))
	c := &conn{c: nc, r: bufio.NewReader(nc)}
	c.init(t)
	require.NoError(t, c.write(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"slow"}}`))
	<-started

	drained := make(chan error, 1)
	go func() { drained <- eng.Shutdown(ctx) }()
	require.Eventually(t, eng.ShuttingDown, wait, time.Millisecond)
	require.NoError(t, c.write(`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"slow"}}`))
	m, err := c.read()
	require.NoError(t, err)
	require.NotNil(t, m.Error)
	assert.Equal(t, codec.CodeServerBusy, m.Error.Code)

	close(release)
	m, err = c.read()
	require.NoError(t, err)
	assert.Equal(t, "9", string(m.ID))
	txt, err := m.text()
	require.NoError(t, err)
	assert.Equal(t, "drained", txt)
	require.NoError(t, <-drained)
	require.NoError(t, srv.Shutdown(ctx))
	require.NoError(t, <-errc)
	assert.True(t, c.closed())
	nc.Close()
}

func TestAddrBeforeStart(t *testing.T) {
	eng := engine.New(engine.Options{})
	defer eng.Shutdown(context.Background())
	srv := tcp.New(eng, tcp.Options{Addr: "127.0.0.1:0"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	assert.Nil(t, srv.Addr(ctx), "Addr gives up with its ctx")
	assert.NoError(t, srv.Shutdown(context.Background()), "Shutdown before serving is a no-op")
	ctx, cancel = context.WithTimeout(context.Background(), wait)
	defer cancel()
	assert.Nil(t, srv.Addr(ctx), "Addr returns nil, at once, after Shutdown")
	assert.NoError(t, ctx.Err(), "Addr did not wait for its ctx")
	assert.NoError(t, srv.ListenAndServe(context.Background()), "ListenAndServe after Shutdown returns at once")
}

func TestListenFailure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	eng := engine.New(engine.Options{})
	defer eng.Shutdown(context.Background())
	srv := tcp.New(eng, tcp.Options{Addr: ln.Addr().String()})
	require.Error(t, srv.ListenAndServe(context.Background()), "the port is taken")
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	assert.Nil(t, srv.Addr(ctx), "Addr returns nil, at once, after a failed start")
}

// TestPartialWrites: messages split at odd points, arriving in separate
// reads, are framed whole; a read holding no complete frame loses nothing.
func TestPartialWrites(t *testing.T) {
	s := start(t, engine.Options{}, tcp.Options{})
	c := dial(t, s.addr)
	stream := initLine + "\n" + initializedLine + "\r\n" + echoLine(1, "split ünïcode") + "\n" + pechoLine(2, "pooled") + "\n" + addLine(3, 40, 2) + "\n"
	for i, n := 0, 1; i < len(stream); n = n%11 + 3 {
		end := min(i+n, len(stream))
		_, err := io.WriteString(c.c, stream[i:end])
		require.NoError(t, err)
		i = end
		time.Sleep(time.Millisecond) // let the server read each piece on its own: a real socket, nothing to wait on
	}
	want := map[string]string{`"init"`: "", "1": "split ünïcode", "2": "pooled", "3": "42"}
	for len(want) > 0 {
		m, err := c.read()
		require.NoError(t, err, "missing answers: %v", want)
		exp, ok := want[string(m.ID)]
		require.True(t, ok, "unexpected id %s", m.ID)
		delete(want, string(m.ID))
		if string(m.ID) == `"init"` {
			require.Nil(t, m.Error)
			continue
		}
		got, err := m.text()
		require.NoError(t, err)
		assert.Equal(t, exp, got)
	}
}

package tcp_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers/builtin"
	"github.com/mcpedge/mcpedge/transport/netlimit"
	"github.com/mcpedge/mcpedge/transport/tcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// limitErr reads the -32000 error a connection gets before the server
// closes it over a limit, and returns the limit it names.
func limitErr(t *testing.T, c *conn) string {
	t.Helper()
	for {
		m, err := c.read()
		require.NoError(t, err, "no error line before the close")
		if m.Error == nil {
			continue // an answer due before the limit hit
		}
		require.Equal(t, codec.CodeServerBusy, m.Error.Code, "error %+v", m.Error)
		var data struct {
			Limit string `json:"limit"`
		}
		require.NoError(t, codec.Unmarshal(m.Error.Data, &data), "data %s", m.Error.Data)
		require.True(t, c.closed(), "closed after the error")
		return data.Limit
	}
}

// dialFrom dials addr from the local address src (127.0.0.x: another client).
func dialFrom(t *testing.T, src, addr string) *conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: wait}
	c, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(wait)))
	return &conn{c: c, r: bufio.NewReaderSize(c, 64<<10)}
}

// TestConnLimitAnswer: a connection over a limit is told which one.
func TestConnLimitAnswer(t *testing.T) {
	t.Run("max-conns", func(t *testing.T) {
		s := start(t, engine.Options{}, tcp.Options{Conns: netlimit.New(1, 0)})
		a := dial(t, s.addr)
		a.init(t)
		assert.Equal(t, "max-conns", limitErr(t, dial(t, s.addr)))
		a.echo(t, 1, "unaffected")
	})
	t.Run("max-conns-per-ip", func(t *testing.T) {
		s := start(t, engine.Options{}, tcp.Options{Conns: netlimit.New(0, 2)})
		a, b := dialFrom(t, "127.0.0.1", s.addr), dialFrom(t, "127.0.0.1", s.addr)
		a.init(t)
		b.init(t)
		assert.Equal(t, "max-conns-per-ip", limitErr(t, dialFrom(t, "127.0.0.1", s.addr)))
		other := dialFrom(t, "127.0.0.2", s.addr) // another client is not held back
		other.init(t)
		other.echo(t, 1, "other address")
		a.echo(t, 2, "unaffected")
	})
}

// TestReadTimeout: a message that does not arrive whole within the read
// timeout, or a connection that never sends its first message, is closed;
// connections that complete their messages are not.
func TestReadTimeout(t *testing.T) {
	const rt = 200 * time.Millisecond
	s := start(t, engine.Options{}, tcp.Options{ReadTimeout: rt, IdleTimeout: -1})
	short := func(c *conn) *conn { c.c.SetDeadline(time.Now().Add(3 * time.Second)); return c }

	silent := short(dial(t, s.addr)) // never sends anything
	half := short(dial(t, s.addr))   // sends most of a message
	half.init(t)
	_, err := io.WriteString(half.c, echoLine(1, "never finished"))
	require.NoError(t, err)
	trickle := short(dial(t, s.addr)) // sends one message a byte at a time, too slowly
	trickle.init(t)
	busy := short(dial(t, s.addr)) // completes a message every 50 ms
	busy.init(t)

	done := make(chan struct{})
	var wg sync.WaitGroup
	// The trickler's message begins after this instant: its timeout, the
	// last of the three, cannot come sooner than rt after it.
	began := time.Now()
	wg.Add(1)
	go func() { // the trickler
		defer wg.Done()
		line := echoLine(2, strings.Repeat("t", 100))
		for i := 0; i < len(line); i++ {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if _, err := io.WriteString(trickle.c, line[i:i+1]); err != nil {
				return
			}
		}
	}()
	for _, c := range []*conn{silent, half, trickle} {
		assert.Equal(t, "read-timeout", limitErr(t, c))
	}
	close(done)
	wg.Wait()
	elapsed := time.Since(began)
	assert.GreaterOrEqual(t, elapsed, rt-50*time.Millisecond, "closed before the timeout")
	for i := range 12 { // 600 ms, three timeouts
		busy.echo(t, 10+i, "complete messages keep the connection")
		time.Sleep(50 * time.Millisecond) // a slow client on a real socket: what is tested
	}
}

// TestIdleTimeout: a connection with no traffic and nothing in flight is
// closed; one waiting on a long call is not.
func TestIdleTimeout(t *testing.T) {
	const it = 200 * time.Millisecond
	s := start(t, engine.Options{}, tcp.Options{ReadTimeout: -1, IdleTimeout: it})
	idle := dial(t, s.addr)
	// The idle connection's clock starts at its last traffic, which is
	// after this instant and before init returns: timing from any later
	// point (once the other connection's call started, say) would leave
	// the test at the mercy of the scheduler.
	began := time.Now()
	idle.init(t)
	waiting := dial(t, s.addr)
	waiting.init(t)
	require.NoError(t, waiting.write(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}`))
	<-s.started
	assert.Equal(t, "idle-timeout", limitErr(t, idle))
	// Traffic is stamped with the sweeper's coarse clock, which is up to
	// one tick (an eighth of the timeout) behind.
	assert.GreaterOrEqual(t, time.Since(began), it-it/8)
	time.Sleep(2 * it) // well past the timeout, but a call is in flight: what is tested
	close(s.release)
	m, err := waiting.read()
	require.NoError(t, err)
	txt, err := m.text()
	require.NoError(t, err)
	assert.Equal(t, "released", txt)
	waiting.echo(t, 2, "still open")
}

// TestBufferBudget: past MaxBuffered, the connections holding the most
// partial-message bytes are closed first, and only as many as needed.
func TestBufferBudget(t *testing.T) {
	const budget = 1 << 20
	s := start(t, engine.Options{}, tcp.Options{ReadTimeout: -1, IdleTimeout: -1, MaxBuffered: budget})
	partial := func(kb int) (*conn, string) {
		c := dial(t, s.addr)
		c.init(t)
		text := strings.Repeat("b", kb<<10)
		_, err := io.WriteString(c.c, echoLine(7, text)) // no newline yet
		require.NoError(t, err)
		return c, text
	}
	var held int64
	waitHeld := func() {
		require.Eventually(t, func() bool { return s.tcp.Buffered() >= held }, wait, time.Millisecond,
			"buffered %d, want %d", s.tcp.Buffered(), held)
	}
	big, _ := partial(400)
	held += int64(len(echoLine(7, strings.Repeat("b", 400<<10))))
	waitHeld()
	mid, midText := partial(300)
	small, smallText := partial(100)
	held += int64(len(echoLine(7, midText)) + len(echoLine(7, smallText)))
	waitHeld()
	require.Less(t, held, int64(budget))
	last, lastText := partial(300) // over the budget now: big goes, alone
	assert.Equal(t, "max-buffered", limitErr(t, big))
	for _, c := range []struct {
		c    *conn
		text string
	}{{mid, midText}, {small, smallText}, {last, lastText}} {
		require.NoError(t, c.c.write(""), "the rest of the message: its newline")
		m, err := c.c.read()
		require.NoError(t, err)
		got, err := m.text()
		require.NoError(t, err)
		assert.Equal(t, c.text, got)
	}
	require.Eventually(t, func() bool { return s.tcp.Buffered() == 0 }, wait, time.Millisecond)
}

// TestRestartAfterManyClosedConnections: a new listener binds the port
// at once although the server just closed many connections (their
// TIME_WAIT state needs SO_REUSEADDR).
func TestRestartAfterManyClosedConnections(t *testing.T) {
	eng := engine.New(engine.Options{})
	defer eng.Shutdown(context.Background())
	require.NoError(t, builtin.Install("bench", eng.Registry(), builtin.Env{}))
	srv := tcp.New(eng, tcp.Options{Addr: "127.0.0.1:0", Loops: 2})
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	a := srv.Addr(ctx)
	require.NotNil(t, a)
	var cs []*conn
	for range 200 {
		c := dial(t, a.String())
		cs = append(cs, c)
	}
	cs[0].init(t)
	require.Eventually(t, func() bool { return srv.Conns() == 200 }, wait, time.Millisecond)
	require.NoError(t, srv.Shutdown(ctx)) // the server closes first: its side waits in TIME_WAIT
	require.NoError(t, <-errc)
	for _, c := range cs {
		assert.True(t, c.closed())
		c.c.Close()
	}

	again := tcp.New(eng, tcp.Options{Addr: a.String(), Loops: 2})
	go func() { errc <- again.ListenAndServe(context.Background()) }()
	require.NotNil(t, again.Addr(ctx), "no second listener on %s", a)
	c := dial(t, a.String())
	c.init(t)
	c.echo(t, 1, "restarted")
	require.NoError(t, again.Shutdown(ctx))
	require.NoError(t, <-errc)
}

// TestListenErrorNamesCause: binding a port in use says so, with the
// address.
func TestListenErrorNamesCause(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	eng := engine.New(engine.Options{})
	defer eng.Shutdown(context.Background())
	err = tcp.New(eng, tcp.Options{Addr: ln.Addr().String()}).ListenAndServe(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "address already in use")
	assert.Contains(t, err.Error(), ln.Addr().String())
}

// fdServerEnv makes the test binary a server with few file descriptors
// (see TestAcceptErrorsDoNotStopServer).
const fdServerEnv = "MCPEDGE_TCP_TEST_FD_SERVER"

// TestMain lets the test binary run as that server.
func TestMain(m *testing.M) {
	if os.Getenv(fdServerEnv) != "" {
		os.Exit(fdServer())
	}
	os.Exit(m.Run())
}

// fdServer serves on an ephemeral port with RLIMIT_NOFILE at 64 and no
// connection limit, prints its address, and serves until stdin closes.
func fdServer() int {
	eng := engine.New(engine.Options{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err := builtin.Install("bench", eng.Registry(), builtin.Env{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv := tcp.New(eng, tcp.Options{Addr: "127.0.0.1:0", Loops: 2})
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe(context.Background()) }()
	a := srv.Addr(context.Background())
	if a == nil {
		fmt.Fprintln(os.Stderr, "no listener:", <-errc)
		return 1
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: 64, Max: 64}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(a.String())
	stop := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(stop) }()
	select {
	case <-stop:
	case err := <-errc:
		fmt.Fprintln(os.Stderr, "ListenAndServe returned:", err)
		return 3
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	_ = eng.Shutdown(ctx)
	if err := srv.Shutdown(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "shutdown:", err)
		return 1
	}
	return 0
}

// TestAcceptErrorsDoNotStopServer: a server out of file descriptors
// (accept fails with EMFILE) keeps serving the sessions it has and serves
// new ones once descriptors free up.
func TestAcceptErrorsDoNotStopServer(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fdServerEnv+"=1")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr logBuffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	defer func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("server: %v\n%s", err, stderr.String())
		}
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "server: %s", stderr.String())
	addr := strings.TrimSpace(line)

	first := dial(t, addr)
	first.init(t)
	// Far more connections than descriptors: the server accepts until
	// EMFILE; the rest wait in its backlog.
	var flood []net.Conn
	for range 150 {
		c, err := net.DialTimeout("tcp", addr, wait)
		require.NoError(t, err)
		flood = append(flood, c)
	}
	require.Eventually(t, func() bool { return strings.Contains(stderr.String(), "too many open files") }, wait, 10*time.Millisecond,
		"accept never failed: %s", stderr.String())
	first.echo(t, 1, "still served while accept fails")
	for _, c := range flood {
		c.Close()
	}
	// Once descriptors free up, new connections are served.
	require.Eventually(t, func() bool {
		nc, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(3 * time.Second))
		c := &conn{c: nc, r: bufio.NewReader(nc)}
		if c.write(initLine, initializedLine, echoLine(2, "new")) != nil {
			return false
		}
		for range 2 {
			if m, err := c.read(); err != nil || m.Error != nil {
				return false
			}
		}
		return true
	}, wait, 50*time.Millisecond, "new connections not served: %s", stderr.String())
	first.echo(t, 3, "and the first still is")
}

// A session the engine ends itself (here, after unanswered keep-alive
// pings) takes its connection with it, instead of leaving an open socket
// whose session answers nothing.
func TestEngineClosedSessionClosesConnection(t *testing.T) {
	s := start(t, engine.Options{KeepAlive: 20 * time.Millisecond, KeepAliveMisses: 2}, tcp.Options{})
	c := dial(t, s.addr)
	c.init(t)
	require.NoError(t, c.c.SetReadDeadline(time.Now().Add(wait)))
	require.True(t, c.closed(), "the connection outlived its session")
	other := dial(t, s.addr)
	other.init(t)
}

// writeChunks writes b in pieces of size n, as a client on a slow link
// would, so that the server reads it in many reads.
func writeChunks(t *testing.T, c net.Conn, b []byte, n int) {
	t.Helper()
	for len(b) > 0 {
		k := min(n, len(b))
		_, err := c.Write(b[:k])
		require.NoError(t, err)
		b = b[k:]
	}
}

// writeUntilClosed writes b in pieces of n bytes, as writeChunks does,
// until the server closes the connection (a write that fails with a reset
// or a broken pipe); it returns the bytes written and whether the server
// closed it first.
func writeUntilClosed(t *testing.T, c net.Conn, b []byte, n int) (int, bool) {
	t.Helper()
	sent := 0
	for sent < len(b) {
		k, err := c.Write(b[sent:min(sent+n, len(b))])
		sent += k
		if isReset(err) {
			return sent, true
		}
		require.NoError(t, err)
	}
	return sent, false
}

// A message far larger than a read is assembled out of gnet's buffer
// (each byte copied and scanned once, not once per read: defect 8's
// stall) and served whole, with the messages that follow it in the same
// read, on both framings.
func TestBigMessageAssembled(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	for _, framer := range []codec.Framer{codec.NewlineFramer{}, codec.ContentLengthFramer{}} {
		t.Run(framer.Name(), func(t *testing.T) {
			s := start(t, engine.Options{}, tcp.Options{Framer: framer})
			c := dial(t, s.addr)
			var stream []byte
			for _, line := range []string{initLine, initializedLine, pechoLine(1, big), echoLine(2, "after"), pechoLine(3, big), addLine(4, 1, 2)} {
				stream = framer.AppendFrame(stream, []byte(line))
			}
			writeChunks(t, c.c, stream, 3000)
			want := map[string]string{`"init"`: "", "1": big, "2": "after", "3": big, "4": "3"}
			for len(want) > 0 {
				var m msg
				if _, nl := framer.(codec.NewlineFramer); nl {
					var err error
					m, err = c.read()
					require.NoError(t, err)
				} else {
					m = readContentLength(t, c)
				}
				exp, ok := want[string(m.ID)]
				require.True(t, ok, "unexpected answer %s", m.ID)
				delete(want, string(m.ID))
				if exp != "" {
					txt, err := m.text()
					require.NoError(t, err)
					require.Equal(t, len(exp), len(txt))
				}
			}
			// The stream is still framed right after.
			_, err := c.c.Write(framer.AppendFrame(nil, []byte(addLine(5, 2, 2))))
			require.NoError(t, err)
			var m msg
			if _, nl := framer.(codec.NewlineFramer); nl {
				m, err = c.read()
				require.NoError(t, err)
			} else {
				m = readContentLength(t, c)
			}
			txt, err := m.text()
			require.NoError(t, err)
			require.Equal(t, "4", txt)
		})
	}
}

func readContentLength(t *testing.T, c *conn) msg {
	t.Helper()
	var n int
	for {
		line, err := c.r.ReadString('\n')
		require.NoError(t, err)
		if line == "\r\n" {
			break
		}
		_, err = fmt.Sscanf(line, "Content-Length: %d", &n)
		require.NoError(t, err)
	}
	body := make([]byte, n)
	_, err := io.ReadFull(c.r, body)
	require.NoError(t, err)
	var m msg
	require.NoError(t, codec.Unmarshal(body, &m))
	return m
}

// An assembled message that outgrows the size limit is refused like any
// other: a parse error, then the close. The server closes as soon as the
// message passes the limit, while the client may still be sending the
// rest: a write then fails (the connection reset, or a broken pipe),
// which is the close, not an error; the answer sent before the close is
// read all the same.
func TestBigMessageOverLimitWhileAssembled(t *testing.T) {
	const limit = 256 << 10
	s := start(t, engine.Options{MaxMessage: limit}, tcp.Options{})
	c := dial(t, s.addr)
	c.init(t)
	prefix := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"text":"`
	if sent, closed := writeUntilClosed(t, c.c, []byte(prefix+strings.Repeat("x", 300<<10)), 4096); closed {
		require.Greater(t, sent, limit, "the server closed the connection before the message passed the limit")
	}
	m, err := c.read()
	require.NoError(t, err)
	require.NotNil(t, m.Error)
	require.Equal(t, codec.CodeParseError, m.Error.Code)
	require.True(t, c.closed())
}

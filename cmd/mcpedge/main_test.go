package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/transport/netlimit"
	"github.com/mcpedge/mcpedge/transport/tcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const wait = 10 * time.Second

func TestParseDefaults(t *testing.T) {
	c, err := parse(nil, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:7400", c.tcp)
	assert.False(t, c.stdio)
	assert.Equal(t, "demo", c.handlers)
	assert.Equal(t, "newline", c.framing)
	assert.Equal(t, codec.DefaultMaxMessage, c.maxMessage)
	assert.Equal(t, 8<<20, c.maxOutbound)
	assert.Equal(t, 10*time.Second, c.drain)
	assert.Equal(t, "info", c.logLevel)
}

func TestParseHTTPSurvivalFlags(t *testing.T) {
	c, err := parse(nil, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 30*time.Second, c.readTimeout)
	assert.Equal(t, 30*time.Second, c.writeTimeout)
	assert.Equal(t, 5*time.Minute, c.idleTimeout)
	assert.Equal(t, 30*time.Second, c.sessionInit)
	assert.Equal(t, 65536, c.maxSessions)
	assert.Equal(t, -1, c.maxSessionsPerIP, "the default share")
	assert.Equal(t, 0, sessionsPerIP(c.maxSessionsPerIP), "HTTPOptions' default share")
	assert.Equal(t, -1, sessionsPerIP(0), "0: none")
	assert.Equal(t, 8, sessionsPerIP(8))
	assert.Equal(t, engine.DefaultMaxSubscriptions, c.maxSubscriptions)

	t.Setenv("MCPEDGE_MAX_SESSIONS_PER_IP", "8")
	t.Setenv("MCPEDGE_SESSION_INIT_TIMEOUT", "5s")
	c, err = parse([]string{"-read-timeout", "3s", "-write-timeout=4s", "-idle-timeout", "1m", "-max-sessions", "100"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 3*time.Second, c.readTimeout)
	assert.Equal(t, 4*time.Second, c.writeTimeout)
	assert.Equal(t, time.Minute, c.idleTimeout)
	assert.Equal(t, 5*time.Second, c.sessionInit)
	assert.Equal(t, 100, c.maxSessions)
	assert.Equal(t, 8, c.maxSessionsPerIP)

	t.Setenv("MCPEDGE_MAX_SUBSCRIPTIONS", "5")
	c, err = parse(nil, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 5, c.maxSubscriptions)
	c, err = parse([]string{"-max-subscriptions", "0"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 0, c.maxSubscriptions)
}

func TestParseFlagsAndEnv(t *testing.T) {
	t.Setenv("MCPEDGE_TCP", "127.0.0.1:9000")
	t.Setenv("MCPEDGE_MAX_MESSAGE", "2048")
	t.Setenv("MCPEDGE_STDIO", "true")
	t.Setenv("MCPEDGE_HANDLERS", "bench")
	t.Setenv("MCPEDGE_DRAIN", "3s")
	t.Setenv("MCPEDGE_MAX_CONNS", "7")
	c, err := parse(nil, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:9000", c.tcp, "MCPEDGE_TCP is -tcp's twin")
	assert.Equal(t, 2048, c.maxMessage, "MCPEDGE_MAX_MESSAGE is -max-message's twin")
	assert.True(t, c.stdio)
	assert.Equal(t, "bench", c.handlers)
	assert.Equal(t, 3*time.Second, c.drain)
	assert.Equal(t, 7, c.maxConns)

	// A flag given wins over its twin.
	c, err = parse([]string{"-tcp", "127.0.0.1:9001", "-max-message=4096", "-framing", "content-length", "-loops", "3", "-workers", "9", "-page-size", "5", "-log-level", "debug"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:9001", c.tcp)
	assert.Equal(t, 4096, c.maxMessage)
	assert.Equal(t, "content-length", c.framing)
	assert.Equal(t, 3, c.loops)
	assert.Equal(t, 9, c.workers)
	assert.Equal(t, 5, c.pageSize)
	assert.Equal(t, "debug", c.logLevel)
}

func TestEdgeLimitFlags(t *testing.T) {
	c, err := parse(nil, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, netlimit.DefaultMaxConns(), c.maxConns, "-max-conns derives from RLIMIT_NOFILE")
	assert.Zero(t, c.maxConnsPerIP)
	assert.Equal(t, 30*time.Second, c.readTimeout)
	assert.Equal(t, 5*time.Minute, c.idleTimeout)
	assert.Equal(t, tcp.DefaultMaxBuffered(), c.maxBuffered)

	t.Setenv("MCPEDGE_MAX_CONNS_PER_IP", "3")
	t.Setenv("MCPEDGE_READ_TIMEOUT", "2s")
	t.Setenv("MCPEDGE_MAX_BUFFERED", "1048576")
	c, err = parse([]string{"-idle-timeout", "0", "-max-conns", "0"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 3, c.maxConnsPerIP)
	assert.Equal(t, 2*time.Second, c.readTimeout)
	assert.Equal(t, int64(1<<20), c.maxBuffered)
	assert.Zero(t, c.idleTimeout)
	assert.Zero(t, c.maxConns)
	assert.Equal(t, time.Duration(-1), orNone(c.idleTimeout), "0 on the command line is none in Options")
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"unknown flag", []string{"-nope"}, nil, "-nope: unknown flag"},
		{"bad number", []string{"-loops", "many"}, nil, `-loops "many": not a whole number`},
		{"extra argument", []string{"serve"}, nil, "unexpected arguments"},
		{"bad env twin", nil, map[string]string{"MCPEDGE_MAX_CONNS": "lots"}, "MCPEDGE_MAX_CONNS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, err := parse(tc.args, io.Discard)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestRunExitCodes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"version", []string{"-version"}, 0, "mcpedge " + engine.Version, ""},
		{"help", []string{"-h"}, 0, "Usage: mcpedge", ""},
		{"help long", []string{"--help"}, 0, "MCPEDGE_", ""},
		{"unknown handler set", []string{"-stdio", "-handlers", "nope"}, 2, "", "unknown handler set"},
		{"unknown flag", []string{"-bogus"}, 2, "", "-bogus: unknown flag"},
		{"unknown framing", []string{"-stdio", "-framing", "xml"}, 2, "", "unknown framing"},
		{"bad log level", []string{"-stdio", "-log-level", "chatty"}, 2, "", "-log-level"},
		{"nothing to serve", []string{"-tcp", "", "-http", ""}, 2, "", "nothing to serve"},
		{"extra argument", []string{"now"}, 2, "", "unexpected arguments"},
		{"state key file missing", []string{"-stdio", "-state-key-file", "/nonexistent/keys"}, 2, "", "-state-key-file"},
		{"state key short", []string{"-stdio", "-state-key-file", writeFile(t, "abcd\n")}, 2, "", "at least 32 bytes"},
		{"state key not hex", []string{"-stdio", "-state-key-file", writeFile(t, strings.Repeat("zz", 32)+"\n")}, 2, "", "not hex"},
		{"state key file empty", []string{"-stdio", "-state-key-file", writeFile(t, "# none\n")}, 2, "", "no key"},
		{"state ttl", []string{"-stdio", "-state-ttl", "0s"}, 2, "", "-state-ttl"},
		{"unknown version", []string{"-stdio", "-versions", "2025-11-25,1999-01-01"}, 2, "", "-versions: unknown protocol revision \"1999-01-01\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tc.args, strings.NewReader(""), &stdout, &stderr)
			assert.Equal(t, tc.code, code, "stderr: %s", stderr.String())
			assert.Contains(t, stdout.String(), tc.stdout)
			assert.Contains(t, stderr.String(), tc.stderr)
		})
	}
}

// writeFile writes content to a temporary file and returns its path.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

type msg struct {
	ID     codec.RawJSON `json:"id"`
	Method string        `json:"method"`
	Params codec.RawJSON `json:"params"`
	Result codec.RawJSON `json:"result"`
	Error  *codec.Error  `json:"error"`
}

// stdioSession runs run() with -stdio over pipes.
type stdioSession struct {
	t    *testing.T
	in   *io.PipeWriter
	out  *bufio.Reader
	code chan int
}

func startStdio(t *testing.T, args ...string) *stdioSession {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &stdioSession{t: t, in: inW, out: bufio.NewReader(outR), code: make(chan int, 1)}
	var stderr lockedBuffer
	go func() {
		s.code <- run(append([]string{"-stdio"}, args...), inR, outW, &stderr)
		outW.Close()
	}()
	t.Cleanup(func() {
		inW.Close()
		outR.Close()
		if t.Failed() {
			t.Logf("stderr:\n%s", stderr.String())
		}
	})
	return s
}

func (s *stdioSession) call(id int, method, params string) msg {
	s.t.Helper()
	line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", id, method, params)
	_, err := io.WriteString(s.in, line)
	require.NoError(s.t, err)
	for {
		b, err := s.out.ReadBytes('\n')
		require.NoError(s.t, err)
		var m msg
		require.NoError(s.t, codec.Unmarshal(b, &m))
		if m.Method != "" { // a notification: not our answer
			continue
		}
		require.Equal(s.t, fmt.Sprint(id), string(m.ID))
		require.Nil(s.t, m.Error, "%s: %+v", method, m.Error)
		return m
	}
}

func toolText(t *testing.T, m msg) string {
	t.Helper()
	var r mcp.CallToolResult
	require.NoError(t, codec.Unmarshal(m.Result, &r))
	require.NotEmpty(t, r.Content)
	require.False(t, r.IsError, "tool error: %s", r.Content[0].Text)
	return r.Content[0].Text
}

// TestStdioBench runs the command in-process on the bench set over pipes.
func TestStdioBench(t *testing.T) {
	s := startStdio(t, "-handlers", "bench", "-log-level", "error")
	m := s.call(1, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"cmd-test","version":"1"}}`)
	var init mcp.InitializeResult
	require.NoError(t, codec.Unmarshal(m.Result, &init))
	assert.Equal(t, mcp.Version20251125, init.ProtocolVersion)
	_, err := io.WriteString(s.in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	require.NoError(t, err)

	m = s.call(2, "tools/list", `{}`)
	var tools mcp.ListToolsResult
	require.NoError(t, codec.Unmarshal(m.Result, &tools))
	names := []string{}
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	assert.ElementsMatch(t, []string{"echo", "add"}, names)

	assert.Equal(t, `same "text" ✓`, toolText(t, s.call(3, "tools/call", `{"name":"echo","arguments":{"text":"same \"text\" ✓"}}`)))
	assert.Equal(t, "5", toolText(t, s.call(4, "tools/call", `{"name":"add","arguments":{"a":2,"b":3}}`)))
	assert.Equal(t, "0.75", toolText(t, s.call(5, "tools/call", `{"name":"add","arguments":{"a":0.5,"b":0.25}}`)))

	m = s.call(6, "resources/read", `{"uri":"mem://hello"}`)
	var rr mcp.ReadResourceResult
	require.NoError(t, codec.Unmarshal(m.Result, &rr))
	require.Len(t, rr.Contents, 1)
	assert.Equal(t, "hello", rr.Contents[0].Text)

	m = s.call(7, "prompts/get", `{"name":"greet","arguments":{"name":"Ada"}}`)
	var gp mcp.GetPromptResult
	require.NoError(t, codec.Unmarshal(m.Result, &gp))
	require.NotEmpty(t, gp.Messages)
	assert.Contains(t, gp.Messages[0].Content.Text, "Ada")

	require.NoError(t, s.in.Close())
	select {
	case code := <-s.code:
		assert.Equal(t, 0, code)
	case <-time.After(wait):
		t.Fatal("run did not return at EOF")
	}
}

func TestStdioContentLength(t *testing.T) {
	inR, inW := io.Pipe()
	var out lockedBuffer
	code := make(chan int, 1)
	go func() {
		code <- run([]string{"-stdio", "-handlers", "bench", "-framing", "content-length"}, inR, &out, io.Discard)
	}()
	f := codec.ContentLengthFramer{}
	var in []byte
	in = f.AppendFrame(in, []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	_, err := inW.Write(in)
	require.NoError(t, err)
	require.NoError(t, inW.Close())
	select {
	case c := <-code:
		require.Equal(t, 0, c)
	case <-time.After(wait):
		t.Fatal("run did not return")
	}
	frame, n, err := f.Next([]byte(out.String()))
	require.NoError(t, err)
	require.NotZero(t, n, "output %q", out.String())
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":1,"result":{}}`, string(frame))
}

// lockedBuffer is a bytes.Buffer safe for a writer and a reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var addrRE = regexp.MustCompile(`addr=(127\.0\.0\.1:[0-9]+)`)

// TestSIGTERMDrains builds the command, serves TCP on an ephemeral port,
// starts a slow call, sends SIGTERM and checks the answer still arrives and
// the process exits 0.
func TestSIGTERMDrains(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "mcpedge")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())

	cmd := exec.CommandContext(ctx, bin, "-tcp", "127.0.0.1:0", "-http", "", "-admin", "", "-handlers", "demo", "-drain", "5s")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer cmd.Process.Kill()

	var log lockedBuffer
	addrc := make(chan string, 1)
	logged := make(chan struct{}) // closed once the log is read to its end
	go func() {
		defer close(logged)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.Write(append(sc.Bytes(), '\n'))
			if m := addrRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addrc <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	var addr string
	select {
	case addr = <-addrc:
	case <-time.After(wait):
		t.Fatalf("no addr= in the log:\n%s", log.String())
	}

	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(wait))
	r := bufio.NewReader(nc)
	read := func() msg {
		t.Helper()
		b, err := r.ReadBytes('\n')
		require.NoError(t, err, "log:\n%s", log.String())
		var m msg
		require.NoError(t, codec.Unmarshal(b, &m))
		return m
	}
	_, err = io.WriteString(nc, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"sig","version":"1"}}}`+"\n"+
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"count","arguments":{"n":5,"delayMs":100},"_meta":{"progressToken":"c"}}}`+"\n")
	require.NoError(t, err)
	require.Nil(t, read().Error)
	require.Equal(t, mcp.NotificationProgress, read().Method, "the slow call is running")

	start := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	var result msg
	for {
		m := read()
		if m.Method == mcp.NotificationProgress {
			continue
		}
		result = m
		break
	}
	assert.Equal(t, "2", string(result.ID))
	require.Nil(t, result.Error, "log:\n%s", log.String())
	assert.Contains(t, string(result.Result), "counted to 5")

	// The log to its end (the exit closes it) before Wait, which closes
	// the pipe and could cut off the last lines unread.
	select {
	case <-logged:
	case <-time.After(wait):
	}
	err = cmd.Wait()
	require.NoError(t, err, "exit status; log:\n%s", log.String())
	assert.Equal(t, 0, cmd.ProcessState.ExitCode())
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Contains(t, log.String(), "shutting down")
}

// childEnv makes the test binary run mcpedge itself (see TestMain) with
// the arguments of MCPEDGE_TEST_ARGS, under a soft RLIMIT_NOFILE of
// MCPEDGE_TEST_NOFILE; set to "argv", with its own arguments, as a
// script calls the binary (TestClusterDocExample).
const childEnv = "MCPEDGE_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "argv" {
		os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	if os.Getenv(childEnv) != "" {
		if n, err := strconv.ParseUint(os.Getenv("MCPEDGE_TEST_NOFILE"), 10, 64); err == nil {
			var rl syscall.Rlimit
			if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
				fmt.Fprintln(os.Stderr, "getrlimit:", err)
				os.Exit(3)
			}
			rl.Cur = n
			if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
				fmt.Fprintln(os.Stderr, "setrlimit:", err)
				os.Exit(3)
			}
		}
		os.Exit(run(strings.Fields(os.Getenv("MCPEDGE_TEST_ARGS")), os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestHTTPSurvivesDescriptorExhaustion: with few file descriptors, more
// connections than it can accept made accept fail with EMFILE, which
// ended fasthttp's Serve and the process (exit 1). The server now backs
// off, and serves again once descriptors are free. -max-conns is off here:
// its default, derived from the same limit, would refuse the connections
// before accept could fail.
func TestHTTPSurvivesDescriptorExhaustion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", "MCPEDGE_TEST_NOFILE=64", "MCPEDGE_ADMIN=",
		"MCPEDGE_TEST_ARGS=-tcp= -http 127.0.0.1:0 -max-conns 0 -log-level info")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer cmd.Process.Kill()

	var log lockedBuffer
	addrc := make(chan string, 1)
	acceptFailed := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		var once sync.Once
		for sc.Scan() {
			log.Write(append(sc.Bytes(), '\n'))
			if m := addrRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addrc <- m[1]:
				default:
				}
			}
			if strings.Contains(sc.Text(), "accept failed") {
				once.Do(func() { close(acceptFailed) })
			}
		}
	}()
	exited := make(chan error, 1)
	var addr string
	select {
	case addr = <-addrc:
	case <-time.After(wait):
		t.Fatalf("no addr= in the log:\n%s", log.String())
	}
	go func() { exited <- cmd.Wait() }()

	// Twice as many connections as the server has descriptors.
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < 128; i++ {
		c, err := net.DialTimeout("tcp", addr, wait)
		if err != nil {
			select {
			case err := <-exited:
				t.Fatalf("the server exited (%v):\n%s", err, log.String())
			case <-time.After(wait):
				t.Fatalf("dial: %v\n%s", err, log.String())
			}
		}
		conns = append(conns, c)
	}
	select {
	case <-acceptFailed:
	case err := <-exited:
		t.Fatalf("the server exited (%v):\n%s", err, log.String())
	case <-time.After(wait):
		t.Fatalf("no accept error logged:\n%s", log.String())
	}
	for _, c := range conns {
		c.Close()
	}
	conns = nil

	// Served again once the connections are gone.
	hc := &http.Client{Timeout: wait}
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"fd","version":"1"}}}`
	var resp *http.Response
	deadline := time.Now().Add(wait)
	for {
		hr, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/mcp", strings.NewReader(initialize))
		hr.Header.Set("Content-Type", "application/json")
		hr.Header.Set("Accept", "application/json, text/event-stream")
		if resp, err = hc.Do(hr); err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "not served again: %v\n%s", err, log.String())
		// Retry: the process's accept loop backs off on its own, with
		// nothing to wait on from here but the server exiting.
		select {
		case err := <-exited:
			t.Fatalf("the server exited (%v):\n%s", err, log.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, string(b))

	select {
	case err := <-exited:
		t.Fatalf("the server exited (%v):\n%s", err, log.String())
	default:
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		require.NoError(t, err, "exit status; log:\n%s", log.String())
	case <-time.After(wait):
		t.Fatalf("no exit after SIGTERM:\n%s", log.String())
	}
}

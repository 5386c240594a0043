package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRunFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		name, stderr string
		args         []string
	}{
		{"bad log format", "-log-format", []string{"-stdio", "-log-format", "xml"}},
		{"lame duck past drain", "-lame-duck", []string{"-stdio", "-drain", "1s", "-lame-duck", "2s"}},
		{"lame duck negative", "-lame-duck", []string{"-stdio", "-lame-duck", "-1s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			assert.Equal(t, 2, run(tc.args, strings.NewReader(""), &stdout, &stderr))
			assert.Contains(t, stderr.String(), tc.stderr)
		})
	}
}

// child is the command run as a child process (see TestMain).
type child struct {
	t    *testing.T
	cmd  *exec.Cmd
	log  *lockedBuffer
	addr string
	done chan struct{} // closed when stderr is read to its end
}

// startChild runs mcpedge with args and waits for the address it serves.
func startChild(t *testing.T, args string) *child {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	// The admin listener off unless args name one: its default port may
	// be another test's (a port taken stops the node).
	cmd.Env = append(os.Environ(), childEnv+"=1", "MCPEDGE_TEST_ARGS="+args, "MCPEDGE_ADMIN=")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	c := &child{t: t, cmd: cmd, log: &lockedBuffer{}, done: make(chan struct{})}
	addrc := make(chan string, 1)
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			c.log.Write(append(sc.Bytes(), '\n'))
			if m := addrRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addrc <- m[1]:
				default:
				}
			} else if i := strings.Index(sc.Text(), `"addr":"127.0.0.1:`); i >= 0 {
				a := sc.Text()[i+len(`"addr":"`):]
				select {
				case addrc <- a[:strings.IndexByte(a, '"')]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr) // past a line too long to scan: the child never blocks on a full pipe
	}()
	select {
	case c.addr = <-addrc:
	case <-time.After(wait):
		t.Fatalf("no addr in the log:\n%s", c.log.String())
	}
	return c
}

// stop sends sig and returns the exit code and how long the exit took.
// The log is read to its end, which the child's exit closes, before
// Wait: Wait closes the pipe, and called first it could cut off the last
// lines unread (a loaded machine once lost "drain incomplete" so).
func (c *child) stop(sig os.Signal) (int, time.Duration) {
	c.t.Helper()
	start := time.Now()
	require.NoError(c.t, c.cmd.Process.Signal(sig))
	select {
	case <-c.done:
	case <-time.After(wait): // not exited: Wait waits, then ends the read
	}
	err := c.cmd.Wait()
	elapsed := time.Since(start)
	<-c.done
	var ee *exec.ExitError
	if err != nil && !errorsAs(err, &ee) {
		c.t.Fatalf("wait: %v", err)
	}
	return c.cmd.ProcessState.ExitCode(), elapsed
}

func errorsAs(err error, ee **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	*ee = e
	return ok
}

// tcpInit dials the child's TCP address and initializes a session.
func tcpInit(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	require.NoError(t, nc.SetDeadline(time.Now().Add(wait)))
	r := bufio.NewReader(nc)
	_, err = io.WriteString(nc, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n"+
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	require.NoError(t, err)
	_, err = r.ReadBytes('\n')
	require.NoError(t, err)
	return nc, r
}

// TestSIGTERMExitsNonZeroWhenCut: a call that outlives -drain is cut, and
// the process says so with exit status 1, right after -drain.
func TestSIGTERMExitsNonZeroWhenCut(t *testing.T) {
	c := startChild(t, "-tcp 127.0.0.1:0 -http= -drain 300ms")
	nc, r := tcpInit(t, c.addr)
	_, err := io.WriteString(nc, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"count","arguments":{"n":100,"delayMs":1000},"_meta":{"progressToken":"p"}}}`+"\n")
	require.NoError(t, err)
	line, err := r.ReadBytes('\n')
	require.NoError(t, err)
	require.Contains(t, string(line), "notifications/progress", "the long call is running")
	code, took := c.stop(syscall.SIGTERM)
	assert.Equal(t, 1, code, "log:\n%s", c.log.String())
	assert.Less(t, took, wait/2)
	assert.Contains(t, c.log.String(), "drain incomplete")
}

// TestSIGTERMEndsTasks: with a 2026-07-28 task running, SIGTERM cancels
// it and the drain ends as soon as its handler returns, exit status 0; it
// used to wait out -drain and log "drain incomplete active=0".
func TestSIGTERMEndsTasks(t *testing.T) {
	c := startChild(t, "-tcp 127.0.0.1:0 -http= -handlers conformance -drain 20s")
	nc, err := net.Dial("tcp", c.addr)
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	require.NoError(t, nc.SetDeadline(time.Now().Add(wait)))
	_, err = io.WriteString(nc, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow_compute","arguments":{"seconds":600},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`+"\n")
	require.NoError(t, err)
	line, err := bufio.NewReader(nc).ReadBytes('\n')
	require.NoError(t, err)
	require.Contains(t, string(line), `"resultType":"task"`, "the task is running")
	code, _ := c.stop(syscall.SIGTERM)
	assert.Equal(t, 0, code, "log:\n%s", c.log.String())
	assert.NotContains(t, c.log.String(), "drain incomplete")
}

// TestSIGHUPDoesNotKill: SIGHUP is logged and the server serves on; a
// later SIGTERM with nothing in flight exits 0.
func TestSIGHUPDoesNotKill(t *testing.T) {
	c := startChild(t, "-tcp 127.0.0.1:0 -http=")
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool { return strings.Contains(c.log.String(), "SIGHUP") }, wait, time.Millisecond)
	tcpInit(t, c.addr) // still serving
	code, _ := c.stop(syscall.SIGTERM)
	assert.Equal(t, 0, code, "log:\n%s", c.log.String())
}

// TestSIGTERMIdleKeepAliveIsPrompt: idle keep-alive HTTP connections do
// not hold the exit for -drain: they are closed at once.
func TestSIGTERMIdleKeepAliveIsPrompt(t *testing.T) {
	const drain = 10 * time.Second
	c := startChild(t, "-tcp= -http 127.0.0.1:0 -drain "+drain.String())
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}, Timeout: wait}
	defer hc.CloseIdleConnections()
	for range 4 {
		req, err := http.NewRequest(http.MethodPost, "http://"+c.addr+"/mcp",
			strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := hc.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	code, took := c.stop(syscall.SIGTERM)
	assert.Equal(t, 0, code, "log:\n%s", c.log.String())
	assert.Less(t, took, drain/2, "the exit waited for idle keep-alive connections")
}

// TestLogFormatJSON: -log-format json writes one JSON object a line, and
// at debug a line for each connection opened and closed, with its reason.
func TestLogFormatJSON(t *testing.T) {
	c := startChild(t, "-tcp 127.0.0.1:0 -http= -log-format json -log-level debug")
	nc, _ := tcpInit(t, c.addr)
	nc.Close()
	require.Eventually(t, func() bool { return strings.Contains(c.log.String(), "tcp connection closed") }, wait, time.Millisecond)
	code, _ := c.stop(syscall.SIGTERM)
	assert.Equal(t, 0, code)
	var opened, closed bool
	for _, line := range strings.Split(strings.TrimSpace(c.log.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), "not JSON: %q", line)
		require.Contains(t, m, "level")
		require.Contains(t, m, "msg")
		switch m["msg"] {
		case "tcp connection opened":
			opened = true
		case "tcp connection closed":
			closed = true
			assert.NotEmpty(t, m["reason"], "a close line names its reason")
		}
	}
	assert.True(t, opened, "no open line")
	assert.True(t, closed, "no close line")
}

// TestSecretsNeverLogged: at debug, neither an Authorization header nor a
// token-looking parameter reaches the log, whatever the request.
func TestSecretsNeverLogged(t *testing.T) {
	const bearer, token = "sekr3t-bearer-9f8e7d", "tok-4b3c2a1-SECRET"
	c := startChild(t, "-tcp= -http 127.0.0.1:0 -log-level debug")
	hc := &http.Client{Timeout: wait}
	defer hc.CloseIdleConnections()
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"},"token":"` + token + `"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"nope","arguments":{"api_key":"` + token + `","token":"` + token + `"}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"bogus/` + token + `","params":{"password":"` + token + `"}}`,
		`{not json ` + token,
	} {
		req, err := http.NewRequest(http.MethodPost, "http://"+c.addr+"/mcp?access_token="+token, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+bearer)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := hc.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	code, _ := c.stop(syscall.SIGTERM)
	assert.Equal(t, 0, code)
	log := c.log.String()
	assert.Contains(t, log, "level=DEBUG", "the test runs at debug")
	assert.NotContains(t, log, bearer)
	assert.NotContains(t, log, token)
}

// TestRedact: whatever a layer logs, a secret attribute or a secret inside
// a value is masked.
func TestRedact(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLogger(&buf, "json", slog.LevelDebug)
	require.NoError(t, err)
	log.Debug("request",
		"authorization", "Bearer abc.def.ghi",
		"headers", "Host: x\r\nAuthorization: Bearer abc.def.ghi\r\n",
		"query", "a=1&access_token=qwerty123&b=2",
		"params", `{"name":"x","arguments":{"token":"qwerty123","api_key":"qwerty123"}}`,
		slog.Group("req", "cookie", "session=qwerty123"),
		"err", io.ErrUnexpectedEOF,
	)
	out := buf.String()
	assert.NotContains(t, out, "abc.def.ghi")
	assert.NotContains(t, out, "qwerty123")
	assert.Contains(t, out, "[REDACTED]")
	assert.Contains(t, out, `\"name\":\"x\"`, "the rest of a value is kept")
	var m map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &m))
}

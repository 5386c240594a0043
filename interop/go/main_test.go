package interop

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The two protocol eras the tests cover.
const (
	v2025 = "2025-11-25"
	v2026 = "2026-07-28"
)

// Bounds: one scenario (a subtest), and a server's start.
const (
	scenarioTimeout = 20 * time.Second
	startTimeout    = 15 * time.Second
)

// Handler sets of cmd/mcpedge (handlers/builtin). conformance has the
// tools that ask the client for input (test_elicitation, test_sampling),
// static resources and prompts; demo has board_write and the
// mem://board/{name} template, whose writes notify subscribers.
const (
	setConformance = "conformance"
	setDemo        = "demo"
)

// serverInfoName is the identity the conformance set answers with.
const serverInfoName = "mcp-conformance-test-server"

// mcpedgeBin is the server binary under test.
var mcpedgeBin string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if bin := os.Getenv("MCPEDGE_BIN"); bin != "" {
		abs, err := filepath.Abs(bin)
		if err != nil {
			fmt.Fprintln(os.Stderr, "interop: MCPEDGE_BIN:", err)
			return 2
		}
		if _, err := os.Stat(abs); err != nil {
			fmt.Fprintln(os.Stderr, "interop: MCPEDGE_BIN:", err)
			return 2
		}
		mcpedgeBin = abs
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "mcpedge-interop-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "interop:", err)
		return 2
	}
	defer os.RemoveAll(dir)
	mcpedgeBin = filepath.Join(dir, "mcpedge")
	// The repository root is two levels up; its module builds the binary.
	build := exec.Command("go", "build", "-o", mcpedgeBin, "./cmd/mcpedge")
	build.Dir = filepath.Join("..", "..")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "interop: building mcpedge:", err)
		return 2
	}
	return m.Run()
}

// ctxFor returns a context bounded by scenarioTimeout and by the test's
// deadline, canceled when the test ends.
func ctxFor(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), scenarioTimeout)
	if d, ok := t.Deadline(); ok {
		var c2 context.CancelFunc
		ctx, c2 = context.WithDeadline(ctx, d.Add(-2*time.Second))
		t.Cleanup(c2)
	}
	t.Cleanup(cancel)
	return ctx
}

// stdioArgs are the arguments of a server on stdin/stdout with the handler
// set hs.
func stdioArgs(hs string) []string {
	return []string{"-stdio", "-handlers", hs, "-log-level", "warn", "-drain", "1s"}
}

// stdioCmd returns the server command for stdio clients that take an
// *exec.Cmd. Its stderr goes to the test log.
func stdioCmd(t *testing.T, hs string) *exec.Cmd {
	cmd := exec.Command(mcpedgeBin, stdioArgs(hs)...)
	cmd.Stderr = testWriter{t, "mcpedge"}
	return cmd
}

var serveLine = regexp.MustCompile(`serving MCP over Streamable HTTP"? addr=(\S+) url=(\S+)`)

// startHTTP starts mcpedge on a free port of 127.0.0.1 with the handler set
// hs and returns its Streamable HTTP endpoint. The server is stopped
// (SIGTERM, then SIGKILL) when the test ends.
func startHTTP(t *testing.T, hs string) string {
	t.Helper()
	// -admin "": a default admin port taken (another server) stops mcpedge.
	cmd := exec.Command(mcpedgeBin, "-tcp", "", "-http", "127.0.0.1:0", "-admin", "", "-handlers", hs, "-log-level", "info", "-drain", "1s")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", mcpedgeBin, err)
	}
	exited := make(chan struct{})
	var log strings.Builder
	var logMu sync.Mutex
	urls := make(chan string, 1)
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			logMu.Lock()
			log.WriteString(line + "\n")
			logMu.Unlock()
			if m := serveLine.FindStringSubmatch(line); m != nil && !sent {
				urls <- m[2]
				sent = true
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			logMu.Lock()
			t.Logf("mcpedge -handlers %s log:\n%s", hs, log.String())
			logMu.Unlock()
		}
	})
	select {
	case u := <-urls:
		if !strings.HasPrefix(u, "http://127.0.0.1:") {
			t.Fatalf("mcpedge serves on %s, want 127.0.0.1", u)
		}
		return u
	case <-exited:
		logMu.Lock()
		defer logMu.Unlock()
		t.Fatalf("mcpedge exited before serving:\n%s", log.String())
	case <-time.After(startTimeout):
		t.Fatalf("mcpedge did not report its HTTP address within %v", startTimeout)
	}
	return ""
}

// testWriter writes output (a subprocess's, a library's log) to the test
// log, each line after prefix, until the test ends.
type testWriter struct {
	t      *testing.T
	prefix string
}

func (w testWriter) Write(p []byte) (int, error) {
	defer func() { _ = recover() }() // a log after the test ended panics
	w.t.Logf("%s: %s", w.prefix, strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Fixtures of the conformance set the scenarios check.
const (
	staticTextURI  = "test://static-text"
	staticText     = "This is the content of the static text resource."
	simpleText     = "This is a simple text response for testing."
	elicitUsername = "interop-user"
	elicitEmail    = "interop@example.com"
	sampledText    = "interop sampled answer"
)

// wantElicited is the text test_elicitation answers with once the client
// accepted with the username and email above.
func wantElicited(text string) bool {
	return strings.HasPrefix(text, "User response: action=accept") &&
		strings.Contains(text, elicitUsername) && strings.Contains(text, elicitEmail)
}

// boardName returns a board entry name unique to the test.
func boardName(t *testing.T) string {
	r := strings.NewReplacer("/", "-", " ", "-", "#", "-", "?", "-")
	return r.Replace(t.Name()) + fmt.Sprint("-", time.Now().UnixNano())
}

// untilNotified calls write every interval until notified is closed or
// ctx ends: a subscription may be established a moment after the call that
// asked for it returns (subscriptions/listen is acknowledged by a
// notification the libraries do not surface), so the write is repeated.
func untilNotified(ctx context.Context, t *testing.T, notified <-chan struct{}, write func() error) {
	t.Helper()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := write(); err != nil {
			t.Fatalf("board_write: %v", err)
		}
		select {
		case <-notified:
			return
		case <-ctx.Done():
			t.Fatalf("no notifications/resources/updated within the deadline: %v", ctx.Err())
		case <-tick.C:
		}
	}
}

// conn is how a client reaches the server.
type conn int

const (
	overStdio conn = iota // a server subprocess per client, on its stdin/stdout
	overHTTP              // Streamable HTTP on 127.0.0.1, a server per handler set per top-level test
)

func (tr conn) String() string {
	if tr == overHTTP {
		return "HTTP"
	}
	return "stdio"
}

// endpoints are the servers a top-level test's clients reach: for HTTP,
// one server per handler set, started now and stopped when t ends; for
// stdio, none (each client starts its own).
type endpoints struct {
	tr   conn
	urls map[string]string // handler set → Streamable HTTP endpoint
}

func newEndpoints(t *testing.T, tr conn) *endpoints {
	t.Helper()
	e := &endpoints{tr: tr, urls: map[string]string{}}
	if tr == overHTTP {
		for _, hs := range []string{setConformance, setDemo} {
			e.urls[hs] = startHTTP(t, hs)
		}
	}
	return e
}

// discoverProbe explains a failed 2026-07-28 negotiation over HTTP: it
// POSTs a server/discover of its own, as the libraries do, and returns the
// server's status and body ("" over stdio).
func (e *endpoints) discoverProbe(hs string) string {
	if e.tr != overHTTP {
		return ""
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{` +
		`"io.modelcontextprotocol/protocolVersion":"` + v2026 + `",` +
		`"io.modelcontextprotocol/clientCapabilities":{},` +
		`"io.modelcontextprotocol/clientInfo":{"name":"mcpedge-interop-probe","version":"1.0.0"}}}}`
	req, err := http.NewRequest(http.MethodPost, e.urls[hs], strings.NewReader(body))
	if err != nil {
		return "; probe: " + err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", v2026)
	req.Header.Set("Mcp-Method", "server/discover")
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		return "; probe: " + err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return fmt.Sprintf("; a server/discover POST with MCP-Protocol-Version: %s gets HTTP %d: %s", v2026, resp.StatusCode, strings.TrimSpace(string(b)))
}

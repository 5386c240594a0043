package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge"
	"github.com/mcpedge/mcpedge/client"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/gateway"
	"github.com/mcpedge/mcpedge/handlers/builtin"
	"github.com/stretchr/testify/require"
)

// The test binary is its own upstream: run with GATEWAY_TEST_UPSTREAM
// set, it serves MCP on stdio (an mcpedge with a handler set, or the
// scripted fake of fake_test.go) instead of running the tests.
func TestMain(m *testing.M) {
	switch os.Getenv("GATEWAY_TEST_UPSTREAM") {
	case "":
		os.Exit(m.Run())
	case "fake":
		serveFake()
		os.Exit(0)
	case "fake26":
		serveFake26()
		os.Exit(0)
	default:
		if set, ok := strings.CutPrefix(os.Getenv("GATEWAY_TEST_UPSTREAM"), "http:"); ok {
			os.Exit(serveHTTPUpstream(set))
		}
		os.Exit(serveUpstream(os.Getenv("GATEWAY_TEST_UPSTREAM")))
	}
}

// serveUpstream serves the built-in handler set on stdio until stdin
// closes or a signal comes.
func serveUpstream(set string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	// One connection carries every call of the gateway's downstream
	// sessions: no per-session in-flight bound here.
	// GATEWAY_TEST_VERSIONS (or the file GATEWAY_TEST_VERSIONS_FILE,
	// read at each start: an upstream restarted in another era) names
	// the revisions it offers, comma-separated.
	// GATEWAY_TEST_DOWN_FILE: while that file exists, the upstream
	// exits at once (an upstream down on one node of a cluster).
	if f := os.Getenv("GATEWAY_TEST_DOWN_FILE"); f != "" {
		if _, err := os.Stat(f); err == nil {
			return 1
		}
	}
	versions := os.Getenv("GATEWAY_TEST_VERSIONS")
	if f := os.Getenv("GATEWAY_TEST_VERSIONS_FILE"); f != "" {
		b, _ := os.ReadFile(f)
		versions = strings.TrimSpace(string(b))
	}
	var offer []string
	if versions != "" {
		offer = strings.Split(versions, ",")
	}
	srv := mcpedge.New(mcpedge.Options{EngineOptions: mcpedge.EngineOptions{MaxInflight: -1, Versions: offer}})
	if err := builtin.Install(set, srv.Registry(), builtin.Env{ResourceUpdated: srv.ResourceUpdated, Publish: srv.Engine().Bus().Publish, Subscribe: srv.Engine().Bus().Subscribe}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := srv.ServeStdio(ctx, os.Stdin, os.Stdout); err != nil {
		return 1
	}
	return 0
}

// selfUpstream is an upstream that runs this test binary serving the
// handler set (or "fake").
func selfUpstream(name, set string) gateway.Upstream {
	return gateway.Upstream{Name: name, Transport: gateway.Stdio, Command: os.Args[0], Env: []string{"GATEWAY_TEST_UPSTREAM=" + set}}
}

// selfUpstreamV is selfUpstream offering only versions (comma-separated).
func selfUpstreamV(name, set, versions string) gateway.Upstream {
	u := selfUpstream(name, set)
	u.Env = append(u.Env, "GATEWAY_TEST_VERSIONS="+versions)
	return u
}

// testCtx is a context bounded for one test.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// front is a gateway and the mcpedge server it serves through, on a TCP
// port of 127.0.0.1.
type front struct {
	gw   *gateway.Gateway
	srv  *mcpedge.Server
	addr string
}

// startFront starts a gateway for opts behind an mcpedge serving TCP.
func startFront(t *testing.T, opts gateway.Options) *front {
	t.Helper()
	f, err := tryFront(t, opts)
	require.NoError(t, err)
	return f
}

func tryFront(t *testing.T, opts gateway.Options, tune ...func(*mcpedge.Options)) (*front, error) {
	t.Helper()
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 20 * time.Second
	}
	gw, err := gateway.New(opts)
	if err != nil {
		return nil, err
	}
	eo := mcpedge.Options{TCP: &mcpedge.TCPOptions{Addr: "127.0.0.1:0", Loops: 1}}
	eo.Bus = gw.Bus(nil)
	eo.OnRootsListChanged = gw.RootsListChanged
	eo.MaxInflight = -1
	eo.Workers = 4096 // a proxied call holds a worker while its upstream works
	for _, f := range tune {
		f(&eo)
	}
	srv := mcpedge.New(eo)
	if err := gw.Start(context.Background(), srv.Engine()); err != nil {
		_ = srv.Shutdown(context.Background())
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	a := srv.TCPAddr(ctx)
	require.NotNil(t, a)
	t.Cleanup(func() {
		cancel()
		<-done
		gw.Close()
	})
	return &front{gw: gw, srv: srv, addr: a.String()}, nil
}

// dial opens a downstream client to f.
func (f *front) dial(t *testing.T, opts client.Options) *client.Client {
	t.Helper()
	if opts.Era == client.EraAuto {
		opts.Era = client.EraLegacy
	}
	c, err := client.Dial(testCtx(t), &client.TCPTransport{Addr: f.addr}, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// serveHTTPUpstream serves the handler set over Streamable HTTP on a port
// of 127.0.0.1, writes its URL on stdout, and serves until stdin closes or
// a signal comes (GATEWAY_TEST_UPSTREAM=http:SET).
func serveHTTPUpstream(set string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	srv := mcpedge.New(mcpedge.Options{EngineOptions: mcpedge.EngineOptions{MaxInflight: -1}, HTTP: &mcpedge.HTTPOptions{Addr: "127.0.0.1:0"}})
	if err := builtin.Install(set, srv.Registry(), builtin.Env{ResourceUpdated: srv.ResourceUpdated, Publish: srv.Engine().Bus().Publish, Subscribe: srv.Engine().Bus().Subscribe}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	a := srv.HTTPAddr(ctx)
	if a == nil {
		return 1
	}
	fmt.Printf("http://%s/mcp\n", a)
	if err := <-done; err != nil {
		return 1
	}
	return 0
}

// httpChild starts this test binary serving set over HTTP in a process
// of its own (so that its allocations are not counted), and returns its
// URL.
func httpChild(t testing.TB, set string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "GATEWAY_TEST_UPSTREAM=http:"+set)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	return strings.TrimSpace(line)
}

// signalSink is a downstream session's sink that hands over a copy of
// each message.
type signalSink struct{ ch chan []byte }

func (s signalSink) Send(buf *codec.Buffer) error {
	b := append([]byte(nil), buf.B...)
	codec.PutBuffer(buf)
	s.ch <- b
	return nil
}

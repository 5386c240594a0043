package loadtest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/valyala/fasthttp"
)

// Target names a server: "tcp://host:port" (newline-delimited JSON-RPC),
// "http://host:port/path" (Streamable HTTP) or "stdio:command args..."
// (a child process mcpload starts, speaking on its stdin and stdout; the
// command line is split on spaces, without quoting).
type Target struct {
	Transport string   // "tcp", "http" or "stdio"
	Addr      string   // host:port for tcp, the URL for http
	Command   []string // stdio: the program and its arguments
}

// ParseTarget parses a target spec.
func ParseTarget(spec string) (Target, error) {
	switch {
	case strings.HasPrefix(spec, "stdio:"):
		f := strings.Fields(strings.TrimPrefix(spec, "stdio:"))
		if len(f) == 0 {
			return Target{}, fmt.Errorf("%w: stdio target without a command", ErrConfig)
		}
		return Target{Transport: "stdio", Command: f}, nil
	case strings.HasPrefix(spec, "tcp://"):
		addr := strings.TrimPrefix(spec, "tcp://")
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return Target{}, fmt.Errorf("%w: tcp target %q: %w", ErrConfig, spec, err)
		}
		return Target{Transport: "tcp", Addr: addr}, nil
	case strings.HasPrefix(spec, "http://"):
		u, err := url.Parse(spec)
		if err != nil || u.Host == "" {
			return Target{}, fmt.Errorf("%w: http target %q", ErrConfig, spec)
		}
		if u.Path == "" {
			u.Path = "/mcp"
		}
		return Target{Transport: "http", Addr: u.String()}, nil
	}
	return Target{}, fmt.Errorf("%w: target %q: want tcp://host:port, http://host:port/path or stdio:command", ErrConfig, spec)
}

// String returns the spec the target was parsed from, normalised.
func (t Target) String() string {
	switch t.Transport {
	case "stdio":
		return "stdio:" + strings.Join(t.Command, " ")
	case "tcp":
		return "tcp://" + t.Addr
	}
	return t.Addr
}

// session is one initialized MCP session.
type session interface {
	// Call sends a request and appends its answer's result to dst.
	Call(ctx context.Context, method string, params, dst []byte) ([]byte, error)
	notify(method string, params []byte) error
	// broken reports why the session can no longer be used, or nil.
	broken() *Error
	Close() error
}

// dialer opens sessions to a target.
type dialer interface {
	dial(ctx context.Context, inflight int) (session, error)
	// pid is the server process mcpload started (stdio), or 0.
	pid() int
	close()
}

func newDialer(t Target, conns, inflight int, opts *sessionOpts, stderr io.Writer) (dialer, error) {
	switch t.Transport {
	case "tcp":
		return &tcpDialer{addr: t.Addr, opts: opts}, nil
	case "http":
		return newHTTPTarget(t.Addr, conns, inflight, opts), nil
	case "stdio":
		return &stdioDialer{cmd: t.Command, opts: opts, stderr: stderr}, nil
	}
	return nil, fmt.Errorf("%w: transport %q", ErrConfig, t.Transport)
}

// initParams is what mcpload says in initialize.
const initParams = `{"protocolVersion":"` + protocolVersion + `","capabilities":{},"clientInfo":{"name":"mcpload","version":"1"}}`

// handshake runs initialize and notifications/initialized on s and returns
// the negotiated protocol version.
func handshake(ctx context.Context, s session) (string, error) {
	res, err := s.Call(ctx, "initialize", []byte(initParams), nil)
	if err != nil {
		return "", &Error{Kind: KindConnect, Err: err, Msg: "initialize"}
	}
	var r struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := codec.Unmarshal(res, &r); err != nil || r.ProtocolVersion == "" {
		return "", &Error{Kind: KindConnect, Err: err, Msg: "initialize result without protocolVersion: " + clip(res)}
	}
	return r.ProtocolVersion, nil
}

type tcpDialer struct {
	addr string
	opts *sessionOpts
}

func (d *tcpDialer) dial(ctx context.Context, inflight int) (session, error) {
	var nd net.Dialer
	dctx, cancel := context.WithTimeout(ctx, d.opts.timeout)
	defer cancel()
	c, err := nd.DialContext(dctx, "tcp", d.addr)
	if err != nil {
		return nil, &Error{Kind: KindConnect, Err: err}
	}
	s := newStreamSession(c, c, c, inflight, d.opts)
	if d.opts.stateless {
		return s, nil
	}
	if _, err := handshake(ctx, s); err != nil {
		_ = s.Close()
		return nil, err
	}
	if err := s.notify("notifications/initialized", nil); err != nil {
		_ = s.Close()
		return nil, &Error{Kind: KindConnect, Err: err, Msg: "notifications/initialized"}
	}
	return s, nil
}

func (d *tcpDialer) pid() int { return 0 }
func (d *tcpDialer) close()   {}

// stdioDialer starts the server command for each session.
type stdioDialer struct {
	cmd    []string
	opts   *sessionOpts
	stderr io.Writer

	mu   sync.Mutex
	proc *exec.Cmd
}

// stdioCloser closes the child's stdin, then waits for it to exit, killing
// it after a grace period.
type stdioCloser struct {
	stdin io.Closer
	cmd   *exec.Cmd
	once  sync.Once
}

// Close stops the child once; later calls return at once.
func (c *stdioCloser) Close() error {
	c.once.Do(func() {
		_ = c.stdin.Close()
		done := make(chan struct{})
		go func() { _ = c.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			_ = c.cmd.Process.Kill()
			<-done
		}
	})
	return nil
}

func (d *stdioDialer) dial(ctx context.Context, inflight int) (session, error) {
	cmd := exec.Command(d.cmd[0], d.cmd[1:]...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, &Error{Kind: KindConnect, Err: err}
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, &Error{Kind: KindConnect, Err: err}
	}
	cmd.Stderr = d.stderr
	if err := cmd.Start(); err != nil {
		return nil, &Error{Kind: KindConnect, Err: err}
	}
	d.mu.Lock()
	d.proc = cmd
	d.mu.Unlock()
	s := newStreamSession(stdin, stdout, &stdioCloser{stdin: stdin, cmd: cmd}, inflight, d.opts)
	if d.opts.stateless {
		return s, nil
	}
	if _, err := handshake(ctx, s); err != nil {
		_ = s.Close()
		return nil, err
	}
	if err := s.notify("notifications/initialized", nil); err != nil {
		_ = s.Close()
		return nil, &Error{Kind: KindConnect, Err: err, Msg: "notifications/initialized"}
	}
	return s, nil
}

func (d *stdioDialer) pid() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.proc == nil || d.proc.Process == nil {
		return 0
	}
	return d.proc.Process.Pid
}

func (d *stdioDialer) close() {}

// httpTarget is a Streamable HTTP endpoint and the pooled connections to
// it that its sessions share.
type httpTarget struct {
	url    string
	client httpDoer
	opts   *sessionOpts
}

func newHTTPTarget(rawURL string, conns, inflight int, opts *sessionOpts) *httpTarget {
	u, _ := url.Parse(rawURL)
	if conns < 1 {
		conns = 1
	}
	var c httpDoer
	if inflight > 1 {
		c = &fasthttp.PipelineClient{
			Addr:                     u.Host,
			MaxConns:                 conns,
			MaxPendingRequests:       inflight,
			ReadTimeout:              opts.timeout,
			WriteTimeout:             opts.timeout,
			ReadBufferSize:           16 << 10,
			NoDefaultUserAgentHeader: true,
		}
	} else {
		c = &fasthttp.HostClient{
			Addr:                          u.Host,
			MaxConns:                      conns,
			MaxConnWaitTimeout:            opts.timeout,
			ReadBufferSize:                16 << 10,
			NoDefaultUserAgentHeader:      true,
			DisableHeaderNamesNormalizing: false,
			MaxResponseBodySize:           opts.maxFrame,
			MaxIdleConnDuration:           time.Minute,
		}
	}
	return &httpTarget{url: rawURL, client: c, opts: opts}
}

func (t *httpTarget) dial(ctx context.Context, _ int) (session, error) {
	if t.opts.stateless {
		// 2026-07-28: no initialize, no session id; each POST stands alone.
		return &httpSession{t: t, modern: true, version: []byte(ProtocolStateless)}, nil
	}
	s := &httpSession{t: t, initializing: true}
	version, err := handshake(ctx, s)
	s.initializing = false
	if err != nil {
		return nil, err
	}
	s.version = []byte(version)
	if err := s.notify("notifications/initialized", nil); err != nil {
		return nil, &Error{Kind: KindConnect, Err: err, Msg: "notifications/initialized"}
	}
	return s, nil
}

func (t *httpTarget) pid() int { return 0 }

func (t *httpTarget) close() {
	if hc, ok := t.client.(*fasthttp.HostClient); ok {
		hc.CloseIdleConnections()
	}
}

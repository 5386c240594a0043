package loadtest

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/valyala/fasthttp"
)

// Target names a server: "tcp://host:port" (newline-delimited JSON-RPC),
// "tcps://host:port" (the same over TLS),
// "http://host:port/path" (Streamable HTTP) or "stdio:command args..."
// (a child process mcpload starts, speaking on its stdin and stdout; the
// command line is split on spaces, without quoting).
type Target struct {
	Transport string   // "tcp", "http" or "stdio"
	Addr      string   // host:port for tcp, the URL for http
	Command   []string // stdio: the program and its arguments
	// TLS, for a tcps target, is the client's TLS configuration: the
	// server's certificate is verified against RootCAs (nil: the
	// system's) for ServerName (the target's host), Certificates holds
	// the client's (mutual TLS). nil: plain TCP.
	TLS *tls.Config
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
	case strings.HasPrefix(spec, "tcp://"), strings.HasPrefix(spec, "tcps://"):
		scheme, addr, _ := strings.Cut(spec, "://")
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return Target{}, fmt.Errorf("%w: %s target %q: %w", ErrConfig, scheme, spec, err)
		}
		t := Target{Transport: "tcp", Addr: addr}
		if scheme == "tcps" {
			t.TLS = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: host}
		}
		return t, nil
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
	return Target{}, fmt.Errorf("%w: target %q: want tcp://host:port, tcps://host:port, http://host:port/path or stdio:command", ErrConfig, spec)
}

// ParseTargets parses the targets of one run, from mcpload's arguments:
// each argument is a spec or a comma-separated list of specs. A stdio spec
// is one target whose command line is all the arguments joined by spaces.
// The targets must all have one transport, and stdio allows only one; a
// breach is ErrConfig.
func ParseTargets(args ...string) ([]Target, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("%w: no target", ErrConfig)
	}
	if strings.HasPrefix(args[0], "stdio:") {
		for _, a := range args[1:] {
			if strings.HasPrefix(a, "stdio:") {
				return nil, fmt.Errorf("%w: several stdio targets: a stdio run has one server", ErrConfig)
			}
		}
		t, err := ParseTarget(strings.Join(args, " "))
		if err != nil {
			return nil, err
		}
		return []Target{t}, nil
	}
	var ts []Target
	for _, a := range args {
		for spec := range strings.SplitSeq(a, ",") {
			t, err := ParseTarget(strings.TrimSpace(spec))
			if err != nil {
				return nil, err
			}
			ts = append(ts, t)
		}
	}
	if err := CheckTargets(ts); err != nil {
		return nil, err
	}
	return ts, nil
}

// CheckTargets reports, as ErrConfig, targets that cannot make one run:
// none, of different transports, or more than one stdio target.
func CheckTargets(ts []Target) error {
	if len(ts) == 0 {
		return fmt.Errorf("%w: no target", ErrConfig)
	}
	switch ts[0].Transport {
	case "tcp", "http", "stdio":
	default:
		return fmt.Errorf("%w: transport %q", ErrConfig, ts[0].Transport)
	}
	for _, t := range ts[1:] {
		if t.Transport != ts[0].Transport {
			return fmt.Errorf("%w: targets %s and %s: one transport for all", ErrConfig, ts[0], t)
		}
	}
	if len(ts) > 1 && ts[0].Transport == "stdio" {
		return fmt.Errorf("%w: several stdio targets: a stdio run has one server", ErrConfig)
	}
	return nil
}

// targetsOf returns the targets of a config: ts, or else the one t.
func targetsOf(t Target, ts []Target) ([]Target, error) {
	if len(ts) == 0 {
		ts = []Target{t}
	}
	if err := CheckTargets(ts); err != nil {
		return nil, err
	}
	return ts, nil
}

// targetsString names targets as a comma-separated list of their specs.
func targetsString(ts []Target) string {
	if len(ts) == 1 {
		return ts[0].String()
	}
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = t.String()
	}
	return strings.Join(s, ",")
}

// String returns the spec the target was parsed from, normalised.
func (t Target) String() string {
	switch t.Transport {
	case "stdio":
		return "stdio:" + strings.Join(t.Command, " ")
	case "tcp":
		if t.TLS != nil {
			return "tcps://" + t.Addr
		}
		return "tcp://" + t.Addr
	}
	return t.Addr
}

// dialTCP connects to a TCP target, over TLS for a tcps one.
func dialTCP(ctx context.Context, addr string, cfg *tls.Config) (net.Conn, error) {
	var nd net.Dialer
	c, err := nd.DialContext(ctx, "tcp", addr)
	if err != nil || cfg == nil {
		return c, err
	}
	tc := tls.Client(c, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = c.Close()
		return nil, err
	}
	return tc, nil
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

// newDialer returns the dialer of targets ts, which CheckTargets has
// passed. With several, each dial goes to the next target in turn; HTTP
// sessions then also send each request to the next target (httpCluster).
func newDialer(ts []Target, conns, inflight int, opts *sessionOpts, stderr io.Writer) (dialer, error) {
	t := ts[0]
	switch t.Transport {
	case "tcp":
		d := &tcpDialer{addr: t.Addr, tls: t.TLS, opts: opts}
		if len(ts) > 1 {
			for _, t := range ts {
				d.addrs = append(d.addrs, t.Addr)
				d.tlss = append(d.tlss, t.TLS)
			}
			d.dials = make([]atomic.Int64, len(ts))
		}
		return d, nil
	case "http":
		if len(ts) > 1 {
			return newHTTPCluster(ts, conns, inflight, opts), nil
		}
		return newHTTPTarget(t.Addr, conns, inflight, opts), nil
	case "stdio":
		if len(ts) > 1 {
			return nil, fmt.Errorf("%w: several stdio targets", ErrConfig)
		}
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

// tcpDialer opens a connection per session, to addr, or, with several
// addrs, to each of them in turn (a session is bound to its connection).
type tcpDialer struct {
	addr  string
	tls   *tls.Config    // tcps: the client's TLS configuration
	addrs []string       // several targets: dials go round-robin
	tlss  []*tls.Config  // of each of addrs
	dials []atomic.Int64 // of each of addrs
	next  atomic.Uint64
	opts  *sessionOpts
}

func (d *tcpDialer) dial(ctx context.Context, inflight int) (session, error) {
	addr, cfg := d.addr, d.tls
	if n := uint64(len(d.addrs)); n > 1 {
		i := (d.next.Add(1) - 1) % n
		addr, cfg = d.addrs[i], d.tlss[i]
		d.dials[i].Add(1)
	}
	dctx, cancel := context.WithTimeout(ctx, d.opts.timeout)
	defer cancel()
	c, err := dialTCP(dctx, addr, cfg)
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

// counts returns the connections opened to each of several targets (nil
// with one).
func (d *tcpDialer) counts() []TargetResult {
	if len(d.addrs) < 2 {
		return nil
	}
	out := make([]TargetResult, len(d.addrs))
	for i, a := range d.addrs {
		out[i] = TargetResult{Target: Target{Transport: "tcp", Addr: a, TLS: d.tlss[i]}.String(), Connections: d.dials[i].Load()}
	}
	return out
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

	// Of a cluster (several targets; nil peers: one): every target, this
	// one at peers[idx]. A session initialized here sends each request to
	// the next peer in turn, and the peer counts it.
	peers         []*httpTarget
	idx           int
	sessions      atomic.Int64 // initialized here
	calls, failed atomic.Int64 // requests sent here; those that failed
}

// httpCluster is several Streamable HTTP targets, nodes of one cluster
// that each take any session's requests: sessions are initialized on each
// in turn, and each session's requests go to each in turn.
type httpCluster struct {
	ts   []*httpTarget
	next atomic.Uint64
}

func newHTTPCluster(ts []Target, conns, inflight int, opts *sessionOpts) *httpCluster {
	c := &httpCluster{ts: make([]*httpTarget, len(ts))}
	for i, t := range ts {
		c.ts[i] = newHTTPTarget(t.Addr, conns, inflight, opts)
		c.ts[i].peers, c.ts[i].idx = c.ts, i
	}
	return c
}

func (c *httpCluster) dial(ctx context.Context, inflight int) (session, error) {
	return c.ts[(c.next.Add(1)-1)%uint64(len(c.ts))].dial(ctx, inflight)
}

func (c *httpCluster) pid() int { return 0 }

func (c *httpCluster) close() {
	for _, t := range c.ts {
		t.close()
	}
}

// counts returns each target's sessions, requests and failed requests so
// far.
func (c *httpCluster) counts() []TargetResult {
	out := make([]TargetResult, len(c.ts))
	for i, t := range c.ts {
		out[i] = TargetResult{Target: t.url, Sessions: t.sessions.Load(), Requests: t.calls.Load(), Errors: t.failed.Load()}
	}
	return out
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
		s := &httpSession{t: t, modern: true, version: []byte(ProtocolStateless)}
		s.rr.Store(uint64(t.idx))
		t.opened()
		return s, nil
	}
	s := &httpSession{t: t, initializing: true}
	s.rr.Store(uint64(t.idx))
	version, err := handshake(ctx, s)
	s.initializing = false
	if err != nil {
		return nil, err
	}
	s.version = []byte(version)
	if err := s.notify("notifications/initialized", nil); err != nil {
		return nil, &Error{Kind: KindConnect, Err: err, Msg: "notifications/initialized"}
	}
	t.opened()
	return s, nil
}

// opened counts a session opened on a cluster's target.
func (t *httpTarget) opened() {
	if t.peers != nil {
		t.sessions.Add(1)
	}
}

func (t *httpTarget) pid() int { return 0 }

func (t *httpTarget) close() {
	if hc, ok := t.client.(*fasthttp.HostClient); ok {
		hc.CloseIdleConnections()
	}
}

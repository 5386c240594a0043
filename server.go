package mcpedge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/mcpedge/mcpedge/auth"

	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/session"
	mcphttp "github.com/mcpedge/mcpedge/transport/http"
	"github.com/mcpedge/mcpedge/transport/netkit"
	"github.com/mcpedge/mcpedge/transport/netlimit"
	"github.com/mcpedge/mcpedge/transport/stdio"
	"github.com/mcpedge/mcpedge/transport/tcp"
	"github.com/valyala/fasthttp"
)

// Options configure a Server. The zero value works: an engine with its
// defaults and no network transport (serve it with ServeStdio, or set TCP
// or HTTP for Serve).
type Options struct {
	// EngineOptions configure the engine: Name and Version (sent in
	// initialize), Workers, MaxMessage, the per-session limits, middleware
	// (Receive, Send), and Logger, which every transport and this package
	// log to as well (nil discards). See engine.Options for each field and
	// its default.
	EngineOptions

	// TCP, when not nil, serves MCP over raw TCP with these options; nil
	// means no TCP. The zero TCPOptions serve newline-delimited JSON on
	// 127.0.0.1:7400 (tcp.DefaultAddr), one event loop per core, with a
	// 30 s read timeout, a 5 min idle timeout and no connection limit.
	// "127.0.0.1:0" picks a free port: read it with TCPAddr.
	TCP *TCPOptions
	// HTTP, when not nil, serves MCP over Streamable HTTP (and the legacy
	// HTTP+SSE endpoints) with these options; nil means no HTTP. The zero
	// HTTPOptions serve stateful Streamable HTTP on 127.0.0.1:7401
	// (mcphttp.DefaultAddr) at /mcp, with /sse and /message for legacy
	// clients, accepting only loopback Host and Origin values. Read the
	// address of port 0 with HTTPAddr.
	HTTP *HTTPOptions
	// Stdio configures ServeStdio; the zero value serves newline-delimited
	// JSON, and a zero Stdio.DrainTimeout means DrainTimeout.
	Stdio StdioOptions

	// DrainTimeout bounds a graceful stop that Serve or ServeStdio begins
	// on its own (their context ended, a listener failed, stdin ended):
	// every step of the shutdown order (see the package doc) must fit in
	// it. 0 means 10 s; < 0 means no wait (requests in flight are
	// cancelled at once). Shutdown is bounded by its own context instead.
	DrainTimeout time.Duration

	// Auth, when set, authorizes every request on every transport and
	// revision (docs/authorization.md): Streamable HTTP checks each
	// request's Authorization header and serves the RFC 9728 metadata; TCP
	// and stdio take the token from params._meta["io.mcpedge/token"] of
	// initialize (or of each 2026-07-28 request). It is
	// EngineOptions.Authorize, which the engine asks about every request
	// before anything else, and HTTPOptions.Auth. Reload the Verifier to
	// rotate its keys.
	Auth *auth.Verifier

	// LameDuck, when > 0, spreads the closing of idle connections over
	// this long at the start of a shutdown, after the listeners close and
	// before the drain proper (nats-server's lame-duck mode), so that the
	// clients of a large server reconnect elsewhere a few at a time. It
	// counts against the shutdown's deadline.
	LameDuck time.Duration

	// Cluster, when set, makes the server a node of a cluster (package
	// cluster's Node; docs/cluster.md): its bus carries notifications
	// (EngineOptions.Bus, unless set already: then it must deliver through
	// the cluster's bus, as a counting wrapper of it does), its name starts session and task ids
	// (EngineOptions.NodeID), and Streamable HTTP requests for sessions
	// other nodes own are forwarded to them (HTTPOptions.Route) while
	// those nodes' requests for this one's are served here. Close the
	// node after Shutdown.
	Cluster Cluster

	// OnDraining, when set, is called once when a shutdown begins, before
	// the listeners close: readiness turns off (see Server.Ready), for
	// a /readyz endpoint or a load balancer to take the node out.
	OnDraining func()
}

// Cluster is a server's membership of a cluster, as package cluster's
// Node implements it. A Cluster is safe for concurrent use.
type Cluster interface {
	// Name names this node; it starts the ids of its sessions and tasks.
	Name() string
	// Bus carries notifications between the nodes.
	Bus() session.Bus
	// Route forwards a request naming id to the node that owns id, when
	// that is another node, and reports whether it did
	// (HTTPOptions.Route).
	Route(ctx *fasthttp.RequestCtx, id []byte) bool
	// Serve serves with h the requests other nodes forward to this one.
	Serve(h fasthttp.RequestHandler)
}

// DefaultDrainTimeout is Options.DrainTimeout's default.
const DefaultDrainTimeout = 10 * time.Second

// Errors of Serve and ServeStdio.
var (
	// ErrServerClosed is returned by Serve and ServeStdio once Shutdown
	// has been called, and when they are called after it.
	ErrServerClosed = errors.New("mcpedge: server closed")
	// ErrNoTransport is returned by Serve when Options set neither TCP
	// nor HTTP.
	ErrNoTransport = errors.New("mcpedge: no transport configured (set Options.TCP or Options.HTTP)")
	// ErrServing is returned by a second call of Serve while the first
	// runs or after it returned.
	ErrServing = errors.New("mcpedge: Serve already called")
)

// TransportError is Serve's error when a listener fails (it cannot listen,
// or stops on its own): Transport names it, "tcp" or "http". When it
// could not listen, Err wraps a *netkit.BindError naming the address and
// the cause (errors.Is(err, syscall.EADDRINUSE)).
type TransportError struct {
	Transport string
	Err       error
}

func (e *TransportError) Error() string { return "mcpedge: " + e.Transport + ": " + e.Err.Error() }

// Unwrap returns the listener's error.
func (e *TransportError) Unwrap() error { return e.Err }

// errStopped is a listener's error when it returned nil without Shutdown.
var errStopped = errors.New("listener stopped")

// Server is an MCP server: the engine and the transports its Options
// configure. Register handlers on Registry (or with AddTool), then call
// Serve, ServeStdio or both; stop it with Shutdown or by ending their
// context. Its methods are safe for concurrent use.
type Server struct {
	eng       *engine.Server
	listeners []listener      // the network transports, in the order they start, drain and stop
	http      *mcphttp.Server // nil: no HTTP (HTTPServer)
	stdio     StdioOptions
	drain     time.Duration
	log       *slog.Logger

	closing   chan struct{} // closed by the first Shutdown
	closeOnce sync.Once
	drainOnce sync.Once // beginDrain

	lameDuck   time.Duration
	onDraining func()

	mu      sync.Mutex
	serving bool                   // Serve was called
	served  bool                   // Serve or ServeStdio was called
	stdios  map[*stdioRun]struct{} // ServeStdio calls running
}

// listener is one of the server's network transports, and the name
// Serve's TransportError and the logs give it. The front door runs every
// one the same way (netkit.Transport): it holds no code of any one
// transport but New's, which builds them from Options.
type listener struct {
	name string
	netkit.Transport
}

// stdioRun is one ServeStdio call: its session stops when cancel is
// called, and done is closed when stdio.Serve has returned.
type stdioRun struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// New returns a Server configured by opts. It creates the engine and the
// configured transports; nothing listens until Serve.
func New(opts Options) *Server {
	if opts.Auth != nil {
		opts.Authorize = opts.Auth
		if opts.HTTP != nil {
			h := *opts.HTTP
			h.Auth = opts.Auth
			opts.HTTP = &h
		}
	}
	if c := opts.Cluster; c != nil {
		if opts.Bus == nil { // a Bus set already wraps c.Bus() (admin's counting bus)
			opts.Bus = c.Bus()
		}
		opts.NodeID = c.Name()
		if opts.HTTP != nil {
			h := *opts.HTTP
			h.Route = c.Route
			opts.HTTP = &h
		}
	}
	shareBudgets(&opts)
	eng := engine.New(opts.EngineOptions)
	s := &Server{
		eng:     eng,
		stdio:   opts.Stdio,
		drain:   opts.DrainTimeout,
		log:     eng.Logger(),
		closing: make(chan struct{}),
		stdios:  make(map[*stdioRun]struct{}),

		lameDuck:   opts.LameDuck,
		onDraining: opts.OnDraining,
	}
	if s.drain == 0 {
		s.drain = DefaultDrainTimeout
	}
	if s.stdio.DrainTimeout == 0 && s.drain > 0 {
		s.stdio.DrainTimeout = s.drain
	}
	if opts.TCP != nil {
		s.listeners = append(s.listeners, listener{"tcp", tcp.New(eng, *opts.TCP)})
	}
	if opts.HTTP != nil {
		s.http = mcphttp.New(eng, *opts.HTTP)
		s.listeners = append(s.listeners, listener{"http", s.http})
		if opts.Cluster != nil {
			opts.Cluster.Serve(s.http.Handler())
		}
	}
	return s
}

// listener returns the listener named name, or nil.
func (s *Server) listener(name string) netkit.Transport {
	for _, l := range s.listeners {
		if l.name == name {
			return l.Transport
		}
	}
	return nil
}

// shareBudgets gives TCP and HTTP, when both serve, one budget of each
// kind of bytes clients make the server hold, unless they set budgets of
// their own or different limits: -max-buffered then bounds TCP's partial
// messages and HTTP's request bodies together, and -max-outbound-total
// every transport's queued answers.
func shareBudgets(opts *Options) {
	if opts.TCP == nil || opts.HTTP == nil {
		return
	}
	t, h := *opts.TCP, *opts.HTTP
	if t.Buffered == nil && h.Buffered == nil && t.MaxBuffered == h.MaxBuffered {
		b := netlimit.NewBudget(budgetLimit(t.MaxBuffered, netlimit.DefaultMaxBuffered))
		t.Buffered, h.Buffered = b, b
	}
	if t.Outbound == nil && h.Outbound == nil && t.MaxOutboundTotal == h.MaxOutboundTotal {
		b := netlimit.NewBudget(budgetLimit(t.MaxOutboundTotal, netlimit.DefaultMaxOutboundTotal))
		t.Outbound, h.Outbound = b, b
	}
	opts.TCP, opts.HTTP = &t, &h
}

// budgetLimit is an option's budget: 0 means the default, < 0 none.
func budgetLimit(v int64, def func() int64) int64 {
	if v == 0 {
		return def()
	}
	return v
}

// Engine returns the server's engine: its sessions, bus, counters,
// ResourceUpdated, ElicitationComplete.
func (s *Server) Engine() *engine.Server { return s.eng }

// Registry returns the server's handler registry. Register and remove
// tools, resources, templates and prompts on it at any time, before or
// while serving.
func (s *Server) Registry() *Registry { return s.eng.Registry() }

// ResourceUpdated tells the sessions subscribed to uri that it changed
// (engine.Server.ResourceUpdated).
func (s *Server) ResourceUpdated(uri string) { s.eng.ResourceUpdated(uri) }

// TCPAddr waits until the TCP transport listens and returns its address
// (useful with port 0). It returns nil when TCP is not configured, when
// it failed to listen or was shut down first, or when ctx ends first.
func (s *Server) TCPAddr(ctx context.Context) net.Addr { return s.addr(ctx, "tcp") }

// HTTPAddr waits until the HTTP transport listens and returns its address
// (useful with port 0); the MCP endpoint is "http://" + the address +
// HTTPOptions.Path ("/mcp" by default). It returns nil when HTTP is not
// configured, when it failed to listen or was shut down first, or when
// ctx ends first.
func (s *Server) HTTPAddr(ctx context.Context) net.Addr { return s.addr(ctx, "http") }

// addr waits until the listener named name listens and returns its
// address; nil when there is none of that name.
func (s *Server) addr(ctx context.Context, name string) net.Addr {
	if l := s.listener(name); l != nil {
		return l.Addr(ctx)
	}
	return nil
}

// closed reports whether Shutdown has been called.
func (s *Server) closed() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}

// Serve starts every configured network transport (Options.TCP,
// Options.HTTP) and serves until one of these happens:
//
//   - ctx ends: Serve shuts the server down gracefully, in the order of
//     the package doc, within Options.DrainTimeout, and returns nil, or
//     the shutdown's error if it ran out of time (errors.Is
//     context.DeadlineExceeded).
//   - Shutdown is called: Serve returns ErrServerClosed once the listeners
//     are closed. Wait for Shutdown to return before the program exits:
//     it may still be closing connections.
//   - a listener fails, or cannot listen: Serve shuts the others down as
//     above and returns a *TransportError naming it.
//
// Serve is called at most once; it returns ErrNoTransport when neither TCP
// nor HTTP is configured.
func (s *Server) Serve(ctx context.Context) error {
	if len(s.listeners) == 0 {
		return ErrNoTransport
	}
	s.mu.Lock()
	switch {
	case s.closed():
		s.mu.Unlock()
		return ErrServerClosed
	case s.serving:
		s.mu.Unlock()
		return ErrServing
	}
	s.serving, s.served = true, true
	s.mu.Unlock()

	type result struct {
		transport string
		err       error
	}
	// The listeners' context never ends: ending ctx stops them through the
	// shutdown order, not at once.
	lctx := context.WithoutCancel(ctx)
	results := make(chan result, len(s.listeners))
	for _, l := range s.listeners {
		go func() { results <- result{l.name, l.ListenAndServe(lctx)} }()
	}
	running := len(s.listeners)

	var err error
	select {
	case <-ctx.Done():
		err = s.stopWithin(lctx)
	case <-s.closing:
		err = ErrServerClosed
	case r := <-results:
		running--
		if s.closed() { // a Shutdown closed it
			err = ErrServerClosed
			break
		}
		if r.err == nil {
			r.err = errStopped
		}
		err = &TransportError{Transport: r.transport, Err: r.err}
		s.log.Error("listener failed: shutting down", "transport", r.transport, "err", r.err)
		_ = s.stopWithin(lctx) // logged by Shutdown
	}
	for ; running > 0; running-- {
		<-results // closed by Shutdown: returns soon
	}
	return err
}

// ServeStdio serves one session on in and out (a subprocess's stdin and
// stdout) with Options.Stdio, until in ends, ctx ends or Shutdown is
// called; only MCP messages are written to out. It may run beside Serve.
//
// When in ends, requests in flight finish and their answers are written,
// then ServeStdio shuts the whole server down (within
// Options.DrainTimeout) and returns nil, or the stdio error that ended the
// session (an oversized message, a malformed frame, a failed output). When
// ctx ends, it shuts the server down gracefully, as Serve does, and returns
// nil or the shutdown's error. After Shutdown it returns ErrServerClosed.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	s.mu.Lock()
	if s.closed() {
		s.mu.Unlock()
		return ErrServerClosed
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	run := &stdioRun{cancel: cancel, done: make(chan struct{})}
	s.stdios[run] = struct{}{}
	s.served = true
	s.mu.Unlock()

	errc := make(chan error, 1)
	go func() {
		defer close(run.done)
		errc <- stdio.Serve(sctx, s.eng, in, out, s.stdio)
	}()
	defer func() {
		cancel()
		s.mu.Lock()
		delete(s.stdios, run)
		s.mu.Unlock()
	}()

	select {
	case <-ctx.Done():
		err := s.stopWithin(context.WithoutCancel(ctx))
		<-errc
		return err
	case err := <-errc:
		if s.closed() {
			return ErrServerClosed
		}
		serr := s.stopWithin(context.WithoutCancel(ctx))
		if err != nil {
			return err
		}
		return serr
	}
}

// stopWithin shuts the server down within DrainTimeout.
func (s *Server) stopWithin(parent context.Context) error {
	ctx, cancel := context.WithTimeout(parent, max(s.drain, 0))
	defer cancel()
	return s.Shutdown(ctx)
}

// Shutdown stops the server gracefully, as a sequence (see the package
// doc and docs/architecture.md, "Shutdown"):
//
//  1. readiness turns off (Ready reports false; Options.OnDraining is
//     called);
//  2. every listener stops accepting, TCP and HTTP;
//  3. idle connections are closed: spread over Options.LameDuck when set,
//     then at once, and every connection that becomes idle is closed in
//     turn (a request already on its way is never dropped unread);
//  4. the engine drains: new requests are refused with -32000, those in
//     flight finish and their answers are written, listen streams end
//     with their empty result;
//  5. the transports close what is left (SSE streams, sessions) and stop.
//
// Serve and ServeStdio then return ErrServerClosed.
//
// Shutdown returns nil once everything has stopped, or, when ctx ends
// first, an error wrapping ctx's error (errors.Is context.DeadlineExceeded
// with a timeout): requests still in flight were cut, and the transports
// are stopped even then. It may be called more than once, and before
// Serve; a later call waits again, with its own context, for what the
// first left running.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closeOnce.Do(func() { close(s.closing) })
	s.mu.Lock()
	served := s.served
	s.mu.Unlock()
	if served {
		var conns int64
		for _, l := range s.listeners {
			conns += l.Conns()
		}
		args := []any{"active", s.eng.Active(), "tasks", s.eng.RunningTasks(), "conns", conns}
		if d, ok := ctx.Deadline(); ok {
			args = append(args, "timeout", time.Until(d).Round(time.Millisecond))
		}
		s.log.Info("shutting down: draining in-flight requests", args...)
	}
	s.beginDrain(ctx)

	var errs []error
	// 4. The engine drains.
	if err := s.eng.Shutdown(ctx); err != nil {
		s.log.Warn("drain incomplete", "active", s.eng.Active(), "tasks", s.eng.RunningTasks(), "err", err)
		errs = append(errs, fmt.Errorf("mcpedge: drain: %w", err))
	}
	// 5. The transports stop.
	for _, l := range s.listeners {
		if err := l.Shutdown(ctx); err != nil {
			s.log.Warn(l.name+" shutdown", "err", err)
			errs = append(errs, fmt.Errorf("mcpedge: %s shutdown: %w", l.name, err))
		}
	}
	s.mu.Lock()
	runs := make([]*stdioRun, 0, len(s.stdios))
	for r := range s.stdios {
		runs = append(runs, r)
	}
	s.mu.Unlock()
	for _, r := range runs {
		r.cancel()
	}
	for _, r := range runs {
		select {
		case <-r.done:
		case <-ctx.Done():
			err := fmt.Errorf("mcpedge: stdio shutdown: %w", ctx.Err())
			s.log.Warn("stdio shutdown", "err", err)
			return errors.Join(append(errs, err)...)
		}
	}
	return errors.Join(errs...)
}

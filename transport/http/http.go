// Package http serves MCP over Streamable HTTP, the transport of MCP
// revisions 2025-11-25 and 2026-07-28, and over the legacy HTTP+SSE
// transport of revision 2024-11-05, on fasthttp.
//
// Import it under the name mcphttp, to keep it apart from net/http:
//
//	import mcphttp "github.com/mcpedge/mcpedge/transport/http"
//
// Its errors and log messages say "mcphttp:" for the same reason: "http:"
// is net/http's prefix ("http: server closed" is net/http.ErrServerClosed).
//
// One endpoint (Options.Path, "/mcp" by default) takes POST, GET and DELETE.
// A POST carries one JSON-RPC message. A notification or a response is
// answered 202. A request is answered application/json when its handler
// sends nothing before its result; it is answered text/event-stream as soon
// as the handler sends anything else first (progress, a log message, a
// server-to-client request), and everything the request produces goes on
// that stream, its result last. Requests the engine answers itself and
// calls of tools registered NonBlocking, the common case, are served on the
// connection's goroutine without copying; other handlers run on a goroutine
// of their own while the connection waits for their first message. A GET opens the session's standalone stream
// for messages tied to no request; DELETE ends the session.
//
// Sessions are created by initialize and named by a 128-bit random
// Mcp-Session-Id. Every SSE event carries an id "<stream>-<seq>" that names
// its stream; events are kept in a per-session store bounded by the memory
// they retain, so a client that lost a stream resumes it with GET and
// Last-Event-ID. Idle sessions are reaped, and sessions whose client sent
// nothing after initialize are reaped sooner (Options.InitTimeout). In
// stateless mode there are no sessions: each POST is served on its own and
// GET and DELETE are refused.
//
// Revision 2026-07-28 is stateless and shares the endpoint: a POST whose
// MCP-Protocol-Version names it, or that carries a request whose
// params._meta names a protocol version and no Mcp-Session-Id, is served
// on a session of its own that ends with the POST, in either mode, with
// no session id. Its Mcp-Method, Mcp-Name, MCP-Protocol-Version and
// Mcp-Param-* headers (the tool's x-mcp-header arguments) must match its
// body, else it is answered 400 with -32020 (HeaderMismatch); the
// revision's errors are answered 400 (-32602 for _meta, -32020, -32021,
// -32022) or 404 (-32601), their JSON-RPC error the body. A
// subscriptions/listen request is answered with an SSE stream that stays
// open, with keep-alive comments, until the client closes it (which
// cancels it) or the server shuts down. GET and DELETE naming the
// revision are answered 405.
//
// Limits: the live sessions (Options.MaxSessions; when the table is full,
// the oldest session never used after initialize is evicted, else the idle
// one used least recently, else 503), the sessions of one client address
// (Options.MaxSessionsPerIP, a share of MaxSessions by default, 429), the
// connections shared with other transports (Options.Conns, 503 at accept),
// the body size (413 on the declared length, before any of the body is
// read), the memory of bodies being received (Options.MaxBuffered: a body
// is read only once its headers passed every check, into a buffer that
// grows with the bytes received), the bytes pending on a stream (slow
// consumers are cut off), the memory queued for clients in all
// (Options.MaxOutboundTotal) and the read, write and idle timeouts. Answers over a limit carry Retry-After and a JSON-RPC error
// naming the limit. Accept errors (out of file descriptors, aborted
// connections) are retried with back-off and never end Serve.
//
// A client that disconnects while its request is served cancels the
// request's context (with cause ErrClientGone): on a TCP socket the
// connection is watched (a peek, which consumes nothing) once the answer
// takes longer than a few milliseconds, and every write to a stream reports
// a client gone. The handler's error, if it returns one, is recorded like
// any answer, so a client that resumes the stream learns how it ended. A
// stream the handler itself closes (SSE polling) is not a disconnect.
//
// Requests are checked before they reach the engine: Host and Origin against
// DNS rebinding, the method, the content type, the Accept header, the body
// size, the protocol version header and the session. Each failure has its
// status code and a JSON-RPC error body without id.
package http

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/auth"

	"github.com/klauspost/compress/zstd"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/internal/lograte"
	"github.com/mcpedge/mcpedge/session"
	"github.com/mcpedge/mcpedge/transport/netkit"
	"github.com/mcpedge/mcpedge/transport/netlimit"
	"github.com/mcpedge/mcpedge/transport/proxied"
	"github.com/valyala/fasthttp"
)

// DefaultAddr is where the HTTP transport listens by default.
const DefaultAddr = "127.0.0.1:7401"

// Options configure a Server. The zero value serves stateful Streamable
// HTTP on DefaultAddr at /mcp, with the legacy endpoints /sse and /message.
type Options struct {
	// Addr is host:port to listen on; empty means DefaultAddr. When the
	// host is a loopback address or "localhost", only loopback Host and
	// Origin values are accepted besides the allow-lists.
	Addr string
	// Path is the MCP endpoint; empty means "/mcp".
	Path string
	// Stateless serves every POST on a session of its own, issues no
	// session ids and answers GET and DELETE with 405.
	Stateless bool

	// AllowedHosts are Host header values accepted besides loopback ones:
	// "example.com" matches any port, "example.com:8443" only that port,
	// "*" any host. When the server is not bound to loopback and the list
	// is empty, any Host is accepted.
	AllowedHosts []string
	// AllowedOrigins are Origin header values accepted besides loopback
	// origins, compared whole ("https://app.example.com"); "*" accepts any.
	// When the server is not bound to loopback and the list is empty, any
	// Origin is accepted. Requests without Origin are always accepted.
	AllowedOrigins []string

	// CORSOrigins are the origins whose web pages may use the endpoints
	// across origins (cors.go): "https://app.example.com", compared whole;
	// "*" any origin, without credentials. A preflight is answered before
	// credentials are checked, with the MCP headers allowed; the answers to
	// a granted origin expose Mcp-Session-Id. An origin listed here passes
	// the Origin check of AllowedOrigins too. Empty means no CORS: OPTIONS
	// is answered 405.
	CORSOrigins []string

	// TrustedProxies are the peers whose word on the client's address is
	// taken (package proxied): a PROXY protocol header (v1 or v2) at the
	// start of their connections, else the X-Forwarded-For or Forwarded
	// header of each request. The address found is the one the
	// per-address limits count and the logs name. A PROXY header from any
	// other peer closes its connection; their forwarding headers are
	// ignored. nil trusts nobody.
	TrustedProxies *proxied.Trusted

	// TLS, when set, serves HTTPS: every connection is TLS 1.2 or later,
	// with the certificate (and client verification) TLS holds at its
	// handshake, so that a certificate stored later is served without a
	// restart. nil serves plain HTTP.
	TLS *TLS

	// SessionIdle is how long a session may stay unused (no request, no
	// open stream) before it is closed; <= 0 means 30 minutes.
	SessionIdle time.Duration
	// InitTimeout is how long a session created by initialize may wait
	// for its client's next request (notifications/initialized, usually)
	// before it is closed: sessions nobody uses are reaped this soon, not
	// after SessionIdle. <= 0 means 30 s.
	InitTimeout time.Duration
	// MaxSessions bounds the live sessions, legacy ones included. When
	// the table is full, a new session evicts the oldest one whose client
	// never made a request after initialize, else the idle one (no
	// request in flight, no open stream) used least recently; when every
	// session is busy, the initialize is answered 503 with Retry-After.
	// <= 0 means 65536.
	MaxSessions int
	// MaxSessionsPerIP bounds the live sessions of one client address
	// (of one /64 network for IPv6); an initialize beyond it is answered
	// 429 with Retry-After. 0 means a sixteenth of MaxSessions, at least
	// 64 (no limit when MaxSessions is not above 64); < 0 no limit.
	// Clients behind one NAT or proxy share an address: raise it for them.
	MaxSessionsPerIP int
	// Conns, when set, counts the server's connections against a limit
	// shared with other transports: a connection over it is answered 503
	// with Retry-After and closed as it is accepted, and each admitted
	// one is released when it closes. nil means no limit. A Limiter is
	// safe for concurrent use.
	Conns *netlimit.Limiter
	// EventStoreBytes bounds the SSE events a session keeps for replay;
	// <= 0 means 1 MiB. The newest event is always kept.
	EventStoreBytes int
	// MaxStreamBuffer bounds the bytes waiting to be written on one SSE
	// stream; a client that lets that much pile up is disconnected as a
	// slow consumer. <= 0 means 1 MiB. One event of any size is accepted.
	MaxStreamBuffer int

	// MaxBuffered bounds the memory of request bodies being received,
	// across all connections: bodies are read into buffers that grow with
	// the bytes received (never from the declared Content-Length), and
	// past the bound the requests holding the most are cut first (503 with
	// {"limit":"max-buffered"}, the connection closed, ErrBufferBudget)
	// until the total fits. 0 means netlimit.DefaultMaxBuffered(); < 0
	// means none. Ignored when Buffered is set.
	MaxBuffered int64
	// Buffered, when not nil, is the budget of partial inbound bytes,
	// shared with other transports (TCP's partial messages). nil means a
	// budget of MaxBuffered bytes for this transport alone.
	Buffered *netlimit.Budget
	// MaxOutboundTotal bounds the memory queued for clients across all
	// connections: the events waiting on SSE streams and the answers of
	// 64 KiB or more being written, counted by the capacity of their
	// buffers. Past it, the streams and answers holding the most are cut
	// first (ErrOutboundBudget) until the total fits. 0 means
	// netlimit.DefaultMaxOutboundTotal(); < 0 means none. Ignored when
	// Outbound is set.
	MaxOutboundTotal int64
	// Outbound, when not nil, is the budget of queued outbound bytes,
	// shared with other transports (TCP). nil means a budget of
	// MaxOutboundTotal bytes for this transport alone.
	Outbound *netlimit.Budget
	// KeepAlive is the interval of SSE comment lines on idle streams;
	// 0 means 15 s, < 0 disables them.
	KeepAlive time.Duration
	// Retry is the reconnection delay sent in the retry field of each
	// stream's priming event; <= 0 means 1 s.
	Retry time.Duration
	// CompressMin is the size from which responses are compressed (gzip or
	// zstd, as the client accepts); 0 means 1 KiB, < 0 disables.
	CompressMin int

	// NoLegacySSE disables the 2024-11-05 HTTP+SSE endpoints.
	NoLegacySSE bool
	// LegacySSEPath and LegacyMessagePath are the legacy endpoints; empty
	// means "/sse" and "/message".
	LegacySSEPath, LegacyMessagePath string

	// ReadTimeout bounds reading one request, headers and body: the first
	// request of a connection from when it is accepted, later ones from
	// their first byte; 0 means 30 s, < 0 none.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing one response, and each write on an SSE
	// stream: streams themselves live as long as their client reads them
	// (keep-alive comments go out every KeepAlive). 0 means 30 s, < 0
	// none.
	WriteTimeout time.Duration
	// IdleTimeout bounds the wait for the next request on a keep-alive
	// connection; 0 means 2 minutes, < 0 none.
	IdleTimeout time.Duration

	// Route, when set, is offered each request that names a session or a
	// task another server may own, after its Host, Origin and credentials
	// are checked and before anything else: POST, GET and DELETE with an
	// Mcp-Session-Id, a legacy POST with a sessionId, a 2026-07-28
	// tasks/get, tasks/update or tasks/cancel POST by its Mcp-Name, and a
	// 2026-07-28 tools/call, prompts/get or resources/read POST whose
	// requestState names the node that holds its work (engine.StateNode).
	// id is that session id, task id or requestState, valid during the
	// call; engine.SessionNode reads the node of each. Route returns true
	// when it answered the request itself (package cluster forwards it to
	// the node that owns id), false to let the server serve it. It runs on
	// the request's goroutine and may block for as long as the answer
	// takes.
	Route func(ctx *fasthttp.RequestCtx, id []byte) bool

	// Auth, when set, makes the server an OAuth 2.1 resource server: every
	// request to the endpoints carries a bearer token Auth verifies, and
	// the RFC 9728 metadata is served (auth.go, docs/authorization.md).
	Auth *auth.Verifier
}

// Sentinel errors: the causes of the connections, streams and sessions
// the server ends, each carrying its codec.CloseReason.
var (
	ErrClientGone   = codec.ReasonClientGone.Err("mcphttp: client disconnected")
	ErrSlowConsumer = codec.ReasonSlowConsumer.Err("mcphttp: slow consumer: stream buffer over the limit")
	ErrSessionIdle  = codec.ReasonSessionIdle.Err("mcphttp: session idle")
	ErrDeleted      = codec.ReasonDeleted.Err("mcphttp: session deleted by the client")
	ErrServerClosed = codec.ReasonServerClosed.Err("mcphttp: server closed")
	ErrStreamEnded  = codec.ReasonStreamEnded.Err("mcphttp: legacy SSE stream ended")
	errStateless    = codec.ReasonStateless.Err("mcphttp: stateless request served")
)

// Server is the Streamable HTTP transport. Serve it with ListenAndServe or
// Serve, or mount Handler on a fasthttp server of your own; stop it with
// Shutdown. Its methods are safe for concurrent use.
type Server struct {
	eng  *engine.Server
	opts Options
	log  *slog.Logger
	max  int // engine's MaxMessage

	path, ssePath, msgPath []byte
	allow                  atomic.Pointer[allowLists] // SetAllowed swaps it
	cors                   atomic.Pointer[corsList]   // SetCORS swaps it; nil: no CORS
	loopback               atomic.Bool                // bound to a loopback address

	// Sessions are indexed by the engine's table alone (eng.Sessions());
	// the transport keeps counts and the queue that eviction needs.
	nsess   atomic.Int64      // live sessions, legacy ones included (MaxSessions)
	perIP   *netlimit.Limiter // sessions per client address (MaxSessionsPerIP)
	pending pendingQueue      // sessions by age, for the init timeout and eviction
	lru     lruQueue          // sessions by last use, for eviction of idle ones

	calls sync.Pool // *call
	gzw   sync.Pool // *gzip.Writer
	gzr   sync.Pool // *gzip.Reader
	zsw   sync.Pool // *zstd.Encoder for streams

	zstdOnce sync.Once
	zenc     *zstd.Encoder
	zdec     *zstd.Decoder

	cobs engine.ConnObserver // nil: none (metrics.go)

	// The byte budgets (budget.go) and their holders on this server, and
	// the requests refused on their declared length (headerReceived).
	oversized sync.Map // *fasthttp.RequestHeader -> struct{}
	inb, outb *netlimit.Budget
	bodies    holders[*bodyRead]
	answers   holders[*answer]
	streams   holders[*streamHolder]
	detach    [3]func()
	warns     *lograte.Limiter // bad-input warnings, per client address

	srv      *fasthttp.Server
	mu       sync.Mutex
	ln       net.Listener
	ready    chan struct{}
	readyOne sync.Once
	closing  atomic.Bool
	stop     chan struct{}
	stopOne  sync.Once
	reaperWG sync.WaitGroup

	live liveStateless // stateless POSTs that stream

	lingering atomic.Int32 // refused connections being drained

	conns    connTable        // open connections and their states
	acc      *netkit.Acceptor // what Serve accepts from
	noAccept bool             // StopAccepting was called; under mu
	drain    netkit.Drainer   // Drain was called; its idle closer
	lingerWG sync.WaitGroup
}

var _ netkit.Transport = (*Server)(nil)

// New returns a Streamable HTTP transport serving eng. The session reaper
// starts with it and stops at Shutdown.
func New(eng *engine.Server, opts Options) *Server {
	if opts.Addr == "" {
		opts.Addr = DefaultAddr
	}
	if opts.Path == "" {
		opts.Path = "/mcp"
	}
	if opts.SessionIdle <= 0 {
		opts.SessionIdle = 30 * time.Minute
	}
	if opts.InitTimeout <= 0 {
		opts.InitTimeout = 30 * time.Second
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = 1 << 16
	}
	if opts.MaxSessionsPerIP == 0 {
		opts.MaxSessionsPerIP = perIPShare(opts.MaxSessions)
	} else if opts.MaxSessionsPerIP < 0 {
		opts.MaxSessionsPerIP = 0 // netlimit: none
	}
	if opts.EventStoreBytes <= 0 {
		opts.EventStoreBytes = 1 << 20
	}
	if opts.MaxStreamBuffer <= 0 {
		opts.MaxStreamBuffer = 1 << 20
	}
	if opts.KeepAlive == 0 {
		opts.KeepAlive = 15 * time.Second
	}
	if opts.Retry <= 0 {
		opts.Retry = time.Second
	}
	if opts.CompressMin == 0 {
		opts.CompressMin = 1 << 10
	}
	if opts.LegacySSEPath == "" {
		opts.LegacySSEPath = "/sse"
	}
	if opts.LegacyMessagePath == "" {
		opts.LegacyMessagePath = "/message"
	}
	if opts.MaxBuffered == 0 {
		opts.MaxBuffered = netlimit.DefaultMaxBuffered()
	}
	if opts.MaxOutboundTotal == 0 {
		opts.MaxOutboundTotal = netlimit.DefaultMaxOutboundTotal()
	}
	opts.ReadTimeout = timeoutOr(opts.ReadTimeout, 30*time.Second)
	opts.WriteTimeout = timeoutOr(opts.WriteTimeout, 30*time.Second)
	opts.IdleTimeout = timeoutOr(opts.IdleTimeout, 2*time.Minute)
	s := &Server{
		perIP:   netlimit.New(0, opts.MaxSessionsPerIP),
		eng:     eng,
		opts:    opts,
		log:     eng.Logger(),
		max:     eng.Options().MaxMessage,
		path:    []byte(opts.Path),
		ssePath: []byte(opts.LegacySSEPath),
		msgPath: []byte(opts.LegacyMessagePath),
		ready:   make(chan struct{}),
		stop:    make(chan struct{}),
		inb:     opts.Buffered,
		outb:    opts.Outbound,
		warns:   lograte.New(0, 0, 0),
	}
	if s.inb == nil {
		s.inb = netlimit.NewBudget(opts.MaxBuffered)
	}
	if s.outb == nil {
		s.outb = netlimit.NewBudget(opts.MaxOutboundTotal)
	}
	s.detach = [3]func(){s.inb.Attach(&s.bodies), s.outb.Attach(&s.answers), s.outb.Attach(&s.streams)}
	limitBodyPools()
	s.SetAllowed(opts.AllowedHosts, opts.AllowedOrigins)
	s.SetCORS(opts.CORSOrigins)
	s.loopback.Store(loopbackAddr(opts.Addr))
	s.calls.New = func() any { return &call{s: s, wake: make(chan struct{}, 1)} }
	s.srv = &fasthttp.Server{
		Handler:                      s.Handler(),
		ErrorHandler:                 s.httpError,
		ExpectHandler:                s.expect,
		HeaderReceived:               s.headerReceived, // budget.go
		Name:                         "mcpedge",
		NoDefaultServerHeader:        true,
		NoDefaultContentType:         true,
		ReadTimeout:                  opts.ReadTimeout,
		WriteTimeout:                 opts.WriteTimeout,
		IdleTimeout:                  opts.IdleTimeout,
		MaxRequestBodySize:           s.max,
		StreamRequestBody:            true, // bodies are read by readBody, under the budget
		DisablePreParseMultipartForm: true,
		CloseOnShutdown:              true,
		SecureErrorLogMessage:        true, // fasthttp's error logs never quote a request (headers, tokens)
		TCPKeepalive:                 true,
		Logger:                       fasthttpLogger{s.log},
	}
	s.srv.ConnState = s.connState
	s.observe() // metrics.go
	s.reaperWG.Add(1)
	go s.enforce() // budget.go
	if !opts.Stateless {
		s.reaperWG.Add(1)
		go s.reap()
	}
	return s
}

// Options returns the options in effect (defaults filled in), with the
// allow-lists SetAllowed last set.
func (s *Server) Options() Options {
	o := s.opts
	al := s.allow.Load()
	o.AllowedHosts, o.AllowedOrigins = al.rawHosts, al.rawOrig
	o.CORSOrigins = nil
	if cl := s.cors.Load(); cl != nil {
		o.CORSOrigins = cl.raw
	}
	return o
}

// Handler returns the transport's fasthttp request handler, for mounting on
// a fasthttp server of your own. Give that server a MaxRequestBodySize of
// the engine's MaxMessage, StreamRequestBody (so that request bodies are
// read by the handler, under MaxBuffered, once their headers are checked;
// without it fasthttp allocates each body from its declared length) and
// timeouts as Options describes, and leave DisableHeaderNamesNormalizing
// off: headers are looked up by their normalized names.
func (s *Server) Handler() fasthttp.RequestHandler { return s.serveHTTP }

// serveHTTP is the fasthttp handler: handle, with a panic in the
// transport's own code contained to its request (500 and a JSON-RPC
// -32603 body), logged and counted by the engine. fasthttp would let it
// end the process.
func (s *Server) serveHTTP(ctx *fasthttp.RequestCtx) {
	defer func() {
		if p := recover(); p != nil {
			s.eng.ReportPanic(p, "mcphttp: "+string(ctx.Method())+" "+string(ctx.Path()), nil)
			ctx.Response.Reset()
			s.fail(ctx, fasthttp.StatusInternalServerError, codec.CodeInternalError, "Internal Server Error")
			ctx.SetConnectionClose()
		}
	}()
	if s.drain.Draining() || s.eng.ShuttingDown() {
		// Draining: each answer ends its connection, so that no client
		// sends its next request on a keep-alive connection that Shutdown
		// is about to close under it.
		ctx.SetConnectionClose()
	}
	streamed := ctx.Request.IsBodyStream()
	if streamed && ctx.Request.Header.ContentLength() > s.max {
		// Refused on its declared length, before a byte of it is read
		// (headerReceived).
		s.refusedOversized(ctx)
		ctx.SetConnectionClose()
		s.tooLarge(ctx)
		return
	}
	s.handle(ctx)
	if streamed && ctx.Request.IsBodyStream() {
		s.dropBody(ctx) // budget.go
	}
	if s.cobs != nil {
		s.countBytes(ctx) // metrics.go
	}
	s.holdAnswer(ctx) // budget.go
}

// ListenAndServe listens on Options.Addr and serves until Shutdown, when it
// returns nil. It returns an error if it cannot listen. When ctx ends, the
// server is shut down at once, as by Shutdown, without draining the
// engine; for a graceful stop follow the shutdown order of package mcpedge
// (see Shutdown), or serve with mcpedge.Server, which does.
func (s *Server) ListenAndServe(ctx context.Context) error {
	ln, err := listen(s.opts.Addr)
	if err != nil {
		s.readyOne.Do(func() { close(s.ready) })
		return fmt.Errorf("mcphttp: %w", err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves connections accepted from ln until Shutdown. When ln is a
// TCP listener its address decides whether the loopback rules apply.
// Accept errors that a later accept may not have (EMFILE, ENFILE,
// ECONNABORTED...) are logged and retried after a pause, 5 ms doubling to
// 1 s, as net/http does; only a failed listener ends Serve early. When
// ctx ends, the server is shut down at once, as by Shutdown.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { _ = s.Shutdown(context.Background()) })
	defer stop()
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		s.loopback.Store(a.IP.IsLoopback())
	}
	s.mu.Lock()
	if s.closing.Load() || s.noAccept {
		s.mu.Unlock()
		_ = ln.Close()
		return ErrServerClosed
	}
	s.ln = ln
	s.acc = netkit.NewAcceptor(ln, netkit.AcceptConfig{
		Transport: "http", Log: s.log, Conns: s.opts.Conns, Refuse: s.refuse, Observer: s.cobs,
	})
	s.mu.Unlock()
	s.readyOne.Do(func() { close(s.ready) })
	var l net.Listener = admitted{s.acc, s.opts.Conns, s}
	if s.opts.TLS != nil {
		// The handshake runs on the connection's goroutine, at its first
		// read, bounded by ReadTimeout; the connection limit counts it
		// from accept.
		l = tls.NewListener(l, s.opts.TLS.Listener("http/1.1"))
	}
	return s.srv.Serve(l)
}

// Addr waits until the server listens and returns its address (useful with
// port 0), or nil if it failed to listen or ctx ended first.
func (s *Server) Addr(ctx context.Context) net.Addr {
	select {
	case <-s.ready:
	case <-ctx.Done():
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Sessions returns the number of live HTTP sessions, legacy ones included.
func (s *Server) Sessions() int { return int(s.nsess.Load()) }

// Shutdown stops accepting connections, ends every open SSE stream and
// closes the transport's sessions, then waits until the connections are
// idle or ctx ends (requests already sent on idle connections are read
// first). It is the last step of the shutdown order documented in package
// mcpedge (whose Server.Shutdown runs the whole order): StopAccepting and
// Drain, then drain the engine (engine.Server.Shutdown: new requests
// refused with -32000, those in flight finished and their answers
// written), then call Shutdown.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing.Store(true)
	s.mu.Unlock()
	s.readyOne.Do(func() { close(s.ready) })
	s.stopOne.Do(func() { close(s.stop) })
	s.reaperWG.Wait()
	s.drain.Wait()
	for _, d := range s.detach {
		d()
	}
	s.settle(ctx)
	s.eng.Sessions().Range(func(sess *session.Session) bool {
		if s.owns(sess) {
			s.eng.Conn(sess).Close(ErrServerClosed)
		}
		return true
	})
	s.live.closeAll(s, ErrServerClosed)
	err := s.srv.ShutdownWithContext(ctx)
	s.lingerWG.Wait() // bounded by refuseLinger
	if errors.Is(err, net.ErrClosed) {
		err = nil // StopAccepting closed the listener already
	}
	if err != nil {
		return fmt.Errorf("mcphttp: shutdown: %w", err)
	}
	return nil
}

// reap closes idle sessions, and those not initialized in time, until
// Shutdown.
func (s *Server) reap() {
	defer s.reaperWG.Done()
	every := min(max(min(s.opts.SessionIdle, s.opts.InitTimeout)/4, 10*time.Millisecond), 30*time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.reapIdle(time.Now())
		}
	}
}

// reapIdle closes the Streamable HTTP sessions of this server (found in
// the engine's table) that have no request in flight and no open stream
// and that are idle since before now-SessionIdle or were created before
// now-InitTimeout and never used since initialize, returning how many it
// closed. Legacy sessions live as long as their stream and are not reaped.
func (s *Server) reapIdle(now time.Time) int {
	cutoff, initCutoff := now.Add(-s.opts.SessionIdle), now.Add(-s.opts.InitTimeout)
	n, uninit := 0, 0
	s.eng.Sessions().Range(func(sess *session.Session) bool {
		h := s.hsessionOf(sess)
		if h == nil || sess.InFlight() != 0 || h.busy() {
			return true
		}
		idle := sess.IdleSince().Before(cutoff)
		stale := !idle && h.created.Before(initCutoff) && h.pendingInit(sess)
		if idle || stale {
			cause := ErrSessionIdle
			if stale {
				cause, uninit = ErrInitTimeout, uninit+1
			}
			s.eng.Conn(sess).Close(cause)
			n++
		}
		return true
	})
	s.pending.prune(initCutoff)
	if n > 0 {
		s.log.Debug("reaped idle HTTP sessions", "count", n, "not_initialized", uninit)
	}
	return n
}

// zstdCodec returns the shared zstd encoder and decoder, created on first
// use. EncodeAll and DecodeAll are safe for concurrent use.
func (s *Server) zstdCodec() (*zstd.Encoder, *zstd.Decoder) {
	s.zstdOnce.Do(func() {
		// Errors are possible only for invalid options, which these are not.
		s.zenc, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithLowerEncoderMem(true))
		s.zdec, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(uint64(s.max)), zstd.WithDecoderLowmem(true))
	})
	return s.zenc, s.zdec
}

// fasthttpLogger sends fasthttp's own messages to the server's logger.
type fasthttpLogger struct{ l *slog.Logger }

func (f fasthttpLogger) Printf(format string, args ...any) {
	if f.l.Enabled(context.Background(), slog.LevelDebug) {
		f.l.Debug("fasthttp: " + fmt.Sprintf(format, args...))
	}
}

// discard is the outbound sink of stateless sessions: there is no stream
// for messages tied to no request.
type discard struct{}

func (discard) Send(b *codec.Buffer) error {
	codec.PutBuffer(b)
	return session.ErrClosed
}

// timeoutOr returns def for a zero timeout and 0 (fasthttp's "none") for a
// negative one.
func timeoutOr(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

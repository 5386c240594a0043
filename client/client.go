// Package client is an MCP client library for any MCP server: it connects
// over stdio (a subprocess), Streamable HTTP, the legacy HTTP+SSE transport
// or TCP, performs the initialize handshake, and offers typed calls for
// every client-to-server method of revision 2025-11-25, handlers for the
// server's requests (sampling, elicitation, roots, ping), notification
// callbacks, optional reconnection and keep-alive, and a connection pool.
//
// It speaks the stateless revision 2026-07-28 too (see Options.Era): by
// default it sends server/discover first and falls back to initialize
// when the server answers as one of the session revisions. What the
// server says about itself is read the same way in both:
// Client.ServerInfo, ServerCapabilities, ProtocolVersion and Instructions
// (InitializeResult and DiscoverResult are each one era's). In 2026-07-28
// every request carries the client's _meta (and, over HTTP, the
// Mcp-Method, Mcp-Name and Mcp-Param-* headers), results asking for input
// are fulfilled with the handlers below and retried (Options.MaxInputRounds),
// and Listen opens a subscriptions/listen stream.
//
// A Client moves through connecting → initializing → ready → closed; a
// call made in any state but ready fails at once with ErrNotReady. With
// reconnection enabled, a dropped connection sends it back to connecting,
// and it re-initializes and re-subscribes on its own.
//
// Requests are tracked by session.Tracker, the tracker the server engine
// uses for its own requests: each gets an integer id, a timeout
// (Options.RequestTimeout) and context cancellation that sends
// notifications/cancelled; every pending request fails at once, with the
// cause, when the connection drops.
//
// A Client is safe for concurrent use; it is built to carry tens of
// thousands of calls per second (see CallRaw).
package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
	"github.com/puzpuzpuz/xsync/v4"
)

// Version is the client's default ClientInfo.Version.
const Version = "0.1.0"

// State is where a Client is in its life.
type State int32

// The states of a Client.
const (
	StateIdle         State = iota // constructed, Connect not called yet
	StateConnecting                // opening the transport
	StateInitializing              // initialize sent, waiting for the result
	StateReady                     // calls allowed
	StateClosed                    // closed by Close or by a fatal error
)

// String returns the state's lower-case name.
func (s State) String() string {
	switch s {
	case StateIdle:
		return "idle"
	case StateConnecting:
		return "connecting"
	case StateInitializing:
		return "initializing"
	case StateReady:
		return "ready"
	case StateClosed:
		return "closed"
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// Errors returned by the client. Errors from calls wrap one of these, a
// connection error of transport.go, or a *codec.Error answered by the
// server (use errors.As).
var (
	ErrNotReady           = errors.New("client: not ready")
	ErrClientClosed       = errors.New("client: closed")
	ErrAlreadyConnected   = errors.New("client: Connect called twice")
	ErrTimeout            = errors.New("client: request timed out")
	ErrInitTimeout        = errors.New("client: initialize timed out")
	ErrUnsupportedVersion = errors.New("client: server chose an unsupported protocol version")
	ErrKeepAlive          = errors.New("client: keep-alive: server stopped answering pings")
	ErrReconnectFailed    = errors.New("client: reconnection failed")
	ErrReplyLater         = errors.New("client: the handler will reply later")
	ErrAlreadyReplied     = errors.New("client: server request already answered")
	ErrServerCancelled    = errors.New("client: the server cancelled its request")
)

// Options configure a Client. The zero value works: the client declares
// no capability, waits 60 s for answers and 30 s for initialize, and does
// not reconnect.
type Options struct {
	// ClientInfo names the client in initialize; the zero value means
	// {Name: "mcpedge-client", Version: Version}.
	ClientInfo mcp.Implementation
	// ProtocolVersion is the session revision requested by initialize;
	// empty means mcp.LatestVersion. The server's choice must be one of
	// mcp.SessionVersions. A 2026-07-28 revision here is the one
	// server/discover asks for (initialize then asks for
	// mcp.LatestVersion).
	ProtocolVersion string
	// Era picks the protocol generation: EraAuto (the zero value) sends
	// server/discover first and falls back to initialize when the
	// server does not speak 2026-07-28; EraModern and EraLegacy force
	// one. The outcome is kept for the client's life (reconnections and
	// all).
	Era Era
	// LogLevel, in 2026-07-28, is the lowest level of the log messages
	// asked for with each request (SetLogLevel changes it); empty asks
	// for none. Session revisions ignore it: call SetLogLevel.
	LogLevel string
	// MaxInputRounds bounds the input rounds (2026-07-28 multi
	// round-trip requests) of one call; <= 0 means 8.
	MaxInputRounds int
	// Capabilities are declared as they are when set; nil derives them
	// from the handlers below (sampling, elicitation with form mode,
	// roots with listChanged).
	Capabilities *mcp.ClientCapabilities

	// Handlers for the server's requests. Each runs on a goroutine of its
	// own with a context cancelled when the server cancels the request or
	// the connection ends. A handler may return ErrReplyLater and answer
	// later with ServerRequest.Reply or Fail. A request without a handler
	// is answered "method not found"; ping is always answered.
	OnSampling    SamplingHandler
	OnElicitation ElicitationHandler
	OnRoots       RootsHandler

	// Notification callbacks. They run one at a time, in arrival order, on
	// a dispatch goroutine of the client: they may call the client, but a
	// callback that blocks holds back the notifications behind it (and,
	// once 256 are queued, the connection's reads).
	OnToolListChanged     func()
	OnResourceListChanged func()
	OnPromptListChanged   func()
	// OnResourceUpdated is called for every notifications/resources/updated
	// (Subscribe's callbacks are called for their URI as well).
	OnResourceUpdated func(uri string)
	OnLog             func(p *mcp.LoggingMessageParams)
	// OnProgress receives progress whose token is not that of a call made
	// with WithProgress.
	OnProgress  func(p *mcp.ProgressParams)
	OnCancelled func(p *mcp.CancelledParams)
	// OnNotification receives every notification, after the callbacks
	// above, except the progress of calls made with WithProgress; params
	// is the client's own copy.
	OnNotification func(method string, params []byte)
	// OnConnectionLost and OnReconnected report reconnection (when
	// Reconnect is set).
	OnConnectionLost func(err error)
	OnReconnected    func()

	// RequestTimeout bounds each call; 0 means 60 s, < 0 none.
	RequestTimeout time.Duration
	// InitTimeout bounds the initialize handshake; <= 0 means 30 s.
	InitTimeout time.Duration
	// Reconnect, if set, makes the client reconnect after a drop.
	Reconnect *ReconnectPolicy
	// KeepAlive, if > 0, pings the server at that interval; after
	// KeepAliveMisses unanswered pings in a row (<= 0 means 3) the
	// connection is declared dead.
	KeepAlive       time.Duration
	KeepAliveMisses int

	// Logger receives the client's logs; nil discards them.
	Logger *slog.Logger
}

// ProgressFunc receives progress notifications for one call.
type ProgressFunc func(progress, total float64, message string)

// Client is a connection to one MCP server. Its methods are safe for
// concurrent use.
type Client struct {
	t    Transport
	opts Options
	log  *slog.Logger
	caps mcp.ClientCapabilities

	state    atomic.Int32
	cur      atomic.Pointer[link]
	initRes  atomic.Pointer[mcp.InitializeResult]
	inflight atomic.Int64
	tools    atomic.Pointer[toolSet]

	// 2026-07-28: the era chosen (EraAuto until the first handshake), the
	// _meta of modern requests, the discover result and the server's
	// identity from its _meta, the per-request log level and the
	// x-mcp-header parameters of the tools listed.
	era            atomic.Int32
	modern         atomic.Pointer[modernState]
	discovered     atomic.Pointer[mcp.DiscoverResult]
	discoveredInfo atomic.Pointer[mcp.Implementation]
	logLevel       atomic.Pointer[string]
	legacyVersion  string
	hdrTools       *xsync.Map[string, []mcp.HeaderParam]

	mu       sync.Mutex
	subs     map[string][]func(uri string)
	closing  bool
	closeErr error
	done     chan struct{}
	doneOnce sync.Once

	bgCtx    context.Context
	bgCancel context.CancelFunc
	bg       sync.WaitGroup
	notes    chan func()
}

// New returns a client for the server t reaches; call Connect to use it.
func New(t Transport, opts Options) *Client {
	if opts.ClientInfo.Name == "" {
		opts.ClientInfo = mcp.Implementation{Name: "mcpedge-client", Version: Version}
	}
	if opts.ProtocolVersion == "" {
		opts.ProtocolVersion = mcp.LatestVersion
	}
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = 60 * time.Second
	}
	if opts.InitTimeout <= 0 {
		opts.InitTimeout = 30 * time.Second
	}
	if opts.KeepAliveMisses <= 0 {
		opts.KeepAliveMisses = 3
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c := &Client{
		t: t, opts: opts, log: log,
		subs:     map[string][]func(string){},
		done:     make(chan struct{}),
		notes:    make(chan func(), 256),
		hdrTools: xsync.NewMap[string, []mcp.HeaderParam](),
	}
	c.legacyVersion = opts.ProtocolVersion
	if mcp.StatelessVersion(opts.ProtocolVersion) {
		c.legacyVersion = mcp.LatestVersion
	}
	if opts.LogLevel != "" {
		lv := opts.LogLevel
		c.logLevel.Store(&lv)
	}
	if opts.Capabilities != nil {
		c.caps = *opts.Capabilities
	} else {
		if opts.OnSampling != nil {
			c.caps.Sampling = &mcp.SamplingCapability{}
		}
		if opts.OnElicitation != nil {
			c.caps.Elicitation = &mcp.ElicitationCapability{Form: codec.RawJSON("{}")}
		}
		if opts.OnRoots != nil {
			c.caps.Roots = &mcp.RootsCapability{ListChanged: true}
		}
	}
	c.bgCtx, c.bgCancel = context.WithCancel(context.Background())
	return c
}

// Dial creates a client and connects it.
func Dial(ctx context.Context, t Transport, opts Options) (*Client, error) {
	c := New(t, opts)
	if err := c.Connect(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// Connect opens the transport and performs the initialize handshake. On
// failure the client is closed and the error says why (ErrInitTimeout,
// ErrUnsupportedVersion, a transport error, the server's error).
func (c *Client) Connect(ctx context.Context) error {
	if !c.state.CompareAndSwap(int32(StateIdle), int32(StateConnecting)) {
		return ErrAlreadyConnected
	}
	c.bg.Add(1)
	go c.dispatch()
	if err := c.connectOnce(ctx); err != nil {
		c.terminate(err)
		c.bg.Wait()
		return err
	}
	return nil
}

// connectOnce opens a connection and initializes it.
func (c *Client) connectOnce(ctx context.Context) error {
	c.setState(StateConnecting)
	l := newLink(c)
	conn, err := c.t.Connect(ctx, l)
	if err != nil {
		return fmt.Errorf("client: connect: %w", err)
	}
	l.conn = conn
	_, stream := conn.(*streamConn)
	l.blocking = !stream
	close(l.connSet)
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		conn.Close()
		return ErrClientClosed
	}
	c.cur.Store(l)
	c.mu.Unlock()

	c.setState(StateInitializing)
	if err := c.handshake(ctx, l); err != nil {
		conn.Close()
		return err
	}
	// Re-establish subscriptions (after a reconnect; listen streams
	// re-issue themselves).
	c.mu.Lock()
	uris := make([]string, 0, len(c.subs))
	for u := range c.subs {
		uris = append(uris, u)
	}
	c.mu.Unlock()
	for _, u := range uris {
		if err := c.subscribeOn(ctx, l, u); err != nil {
			c.log.Warn("re-subscribe failed", "uri", u, "err", err)
		}
	}
	// Ready only while the connection lives: lost() acts on ready
	// connections, and both decide under c.mu.
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return ErrClientClosed
	}
	if l.dead.Load() {
		return fmt.Errorf("client: connection lost during initialization: %w", l.cause)
	}
	if c.opts.KeepAlive > 0 {
		c.bg.Add(1)
		go c.keepAlive(l)
	}
	c.setState(StateReady)
	return nil
}

func (c *Client) initialize(ctx context.Context, l *link, version string) error {
	ictx, cancel := context.WithTimeoutCause(ctx, c.opts.InitTimeout, ErrInitTimeout)
	defer cancel()
	params, err := codec.Marshal(&mcp.InitializeParams{
		ProtocolVersion: version,
		Capabilities:    c.caps,
		ClientInfo:      c.opts.ClientInfo,
	})
	if err != nil {
		return fmt.Errorf("client: initialize: %w", err)
	}
	raw, err := l.call(ictx, mcp.MethodInitialize, params, nil, 0)
	if err != nil {
		if errors.Is(context.Cause(ictx), ErrInitTimeout) && ctx.Err() == nil {
			return fmt.Errorf("%w after %v", ErrInitTimeout, c.opts.InitTimeout)
		}
		return fmt.Errorf("client: initialize: %w", err)
	}
	var res mcp.InitializeResult
	if err := codec.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("%w: initialize result: %w", ErrProtocol, err)
	}
	if !mcp.SupportedVersion(res.ProtocolVersion) {
		return fmt.Errorf("%w: %q", ErrUnsupportedVersion, res.ProtocolVersion)
	}
	c.initRes.Store(&res)
	c.tools.Store(nil)
	neg, _ := l.conn.(Negotiator)
	if neg != nil {
		neg.Negotiated(res.ProtocolVersion)
	}
	if err := l.notify(ictx, mcp.NotificationInitialized, nil); err != nil {
		return fmt.Errorf("client: notifications/initialized: %w", err)
	}
	if neg != nil {
		neg.Initialized()
	}
	return nil
}

func (c *Client) setState(s State) { c.state.Store(int32(s)) }

// State returns the client's current state.
func (c *Client) State() State { return State(c.state.Load()) }

// InFlight returns the number of calls waiting for an answer.
func (c *Client) InFlight() int64 { return c.inflight.Load() }

// Done is closed when the client is closed, by Close or by a connection
// loss it did not (or could not) recover from; Err then says why.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err returns why the client closed, or nil while it is open.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return c.closeErr
	}
	return nil
}

// Close closes the connection and stops the client's goroutines. Pending
// calls fail with ErrClosed. Close is idempotent.
func (c *Client) Close() error {
	c.terminate(ErrClosed)
	if l := c.cur.Load(); l != nil {
		l.conn.Close()
	}
	c.bg.Wait()
	return nil
}

// terminate moves the client to closed with cause (the first cause wins)
// and stops its background work. It does not wait, so it may run on a
// connection's read goroutine.
func (c *Client) terminate(cause error) {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	c.closing = true
	c.closeErr = cause
	c.setState(StateClosed)
	c.mu.Unlock()
	c.bgCancel()
	c.doneOnce.Do(func() { close(c.done) })
}

// lost is called when a connection ends; it acts only on the current,
// ready one (a connection that dies while initializing fails connectOnce).
func (c *Client) lost(l *link, cause error) {
	c.mu.Lock()
	if c.closing || c.cur.Load() != l || c.State() != StateReady {
		c.mu.Unlock()
		return
	}
	if c.opts.Reconnect == nil {
		c.mu.Unlock()
		c.log.Warn("connection lost", "err", cause)
		c.terminate(cause)
		return
	}
	c.setState(StateConnecting)
	c.bg.Add(1)
	c.mu.Unlock()
	c.log.Warn("connection lost; reconnecting", "err", cause)
	if f := c.opts.OnConnectionLost; f != nil {
		f(cause)
	}
	go c.reconnect(cause)
}

// link returns the current connection if the client is ready.
func (c *Client) readyLink() (*link, error) {
	s := State(c.state.Load())
	if s == StateReady {
		if l := c.cur.Load(); l != nil {
			return l, nil
		}
	}
	if s == StateClosed {
		if err := c.Err(); err != nil && !errors.Is(err, ErrClosed) {
			return nil, fmt.Errorf("%w: %w", ErrClientClosed, err)
		}
		return nil, ErrClientClosed
	}
	return nil, fmt.Errorf("%w (state %s)", ErrNotReady, s)
}

// request sends one request on the current connection and waits for its
// answer. The result is the caller's.
func (c *Client) request(ctx context.Context, method string, params []byte, progress ProgressFunc) ([]byte, error) {
	l, err := c.readyLink()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	c.inflight.Add(1)
	defer c.inflight.Add(-1)
	res, err := l.call(ctx, method, params, progress, c.opts.RequestTimeout)
	if err != nil && method == mcp.MethodToolsCall && c.modern.Load() != nil && headerMismatch(err) {
		// The tool's x-mcp-header parameters changed, or were not known:
		// list the tools again and retry once.
		if _, lerr := c.AllTools(ctx); lerr == nil {
			res, err = l.call(ctx, method, params, progress, c.opts.RequestTimeout)
		}
	}
	if err == nil && c.modern.Load() != nil {
		res, err = c.rounds(ctx, method, params, res, progress)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	return res, nil
}

// dispatch runs notification callbacks, in order, until the client stops.
func (c *Client) dispatch() {
	defer c.bg.Done()
	for {
		select {
		case f := <-c.notes:
			f()
		case <-c.bgCtx.Done():
			return
		}
	}
}

// enqueue hands f to the dispatch goroutine, waiting while its queue is
// full.
func (c *Client) enqueue(f func()) {
	select {
	case c.notes <- f:
	case <-c.bgCtx.Done():
	}
}

// link is one connection and the state tied to it: a tracker for the
// requests sent on it and the server requests being served.
type link struct {
	c       *Client
	conn    Conn
	connSet chan struct{}
	tracker *session.Tracker
	// blocking is set for connections whose Send may carry the answer
	// (anything but a framed stream).
	blocking bool

	progress  *xsync.Map[int64, ProgressFunc]
	nprogress atomic.Int32
	srv       *xsync.Map[string, *ServerRequest]
	listens   *xsync.Map[int64, *Subscription]

	dead  atomic.Bool
	done  chan struct{}
	cause error // set before dead

}

func newLink(c *Client) *link {
	return &link{
		c:        c,
		connSet:  make(chan struct{}),
		tracker:  session.NewTracker(),
		progress: xsync.NewMap[int64, ProgressFunc](),
		srv:      xsync.NewMap[string, *ServerRequest](),
		listens:  xsync.NewMap[int64, *Subscription](),
		done:     make(chan struct{}),
	}
}

// call sends a request and waits for the answer, ctx's end, timeout (if
// > 0) or the connection's end.
func (l *link) call(ctx context.Context, method string, params []byte, progress ProgressFunc, timeout time.Duration) ([]byte, error) {
	return l.callx(ctx, method, params, progress, timeout, nil)
}

// callx is call with started, if not nil, called with the request's id
// before it is sent. In 2026-07-28 the client's _meta is added to params.
func (l *link) callx(ctx context.Context, method string, params []byte, progress ProgressFunc, timeout time.Duration, started func(id int64)) ([]byte, error) {
	if l.blocking {
		// The answer may come back inside Send (HTTP): the deadline must
		// bound Send too, and ending ctx when the call returns stops the
		// stream that may still carry it.
		var cancel context.CancelFunc
		if timeout > 0 {
			ctx, cancel = context.WithTimeoutCause(ctx, timeout, ErrTimeout)
		} else {
			ctx, cancel = context.WithCancel(ctx)
		}
		defer cancel()
		timeout = 0
	}
	call, err := l.tracker.Start()
	if err != nil {
		return nil, err
	}
	if progress != nil {
		l.progress.Store(call.ID, progress)
		l.nprogress.Add(1)
		defer func() {
			l.progress.Delete(call.ID)
			l.nprogress.Add(-1)
		}()
	}
	token := progress != nil
	if ms := l.c.modern.Load(); ms != nil && method != mcp.MethodInitialize {
		if params, err = l.c.modernParams(ms, params, call.ID, token); err != nil {
			l.tracker.Forget(call)
			return nil, err
		}
		token = false
	}
	if started != nil {
		started(call.ID)
	}
	b := codec.GetBuffer()
	b.B = appendRequest(b.B, call.ID, method, params, token)
	err = l.conn.Send(ctx, b.B)
	codec.PutBuffer(b)
	if err == nil {
		var reply session.Reply
		reply, err = l.tracker.Wait(ctx, call, timeout)
		if err == nil {
			if reply.Err != nil {
				return nil, reply.Err
			}
			return reply.Result, nil
		}
		if errors.Is(err, session.ErrTimeout) {
			err = ErrTimeout
		}
	} else {
		l.tracker.Forget(call)
	}
	if ctx.Err() != nil {
		if cause := context.Cause(ctx); !errors.Is(err, cause) {
			err = cause
		}
	}
	// A listen stream on HTTP ends with its response stream: nothing to
	// send.
	listenHTTP := method == mcp.MethodSubscriptionsListen && l.blocking
	if (ctx.Err() != nil || errors.Is(err, ErrTimeout)) && method != mcp.MethodInitialize && !listenHTTP && !l.dead.Load() {
		l.cancelRequest(call.ID, err)
	}
	return nil, err
}

// cancelRequest tells the server a request was abandoned. It runs apart:
// the caller is returning, and an HTTP send is a round trip.
func (l *link) cancelRequest(id int64, cause error) {
	reason := "cancelled"
	if cause != nil {
		reason = cause.Error()
	}
	b := make([]byte, 0, 96+len(reason))
	b = append(b, `{"requestId":`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"reason":`...)
	b = codec.AppendString(b, reason)
	b = append(b, '}')
	msg := codec.AppendNotification(nil, mcp.NotificationCancelled, b)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := l.conn.Send(ctx, msg); err != nil {
			l.c.log.Debug("notifications/cancelled not sent", "err", err)
		}
	}()
}

// notify sends a notification.
func (l *link) notify(ctx context.Context, method string, params []byte) error {
	b := codec.GetBuffer()
	b.B = codec.AppendNotification(b.B, method, params)
	err := l.conn.Send(ctx, b.B)
	codec.PutBuffer(b)
	return err
}

// kill declares the connection dead with cause.
func (l *link) kill(cause error) {
	if a, ok := l.conn.(interface{ Abort(error) }); ok {
		a.Abort(cause)
		return
	}
	go l.conn.Close()
}

// Closed implements Inbound.
func (l *link) Closed(err error) {
	if err == nil {
		err = ErrConnectionLost
	}
	l.cause = err
	l.dead.Store(true)
	l.tracker.FailAll(err)
	l.srv.Range(func(_ string, r *ServerRequest) bool {
		r.cancel(err)
		return true
	})
	close(l.done)
	l.c.lost(l, err)
}

// appendRequest appends a request with integer id; with token, params get
// _meta.progressToken = id spliced in front of their members.
func appendRequest(dst []byte, id int64, method string, params []byte, token bool) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = strconv.AppendInt(dst, id, 10)
	dst = append(dst, `,"method":`...)
	dst = codec.AppendString(dst, method)
	switch {
	case token:
		dst = append(dst, `,"params":{"_meta":{"progressToken":`...)
		dst = strconv.AppendInt(dst, id, 10)
		dst = append(dst, '}')
		rest := trimSpace(params)
		if len(rest) > 1 && rest[0] == '{' {
			if inner := trimSpace(rest[1:]); len(inner) > 0 && inner[0] != '}' {
				dst = append(dst, ',')
				dst = append(dst, inner...)
				return append(dst, '}')
			}
		}
		dst = append(dst, '}')
	case len(params) > 0:
		dst = append(dst, `,"params":`...)
		dst = append(dst, params...)
	}
	return append(dst, '}')
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	return b
}

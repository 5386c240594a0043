// Package engine dispatches MCP messages from transports to handlers. It owns
// the session table, the registries, the bounded worker pool and the
// notification bus. Package mcpedge (the module's root) wraps it with its
// transports in one Server, the embedding API; use this package directly to
// drive transports of your own. Shut a Server down in the order documented
// in package mcpedge: the transports stop accepting and close their idle
// connections, this engine drains, then the transports stop.
//
// Transports need one thing of it, a Conn per session (Open, or
// OpenStateless for one exchange of the stateless revision): a message's
// path is Conn.HandleFrame (a frame, decoded here) or Conn.HandleMessage (a
// message the transport decoded), which never block: an answer the engine
// gives at once is appended to the caller's output, and a request for a
// handler is copied once and run on the worker pool, its answer going to
// the request's reply sink (a Replier is told which message is the
// answer). Other server messages go to the session's Out sink. Which
// method is served how, in which revision, is the method table's to say
// (methods.go).
package engine

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"log/slog"
	"math"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
	"github.com/panjf2000/ants/v2"
)

// Options configure a Server. The zero value works.
type Options struct {
	// Name and Version identify the server in initialize (defaults
	// "mcpedge" and the module version).
	Name, Title, Version string
	// Instructions are sent in the initialize result.
	Instructions string

	// Workers bounds the handlers running at once on the worker pool, on
	// every transport; <= 0 means 256 per CPU. A request that finds every
	// worker busy waits for one in its client's queue, served in turn
	// with the other clients' (the fair scheduler, sched.go).
	Workers int
	// QueuePerClient bounds the requests of one client waiting for a
	// worker: one authenticated subject, else one session, else (a
	// stateless 2026-07-28 client) one address; 0 means 64, < 0 no bound
	// but QueueTotal. A request over it is refused with CodeServerBusy
	// and the limit "queue".
	QueuePerClient int
	// QueueTotal bounds the requests of all clients waiting for a worker;
	// <= 0 means 4096. A request over it is refused with CodeServerBusy
	// and the limit "workers".
	QueueTotal int
	// MaxInflight bounds the requests one session has in flight, being
	// served or waiting for a worker, a ceiling on its share of the
	// workers; a stateless 2026-07-28 client's are counted by its
	// subject, else its address. 0 means 64, < 0 no limit. A request
	// over it is refused with CodeServerBusy and the limit
	// "max-inflight".
	MaxInflight int
	// MaxSubscriptions bounds the subscriptions one session holds: its
	// resources/subscribe subscriptions and the resource URIs of its
	// subscriptions/listen streams together, each URI counted once per
	// request, and their URIs to session.URIBudget (256) bytes each on
	// average; 0 means 1024, < 0 no limit. A subscribe or listen over it
	// is refused with CodeServerBusy and the limit "subscriptions". A URI
	// is at most 8 KiB (longer: CodeInvalidParams).
	MaxSubscriptions int
	// Rate, if > 0, bounds each session's requests per second, with bursts
	// of RateBurst; a request over it is refused with CodeServerBusy, the
	// limit "rate" and retryAfterMs. A session's bucket starts with the
	// tokens of its client's latest session (its subject, else its
	// address), so that a new session does not start a client afresh; a
	// stateless 2026-07-28 client's requests share one bucket per subject,
	// else per address (rates.go).
	Rate float64
	// RateBurst is the burst of Rate and RateIP; <= 0 means the rate
	// rounded up (at least 1).
	RateBurst int
	// RateIP, if > 0, bounds the requests per second of all the sessions
	// of one client address (as the transport reports it), with bursts of
	// RateBurst; over it the limit is "rate-ip".
	RateIP float64
	// RateSubject, if > 0, bounds the requests per second of one
	// authenticated subject (an unauthenticated client: its address),
	// over all its sessions, connections and stateless requests, and
	// across the nodes of a cluster (Nodes), with bursts of
	// RateSubjectBurst (<= 0: the rate rounded up); over it the limit is
	// "rate-subject".
	RateSubject      float64
	RateSubjectBurst int
	// ToolLimits are the limits of tools, by name (ToolLimits;
	// SetToolLimits changes them).
	ToolLimits map[string]ToolLimits
	// Nodes, when set, returns the number of live nodes of the cluster
	// this server is one of (package cluster's Node.Nodes): the
	// cluster-wide rates (RateSubject, ToolLimits' Rate, RateLimit) are
	// enforced by each node at its share, the rate divided by it. It is
	// called on each request such a rate limits, and must be cheap.
	Nodes func() int
	// BigMessage is the size above which a frame given to HandleFrame is
	// decoded and served on the worker pool rather than on the caller's
	// event loop, so that a large message does not stall the other
	// connections of that loop; 0 means 64 KiB, < 0 never.
	BigMessage int

	// MaxMessage bounds one inbound message; <= 0 means 4 MiB.
	MaxMessage int
	// PageSize is the number of items per list page; <= 0 means 100.
	PageSize int
	// ClientRequestTimeout bounds a server-to-client request (sampling,
	// elicitation, roots, ping) issued by a handler; <= 0 means 60 s.
	ClientRequestTimeout time.Duration
	// ListChangedDelay coalesces list-changed notices: at most one of a
	// kind per session per delay; <= 0 means 100 ms.
	ListChangedDelay time.Duration

	// TaskTTL is the longest a task and its result are kept (a 2025-11-25
	// client may ask for less); <= 0 means 10 minutes.
	TaskTTL time.Duration
	// MaxTasks bounds the tasks the server keeps, running or ended, of
	// both revisions; <= 0 means 1024. When that many are kept, a new
	// task makes room by forgetting the oldest that has ended.
	MaxTasks int
	// MaxTaskBytes bounds the bytes of the results the tasks kept hold;
	// <= 0 means 64 MiB. Past it the oldest tasks that have ended are
	// forgotten (a client asking for one is told it is unknown, as after
	// its ttl).
	MaxTaskBytes int64
	// MaxTasksPerClient bounds the tasks one client keeps: one
	// authenticated subject, else one address (every session of it), else
	// one session; 0 means 16, < 0 no limit. Over it the client's oldest
	// ended task is forgotten, or its 2026-07-28 task polled least
	// recently when nobody polled it for TaskIdle is cancelled; failing
	// both the new task is refused with CodeServerBusy and the limit
	// "tasks".
	MaxTasksPerClient int
	// TaskWorkers bounds the task handlers running at once, on the worker
	// pool: they count against Workers, and at most TaskWorkers of them
	// run tasks, so long tasks never take the pool from requests; <= 0
	// means a quarter of Workers (at least 1), and never more than
	// Workers or MaxTasks. Over it a 2026-07-28 task nobody polled for
	// TaskIdle is cancelled to make room; failing that the new task is
	// refused with the limit "task-workers".
	TaskWorkers int
	// TaskIdle is how long a running 2026-07-28 task may go unpolled
	// (tasks/get, tasks/update) before it counts as abandoned, to be
	// cancelled when a new task needs its room; <= 0 means 1 minute. A
	// 2025-11-25 task lives as long as its session.
	TaskIdle time.Duration
	// NodeID names this node of a cluster in the ids of the sessions it
	// opens and of the tasks it creates for 2026-07-28 requests
	// ("<NodeID>.<random>", see SessionNode), so that a
	// router can send a session's requests, and tasks/get, tasks/update
	// and tasks/cancel, to the node that owns them. It must not contain a
	// '.'. Empty: ids are random only.
	NodeID string

	// KeepAlive, if > 0, pings each initialized session at that interval;
	// a session that misses KeepAliveMisses answers in a row is closed.
	KeepAlive time.Duration
	// KeepAliveMisses is the number of missed pings that closes a session;
	// <= 0 means 3.
	KeepAliveMisses int

	// OnRootsListChanged, if set, is called when a client sends
	// notifications/roots/list_changed.
	OnRootsListChanged func(sess *session.Session)

	// Receive wraps the handling of every request that is answered:
	// Receive[0] is the outermost. It sees the requests served by handlers
	// (on the worker pool, NonBlocking tools on the event loop) and those the engine answers itself (ping,
	// initialize, list pages, static resources, ...), on every transport
	// and protocol revision. Requests refused before dispatch
	// (Options.Authorize, a limit, shutdown, a session not initialized, a
	// malformed message) do not reach it. Its context is the request's (the session's for requests
	// the engine answers itself); values a middleware adds to the context
	// it passes on reach the handler. A middleware runs where the request
	// is served, the event loop included: like a NonBlocking tool, it must
	// not block. With none configured, dispatch costs nothing more.
	Receive []Middleware
	// Send wraps the sending of every message the server sends on its own
	// initiative (notifications, server-to-client requests; not answers):
	// Send[0] is the outermost.
	Send []SendMiddleware

	// Authorize, if not nil, decides every request before anything else
	// is done with it, on every transport and revision: a request it
	// refuses gets its error and nothing else (auth.go). The caller it
	// returns reaches handlers in their context (Caller), tools/call is
	// checked against the tool's RequiredScopes with it, and an
	// initialize's caller becomes its session's (session.Session.Auth).
	// An Authorizer that is also a Policy narrows what each caller sees
	// and uses. Package auth's *Verifier implements both. nil costs one
	// nil check per request.
	Authorize Authorizer

	// StateKeys sign the requestState of 2026-07-28 multi round-trip
	// requests (HMAC-SHA256): the first signs, any verifies, so a key
	// rotates by putting the new one first and dropping the old one once
	// StateTTL has passed. Give every node of a cluster the same keys.
	// Empty: a random key of this process.
	StateKeys [][]byte
	// StateTTL bounds the age of a requestState; <= 0 means 10 minutes.
	StateTTL time.Duration
	// DiscoverCache is the cache hint of server/discover results.
	DiscoverCache handlers.CacheHint

	// Versions are the protocol revisions the server offers (see
	// mcp.AllVersions); empty means all. Revisions it does not know are
	// ignored (none known: all). An initialize negotiates among the
	// session revisions offered, and is refused with
	// UnsupportedProtocolVersionError (-32022, naming them) when none is;
	// a 2026-07-28 request, server/discover included, gets -32022 when
	// 2026-07-28 is not offered; server/discover and every -32022 list
	// only the revisions offered (versions.go).
	Versions []string

	// Observer, if not nil, is told how each request ends, of refusals
	// and of sessions closing (metrics: package admin); a ConnObserver
	// too, it is told of the transports' connections and bytes. nil costs
	// one nil check per request.
	Observer Observer
	// Tracer, if not nil, traces requests: a span per request (package
	// tracing: OpenTelemetry). nil costs one nil check per request, with
	// Observer's.
	Tracer Tracer

	// Bus carries resource updates and list changes; nil means an
	// in-process bus.
	Bus session.Bus
	// Logger receives the server's own logs; nil discards them.
	Logger *slog.Logger
}

// DefaultMaxSubscriptions is Options.MaxSubscriptions' default.
const DefaultMaxSubscriptions = 1024

// Version is mcpedge's release.
const Version = "0.1.0"

// Sentinel errors.
var (
	ErrShuttingDown = codec.ReasonShutdown.Err("engine: shutting down")
)

// Server is an MCP server engine. Its methods are safe for concurrent use.
type Server struct {
	opts     Options
	reg      *handlers.Registry
	sessions *session.Table
	bus      session.Bus
	log      *slog.Logger
	pool     *ants.PoolWithFunc

	ctx    context.Context
	cancel context.CancelFunc

	adm    *admission
	active atomic.Int64

	listPending  [4]atomic.Bool  // by handlers.ListKind
	listChanged  [4]atomic.Int64 // UnixNano of the last change, by kind
	unsubs       []func()
	tasks        *taskStore
	taskHandlers atomic.Int64 // task handlers running (RunningTasks)

	// The limits SetLimits changes: the hot path loads them atomically.
	maxInflight atomic.Int64
	maxSubs     atomic.Int64 // Options.MaxSubscriptions; < 0: none
	rates       atomic.Pointer[rateLimits]
	rateMu      sync.Mutex                            // serializes SetLimits' swaps of rates
	sweeping    atomic.Bool                           // sweepRates runs
	tools       atomic.Pointer[map[string]*toolLimit] // nil: no tool has limits
	toolMu      sync.Mutex                            // serializes SetToolLimits
	panics      atomic.Uint64

	sched *scheduler // the fair scheduler in front of pool

	offer        offer                  // Options.Versions (versions.go)
	instructions atomic.Pointer[string] // SetInstructions; nil: Options.Instructions

	stateKey       [][]byte // when Options.StateKeys is empty
	serverInfoMeta []byte   // {"io.modelcontextprotocol/serverInfo":{...}}
	listeners      listeners
	memos          [64]atomic.Pointer[session.Memo] // stateless exchanges' _meta (parseStatelessMemo)
	memoSeed       maphash.Seed
	// statelessTracker is the Tracker the stateless exchanges share.
	statelessTracker *session.Tracker

	// The middleware chains; nil without middleware.
	receive     MethodHandler // around serveInner
	receiveFast MethodHandler // around fastInner
	sender      Sender

	authz  Authorizer   // Options.Authorize; nil: none
	obs    Observer     // Options.Observer; nil: none
	tobs   ToolObserver // Options.Observer when it is one; nil: none
	epoch  time.Time    // New's time, with its monotonic reading (observe.go)
	tracer Tracer       // Options.Tracer; nil: none
	// watch: obs or tracer is set, so requests are timed and their ends
	// told (handleObserved): the one check of the paths that need neither.
	watch bool

	policy Policy // Options.Authorize when it is a Policy (auth.go); nil: none
}

// New returns a Server configured by opts.
func New(opts Options) *Server {
	if opts.Name == "" {
		opts.Name = "mcpedge"
	}
	if opts.Version == "" {
		opts.Version = Version
	}
	if opts.Workers <= 0 {
		opts.Workers = 256 * runtime.GOMAXPROCS(0)
	}
	if opts.MaxMessage <= 0 {
		opts.MaxMessage = codec.DefaultMaxMessage
	}
	if opts.ClientRequestTimeout <= 0 {
		opts.ClientRequestTimeout = 60 * time.Second
	}
	if opts.ListChangedDelay <= 0 {
		opts.ListChangedDelay = 100 * time.Millisecond
	}
	if opts.TaskTTL <= 0 {
		opts.TaskTTL = 10 * time.Minute
	}
	if opts.MaxTasks <= 0 {
		opts.MaxTasks = 1024
	}
	if opts.MaxTaskBytes <= 0 {
		opts.MaxTaskBytes = 64 << 20
	}
	if opts.MaxTasksPerClient == 0 {
		opts.MaxTasksPerClient = 16
	}
	if opts.TaskWorkers <= 0 {
		opts.TaskWorkers = max(1, opts.Workers/4)
	}
	opts.TaskWorkers = min(opts.TaskWorkers, opts.Workers, opts.MaxTasks)
	if opts.TaskIdle <= 0 {
		opts.TaskIdle = time.Minute
	}
	if opts.MaxInflight == 0 {
		opts.MaxInflight = 64
	}
	if opts.MaxSubscriptions == 0 {
		opts.MaxSubscriptions = DefaultMaxSubscriptions
	}
	if opts.RateBurst <= 0 {
		opts.RateBurst = max(1, int(math.Ceil(max(opts.Rate, opts.RateIP))))
	}
	if opts.RateSubjectBurst <= 0 {
		opts.RateSubjectBurst = max(1, int(math.Ceil(opts.RateSubject)))
	}
	opts.QueuePerClient, opts.QueueTotal = queueBounds(opts.QueuePerClient, opts.QueueTotal)
	if opts.BigMessage == 0 {
		opts.BigMessage = 64 << 10
	}
	if opts.StateTTL <= 0 {
		opts.StateTTL = 10 * time.Minute
	}
	if opts.KeepAliveMisses <= 0 {
		opts.KeepAliveMisses = 3
	}
	if opts.Bus == nil {
		opts.Bus = session.NewLocalBus()
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Server{
		opts:     opts,
		obs:      opts.Observer,
		tobs:     toolObserver(opts.Observer),
		authz:    opts.Authorize,
		epoch:    time.Now(),
		tracer:   opts.Tracer,
		watch:    opts.Observer != nil || opts.Tracer != nil,
		reg:      handlers.NewRegistry(handlers.Options{PageSize: opts.PageSize}),
		sessions: session.NewTable(),
		bus:      opts.Bus,
		log:      log,
		tasks:    newTaskStore(),
		adm:      newAdmission(),
	}
	s.policy, _ = opts.Authorize.(Policy)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if len(opts.StateKeys) == 0 {
		s.stateKey = newStateKey()
	}
	s.memoSeed = maphash.MakeSeed()
	s.offer = newOffer(opts.Versions)
	s.opts.Versions = s.offer.all
	s.instructions.Store(&s.opts.Instructions)
	s.statelessTracker = session.NewTracker()
	info, _ := codec.Marshal(mcp.Implementation{Name: opts.Name, Title: opts.Title, Version: opts.Version})
	s.serverInfoMeta = append(append([]byte(`{"`+mcp.MetaServerInfo+`":`), info...), '}')
	s.buildMiddleware()
	// The scheduler keeps the jobs running to Workers; the pool has room
	// for as many again, its workers that have ended their job but not
	// yet gone back to its idle list, so that starting one never fails
	// while the scheduler counts a worker free.
	pool, err := ants.NewPoolWithFunc(2*opts.Workers, s.work, ants.WithNonblocking(true), ants.WithDisablePurge(false))
	if err != nil {
		panic(fmt.Sprintf("engine: worker pool: %v", err)) // only for a non-positive size, excluded above
	}
	s.pool = pool
	perKey, total := queueBounds(opts.QueuePerClient, opts.QueueTotal)
	s.sched = newScheduler(opts.Workers, perKey, total, pool.Invoke)
	s.reg.OnChange(s.registryChanged)
	for _, k := range []handlers.ListKind{handlers.ListTools, handlers.ListResources, handlers.ListPrompts} {
		kind := k
		s.unsubs = append(s.unsubs, s.bus.Subscribe(listTopic(kind), func(string, []byte) { s.broadcastListChanged(kind) }))
	}
	if opts.KeepAlive > 0 {
		go s.keepAlive()
	}
	s.maxInflight.Store(int64(opts.MaxInflight))
	s.maxSubs.Store(int64(opts.MaxSubscriptions))
	s.rates.Store(s.newRateLimits(Limits{Rate: opts.Rate, RateIP: opts.RateIP, RateBurst: opts.RateBurst, RateSubject: opts.RateSubject, RateSubjectBurst: opts.RateSubjectBurst}, nil))
	s.SetToolLimits(opts.ToolLimits)
	return s
}

// Registry returns the server's handler registry. Register and remove
// handlers on it at any time.
func (s *Server) Registry() *handlers.Registry { return s.reg }

// Sessions returns the live session table.
func (s *Server) Sessions() *session.Table { return s.sessions }

// Bus returns the notification bus.
func (s *Server) Bus() session.Bus { return s.bus }

// Logger returns the server's logger.
func (s *Server) Logger() *slog.Logger { return s.log }

// Options returns the options in effect (defaults filled in), with the
// limits SetLimits last set.
func (s *Server) Options() Options {
	o := s.opts
	l := s.Limits()
	o.MaxInflight, o.MaxSubscriptions, o.Rate, o.RateIP, o.RateBurst = l.MaxInflight, l.MaxSubscriptions, l.Rate, l.RateIP, l.RateBurst
	o.RateSubject, o.RateSubjectBurst, o.QueuePerClient, o.QueueTotal = l.RateSubject, l.RateSubjectBurst, l.QueuePerClient, l.QueueTotal
	o.ToolLimits = s.ToolLimits()
	return o
}

// newSession creates a session whose default outbound stream is out and
// adds it to the table (Open).
func (s *Server) newSession(out session.Sink) *session.Session {
	// The session's context does not hang off the server's: registering
	// each session in a parent would cost memory per idle session, and
	// Shutdown closes every session itself.
	id := session.NewID()
	if s.opts.NodeID != "" {
		id = s.opts.NodeID + "." + id
	}
	sess := session.NewWithID(context.Background(), out, id)
	s.sessions.Add(sess) // its -rate bucket is made at its first request (startSessionRate)
	s.log.Debug("session opened", "session", sess.ID())
	return sess
}

// closeSession ends a session with cause: its requests are cancelled, its
// pending server-to-client requests fail, its subscriptions end. A session
// whose default sink is a session.Closer (a TCP connection) has its
// connection closed too.
func (s *Server) closeSession(sess *session.Session, cause error) {
	if sess.Close(cause) {
		s.log.Debug("session closed", "session", sess.ID(), "cause", cause)
		if s.obs != nil {
			s.obs.SessionClosed(sess, cause)
		}
		if c, ok := sess.Out.(session.Closer); ok {
			c.CloseSink(cause)
		}
	}
}

// Panics returns the number of panics recovered so far: in handlers, and
// anywhere on the path from a transport's bytes to a handler.
func (s *Server) Panics() uint64 { return s.panics.Load() }

// ReportPanic logs, with its stack, and counts (Panics) a panic that a
// transport recovered in its own code; call it from the deferred function
// that recovered, so that the stack is the panic's. sess may be nil.
func (s *Server) ReportPanic(p any, where string, sess *session.Session) {
	s.recovered(p, where, sess, "")
}

// recovered logs and counts a panic recovered at an entry point.
func (s *Server) recovered(p any, where string, sess *session.Session, method string) {
	s.panics.Add(1)
	id := ""
	if sess != nil {
		id = sess.ID()
	}
	s.log.Error("panic recovered", "where", where, "session", id, "method", method, "panic", p, "stack", string(debug.Stack()))
}

// ErrPanic is the cause of a session closed because a message it sent
// made the server panic where no answer could be sent.
var ErrPanic = codec.ReasonPanic.Err("engine: panic while serving a message")

// Active returns the number of requests being served.
func (s *Server) Active() int64 { return s.active.Load() }

// ShuttingDown reports whether Shutdown has begun.
func (s *Server) ShuttingDown() bool { return s.adm.closing() }

// Shutdown drains the server, the engine's step of the shutdown order
// documented in package mcpedge (whose Server.Shutdown runs the whole
// order; the transports have stopped accepting and closed their idle
// connections before it): new requests are refused at once with -32000,
// data {"limit":"shutdown"}, while connections stay open; requests in flight run to completion, and their
// answers are written, until ctx ends (those still running are then
// cancelled); tasks still running are cancelled at once (their status
// says so), and the drain waits for their handlers to return too; then
// every session is closed and the pool released. The
// transports are shut down after it returns (tcp.Server.Shutdown,
// mcphttp.Server.Shutdown), not before: a transport stopped first would
// drop the answers still in flight.
func (s *Server) Shutdown(ctx context.Context) error {
	done := s.adm.close()
	s.endListeners()
	s.endTasks()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	for _, u := range s.unsubs {
		u()
	}
	s.sessions.CloseAll(ErrShuttingDown)
	s.cancel()
	s.pool.Release()
	return err
}

// ResourceUpdated tells subscribers of uri that it changed: each session
// subscribed to it receives notifications/resources/updated.
func (s *Server) ResourceUpdated(uri string) {
	s.bus.Publish(session.TopicResourceUpdated+uri, codec.AppendString(nil, uri))
}

func listTopic(k handlers.ListKind) string {
	switch k {
	case handlers.ListTools:
		return session.TopicListChanged + "tools"
	case handlers.ListResources:
		return session.TopicListChanged + "resources"
	}
	return session.TopicListChanged + "prompts"
}

func listNotification(k handlers.ListKind) string {
	switch k {
	case handlers.ListTools:
		return mcp.NotificationToolListChanged
	case handlers.ListResources:
		return mcp.NotificationResourceListChanged
	}
	return mcp.NotificationPromptListChanged
}

// registryChanged publishes a registry change on the bus, so that every
// node of a cluster announces it.
func (s *Server) registryChanged(k handlers.ListKind) {
	s.bus.Publish(listTopic(k), nil)
}

// broadcastListChanged coalesces list changes of kind k: the first change
// arms a timer, later ones within ListChangedDelay ride on it, and when it
// fires every initialized session receives one notice.
//
// Only sessions initialized before the change are told: a session that
// initialized later has not seen the old list.
func (s *Server) broadcastListChanged(k handlers.ListKind) {
	s.listChanged[k].Store(time.Now().UnixNano())
	if !s.listPending[k].CompareAndSwap(false, true) {
		return
	}
	time.AfterFunc(s.opts.ListChangedDelay, func() {
		s.listPending[k].Store(false)
		method := listNotification(k)
		changed := s.listChanged[k].Load()
		s.sessions.Range(func(sess *session.Session) bool {
			if sess.Initialized() && sess.Out != nil && !sess.Replica() && sess.InitializedAt().UnixNano() < changed {
				s.notify(sess, sess.Out, method, nil)
			}
			return true
		})
		s.listeners.each(func(l *listener) { l.listChanged(k, changed) })
	})
}

// notify sends a notification to sink on behalf of sess.
func (s *Server) notify(sess *session.Session, sink session.Sink, method string, params []byte) error {
	b := codec.GetBuffer()
	b.B = codec.AppendNotification(b.B, method, params)
	return s.send(sess.Context(), sess, sink, method, b)
}

// ErrUnknownSession reports a session id not in the table.
var ErrUnknownSession = errors.New("engine: unknown session")

// ElicitationComplete tells the client of session sessionID that the
// URL-mode elicitation elicitationID is complete
// (notifications/elicitation/complete).
func (s *Server) ElicitationComplete(sessionID, elicitationID string) error {
	sess, ok := s.sessions.Get(sessionID)
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownSession, sessionID)
	}
	params := append(codec.AppendString([]byte(`{"elicitationId":`), elicitationID), '}')
	return s.notify(sess, sess.Out, mcp.NotificationElicitationComplete, params)
}

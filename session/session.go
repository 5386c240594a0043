// Package session holds per-client state shared by every transport: the
// sharded session table, the lifecycle state machine, version and capability
// negotiation, the tracker of server-to-client requests, the in-flight
// request set (for cancellation) and resource subscriptions.
package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/internal/bytesconv"
	"github.com/mcpedge/mcpedge/mcp"
	"golang.org/x/time/rate"
)

// State is a session's lifecycle state.
type State uint32

const (
	StateNew          State = iota // connected; only initialize and ping are served
	StateInitializing              // initialize answered; waiting for notifications/initialized
	StateReady                     // initialized
	StateClosed                    // ended; nothing more is sent
)

func (s State) String() string {
	switch s {
	case StateNew:
		return "new"
	case StateInitializing:
		return "initializing"
	case StateReady:
		return "ready"
	}
	return "closed"
}

// Sentinel errors. ErrClosed, ErrNotInitialized and ErrSlowConsumer end
// sessions: they carry their codec.CloseReason.
var (
	ErrClosed            = codec.ReasonClosed.Err("session: closed")
	ErrNotInitialized    = codec.ReasonNotInitialized.Err("session: not initialized")
	ErrAlreadyInitialize = errors.New("session: already initialized")
	ErrSlowConsumer      = codec.ReasonSlowConsumer.Err("session: slow consumer")
)

// Sink receives a session's outbound messages. Send takes ownership of b
// (the sink returns it to the codec pool when written or dropped) and must
// not block for long: a sink that cannot keep up drops the connection as a
// slow consumer and returns ErrSlowConsumer. Sinks are safe for concurrent
// use.
type Sink interface {
	Send(b *codec.Buffer) error
}

// A Closer is a Sink whose connection serves only its session (a TCP
// connection): when the server ends the session itself (a keep-alive gone
// unanswered, a message that made it panic), it calls CloseSink so that
// the connection ends too. CloseSink must not block and is safe to call
// more than once.
type Closer interface {
	CloseSink(cause error)
}

// Session is one client's state. Its methods are safe for concurrent use.
// Fields set by Initialize (version, client info, capabilities) are
// written once before the state leaves StateNew and read after it.
type Session struct {
	id    string
	state atomic.Uint32

	version    string
	clientInfo mcp.Implementation
	clientCaps mcp.ClientCapabilities

	logLevel   atomic.Int32
	lastActive atomic.Int64
	pinging    atomic.Bool
	pingMisses atomic.Int32
	initAt     atomic.Int64                 // UnixNano of initialize
	remote     netip.Addr                   // the client's address, when the transport knows it
	rate       atomic.Pointer[rate.Limiter] // nil: no rate limit

	// Out is the session's default outbound stream: the connection for TCP
	// and stdio, the standalone GET stream for Streamable HTTP.
	Out Sink

	// Tracker tracks the server-to-client requests of this session.
	Tracker *Tracker

	// Transport names the transport serving the session ("tcp", "http",
	// "stdio"), for metrics and logs; set by the transport once, before
	// it hands the session any message.
	Transport string

	ctx    context.Context
	cancel context.CancelCauseFunc

	inflight   map[string]Canceler // guarded by mu; made on first use; keys alias the requests' ids
	unanswered atomic.Int32        // tracked requests not yet Answered
	streams    atomic.Int32        // open streams (subscriptions/listen)

	mu       sync.Mutex
	subs     map[string]func() // resource URI → unsubscribe from the bus
	reserved int               // subscriptions held elsewhere (ReserveSubscriptions)
	subBytes int               // the URI bytes of subs and of those reserved
	onClose  []func()

	stateless bool // serves only 2026-07-28 requests (NewStateless)

	replica  atomic.Bool                    // held for another server, the session's home (record.go)
	onChange atomic.Pointer[func(*Session)] // OnChange

	memo atomic.Pointer[Memo]

	auth atomic.Pointer[any] // the caller an authorizing layer verified (auth.go)
}

// Memo is a value a layer above keeps per session, keyed by the bytes it
// was derived from: the engine keeps the last 2026-07-28 _meta it parsed,
// which a client sends unchanged with every request. Key and Value are
// immutable once stored.
type Memo struct {
	Key   []byte
	Value any
}

// Memo returns the session's memo, or nil. Safe for concurrent use.
func (s *Session) Memo() *Memo { return s.memo.Load() }

// SetMemo replaces the session's memo. Safe for concurrent use.
func (s *Session) SetMemo(m *Memo) { s.memo.Store(m) }

// NewStateless returns a session for one exchange of the stateless
// revision (2026-07-28), such as a Streamable HTTP POST carrying
// MCP-Protocol-Version: 2026-07-28: it has no id, is in no table, and
// every request it carries is served statelessly, from its own _meta. It
// shares ctx, which it does not cancel: its requests have contexts of
// their own. Close it when the exchange ends.
//
// t tracks what its requests ask of the client, if anything does (the
// stateless revision asks for input in results, not with requests): it
// may be shared by many stateless sessions, and closing one does not fail
// it.
func NewStateless(ctx context.Context, out Sink, t *Tracker) *Session {
	if t == nil {
		t = NewTracker()
	}
	s := &Session{Out: out, Tracker: t, ctx: ctx, stateless: true}
	s.logLevel.Store(-1)
	s.state.Store(uint32(StateReady))
	return s
}

// Stateless reports whether the session was made by NewStateless.
func (s *Session) Stateless() bool { return s.stateless }

// New returns a session in StateNew with a fresh random id. parent bounds
// the session's context, which Close cancels.
func New(parent context.Context, out Sink) *Session {
	return NewWithID(parent, out, NewID())
}

// NewWithID is New with the session id given: a cluster node prefixes
// NewID with its name, so that any node knows which one owns a session.
// id must be unguessable and visible ASCII.
func NewWithID(parent context.Context, out Sink, id string) *Session {
	ctx, cancel := context.WithCancelCause(parent)
	s := &Session{
		id:      id,
		Out:     out,
		Tracker: NewTracker(),
		ctx:     ctx,
		cancel:  cancel,
	}
	s.logLevel.Store(-1)
	s.Touch()
	return s
}

// NewID returns a 128-bit random id from crypto/rand as 32 hex digits
// (visible ASCII, as MCP-Session-Id requires).
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

// SetRemote records the client's IP address, which per-address limits
// key on. Transports call it once, before the session serves a message.
func (s *Session) SetRemote(a netip.Addr) { s.remote = a.Unmap() }

// Remote returns the client's IP address, or the zero Addr when the
// transport has none (stdio).
func (s *Session) Remote() netip.Addr { return s.remote }

// ID returns the session id.
func (s *Session) ID() string { return s.id }

// Context is cancelled when the session closes.
func (s *Session) Context() context.Context { return s.ctx }

// State returns the lifecycle state.
func (s *Session) State() State { return State(s.state.Load()) }

// Version is the negotiated protocol version ("" before initialize).
func (s *Session) Version() string { return s.version }

// ClientInfo is the client's implementation info.
func (s *Session) ClientInfo() mcp.Implementation { return s.clientInfo }

// ClientCapabilities are the client's declared capabilities.
func (s *Session) ClientCapabilities() *mcp.ClientCapabilities { return &s.clientCaps }

// Touch records activity, for idle reaping.
func (s *Session) Touch() { s.lastActive.Store(time.Now().UnixNano()) }

// IdleSince returns when the session was last active.
func (s *Session) IdleSince() time.Time { return time.Unix(0, s.lastActive.Load()) }

// Initialize moves the session from StateNew to StateInitializing, storing
// the negotiated version and the client's declarations. It returns the
// negotiated version, or ErrAlreadyInitialize if the session is past
// StateNew, or ErrClosed.
func (s *Session) Initialize(p *mcp.InitializeParams) (string, error) {
	return s.InitializeAs(p, negotiateVersion(p.ProtocolVersion))
}

// InitializeAs is Initialize with the version the server negotiated
// (a server that offers only some revisions chooses among them).
func (s *Session) InitializeAs(p *mcp.InitializeParams, version string) (string, error) {
	s.mu.Lock()
	switch s.State() {
	case StateNew:
	case StateClosed:
		s.mu.Unlock()
		return "", ErrClosed
	default:
		s.mu.Unlock()
		return "", ErrAlreadyInitialize
	}
	// The fields are written before the state is published; readers load
	// the state first, so they see them.
	s.version = version
	s.clientInfo = p.ClientInfo
	s.clientCaps = p.Capabilities
	s.initAt.Store(time.Now().UnixNano())
	s.state.Store(uint32(StateInitializing))
	s.mu.Unlock()
	s.changed()
	return s.version, nil
}

// SetVersion sets the negotiated version of a session that was not
// initialized through Initialize (a stateless request). Call it before the
// session is shared.
func (s *Session) SetVersion(v string, caps *mcp.ClientCapabilities, info *mcp.Implementation) {
	s.version = v
	s.initAt.Store(time.Now().UnixNano())
	if caps != nil {
		s.clientCaps = *caps
	}
	if info != nil {
		s.clientInfo = *info
	}
	s.state.Store(uint32(StateReady))
}

// InitializedAt returns when initialize was answered (zero before).
func (s *Session) InitializedAt() time.Time {
	if n := s.initAt.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// MarkReady handles notifications/initialized: StateInitializing → StateReady.
// It reports whether the state changed.
func (s *Session) MarkReady() bool {
	if !s.state.CompareAndSwap(uint32(StateInitializing), uint32(StateReady)) {
		return false
	}
	s.changed()
	return true
}

// Initialized reports whether initialize has been answered: requests other
// than initialize and ping are served from then on.
func (s *Session) Initialized() bool {
	st := s.state.Load()
	return st == uint32(StateInitializing) || st == uint32(StateReady)
}

// BeginPing claims the session's keep-alive slot: false if a ping is
// already outstanding.
func (s *Session) BeginPing() bool { return s.pinging.CompareAndSwap(false, true) }

// EndPing releases the keep-alive slot, recording whether the ping was
// answered, and returns the number of pings missed in a row.
func (s *Session) EndPing(answered bool) int {
	defer s.pinging.Store(false)
	if answered {
		s.pingMisses.Store(0)
		return 0
	}
	return int(s.pingMisses.Add(1))
}

// LogLevel returns the minimum level index for notifications/message, or -1
// when the client never set one (then every level is sent).
func (s *Session) LogLevel() int { return int(s.logLevel.Load()) }

// SetLogLevel sets the minimum level index (see mcp.LogLevelIndex).
func (s *Session) SetLogLevel(i int) {
	if s.logLevel.Swap(int32(i)) != int32(i) {
		s.changed()
	}
}

// LogEnabled reports whether a message at level index i passes the filter.
func (s *Session) LogEnabled(i int) bool {
	min := s.logLevel.Load()
	return min < 0 || int32(i) >= min
}

// Canceler is a request in flight as its session sees it: the session
// cancels it when the client asks (CancelRequest) or the session closes.
// Cancel is called with the session's lock held: it must not call back
// into the session.
type Canceler interface {
	Cancel(cause error)
}

// Errors of Track.
var (
	ErrInflightLimit = errors.New("session: too many requests in flight")
	ErrDuplicateID   = errors.New("session: a request with this id is in flight")
)

// Track adds a client request, c, to the session's in-flight set under its
// raw JSON id, so that notifications/cancelled and the session closing
// reach it; call Done when it ends, and Answered once its answer is sent. The set keys on id without copying it:
// id must stay valid and unmodified until Done. Track fails, tracking
// nothing, with ErrInflightLimit when the session has max requests in
// flight already (max <= 0: no limit), and with ErrDuplicateID when a
// request with the same id is in flight (JSON-RPC ids are unique among a
// session's pending requests). A closed session tracks nothing either
// (ErrClosed). It does not allocate once the set has grown.
func (s *Session) Track(id []byte, c Canceler, max int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.State() == StateClosed {
		return ErrClosed
	}
	if max > 0 && len(s.inflight) >= max {
		return ErrInflightLimit
	}
	key := bytesconv.B2S(id)
	if _, dup := s.inflight[key]; dup {
		return ErrDuplicateID
	}
	if s.inflight == nil {
		s.inflight = make(map[string]Canceler)
	}
	s.inflight[key] = c
	s.unanswered.Add(1)
	return nil
}

// SetRateLimit limits the session to r requests per second with bursts of
// burst, checked by AllowRequest; without it every request is allowed.
// It may be called while the session serves messages: a limit already
// set keeps its tokens and takes the new rate and burst; r <= 0 removes
// the limit.
func (s *Session) SetRateLimit(r float64, burst int) {
	if r <= 0 {
		s.rate.Store(nil)
		return
	}
	if l := s.rate.Load(); l != nil {
		l.SetLimit(rate.Limit(r))
		l.SetBurst(burst)
		return
	}
	s.rate.Store(rate.NewLimiter(rate.Limit(r), burst))
}

// SetRateLimiter gives the session the rate limit l, checked by
// AllowRequest, unless it has one: it returns the limit in effect.
func (s *Session) SetRateLimiter(l *rate.Limiter) *rate.Limiter {
	if s.rate.CompareAndSwap(nil, l) {
		return l
	}
	if cur := s.rate.Load(); cur != nil {
		return cur
	}
	return l
}

// RateLimited reports whether the session has a rate limit.
func (s *Session) RateLimited() bool { return s.rate.Load() != nil }

// AllowRequest takes one token from the session's rate limit. When none is
// left it returns false and how long until one is.
func (s *Session) AllowRequest(now time.Time) (bool, time.Duration) {
	l := s.rate.Load()
	if l == nil {
		return true, 0
	}
	return Allow(l, now)
}

// Allow takes one token from l at now, or reports how long until one is.
func Allow(l *rate.Limiter, now time.Time) (bool, time.Duration) {
	if l.AllowN(now, 1) {
		return true, 0
	}
	need := 1 - l.TokensAt(now)
	lim := float64(l.Limit())
	if lim <= 0 {
		return false, time.Second
	}
	return false, time.Duration(need / lim * float64(time.Second))
}

// Done removes the request c tracked under id from the in-flight set.
func (s *Session) Done(id []byte, c Canceler) {
	key := bytesconv.B2S(id)
	s.mu.Lock()
	if s.inflight[key] == c {
		delete(s.inflight, key)
	}
	s.mu.Unlock()
}

// ErrCancelledByClient is the cause of a request cancelled by
// notifications/cancelled.
var ErrCancelledByClient = errors.New("session: request cancelled by client")

// CancelRequest cancels the in-flight request with raw JSON id with cause
// (nil means ErrCancelledByClient), reporting whether one was found.
func (s *Session) CancelRequest(id []byte, cause error) bool {
	if cause == nil {
		cause = ErrCancelledByClient
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.inflight[bytesconv.B2S(id)]
	if ok {
		c.Cancel(cause)
	}
	return ok
}

// InFlight returns the number of requests tracked (Track) whose answer
// has not yet been handed to the transport (Answered): what a transport
// waits for before it closes a session whose input ended.
func (s *Session) InFlight() int { return int(s.unanswered.Load()) }

// StreamOpened and StreamEnded count the session's open streams, such as
// subscriptions/listen: requests that stay open on their reply sink and
// are no answer a transport waits for (they are not InFlight), but whose
// connection a drain must not close as idle before the stream has ended
// with its final answer.
func (s *Session) StreamOpened() { s.streams.Add(1) }

// StreamEnded records that a stream StreamOpened counted has ended.
func (s *Session) StreamEnded() { s.streams.Add(-1) }

// Streams returns the number of the session's open streams.
func (s *Session) Streams() int { return int(s.streams.Load()) }

// Answered records that the answer of a request Track accepted has been
// handed to the transport (or that none will be). A request leaves the
// in-flight set (Done) before its answer is sent, so that its client may
// reuse the id as soon as it has the answer; it counts in InFlight until
// Answered.
func (s *Session) Answered() { s.unanswered.Add(-1) }

// ErrSubscriptionLimit is returned by Subscribe, and ReserveSubscriptions
// reports false, when the session holds as many subscriptions as it may.
var ErrSubscriptionLimit = errors.New("session: subscription limit reached")

// URIBudget is the bytes of URI a session's subscriptions may hold on
// average: within a limit of max subscriptions, their URIs total at most
// max*URIBudget bytes, so that a few long URIs fit but max of them do not.
const URIBudget = 256

// fitsLocked reports whether n more subscriptions with size bytes of URI
// fit within max. s.mu is held.
func (s *Session) fitsLocked(n, size, max int) bool {
	return max <= 0 || (len(s.subs)+s.reserved+n <= max && s.subBytes+size <= max*URIBudget)
}

// Subscribe records a resource subscription; unsub is called when the
// client unsubscribes or the session closes. A repeated subscription keeps
// the first and calls the new unsub at once. The session holds at most
// max subscriptions, resource subscriptions and those reserved
// (ReserveSubscriptions) together, and their URIs at most max*URIBudget
// bytes (max <= 0: no limit): over it, and on a closed session, unsub is
// called at once and ErrSubscriptionLimit or ErrClosed returned.
func (s *Session) Subscribe(uri string, unsub func(), max int) error {
	s.mu.Lock()
	var err error
	switch _, dup := s.subs[uri]; {
	case s.State() == StateClosed:
		err = ErrClosed
	case dup:
	case !s.fitsLocked(1, len(uri), max):
		err = ErrSubscriptionLimit
	default:
		if s.subs == nil {
			s.subs = make(map[string]func())
		}
		s.subs[uri] = unsub
		s.subBytes += len(uri)
		s.mu.Unlock()
		s.changed()
		return nil
	}
	s.mu.Unlock()
	unsub()
	return err
}

// CanSubscribe reports whether a subscription to uri would be accepted
// within max now: it is held already, or there is room for it.
func (s *Session) CanSubscribe(uri string, max int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.subs[uri]; dup {
		return true
	}
	return s.fitsLocked(1, len(uri), max)
}

// ReserveSubscriptions counts n subscriptions whose URIs total size bytes,
// held for the session elsewhere (the URIs of its subscriptions/listen
// streams), against the same limits as Subscribe, reporting false, and
// reserving nothing, when they do not fit or the session is closed.
// Release them with ReleaseSubscriptions.
func (s *Session) ReserveSubscriptions(n, size, max int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.State() == StateClosed || !s.fitsLocked(n, size, max) {
		return false
	}
	s.reserved += n
	s.subBytes += size
	return true
}

// ReleaseSubscriptions returns what ReserveSubscriptions took.
func (s *Session) ReleaseSubscriptions(n, size int) {
	s.mu.Lock()
	s.reserved -= n
	s.subBytes -= size
	s.mu.Unlock()
}

// Unsubscribe ends a resource subscription, reporting whether there was one.
func (s *Session) Unsubscribe(uri string) bool {
	s.mu.Lock()
	unsub, ok := s.subs[uri]
	if ok {
		delete(s.subs, uri)
		s.subBytes -= len(uri)
	}
	s.mu.Unlock()
	if ok {
		unsub()
		s.changed()
	}
	return ok
}

// Subscribed reports whether the session subscribes to uri.
func (s *Session) Subscribed(uri string) bool {
	s.mu.Lock()
	_, ok := s.subs[uri]
	s.mu.Unlock()
	return ok
}

// Subscriptions returns the number of subscriptions the session holds:
// its resource subscriptions and those reserved.
func (s *Session) Subscriptions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.subs) + s.reserved
}

// OnClose registers fn to run once when the session closes. If it is
// already closed, fn runs at once.
func (s *Session) OnClose(fn func()) {
	s.mu.Lock()
	if s.State() == StateClosed {
		s.mu.Unlock()
		fn()
		return
	}
	s.onClose = append(s.onClose, fn)
	s.mu.Unlock()
}

// Close ends the session: in-flight requests are cancelled with cause,
// pending server-to-client requests fail, subscriptions and close hooks
// run. It is idempotent and reports whether this call closed it.
func (s *Session) Close(cause error) bool {
	if cause == nil {
		cause = ErrClosed
	}
	s.mu.Lock()
	if s.state.Swap(uint32(StateClosed)) == uint32(StateClosed) {
		s.mu.Unlock()
		return false
	}
	subs := s.subs
	s.subs = nil
	for uri := range subs {
		s.subBytes -= len(uri)
	}
	hooks := s.onClose
	s.onClose = nil
	// Under the lock: a request leaves the set (Done) before its
	// Canceler is reused.
	for _, c := range s.inflight {
		c.Cancel(cause)
	}
	s.mu.Unlock()

	if s.cancel != nil {
		s.cancel(cause)
	}
	if !s.stateless {
		s.Tracker.FailAll(cause)
	}
	for _, unsub := range subs {
		unsub()
	}
	for _, fn := range hooks {
		fn()
	}
	return true
}

// negotiateVersion answers a client's requested protocol version: the same
// version when supported, else the latest.
func negotiateVersion(requested string) string {
	if mcp.SupportedVersion(requested) {
		return requested
	}
	return mcp.LatestVersion
}

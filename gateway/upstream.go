package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
)

// upstream is one configured upstream server: its pools of connections
// (one per era, or one per downstream session with share = "session"),
// what it mirrors into the engine's registry, and its health.
type upstream struct {
	g   *Gateway
	cfg Upstream
	log *slog.Logger
	ref *upRef // what the registry's items call: this upstream, or the one that replaced it

	active  atomic.Int64  // calls in flight (callBegin to callEnd)
	retired atomic.Bool   // replaced or removed by a reload: draining its calls
	idle    chan struct{} // cap 1: a retired upstream's last call ended

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	session   *pool // the session revisions' connections, shared (pool:N); with share = "session", the mirror's
	stateless *pool // 2026-07-28's connections, started on first use

	sessMu sync.Mutex
	bySess map[string]*pool // share = "session": each downstream session's

	noStateless  atomic.Bool  // the upstream answered server/discover without 2026-07-28
	era          atomic.Int32 // what it speaks, as its last handshake told (upstreamEra, era.go)
	httpErr      error
	instructions atomic.Pointer[string] // what the upstream's last handshake said (the mirror's connection)

	m      *mirror
	http   *httpShared // HTTP upstreams: the keep-alive pools
	listen upListen    // an upstream of 2026-07-28 only: the sessions' resource subscriptions (up.go)

	rate *engine.RateLimit // Upstream.Rate; nil: none

	healthMu   sync.Mutex  // noteHealth's, one at a time
	downHere   atomic.Bool // pooled, its shared pool's connections failed: none ready (cluster.go)
	reportedUp atomic.Bool // what noteHealth last saw

	stats   stats
	lastMu  sync.Mutex
	lastErr error
	lastAt  time.Time

	warnMu   sync.Mutex
	warnNext time.Time
	warnSupp int
}

// stats are an upstream's counters (metrics, /upstreams).
type stats struct {
	calls      atomic.Uint64
	errors     atomic.Uint64
	timeouts   atomic.Uint64
	restarts   atomic.Uint64
	children   atomic.Uint64 // stdio children started
	garbage    atomic.Uint64 // messages that were not JSON-RPC
	unknownIDs atomic.Uint64 // answers to ids not in flight
	unrouted   atomic.Uint64 // messages no downstream request could take
	dropped    atomic.Uint64 // notifications over the rate limit
	classes    [len(ErrorClasses)]atomic.Uint64

	// The calls' latencies: per bucket of bounds (Options.LatencyBuckets,
	// in nanoseconds), then over the last; their sum in nanoseconds.
	bounds []int64
	lat    []atomic.Uint64
	latSum atomic.Uint64
}

// ErrorClasses name the ways a call to an upstream fails
// (Status.ErrorsByClass, mcpedge_upstream_errors_total{class}):
// unavailable (not connected, the connection lost, the HTTP exchange
// failed), timeout (no answer within timeout), invalid (an answer that is
// not one), limit (max-inflight, max-sessions), upstream (the upstream's
// own JSON-RPC error) and cancelled (the downstream request ended first).
var ErrorClasses = [...]string{"unavailable", "timeout", "invalid", "limit", "upstream", "cancelled"}

const (
	classUnavailable = iota
	classTimeout
	classInvalid
	classLimit
	classUpstream
	classCancelled
)

// classOf returns the class of a call's error.
func classOf(ctx context.Context, err error) int {
	switch {
	case errors.Is(err, errTimedOut):
		return classTimeout
	case ctx.Err() != nil:
		return classCancelled
	case errors.Is(err, errSlotsFull), errors.Is(err, errLimit):
		return classLimit
	case errors.Is(err, errAnswered):
		return classUpstream
	case errors.Is(err, errInvalid):
		return classInvalid
	}
	return classUnavailable
}

// observe counts a call that took d nanoseconds.
func (s *stats) observe(d int64) {
	if len(s.bounds) == 0 {
		return
	}
	i := 0
	for i < len(s.bounds) && d > s.bounds[i] {
		i++
	}
	s.lat[i].Add(1)
	s.latSum.Add(uint64(max(d, 0)))
}

// callBegin counts a call and returns when it began.
func (u *upstream) callBegin() int64 {
	u.stats.calls.Add(1)
	u.active.Add(1)
	return nanotime()
}

// callEnd records the latency of a call begun at start and, when it
// failed, its error by class; it returns err.
func (u *upstream) callEnd(ctx context.Context, start int64, err error) error {
	u.stats.observe(nanotime() - start)
	if err != nil {
		u.stats.errors.Add(1)
		u.stats.classes[classOf(ctx, err)].Add(1)
	}
	if u.active.Add(-1) == 0 && u.retired.Load() {
		select {
		case u.idle <- struct{}{}:
		default:
		}
	}
	return err
}

// upRef is what the registry's items of an upstream call: the upstream
// configured under its name now. A reload that changes the upstream's
// connection settings points it at the new one, whose mirror takes over
// the items: nothing is registered again, and the calls in flight finish
// on the old one (drain).
type upRef struct {
	cur atomic.Pointer[upstream]
}

func (r *upRef) tool(ctx context.Context, req *handlers.RawRequest, dst []byte) ([]byte, error) {
	return r.cur.Load().toolHandler(ctx, req, dst)
}

func (r *upRef) prompt(ctx context.Context, req *handlers.RawRequest, dst []byte) ([]byte, error) {
	return r.cur.Load().promptHandler(ctx, req, dst)
}

func (r *upRef) resource(ctx context.Context, req *handlers.RawRequest, dst []byte) ([]byte, error) {
	return r.cur.Load().resourceHandler(ctx, req, dst)
}

// drain stops u, retired by a reload, once its calls in flight have
// ended, or its timeout passed (a call cannot outlive it).
func (u *upstream) drain() {
	u.retired.Store(true)
	t := time.NewTimer(u.cfg.Timeout)
	defer t.Stop()
	for u.active.Load() > 0 {
		select {
		case <-u.idle:
		case <-t.C:
			u.log.Warn("calls still in flight when the drain ended", "calls", u.active.Load())
			u.stop()
			return
		}
	}
	u.stop()
}

func newUpstream(g *Gateway, cfg Upstream) *upstream {
	u := &upstream{g: g, cfg: cfg, log: g.log.With("upstream", cfg.Name), idle: make(chan struct{}, 1)}
	if cfg.Rate > 0 && g.srv != nil {
		u.rate = g.srv.NewRateLimit(cfg.Rate, cfg.Burst)
	}
	if len(g.bounds) > 0 {
		u.stats.bounds = g.bounds
		u.stats.lat = make([]atomic.Uint64, len(g.bounds)+1)
	}
	u.ctx, u.cancel = context.WithCancel(context.Background())
	n := cfg.Share.Pool
	if cfg.Share.Session {
		n = 1 // the mirror's connection
	}
	u.session = newPool(u, sessionEra, n)
	u.stateless = newPool(u, statelessEra, max(1, cfg.Share.Pool))
	u.m = newMirror(u)
	if cfg.Transport == HTTP {
		// The URL was checked by Normalize: this cannot fail but on an
		// OAuth configuration the client refuses, reported at connect.
		u.http, u.httpErr = newHTTPShared(u)
	}
	return u
}

// run starts the upstream's connections: the first of the session pool
// at once (it mirrors the lists), the others unless Lazy.
func (u *upstream) run() {
	u.session.start(0)
	if !u.cfg.Lazy && !u.cfg.Share.Session {
		for i := 1; i < len(u.session.slots); i++ {
			u.session.start(i)
		}
	}
	u.wg.Add(1)
	go u.sweeper()
}

// stop stops every connection (for stdio, every child) and waits.
func (u *upstream) stop() {
	u.cancel()
	u.session.stop()
	u.stateless.stop()
	u.sessMu.Lock()
	for _, p := range u.bySess {
		p.stop()
	}
	u.bySess = nil
	u.sessMu.Unlock()
	u.wg.Wait()
	if u.http != nil {
		u.http.close()
	}
}

// sweeper times out the calls past their deadline, on every connection,
// a few times per timeout.
func (u *upstream) sweeper() {
	defer u.wg.Done()
	tick := min(max(u.cfg.Timeout/8, 10*time.Millisecond), time.Second)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-u.ctx.Done():
			return
		case <-t.C:
		}
		now := nanotime()
		for _, p := range u.pools() {
			for _, s := range p.slots {
				if c := s.cur.Load(); c != nil && c.inflight.Load() > 0 {
					c.sweep(now)
				}
			}
		}
	}
}

// pools returns every pool of the upstream.
func (u *upstream) pools() []*pool {
	out := []*pool{u.session, u.stateless}
	u.sessMu.Lock()
	for _, p := range u.bySess {
		out = append(out, p)
	}
	u.sessMu.Unlock()
	return out
}

// connected is called when a connection is up.
func (u *upstream) connected(c *muxConn) {
	u.log.Debug("connected", "era", c.era, "conn", c.idx, "version", c.info.version)
	if c.p == u.session && c.idx == 0 {
		// The mirror's connection (of either era): take its instructions
		// (before the first lists are read: Start returns with them
		// merged), (re)read the lists, and renew the subscriptions it
		// carried before.
		if old := u.instructions.Swap(&c.info.instructions); old == nil || *old != c.info.instructions {
			u.g.mergeInstructions()
		}
		go u.m.refresh(handlers.ListTools, handlers.ListResources, handlers.ListPrompts)
		go u.g.resubscribe(u)
	}
	u.noteHealth(c)
}

// failed is called when a connection could not be opened or ended.
func (u *upstream) failed(c *muxConn, err error) {
	u.stats.restarts.Add(1)
	u.lastMu.Lock()
	u.lastErr, u.lastAt = err, time.Now()
	u.lastMu.Unlock()
	u.log.Warn("upstream connection failed; reconnecting", "era", c.era, "conn", c.idx, "err", err)
	u.noteHealth(c)
}

func (u *upstream) lastError() error {
	u.lastMu.Lock()
	defer u.lastMu.Unlock()
	if u.lastErr == nil {
		return errors.New("not connected yet")
	}
	return u.lastErr
}

// warn logs a warning about the upstream's messages, at most a few per
// second.
func (u *upstream) warn(msg string, args ...any) {
	u.warnMu.Lock()
	now := time.Now()
	if now.Before(u.warnNext) {
		u.warnSupp++
		u.warnMu.Unlock()
		return
	}
	supp := u.warnSupp
	u.warnSupp, u.warnNext = 0, now.Add(200*time.Millisecond)
	u.warnMu.Unlock()
	if supp > 0 {
		args = append(args, "suppressed", supp)
	}
	u.log.Warn(msg, args...)
}

func (u *upstream) warnGarbage(msg []byte, err error) {
	if len(msg) > 64 {
		msg = msg[:64]
	}
	u.warn("upstream sent a message that is not JSON-RPC; ignored", "err", err, "start", string(msg))
}

// The errors a downstream client gets for an upstream's failures. Each
// names the upstream; data carries {"upstream": NAME}.

// unavailable is the error of a call the upstream could not take: not
// connected, connection lost.
func (u *upstream) unavailable(cause error) *codec.Error {
	return &codec.Error{Code: codec.CodeServerBusy, Message: "upstream " + strconv.Quote(u.cfg.Name) + " unavailable: " + cause.Error(), Data: u.data()}
}

func (u *upstream) data() codec.RawJSON {
	return codec.RawJSON(`{"upstream":` + strconv.Quote(u.cfg.Name) + `}`)
}

// The classes of errors (ErrorClasses) their *codec.Error is wrapped
// with: errors.Is tells the class, errors.As the answer.
var (
	errTimedOut = errors.New("timed out")
	errInvalid  = errors.New("invalid answer")
	errLimit    = errors.New("limit")
	errAnswered = errors.New("the upstream's error")
)

// classedError is a call's *codec.Error and its class.
type classedError struct {
	e     *codec.Error
	class error
}

func (e classedError) Error() string   { return e.e.Error() }
func (e classedError) Unwrap() []error { return []error{e.e, e.class} }

// timedOut is the error of a call the upstream did not answer in time.
func (u *upstream) timedOut() error {
	u.stats.timeouts.Add(1)
	return classedError{&codec.Error{Code: codec.CodeRequestTimeout, Message: "upstream " + strconv.Quote(u.cfg.Name) + " did not answer within " + u.cfg.Timeout.String(), Data: u.data()}, errTimedOut}
}

// garbage is the error of a call the upstream answered with something
// that is not an answer.
func (u *upstream) garbage(what string) error {
	return classedError{&codec.Error{Code: codec.CodeInternalError, Message: "upstream " + strconv.Quote(u.cfg.Name) + " answered " + what, Data: u.data()}, errInvalid}
}

// connError is the error of a call that could not be sent.
func (u *upstream) connError(err error) error {
	if errors.Is(err, errSlotsFull) {
		return &codec.Error{Code: codec.CodeServerBusy, Message: "upstream " + strconv.Quote(u.cfg.Name) + ": too many calls in flight", Data: codec.RawJSON(`{"limit":"upstream-inflight","upstream":` + strconv.Quote(u.cfg.Name) + `}`)}
	}
	if e, ok := errors.AsType[*codec.Error](err); ok {
		return e
	}
	return u.unavailable(err)
}

// rateRefusal is the error of a call over the upstream's Rate, which
// may be sent again after wait.
func (u *upstream) rateRefusal(wait time.Duration) error {
	ms := max(1, wait.Milliseconds())
	return classedError{&codec.Error{Code: codec.CodeServerBusy, Message: "upstream " + strconv.Quote(u.cfg.Name) + ": call rate over the limit",
		Data: codec.RawJSON(`{"limit":"upstream-rate","upstream":` + strconv.Quote(u.cfg.Name) + `,"retryAfterMs":` + strconv.FormatInt(ms, 10) + `}`)}, errLimit}
}

// upstreamError is the error the upstream answered: passed on as it is.
func (u *upstream) upstreamError(obj []byte) error {
	e := &codec.Error{}
	if err := codec.Unmarshal(obj, e); err != nil || e.Code == 0 {
		return u.garbage("a malformed error object")
	}
	return classedError{e, errAnswered}
}

// headers returns the static HTTP headers of the upstream.
func (u *upstream) headers() http.Header {
	if len(u.cfg.Headers) == 0 {
		return nil
	}
	h := http.Header{}
	for k, v := range u.cfg.Headers {
		h.Set(k, v)
	}
	return h
}

// exchange is one downstream request on its way to the upstream.
type exchange struct {
	peer     handlers.Peer
	method   string
	name     string // what the request names (a served tool or prompt, a URI)
	params   []byte
	fp       forwardParams
	linkTask string // the upstream's 2025 task the call waits on (related-task)
	xc       *xcall // a call translated for a 2026-07-28 client (down.go)
}

// poolFor returns the pool serving a request of peer: 2026-07-28
// requests go to the stateless pool, the session revisions' to the shared
// pool, or with share = "session" to the session's own.
func (u *upstream) poolFor(peer handlers.Peer) (*pool, error) {
	if peer.ProtocolVersion() == mcp.Version20260728 {
		if u.era.Load() == eraBoth {
			return u.stateless, nil
		}
		// An upstream of one era: its session pool's connections speak
		// it (era.go), the request translated when it is not 2026-07-28.
		return u.session, nil
	}
	if !u.cfg.Share.Session || u.statelessOnly() {
		return u.session, nil
	}
	id := peer.SessionID()
	u.sessMu.Lock()
	defer u.sessMu.Unlock()
	if u.ctx.Err() != nil {
		return nil, u.unavailable(errStopped)
	}
	if p, ok := u.bySess[id]; ok {
		return p, nil
	}
	if len(u.bySess) >= u.cfg.MaxSessions {
		return nil, classedError{&codec.Error{Code: codec.CodeServerBusy, Message: "upstream " + strconv.Quote(u.cfg.Name) + ": too many sessions, each with a connection of its own", Data: codec.RawJSON(`{"limit":"upstream-max-sessions","upstream":` + strconv.Quote(u.cfg.Name) + `}`)}, errLimit}
	}
	scope, ok := peer.(handlers.SessionScope)
	if !ok {
		return u.session, nil
	}
	p := newPool(u, sessionEra, 1)
	p.sess = id
	if u.bySess == nil {
		u.bySess = map[string]*pool{}
	}
	u.bySess[id] = p
	p.start(0)
	scope.OnSessionClose(func() {
		u.sessMu.Lock()
		if u.bySess[id] == p {
			delete(u.bySess, id)
		}
		u.sessMu.Unlock()
		go p.stop()
	})
	return p, nil
}

// forward sends x to the upstream and appends its result to dst. A
// request of another era than the connection's is translated (down.go,
// up.go); a 2026-07-28 retry naming a held call resumes it.
func (u *upstream) forward(ctx context.Context, x *exchange, dst []byte) ([]byte, error) {
	start := u.callBegin()
	if u.rate != nil {
		if ok, wait := u.rate.Allow(); !ok {
			return dst, u.callEnd(ctx, start, u.rateRefusal(wait))
		}
	}
	modern := x.peer.ProtocolVersion() == mcp.Version20260728
	var held string
	if modern {
		if st := requestStateOf(x.params); st != nil {
			if s, err := codec.StringValue(st); err == nil {
				if _, ok := heldToken(string(s)); ok {
					held = string(s)
				}
			}
		}
	}
	if held != "" {
		out, err := u.resumeDown(ctx, x, held, dst)
		if err != nil {
			return dst, u.connError(u.callEnd(ctx, start, err))
		}
		u.callEnd(ctx, start, nil)
		return out, nil
	}
	p, err := u.poolFor(x.peer)
	if err != nil {
		return dst, u.callEnd(ctx, start, err)
	}
	// A connection whose table filled since it was picked: another.
	for range len(p.slots) + 1 {
		c, err := p.connFor(ctx, x)
		if err != nil {
			return dst, u.callEnd(ctx, start, err)
		}
		var out []byte
		switch {
		case modern && c.era == sessionEra:
			out, err = u.down(ctx, c, x, dst)
		case !modern && c.era == statelessEra:
			out, err = u.up(ctx, c, x, dst)
		default:
			if c.era == statelessEra {
				x.fp.stateless, x.fp.linkCap = true, true
			}
			out, err = c.do(ctx, x, dst)
		}
		if errors.Is(err, errSlotsFull) {
			continue
		}
		if err != nil {
			return dst, u.connError(u.callEnd(ctx, start, err))
		}
		u.callEnd(ctx, start, nil)
		return out, nil
	}
	return dst, u.connError(u.callEnd(ctx, start, errSlotsFull))
}

// String names the upstream.
func (u *upstream) String() string { return fmt.Sprintf("upstream %q", u.cfg.Name) }

package engine

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/internal/bytesconv"
	"github.com/mcpedge/mcpedge/session"
	"github.com/puzpuzpuz/xsync/v4"
	"golang.org/x/time/rate"
)

// Rate limits. Each is a token bucket; those held per client are keyed
// by who the client is, not by its connection or session, so that a new
// session (a flood of initialize) or a new connection starts where the
// client's last one was, never from a full bucket:
//
//   - Options.Rate (-rate): per session. A session's bucket starts with
//     the tokens its client's latest session has (its subject, else its
//     address; stdio: none), and a stateless 2026-07-28 client, which has
//     no session, has one bucket per key (subject, else address).
//   - Options.RateIP (-rate-ip): per client address, whoever it is.
//   - Options.RateSubject (-rate-subject): per authenticated subject, else
//     per address, over every session, connection and stateless request
//     of the client, shared by the nodes of a cluster.
//   - Options.ToolLimits ([tool.NAME] rate): per tool, every client's
//     calls together, shared by the nodes of a cluster.
//
// A limit shared by a cluster's nodes is enforced by each node at its
// share, the rate (and burst) divided by the number of live nodes
// (Options.Nodes): with the clients' requests spread over the nodes, as
// a load balancer spreads them, the cluster as a whole admits the
// configured rate, and the share follows the nodes as they come and go.
// No node asks another anything per request.

// bucket is a token bucket whose rate and burst are given with each
// request, so that a cluster's share can change as nodes come and go.
type bucket struct {
	mu     sync.Mutex
	tokens float64
	at     time.Time // when tokens was counted; zero: never (full)
}

// levelLocked returns the tokens in b at now, for rate r and burst.
func (b *bucket) levelLocked(now time.Time, r, burst float64) float64 {
	if b.at.IsZero() {
		return burst
	}
	el := now.Sub(b.at).Seconds()
	if el < 0 {
		el = 0
	}
	return min(burst, b.tokens+el*r)
}

// take takes a token from b at now, or reports how long until one is.
func (b *bucket) take(now time.Time, r, burst float64) (bool, time.Duration) {
	b.mu.Lock()
	t := b.levelLocked(now, r, burst)
	b.at = now
	if t >= 1 {
		b.tokens = t - 1
		b.mu.Unlock()
		return true, 0
	}
	b.tokens = t
	b.mu.Unlock()
	if r <= 0 {
		return false, time.Second
	}
	return false, time.Duration((1 - t) / r * float64(time.Second))
}

// full reports whether b is full at now: a bucket made anew would be
// the same.
func (b *bucket) full(now time.Time, r, burst float64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.levelLocked(now, r, burst) >= burst
}

// buckets holds a bucket per client key; sweep forgets the full ones, so
// that it holds only the clients active lately.
type buckets struct {
	m *xsync.Map[flowKey, *bucket]
}

func newBuckets() *buckets { return &buckets{m: xsync.NewMap[flowKey, *bucket]()} }

func (bs *buckets) take(key flowKey, now time.Time, r, burst float64) (bool, time.Duration) {
	b, ok := bs.m.Load(key)
	if !ok {
		b, _ = bs.m.LoadOrCompute(key, func() (*bucket, bool) { return new(bucket), false })
	}
	return b.take(now, r, burst)
}

func (bs *buckets) sweep(now time.Time, r, burst float64) {
	bs.m.Range(func(k flowKey, b *bucket) bool {
		if b.full(now, r, burst) {
			bs.m.Delete(k)
		}
		return true
	})
}

// rateKey returns whose bucket a request of sess by caller takes from
// for the limits kept per client: the caller's subject, else the
// client's address, else (stdio, an embedder's transport without
// addresses) the session, and for a stateless exchange the zero key.
func rateKey(sess *session.Session, caller any) flowKey {
	if caller != nil {
		if sub := SubjectOf(caller); sub != "" {
			return flowKey{sub: sub}
		}
	}
	if a := sess.Remote(); a.IsValid() || sess.Stateless() {
		return flowKey{addr: a}
	}
	return flowKey{sess: sess}
}

// rateLimits is the rate configuration in effect, swapped whole; the
// buckets it holds carry over a change of rates (SetLimits), keeping
// their tokens within the new burst.
type rateLimits struct {
	rate, rateIP, rateSubject float64
	burst, subjectBurst       int
	on                        bool // any rate is set

	ip        *buckets // rateIP > 0: by address
	subject   *buckets // rateSubject > 0: by subject, else address
	stateless *buckets // rate > 0: stateless clients, by subject, else address
	// rate > 0: the bucket of each client's latest session, which the
	// client's next session starts from.
	latest *xsync.Map[flowKey, *rate.Limiter]
}

// newRateLimits returns the configuration of l's rates, with the buckets
// of old (nil: none) that still apply.
func (s *Server) newRateLimits(l Limits, old *rateLimits) *rateLimits {
	rl := &rateLimits{rate: l.Rate, rateIP: l.RateIP, rateSubject: l.RateSubject, burst: l.RateBurst, subjectBurst: l.RateSubjectBurst}
	if rl.burst <= 0 {
		rl.burst = max(1, int(math.Ceil(max(l.Rate, l.RateIP))))
	}
	if rl.subjectBurst <= 0 {
		rl.subjectBurst = max(1, int(math.Ceil(l.RateSubject)))
	}
	if old == nil {
		old = &rateLimits{}
	}
	if rl.rate > 0 {
		rl.stateless, rl.latest = old.stateless, old.latest
		if rl.stateless == nil {
			rl.stateless, rl.latest = newBuckets(), xsync.NewMap[flowKey, *rate.Limiter]()
		}
	}
	if rl.rateIP > 0 {
		if rl.ip = old.ip; rl.ip == nil {
			rl.ip = newBuckets()
		}
	}
	if rl.rateSubject > 0 {
		if rl.subject = old.subject; rl.subject == nil {
			rl.subject = newBuckets()
		}
	}
	rl.on = rl.rate > 0 || rl.rateIP > 0 || rl.rateSubject > 0
	if rl.on && s.sweeping.CompareAndSwap(false, true) {
		go s.sweepRates(time.Minute)
	}
	return rl
}

// sweepRates forgets, every interval until the server stops, the buckets
// of the clients idle long enough to have a full bucket again.
func (s *Server) sweepRates(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case now := <-t.C:
			rl := s.rates.Load()
			if rl.ip != nil {
				rl.ip.sweep(now, rl.rateIP, float64(rl.burst))
			}
			if rl.subject != nil {
				r, b := s.share(rl.rateSubject, rl.subjectBurst)
				rl.subject.sweep(now, r, b)
			}
			if rl.stateless != nil {
				rl.stateless.sweep(now, rl.rate, float64(rl.burst))
				rl.latest.Range(func(k flowKey, l *rate.Limiter) bool {
					if l.TokensAt(now) >= float64(l.Burst()) {
						rl.latest.Delete(k)
					}
					return true
				})
			}
		}
	}
}

// nodes returns the number of live nodes sharing the cluster-wide
// limits (Options.Nodes), at least 1.
func (s *Server) nodes() float64 {
	if f := s.opts.Nodes; f != nil {
		if n := f(); n > 1 {
			return float64(n)
		}
	}
	return 1
}

// share returns this node's share of a cluster-wide rate r with burst:
// each divided by the live nodes, the burst at least 1.
func (s *Server) share(r float64, burst int) (float64, float64) {
	n := s.nodes()
	return r / n, max(1, float64(burst)/n)
}

// checkRate takes a token for one request of sess by caller (its
// verified caller, nil without one) from each rate limit that applies,
// and returns the refusal of the first that is empty.
func (s *Server) checkRate(sess *session.Session, caller any) *LimitError {
	rl := s.rates.Load()
	if !rl.on {
		return nil
	}
	now := time.Now()
	if rl.rate > 0 {
		var ok bool
		var wait time.Duration
		if sess.Stateless() {
			ok, wait = rl.stateless.take(rateKey(sess, caller), now, rl.rate, float64(rl.burst))
		} else {
			if !sess.RateLimited() {
				s.startSessionRate(sess, caller, rl, now)
			}
			ok, wait = sess.AllowRequest(now)
		}
		if !ok {
			return &LimitError{Limit: LimitRate, RetryAfter: wait}
		}
	}
	if rl.ip != nil {
		if a := sess.Remote(); a.IsValid() {
			if ok, wait := rl.ip.take(flowKey{addr: a}, now, rl.rateIP, float64(rl.burst)); !ok {
				return &LimitError{Limit: LimitRateIP, RetryAfter: wait}
			}
		}
	}
	if rl.subject != nil {
		r, b := s.share(rl.rateSubject, rl.subjectBurst)
		if ok, wait := rl.subject.take(rateKey(sess, caller), now, r, b); !ok {
			return &LimitError{Limit: LimitRateSubject, RetryAfter: wait}
		}
	}
	return nil
}

// startSessionRate gives sess its -rate bucket at its first request: it
// starts with the tokens the latest session of its client (rateKey) has,
// and becomes the one the client's next session starts from. A client
// that opens session after session (initialize again and again) so
// never starts from a full bucket.
func (s *Server) startSessionRate(sess *session.Session, caller any, rl *rateLimits, now time.Time) {
	l := rate.NewLimiter(rate.Limit(rl.rate), rl.burst)
	key := rateKey(sess, caller)
	if key.sess != nil { // no client to remember it by
		sess.SetRateLimiter(l)
		return
	}
	if prev, ok := rl.latest.Load(key); ok {
		if used := rl.burst - int(math.Floor(prev.TokensAt(now))); used > 0 {
			l.AllowN(now, used)
		}
	}
	if sess.SetRateLimiter(l) == l {
		rl.latest.Store(key, l)
	}
}

// ToolLimits are the limits of one tool (Options.ToolLimits, the
// [tool.NAME] tables of mcpedge's config file), on every call of it,
// whoever the caller.
type ToolLimits struct {
	// Rate, if > 0, bounds the tool's calls per second, with bursts of
	// Burst (<= 0: the rate rounded up), across a cluster's nodes; over
	// it a call is refused with the limit "tool-rate" and retryAfterMs.
	Rate  float64
	Burst int
	// MaxInflight, if > 0, bounds the tool's calls being served at once
	// on this node; over it a call is refused with the limit
	// "tool-max-inflight".
	MaxInflight int
}

// toolLimit is the state of one tool's limits.
type toolLimit struct {
	ToolLimits
	b        bucket
	inflight atomic.Int64
}

// done gives back the place of a call within the tool's MaxInflight.
func (tl *toolLimit) done() { tl.inflight.Add(-1) }

// SetToolLimits replaces the limits of tools, by name (nil or empty:
// none), as a configuration reload does; a tool whose limits are
// unchanged keeps its state (its tokens, its calls in flight). A tool
// without limits pays one map lookup per call while any tool has some.
func (s *Server) SetToolLimits(limits map[string]ToolLimits) {
	s.toolMu.Lock()
	defer s.toolMu.Unlock()
	if len(limits) == 0 {
		s.tools.Store(nil)
		return
	}
	var old map[string]*toolLimit
	if p := s.tools.Load(); p != nil {
		old = *p
	}
	m := make(map[string]*toolLimit, len(limits))
	for name, l := range limits {
		if l.Burst <= 0 {
			l.Burst = max(1, int(math.Ceil(l.Rate)))
		}
		if tl, ok := old[name]; ok && tl.ToolLimits == l {
			m[name] = tl
			continue
		}
		m[name] = &toolLimit{ToolLimits: l}
	}
	s.tools.Store(&m)
}

// ToolLimits returns the tools' limits in effect (SetToolLimits).
func (s *Server) ToolLimits() map[string]ToolLimits {
	p := s.tools.Load()
	if p == nil {
		return nil
	}
	out := make(map[string]ToolLimits, len(*p))
	for name, tl := range *p {
		out[name] = tl.ToolLimits
	}
	return out
}

// checkTool applies the tool's limits to a call of the tool named name,
// about to be served: it returns the tool's limit state when the call
// holds a place within its MaxInflight (give it back with done), or the
// refusal.
func (s *Server) checkTool(name string) (*toolLimit, *LimitError) {
	p := s.tools.Load()
	if p == nil {
		return nil, nil
	}
	tl := (*p)[name]
	if tl == nil {
		return nil, nil
	}
	if tl.Rate > 0 {
		r, b := s.share(tl.Rate, tl.Burst)
		if ok, wait := tl.b.take(time.Now(), r, b); !ok {
			return nil, &LimitError{Limit: LimitToolRate, RetryAfter: wait}
		}
	}
	if tl.MaxInflight <= 0 {
		return nil, nil
	}
	if tl.inflight.Add(1) > int64(tl.MaxInflight) {
		tl.inflight.Add(-1)
		return nil, errToolInflight
	}
	return tl, nil
}

// checkToolCall applies the tool's limits to m, a tools/call, when any
// tool has some: f holds its params' fields, scanned here if they were
// not, and then the place it holds (route gives it back unless a
// request took it). A call whose name the scan cannot read is checked
// by callTool.
func (s *Server) checkToolCall(m *codec.Message, f *toolFields) *LimitError {
	if s.tools.Load() == nil || f.checked || !(f.ok || f.scan(m.Params)) {
		return nil
	}
	f.checked = true
	lim, le := s.checkTool(bytesconv.B2S(f.name))
	f.lim = lim
	return le
}

// toolDone gives back the place f holds within its tool's MaxInflight,
// when no request took it.
func toolDone(f *toolFields) {
	if f.lim != nil {
		f.lim.done()
		f.lim = nil
	}
}

// A RateLimit is a token bucket shared by the nodes of a cluster as the
// engine's own cluster-wide limits are (each node at its share): the
// gateway bounds the calls to each upstream with one ([upstream.NAME]
// rate).
type RateLimit struct {
	s     *Server
	rate  float64
	burst int
	b     bucket
}

// NewRateLimit returns a limit of r per second, with bursts of burst (<=
// 0: r rounded up), across the cluster's nodes (Options.Nodes).
func (s *Server) NewRateLimit(r float64, burst int) *RateLimit {
	if burst <= 0 {
		burst = max(1, int(math.Ceil(r)))
	}
	return &RateLimit{s: s, rate: r, burst: burst}
}

// Allow takes a token, or reports how long until one is.
func (l *RateLimit) Allow() (bool, time.Duration) {
	r, b := l.s.share(l.rate, l.burst)
	return l.b.take(time.Now(), r, b)
}

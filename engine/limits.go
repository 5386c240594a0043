package engine

import (
	"context"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/session"
	"github.com/puzpuzpuz/xsync/v4"
	"golang.org/x/time/rate"
)

// The limits a request can be refused by, as LimitError.Limit and the
// "limit" member of the error's data.
const (
	LimitRate     = "rate"         // the session's requests per second (Options.Rate)
	LimitRateIP   = "rate-ip"      // the client address's requests per second (Options.RateIP)
	LimitInflight = "max-inflight" // the session's requests in flight (Options.MaxInflight)
	LimitWorkers  = "workers"      // the worker pool is full (Options.Workers)
	LimitShutdown = "shutdown"     // the server is draining
	// LimitSubscriptions: the session's resource subscriptions and
	// subscriptions/listen URIs (Options.MaxSubscriptions).
	LimitSubscriptions = "subscriptions"
	// LimitTasks: the client's share of tasks is full of running ones
	// (Options.MaxTasksPerClient).
	LimitTasks = "tasks"
	// LimitTaskWorkers: every worker tasks may hold runs one
	// (Options.TaskWorkers), or the server keeps all the tasks it may
	// (Options.MaxTasks), none of them ended.
	LimitTaskWorkers = "task-workers"
)

// LimitError is the reason a request was refused before any handler ran.
// It is answered with JSON-RPC error CodeServerBusy (-32000) whose data is
// {"limit": Limit, "retryAfterMs": RetryAfter}; a reply sink that is a
// Refuser answers it in its own terms (HTTP 429 or 503 with Retry-After).
type LimitError struct {
	Limit      string        // one of the Limit* names
	RetryAfter time.Duration // when a retry may succeed; 0 when unknown
}

func (e *LimitError) Error() string { return "engine: limit reached: " + e.Limit }

// message is the JSON-RPC error message of the refusal.
func (e *LimitError) message() string {
	switch e.Limit {
	case LimitRate:
		return "server busy: session request rate over the limit"
	case LimitRateIP:
		return "server busy: request rate from this address over the limit"
	case LimitInflight:
		return "server busy: too many requests in flight on this session"
	case LimitWorkers:
		return "server busy: worker pool full"
	case LimitShutdown:
		return "server shutting down"
	case LimitSubscriptions:
		return "server busy: too many subscriptions on this session"
	case LimitTasks:
		return "server busy: too many tasks running for this client"
	case LimitTaskWorkers:
		return "server busy: every worker tasks may use is running one"
	}
	return "server busy"
}

// ClientShare reports whether the limit is the client's own share (its
// rate, its requests in flight, its subscriptions, its tasks), which it can wait out, rather
// than the server's capacity (a full pool, a drain): Streamable HTTP
// answers the first with 429 and the second with 503.
func (e *LimitError) ClientShare() bool {
	switch e.Limit {
	case LimitRate, LimitRateIP, LimitInflight, LimitTasks, LimitSubscriptions:
		return true
	}
	return false
}

// appendData appends the error's data object to dst.
func (e *LimitError) appendData(dst []byte) []byte {
	dst = append(dst, `{"limit":"`...)
	dst = append(dst, e.Limit...)
	dst = append(dst, '"')
	if e.RetryAfter > 0 {
		dst = append(dst, `,"retryAfterMs":`...)
		dst = strconv.AppendInt(dst, max(e.RetryAfter.Milliseconds(), 1), 10)
	}
	return append(dst, '}')
}

// AppendAnswer appends the JSON-RPC error answering request id.
func (e *LimitError) AppendAnswer(dst, id []byte) []byte {
	var data [64]byte
	return codec.AppendError(dst, id, codec.CodeServerBusy, e.message(), e.appendData(data[:0]))
}

// A Refuser is a reply Sink that answers a refused request itself, in its
// transport's terms, instead of being sent the JSON-RPC error. Streamable
// HTTP answers a POST refused for its rate with 429 and one refused because
// the server is full with 503, both with Retry-After.
type Refuser interface {
	session.Sink
	Refuse(id []byte, err *LimitError)
}

// refuse answers request id with err: through reply when it is a
// Refuser, else appended to out, which it returns.
func refuse(out []byte, reply session.Sink, id []byte, err *LimitError) []byte {
	if r, ok := reply.(Refuser); ok {
		r.Refuse(id, err)
		return out
	}
	return err.AppendAnswer(out, id)
}

// The fixed refusals, shared: they carry no per-request state.
var (
	errInflight    = &LimitError{Limit: LimitInflight, RetryAfter: 100 * time.Millisecond}
	errWorkers     = &LimitError{Limit: LimitWorkers, RetryAfter: 100 * time.Millisecond}
	errShutdown    = &LimitError{Limit: LimitShutdown}
	errTasks       = &LimitError{Limit: LimitTasks, RetryAfter: time.Second}
	errTaskWorkers = &LimitError{Limit: LimitTaskWorkers, RetryAfter: time.Second}
	errSubs        = &LimitError{Limit: LimitSubscriptions}
)

// ipRates holds one rate limiter per client address.
type ipRates struct {
	limit rate.Limit
	burst int
	m     *xsync.Map[netip.Addr, *rate.Limiter]
}

func newIPRates(r float64, burst int) *ipRates {
	return &ipRates{limit: rate.Limit(r), burst: burst, m: xsync.NewMap[netip.Addr, *rate.Limiter]()}
}

func (p *ipRates) allow(a netip.Addr, now time.Time) (bool, time.Duration) {
	l, ok := p.m.Load(a)
	if !ok {
		l, _ = p.m.LoadOrCompute(a, func() (*rate.Limiter, bool) { return rate.NewLimiter(p.limit, p.burst), false })
	}
	return session.Allow(l, now)
}

// sweep forgets the limiters of addresses idle long enough to have a full
// bucket again, every interval until ctx ends: the map holds only the
// addresses active lately.
func (p *ipRates) sweep(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			p.m.Range(func(a netip.Addr, l *rate.Limiter) bool {
				if l.TokensAt(now) >= float64(p.burst) {
					p.m.Delete(a)
				}
				return true
			})
		}
	}
}

// checkRate takes a token for one request of sess from its session's and
// its address's rate limits; it returns the refusal when either is empty.
func (s *Server) checkRate(sess *session.Session) *LimitError {
	rl := s.rates.Load()
	if rl.rate <= 0 && rl.ip == nil {
		return nil
	}
	now := time.Now()
	if ok, wait := sess.AllowRequest(now); !ok {
		return &LimitError{Limit: LimitRate, RetryAfter: wait}
	}
	if rl.ip != nil {
		if a := sess.Remote(); a.IsValid() {
			if ok, wait := rl.ip.allow(a, now); !ok {
				return &LimitError{Limit: LimitRateIP, RetryAfter: wait}
			}
		}
	}
	return nil
}

// admission counts the requests being served and refuses new ones once
// closing begins, in one atomic step: the closing bit and the count share a
// word, so no request can slip in between the check and the count while
// Shutdown waits for the count to reach zero.
type admission struct {
	state   atomic.Int64 // closingBit | count
	once    sync.Once
	drained chan struct{}
}

const closingBit = int64(1) << 62

func newAdmission() *admission { return &admission{drained: make(chan struct{})} }

// admit counts a new request, or reports false once closing has begun.
func (a *admission) admit() bool {
	for {
		v := a.state.Load()
		if v&closingBit != 0 {
			return false
		}
		if a.state.CompareAndSwap(v, v+1) {
			return true
		}
	}
}

// done ends an admitted request.
func (a *admission) done() {
	if a.state.Add(-1) == closingBit {
		a.once.Do(func() { close(a.drained) })
	}
}

// close refuses new requests and returns a channel closed once every
// admitted request is done.
func (a *admission) close() <-chan struct{} {
	if a.state.Or(closingBit)|closingBit == closingBit {
		a.once.Do(func() { close(a.drained) })
	}
	return a.drained
}

func (a *admission) closing() bool { return a.state.Load()&closingBit != 0 }

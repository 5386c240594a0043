package engine

import (
	"github.com/mcpedge/mcpedge/session"
)

// Limits are the per-client limits that SetLimits changes while the
// server runs. Their fields mean what the Options fields of the same
// names mean, defaults included.
type Limits struct {
	MaxInflight      int
	MaxSubscriptions int
	Rate             float64
	RateIP           float64
	RateBurst        int
	RateSubject      float64
	RateSubjectBurst int
	QueuePerClient   int
	QueueTotal       int
}

// Limits returns the limits in effect.
func (s *Server) Limits() Limits {
	rl := s.rates.Load()
	s.sched.mu.Lock()
	perKey, total := s.sched.perKey, s.sched.total
	s.sched.mu.Unlock()
	return Limits{
		MaxInflight: int(s.maxInflight.Load()), MaxSubscriptions: int(s.maxSubs.Load()),
		Rate: rl.rate, RateIP: rl.rateIP, RateBurst: rl.burst,
		RateSubject: rl.rateSubject, RateSubjectBurst: rl.subjectBurst,
		QueuePerClient: perKey, QueueTotal: total,
	}
}

// Default queue bounds (Options.QueuePerClient, Options.QueueTotal).
const (
	DefaultQueuePerClient = 64
	DefaultQueueTotal     = 4096
)

// queueBounds fills in the defaults of the queue bounds: per client 0
// means DefaultQueuePerClient and < 0 none; total <= 0 means
// DefaultQueueTotal.
func queueBounds(perKey, total int) (int, int) {
	if perKey == 0 {
		perKey = DefaultQueuePerClient
	}
	if total <= 0 {
		total = DefaultQueueTotal
	}
	return perKey, total
}

// SetLimits changes the limits of a running server, as a configuration
// reload does. MaxInflight applies to the next request of every session,
// MaxSubscriptions to the next subscription (a session over a lowered
// limit keeps what it holds), the queue bounds to the next request
// queued (requests queued stay).
// The session rate applies to the live sessions at once (a session keeps
// the tokens it has, within the new burst) and to new ones; the buckets
// kept per client (per address, per subject, stateless clients) keep
// theirs too, and a rate set anew starts from full buckets. Checking a
// limit costs the hot path an atomic load; SetLimits is safe for
// concurrent use but meant to be rare.
func (s *Server) SetLimits(l Limits) {
	if l.MaxInflight == 0 {
		l.MaxInflight = 64
	}
	s.maxInflight.Store(int64(l.MaxInflight))
	if l.MaxSubscriptions == 0 {
		l.MaxSubscriptions = DefaultMaxSubscriptions
	}
	s.maxSubs.Store(int64(l.MaxSubscriptions))
	s.sched.setQueues(queueBounds(l.QueuePerClient, l.QueueTotal))
	s.rateMu.Lock()
	defer s.rateMu.Unlock()
	old := s.rates.Load()
	rl := s.newRateLimits(l, old)
	s.rates.Store(rl)
	if old.rate != rl.rate || old.burst != rl.burst {
		s.sessions.Range(func(sess *session.Session) bool {
			if sess.RateLimited() || rl.rate <= 0 {
				sess.SetRateLimit(rl.rate, rl.burst)
			}
			return true
		})
	}
}

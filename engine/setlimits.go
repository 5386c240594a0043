package engine

import (
	"context"
	"math"
	"time"

	"github.com/mcpedge/mcpedge/session"
)

// Limits are the per-session and per-address limits that SetLimits
// changes while the server runs. Their fields mean what the Options
// fields of the same names mean, defaults included.
type Limits struct {
	MaxInflight      int
	MaxSubscriptions int
	Rate             float64
	RateIP           float64
	RateBurst        int
}

// rateLimits is the rate configuration in effect, swapped whole.
type rateLimits struct {
	rate, rateIP float64
	burst        int
	ip           *ipRates // nil unless rateIP > 0
	stop         context.CancelFunc
}

// newRateLimits returns the rate configuration for rate, rateIP and
// burst (<= 0: the larger rate, rounded up), with the sweeper of its
// per-address limiters running until the server stops or the
// configuration is replaced.
func (s *Server) newRateLimits(r, rateIP float64, burst int) *rateLimits {
	if burst <= 0 {
		burst = max(1, int(math.Ceil(max(r, rateIP))))
	}
	rl := &rateLimits{rate: r, rateIP: rateIP, burst: burst}
	if rateIP > 0 {
		rl.ip = newIPRates(rateIP, burst)
		ctx, cancel := context.WithCancel(s.ctx)
		rl.stop = cancel
		go rl.ip.sweep(ctx, time.Minute)
	}
	return rl
}

// Limits returns the limits in effect.
func (s *Server) Limits() Limits {
	rl := s.rates.Load()
	return Limits{MaxInflight: int(s.maxInflight.Load()), MaxSubscriptions: int(s.maxSubs.Load()), Rate: rl.rate, RateIP: rl.rateIP, RateBurst: rl.burst}
}

// SetLimits changes the limits of a running server, as a configuration
// reload does. MaxInflight applies to the next request of every session,
// MaxSubscriptions to the next subscription (a session over a lowered
// limit keeps what it holds).
// The session rate applies to the live sessions at once (a session keeps
// the tokens it has, within the new burst) and to new ones. A changed
// per-address rate starts from full buckets. Checking a limit costs the
// hot path an atomic load; SetLimits is safe for concurrent use but meant
// to be rare.
func (s *Server) SetLimits(l Limits) {
	if l.MaxInflight == 0 {
		l.MaxInflight = 64
	}
	s.maxInflight.Store(int64(l.MaxInflight))
	if l.MaxSubscriptions == 0 {
		l.MaxSubscriptions = DefaultMaxSubscriptions
	}
	s.maxSubs.Store(int64(l.MaxSubscriptions))
	old := s.rates.Load()
	burst := l.RateBurst
	if burst <= 0 {
		burst = max(1, int(math.Ceil(max(l.Rate, l.RateIP))))
	}
	if old.rate == l.Rate && old.rateIP == l.RateIP && old.burst == burst {
		return
	}
	rl := &rateLimits{rate: l.Rate, rateIP: l.RateIP, burst: burst}
	if old.rateIP == l.RateIP && old.burst == burst {
		rl.ip, rl.stop = old.ip, old.stop // the address limiters are unchanged
	} else {
		rl = s.newRateLimits(l.Rate, l.RateIP, burst)
		if old.stop != nil {
			old.stop()
		}
	}
	s.rates.Store(rl)
	if old.rate != rl.rate || old.burst != rl.burst {
		s.sessions.Range(func(sess *session.Session) bool {
			sess.SetRateLimit(rl.rate, rl.burst)
			return true
		})
	}
}

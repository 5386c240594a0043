// Package lograte rate-limits log lines per source address, so that a
// flood of bad input does not become a flood of logs: each address has a
// token bucket in a small bounded map, and the lines it drops are counted
// and reported on the next line let through ("suppressed": N).
package lograte

import (
	"context"
	"log/slog"
	"net/netip"
	"sync"
	"time"
)

// Defaults of New's arguments when they are zero.
const (
	DefaultBurst   = 5               // lines at once per address
	DefaultEvery   = time.Second     // one more line per address per this
	DefaultSources = 1024            // addresses tracked at most
	idleForget     = 5 * time.Minute // a quiet address's bucket may be evicted
)

// Limiter lets through, per source address, Burst lines at once and one
// more every Every. It tracks at most Sources addresses: past that, the
// least recently seen is forgotten (with its suppressed count, which is
// then reported on the global line). Its methods are safe for concurrent
// use; the zero value is not usable, call New.
type Limiter struct {
	burst   float64
	every   time.Duration
	sources int
	now     func() time.Time

	mu     sync.Mutex
	byAddr map[netip.Addr]*bucket
	lost   int // suppressed lines of forgotten addresses
}

type bucket struct {
	tokens     float64
	last       time.Time
	suppressed int
}

// New returns a Limiter; zero arguments take the defaults.
func New(burst int, every time.Duration, sources int) *Limiter {
	if burst <= 0 {
		burst = DefaultBurst
	}
	if every <= 0 {
		every = DefaultEvery
	}
	if sources <= 0 {
		sources = DefaultSources
	}
	return &Limiter{burst: float64(burst), every: every, sources: sources, now: time.Now, byAddr: make(map[netip.Addr]*bucket)}
}

// Allow reports whether a line about addr may be logged now and, when it
// may, how many lines about addr were suppressed since the last one let
// through (to be logged with it).
func (l *Limiter) Allow(addr netip.Addr) (ok bool, suppressed int) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.byAddr[addr]
	if b == nil {
		if len(l.byAddr) >= l.sources {
			l.evict(now)
		}
		b = &bucket{tokens: l.burst, last: now}
		l.byAddr[addr] = b
	}
	b.tokens = min(l.burst, b.tokens+float64(now.Sub(b.last))/float64(l.every))
	b.last = now
	if b.tokens < 1 {
		b.suppressed++
		return false, 0
	}
	b.tokens--
	suppressed, b.suppressed = b.suppressed+l.lost, 0
	l.lost = 0
	return true, suppressed
}

// evict forgets quiet addresses, or, when none is quiet, the least
// recently seen one. Called with l.mu held.
func (l *Limiter) evict(now time.Time) {
	var oldest netip.Addr
	var oldestAt time.Time
	for a, b := range l.byAddr {
		if now.Sub(b.last) > idleForget {
			l.lost += b.suppressed
			delete(l.byAddr, a)
			continue
		}
		if oldestAt.IsZero() || b.last.Before(oldestAt) {
			oldest, oldestAt = a, b.last
		}
	}
	if len(l.byAddr) >= l.sources {
		l.lost += l.byAddr[oldest].suppressed
		delete(l.byAddr, oldest)
	}
}

// Len returns the number of addresses tracked.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.byAddr)
}

// Warn logs msg with args at warning level on log when the Limiter lets a
// line about addr through, with "suppressed": N when lines were dropped
// since the last one.
func (l *Limiter) Warn(log *slog.Logger, addr netip.Addr, msg string, args ...any) {
	if !log.Enabled(context.Background(), slog.LevelWarn) {
		return
	}
	ok, n := l.Allow(addr)
	if !ok {
		return
	}
	if n > 0 {
		args = append(args, "suppressed", n)
	}
	log.Warn(msg, args...)
}

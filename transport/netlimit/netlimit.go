// Package netlimit holds the limits the network transports share: one
// process-wide count of open connections, bounded in total and per client
// address, with a default derived from the process's file descriptor
// limit (Limiter); and budgets of the bytes clients make the server hold,
// partial inbound messages and queued outbound bytes, which cut the
// biggest holders of all the transports first (Budget), with defaults
// derived from the machine's memory.
//
// Give one Limiter, and one Budget of each kind, to every transport that
// should count against the same limit, as tcp.Options.Conns and the Conns
// option of transport/http:
//
//	conns := netlimit.New(netlimit.DefaultMaxConns(), 0)
//	buffered := netlimit.NewBudget(netlimit.DefaultMaxBuffered())
//	t := tcp.New(srv, tcp.Options{Conns: conns, Buffered: buffered})
//	h := mcphttp.New(srv, mcphttp.Options{Conns: conns, Buffered: buffered})
package netlimit

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/transport/proxied"
)

// Sentinel errors returned by Acquire: the reasons of a refused
// connection (codec.ReasonMaxConns, codec.ReasonMaxConnsPerIP).
var (
	ErrTooManyConns      = codec.ReasonMaxConns.Err("netlimit: connection limit reached")
	ErrTooManyConnsPerIP = codec.ReasonMaxConnsPerIP.Err("netlimit: per-address connection limit reached")
)

// Limiter counts open connections across every transport that shares it.
// The zero value and a nil *Limiter admit everything. Its methods are safe
// for concurrent use.
type Limiter struct {
	max, perIP int64
	total      atomic.Int64
	trusted    *proxied.Trusted // counted in total only (SetTrusted)

	mu   sync.Mutex
	byIP map[netip.Addr]int64 // made on first use; only when perIP > 0
}

// New returns a Limiter admitting at most max connections in all and at
// most perIP from one address; a value <= 0 means no limit.
func New(max, perIP int) *Limiter {
	return &Limiter{max: int64(max), perIP: int64(perIP)}
}

// Acquire admits one connection from ip, or returns ErrTooManyConns or
// ErrTooManyConnsPerIP. Every nil return must be paired with one Release
// of the same address.
func (l *Limiter) Acquire(ip netip.Addr) error {
	if l == nil {
		return nil
	}
	if n := l.total.Add(1); l.max > 0 && n > l.max {
		l.total.Add(-1)
		return ErrTooManyConns
	}
	if l.perIP <= 0 || l.trusted.Contains(ip) {
		return nil
	}
	ip = ip.Unmap()
	l.mu.Lock()
	if l.byIP[ip] >= l.perIP {
		l.mu.Unlock()
		l.total.Add(-1)
		return fmt.Errorf("%w (%s)", ErrTooManyConnsPerIP, ip)
	}
	if l.byIP == nil {
		l.byIP = make(map[netip.Addr]int64)
	}
	l.byIP[ip]++
	l.mu.Unlock()
	return nil
}

// Release ends a connection admitted by Acquire.
func (l *Limiter) Release(ip netip.Addr) {
	if l == nil {
		return
	}
	l.total.Add(-1)
	if l.perIP <= 0 || l.trusted.Contains(ip) {
		return
	}
	ip = ip.Unmap()
	l.mu.Lock()
	l.unbindLocked(ip)
	l.mu.Unlock()
}

func (l *Limiter) unbindLocked(ip netip.Addr) {
	if n := l.byIP[ip] - 1; n > 0 {
		l.byIP[ip] = n
	} else {
		delete(l.byIP, ip)
	}
}

// SetTrusted makes the connections of trusted proxies count against the
// total limit alone, not against their address's: a load balancer holds
// the connections of many clients. A trusted proxy that names its
// connection's client (a PROXY header) moves it under the client's
// address with Rebind. Call it before the Limiter admits anything.
func (l *Limiter) SetTrusted(t *proxied.Trusted) {
	if l != nil {
		l.trusted = t
	}
}

// Rebind moves a connection admitted under from (a trusted proxy's
// address) to the address of the client it carries, to, which Release
// then takes. It returns an error wrapping ErrTooManyConnsPerIP when to
// is at its limit: the connection stays under from.
func (l *Limiter) Rebind(from, to netip.Addr) error {
	if l == nil || l.perIP <= 0 {
		return nil
	}
	from, to = from.Unmap(), to.Unmap()
	toCounts, fromCounts := !l.trusted.Contains(to), !l.trusted.Contains(from)
	l.mu.Lock()
	defer l.mu.Unlock()
	if toCounts {
		if l.byIP[to] >= l.perIP {
			return fmt.Errorf("%w (%s)", ErrTooManyConnsPerIP, to)
		}
		if l.byIP == nil {
			l.byIP = make(map[netip.Addr]int64)
		}
		l.byIP[to]++
	}
	if fromCounts {
		l.unbindLocked(from)
	}
	return nil
}

// Open returns the number of connections admitted and not yet released.
func (l *Limiter) Open() int64 {
	if l == nil {
		return 0
	}
	return l.total.Load()
}

// Max returns the total limit (0: none).
func (l *Limiter) Max() int {
	if l == nil {
		return 0
	}
	return int(l.max)
}

// DefaultMaxConns derives a connection limit from the process's soft
// RLIMIT_NOFILE, keeping a tenth (at least 64) of the descriptors for
// listeners, logs, files and the client sockets handlers open, so that the
// server refuses connections itself before accept starts failing. It
// returns 0 (no limit) when the limit is unknown or unlimited.
func DefaultMaxConns() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == ^uint64(0) || rl.Cur > 1<<30 {
		return 0
	}
	n := int(rl.Cur)
	reserve := max(n/10, 64)
	if n <= reserve {
		return 1
	}
	return n - reserve
}

package tcp

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/transport/netlimit"
)

// The sweeper is the one goroutine that enforces the read timeout, the
// idle timeout and the byte budgets (MaxBuffered, MaxOutboundTotal). Event loops publish each
// connection's state in atomics as they serve it (conn.track); the sweeper
// scans the connection table every tick and closes connections with
// gnet.Conn.Close, which is safe from any goroutine. No connection has a
// timer or goroutine of its own.

const shards = 32

// table holds every open connection, in shards to keep OnOpen and OnClose
// on different loops apart.
type table struct {
	shards [shards]struct {
		mu    sync.Mutex
		conns []*conn
	}
}

func (t *table) add(k *conn) {
	sh := &t.shards[k.id%shards]
	sh.mu.Lock()
	k.slot = len(sh.conns)
	sh.conns = append(sh.conns, k)
	sh.mu.Unlock()
}

func (t *table) remove(k *conn) {
	sh := &t.shards[k.id%shards]
	sh.mu.Lock()
	if i := k.slot; i >= 0 && i < len(sh.conns) && sh.conns[i] == k {
		last := len(sh.conns) - 1
		sh.conns[i] = sh.conns[last]
		sh.conns[i].slot = i
		sh.conns[last] = nil
		sh.conns = sh.conns[:last]
		k.slot = -1
	}
	sh.mu.Unlock()
}

// each calls f for every connection, a shard at a time, under its lock.
func (t *table) each(f func(k *conn)) {
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for _, k := range sh.conns {
			f(k)
		}
		sh.mu.Unlock()
	}
}

// now returns the coarse clock: nanoseconds since the server started, as
// of the sweeper's last tick (never 0, so 0 can mean "unset").
func (s *Server) now() int64 { return s.clock.Load() }

func (s *Server) tickClock() int64 {
	n := s.exactNow()
	s.clock.Store(n)
	return n
}

// exactNow reads the clock itself, on the scale of now. The start of an
// awaited message is stamped with it: a stamp from the coarse clock is
// as old as the sweeper's last tick, and the sweeper may be late (busy
// enforcing a budget, or not scheduled on a loaded machine), which would
// close a message before it had its ReadTimeout. It is read only where a
// message is left partial, not on every read.
func (s *Server) exactNow() int64 { return int64(time.Since(s.epoch)) + 1 }

// sweepInterval is the sweeper's tick: an eighth of the shortest timeout,
// between 5 ms and 1 s.
func (s *Server) sweepInterval() time.Duration {
	d := time.Second
	for _, t := range []time.Duration{s.opts.ReadTimeout, s.opts.IdleTimeout} {
		if t > 0 && t/8 < d {
			d = t / 8
		}
	}
	return max(d, 5*time.Millisecond)
}

// sweep runs until quit is closed.
func (s *Server) sweep(quit <-chan struct{}) {
	tick := s.sweepInterval()
	t := time.NewTicker(tick)
	defer t.Stop()
	var idle []*conn
	for {
		select {
		case <-quit:
			return
		case <-s.inb.Wake():
			s.inb.Enforce()
			continue
		case <-s.outb.Wake():
			s.outb.Enforce()
			continue
		case <-t.C:
		}
		now := s.tickClock()
		read, idleAfter := int64(s.opts.ReadTimeout+tick), int64(s.opts.IdleTimeout)
		idle = idle[:0]
		var late []*conn
		s.table.each(func(k *conn) {
			if k.closed.Load() {
				return
			}
			if since := k.since.Load(); s.opts.ReadTimeout > 0 && since != 0 && now-since > read {
				late = append(late, k)
				return
			}
			if s.opts.IdleTimeout > 0 && now-k.lastSeen.Load() > idleAfter &&
				k.partial.Load() == 0 && k.pending.Load() == 0 && k.sess.InFlight() == 0 {
				idle = append(idle, k)
			}
		})
		for _, k := range late {
			k.closeWith(ErrReadTimeout)
		}
		for _, k := range idle {
			k.confirmIdle()
		}
		s.inb.Enforce()
		s.outb.Enforce()
	}
}

// confirmIdle closes k as idle if, on its event loop, it still is: nothing
// buffered either way (gnet's outbound buffer can only be read there),
// nothing in flight, no traffic since the sweeper looked.
func (k *conn) confirmIdle() {
	s := k.s
	seen := k.lastSeen.Load()
	_ = k.exec(func() {
		if k.closed.Load() {
			return
		}
		if k.lastSeen.Load() != seen || k.c.OutboundBuffered() > 0 || k.c.InboundBuffered() > 0 ||
			k.pending.Load() > 0 || k.sess.InFlight() > 0 {
			k.lastSeen.Store(s.now()) // busy, not idle: look again a timeout later
			return
		}
		k.closeWith(ErrIdleTimeout)
	})
}

// bufferSource lists the connections holding partial messages for the
// budget of MaxBuffered; bufferHolder and outboundHolder are a connection
// as a holder of either budget's bytes.
type (
	bufferSource   struct{ s *Server }
	outboundSource struct{ s *Server }
	bufferHolder   conn
	outboundHolder conn
)

func (h *bufferHolder) Cut()   { (*conn)(h).closeWith(ErrBufferBudget) }
func (h *outboundHolder) Cut() { (*conn)(h).closeWith(ErrOutboundBudget) }

// AppendHeld implements netlimit.Source. What each connection holds is
// published by its event loop after every read.
func (src bufferSource) AppendHeld(dst []netlimit.Held) ([]netlimit.Held, int64) {
	var cutting int64
	src.s.table.each(func(k *conn) {
		switch p := k.partial.Load(); {
		case p == 0:
		case k.closed.Load():
			cutting += p // on its way out: its bytes are freed at OnClose
		default:
			dst = append(dst, netlimit.Held{N: p, Holder: (*bufferHolder)(k)})
		}
	})
	return dst, cutting
}

// refreshWait bounds how long listing the outbound holders waits for the
// event loops to report what gnet's buffers hold now.
const refreshWait = 100 * time.Millisecond

// AppendHeld implements netlimit.Source. gnet empties its outbound buffer
// as the socket takes it without telling the transport, so what a
// connection last reported may be stale: each one that reported bytes in
// gnet's buffer is asked again on its event loop first (briefly waited
// for), so that a client that has read everything since is not cut.
func (src outboundSource) AppendHeld(dst []netlimit.Held) ([]netlimit.Held, int64) {
	s := src.s
	var left atomic.Int64
	done := make(chan struct{})
	left.Add(1)
	s.table.each(func(k *conn) {
		if k.gout.Load() == 0 || k.closed.Load() {
			return
		}
		left.Add(1)
		err := k.exec(func() {
			if !k.closed.Load() {
				k.syncOut(k.c.OutboundBuffered())
			}
			if left.Add(-1) == 0 {
				close(done)
			}
		})
		if err != nil && left.Add(-1) == 0 {
			close(done)
		}
	})
	if left.Add(-1) == 0 {
		close(done)
	}
	t := time.NewTimer(refreshWait)
	select {
	case <-done:
	case <-t.C:
	}
	t.Stop()
	var cutting int64
	s.table.each(func(k *conn) {
		switch n := k.held.Load(); {
		case n <= 0:
		case k.closed.Load():
			cutting += n
		default:
			dst = append(dst, netlimit.Held{N: n, Holder: (*outboundHolder)(k)})
		}
	})
	return dst, cutting
}

// DefaultMaxBuffered is the default of Options.MaxBuffered
// (netlimit.DefaultMaxBuffered): an eighth of the machine's memory,
// between 64 MiB and 1 GiB (1 GiB where the memory size is unknown).
func DefaultMaxBuffered() int64 { return netlimit.DefaultMaxBuffered() }

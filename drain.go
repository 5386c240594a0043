package mcpedge

import (
	"context"
	"time"
)

// Ready reports whether the server is ready for traffic: Serve or
// ServeStdio has been called and Shutdown has not. A readiness probe
// (/readyz) reads it: it turns false the moment a drain begins, before
// the listeners close.
func (s *Server) Ready() bool {
	s.mu.Lock()
	served := s.served
	s.mu.Unlock()
	return served && !s.closed()
}

// lameDuckTick is the shortest interval between two batches of idle
// connections closed in lame-duck mode.
const lameDuckTick = 10 * time.Millisecond

// beginDrain runs the first steps of the drain: readiness off, every
// listener stops accepting, idle connections closed (spread over
// Options.LameDuck first, when set), and then every connection closed as
// soon as it is idle.
func (s *Server) beginDrain(ctx context.Context) {
	s.drainOnce.Do(func() {
		if s.onDraining != nil {
			s.onDraining()
		}
		for _, l := range s.listeners {
			l.StopAccepting()
		}
		if s.lameDuck > 0 {
			total := s.idleConns()
			if total > 0 {
				s.log.Info("lame duck: closing idle connections", "idle", total, "over", s.lameDuck)
			}
			spread(ctx, s.lameDuck, total, s.closeIdle)
		}
		for _, l := range s.listeners {
			l.Drain()
		}
	})
}

// idleConns returns the number of idle connections of every listener.
func (s *Server) idleConns() int {
	n := 0
	for _, l := range s.listeners {
		n += l.IdleConns()
	}
	return n
}

// closeIdle closes up to max idle connections (max < 0: all of them),
// the first listener's first, and returns how many it closed.
func (s *Server) closeIdle(max int) int {
	n := 0
	for _, l := range s.listeners {
		switch {
		case max < 0:
			n += l.CloseIdle(-1)
		case n < max:
			n += l.CloseIdle(max - n)
		}
	}
	return n
}

// spread calls closeIdle over d so that total connections are closed
// evenly across it (nats-server's lame-duck mode): by time t, about
// total*t/d of them. It returns after d, or when ctx ends, or once
// closeIdle finds nothing left to close past the quota.
func spread(ctx context.Context, d time.Duration, total int, closeIdle func(max int) int) {
	if d <= 0 || total <= 0 {
		return
	}
	steps := max(min(int64(total), int64(d/lameDuckTick)), 1)
	tick := d / time.Duration(steps)
	t := time.NewTicker(tick)
	defer t.Stop()
	closed := 0
	for i := int64(1); i <= steps; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		quota := int(int64(total) * i / steps)
		if quota > closed {
			closed += closeIdle(quota - closed)
		}
	}
}

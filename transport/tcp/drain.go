package tcp

import (
	"context"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/transport/netkit"
)

// ErrDraining is the cause of an idle connection closed by a drain
// (CloseIdle, Drain): the server is shutting down.
var ErrDraining = codec.ReasonDraining.Err("tcp: server draining")

// StopAccepting closes the listener: no connection is accepted after it
// returns, and those open are served on. It is the first step of a drain
// (package mcpedge's Server.Shutdown); Shutdown closes the rest. Called
// before ListenAndServe, it makes ListenAndServe return at once.
func (s *Server) StopAccepting() {
	s.mu.Lock()
	s.noAccept = true
	started, acc := s.started, s.acc
	s.mu.Unlock()
	if started {
		_ = acc.Close()
		<-s.acceptDone
	}
}

// IdleConns returns the number of open connections that look idle:
// nothing in flight, nothing buffered either way.
func (s *Server) IdleConns() int {
	n := 0
	s.table.each(func(k *conn) {
		if k.looksIdle() {
			n++
		}
	})
	return n
}

// CloseIdle closes up to max idle connections (max < 0: all of them) with
// cause ErrDraining and returns how many it found idle. Each is confirmed
// idle on its event loop first: nothing in flight, nothing buffered
// either way, and no byte waiting in the socket, so that a request the
// client sent before the close is never dropped unread.
func (s *Server) CloseIdle(max int) int {
	var idle []*conn
	s.table.each(func(k *conn) {
		if (max < 0 || len(idle) < max) && k.looksIdle() {
			idle = append(idle, k)
		}
	})
	for _, k := range idle {
		k.closeIfIdle()
	}
	return len(idle)
}

// Drain closes every idle connection now, and then, until Shutdown, each
// connection as soon as it is idle (netkit.Drainer): its requests
// answered, nothing more sent. Connections with requests in flight are
// served on.
func (s *Server) Drain() {
	s.mu.Lock()
	var stop <-chan struct{} // nil: not serving, nothing to watch
	if s.started && !s.stopping {
		stop = s.quit
	}
	s.drain.Start(stop, s.CloseIdle) // under mu: Shutdown waits for it
	s.mu.Unlock()
	s.CloseIdle(-1)
}

// settleMax bounds how long Shutdown, after a drain, waits for each
// connection to be idle before it closes them all.
const settleMax = time.Second

// settle closes every connection as soon as it is idle, and returns once
// none is left, or after settleMax or when ctx ends: a request the client
// wrote before the drain ended is read and answered (refused, by then)
// rather than reset by the close.
func (s *Server) settle(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, settleMax)
	defer cancel()
	for s.conns.Load() > 0 {
		s.table.each(func(k *conn) {
			if !k.closed.Load() && k.opened.Load() {
				k.closeIfIdle()
			}
		})
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Millisecond):
		}
	}
}

// looksIdle reports, from the atomics the event loop publishes, whether k
// has nothing in flight, no open stream (subscriptions/listen: the drain
// ends it with its final answer first) and nothing buffered.
func (k *conn) looksIdle() bool {
	return !k.closed.Load() && k.opened.Load() && k.partial.Load() == 0 && k.pending.Load() == 0 &&
		k.sess.InFlight() == 0 && k.sess.Streams() == 0
}

// closeIfIdle closes k with ErrDraining if, on its event loop, it is idle.
func (k *conn) closeIfIdle() {
	_ = k.exec(func() {
		if k.closed.Load() || k.c.OutboundBuffered() > 0 || k.c.InboundBuffered() > 0 ||
			k.pending.Load() > 0 || k.partial.Load() > 0 || k.sess.InFlight() > 0 || k.sess.Streams() > 0 ||
			netkit.Unread(k.c.Fd()) {
			return
		}
		k.closeWith(ErrDraining)
	})
}

package http

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/transport/netkit"
	"github.com/valyala/fasthttp"
)

// ErrDraining is the reason logged for an idle keep-alive connection
// closed by a drain (CloseIdle, Drain).
var ErrDraining = codec.ReasonDraining.Err("mcphttp: server draining")

// connTable tracks the server's connections and whether each is idle
// between requests (fasthttp's ConnState), so that a drain can close the
// idle ones at once and lame-duck mode can close them a few at a time.
type connTable struct {
	m sync.Map // net.Conn -> *connInfo
	n atomic.Int64
}

// connInfo is a connection's state for a drain, and why the server cut
// it (the reason ConnObserver is told when it closes).
type connInfo struct {
	state  atomic.Int32 // fasthttp.ConnState, stateReading or stateClosing
	mu     sync.Mutex   // orders poke and StateActive
	poked  bool         // poke set the read deadline in the past; under mu
	reason atomic.Pointer[error]
}

// setConnReason records why the server cuts c, the first reason given;
// it reports whether c is a connection of this server's.
func (s *Server) setConnReason(c net.Conn, reason error) bool {
	if c == nil {
		return false
	}
	v, ok := s.conns.m.Load(c)
	if ok {
		v.(*connInfo).reason.CompareAndSwap(nil, &reason)
	}
	return ok
}

// connReason returns why the server cut c, or nil.
func (s *Server) connReason(c net.Conn) error {
	if v, ok := s.conns.m.Load(c); ok {
		if p := v.(*connInfo).reason.Load(); p != nil {
			return *p
		}
	}
	return nil
}

// poke wakes c's goroutine, blocked reading its next request, with a read
// deadline in the past, so that it closes c itself, if c is still idle
// (or closing) with no byte waiting. It reports whether it did.
func (ci *connInfo) poke(c net.Conn, from int32) bool {
	ci.mu.Lock()
	defer ci.mu.Unlock()
	if ci.state.Load() != from || netkit.UnreadConn(c) {
		return false
	}
	if from == int32(fasthttp.StateIdle) && !ci.state.CompareAndSwap(from, stateClosing) {
		return false
	}
	ci.poked = true
	_ = c.SetReadDeadline(aLongTimeAgo)
	return true
}

// Drain states besides fasthttp's: stateReading from the first bytes of
// a request on an idle connection to fasthttp's StateActive
// (limitedConn.Read); stateClosing once CloseIdle asked an idle
// connection to close.
const (
	stateReading = int32(-1)
	stateClosing = int32(-2)
)

func (s *Server) connState(c net.Conn, st fasthttp.ConnState) {
	t := &s.conns
	switch st {
	case fasthttp.StateNew:
		v := new(connInfo)
		if lc, ok := c.(*limitedConn); ok {
			v = &lc.info // its reads mark it reading
		}
		v.state.Store(int32(st))
		t.m.Store(c, v)
		t.n.Add(1)
		if s.log.Enabled(context.Background(), slog.LevelDebug) {
			s.log.Debug("http connection opened", "remote", c.RemoteAddr().String())
		}
	case fasthttp.StateIdle:
		if v, ok := t.m.Load(c); ok {
			v.(*connInfo).state.Store(int32(st))
		}
	case fasthttp.StateActive:
		if v, ok := t.m.Load(c); ok {
			ci := v.(*connInfo)
			ci.mu.Lock()
			ci.state.Store(int32(st))
			if ci.poked {
				// A request came as CloseIdle poked: it is served. fasthttp
				// sets its own read deadline next, if it has one.
				ci.poked = false
				_ = c.SetReadDeadline(time.Time{})
			}
			ci.mu.Unlock()
		}
	case fasthttp.StateClosed, fasthttp.StateHijacked:
		if _, ok := t.m.LoadAndDelete(c); ok {
			t.n.Add(-1)
			if s.log.Enabled(context.Background(), slog.LevelDebug) {
				s.log.Debug("http connection closed", "remote", c.RemoteAddr().String(), "reason", st.String())
			}
		}
	}
}

// Conns returns the number of open HTTP connections.
func (s *Server) Conns() int64 { return s.conns.n.Load() }

// IdleConns returns the number of keep-alive connections idle between
// requests.
func (s *Server) IdleConns() int {
	n := 0
	s.conns.m.Range(func(_, v any) bool {
		if v.(*connInfo).state.Load() == int32(fasthttp.StateIdle) {
			n++
		}
		return true
	})
	return n
}

// CloseIdle closes up to max keep-alive connections idle between requests
// (max < 0: all of them) and returns how many it closed. A connection
// with bytes waiting in its socket (a request on its way) is not idle. It
// is closed by its own goroutine, woken by a read deadline in the past:
// so a request whose first bytes that goroutine read just before is
// served, never dropped. One that stays open (a race with fasthttp
// setting its idle deadline) is woken again at the drain's next tick.
func (s *Server) CloseIdle(max int) int {
	n := 0
	s.conns.m.Range(func(k, v any) bool {
		ci := v.(*connInfo)
		c := k.(net.Conn)
		switch ci.state.Load() {
		case stateClosing:
			ci.poke(c, stateClosing) // again: it may have missed the first
			return true
		case int32(fasthttp.StateIdle):
		default:
			return true
		}
		if max >= 0 && n >= max {
			return false
		}
		if ci.poke(c, int32(fasthttp.StateIdle)) {
			if s.log.Enabled(context.Background(), slog.LevelDebug) {
				s.log.Debug("closing idle http connection", "remote", c.RemoteAddr().String(), "reason", ErrDraining)
			}
			n++
		}
		return true
	})
	return n
}

// StopAccepting closes the listener: no connection is accepted after it
// returns, and those open are served on. It is the first step of a drain
// (package mcpedge's Server.Shutdown); Shutdown closes the rest.
func (s *Server) StopAccepting() {
	s.mu.Lock()
	s.noAccept = true
	acc := s.acc
	s.mu.Unlock()
	if acc != nil {
		_ = acc.Close()
	}
}

// Drain closes every idle keep-alive connection now, and then, until
// Shutdown, each one as soon as it is idle (netkit.Drainer); while the
// engine drains, every answer also ends its connection. Requests in
// flight and streams are served on.
func (s *Server) Drain() {
	s.drain.Start(s.stop, s.CloseIdle)
	s.CloseIdle(-1)
}

// sessionNotFound answers a request for a session that is not (or no
// longer) known: 404, or, while the engine drains (the session may have
// been closed by the drain after the request was sent), 503 with the
// engine's -32000 {"limit":"shutdown"}, so that the client retries
// elsewhere rather than re-initializing here.
func (s *Server) sessionNotFound(ctx *fasthttp.RequestCtx, msg string) {
	if s.eng.ShuttingDown() {
		ctx.SetConnectionClose()
		s.failData(ctx, fasthttp.StatusServiceUnavailable, codec.CodeServerBusy, "server shutting down", []byte(`{"limit":"shutdown"}`))
		return
	}
	s.fail(ctx, fasthttp.StatusNotFound, codeSessionNotFound, msg)
}

// settle waits, until ctx ends, for every request already sent on an idle
// keep-alive connection to be read (the connection turns active), so that
// fasthttp's own closing of idle connections, next, drops no request.
func (s *Server) settle(ctx context.Context) {
	for {
		pending := false
		s.conns.m.Range(func(k, v any) bool {
			st := v.(*connInfo).state.Load()
			if st == stateReading || ((st == int32(fasthttp.StateIdle) || st == stateClosing) && netkit.UnreadConn(k.(net.Conn))) {
				pending = true
				return false
			}
			return true
		})
		if !pending {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Millisecond):
		}
	}
}

package tcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/transport/netkit"
	"github.com/mcpedge/mcpedge/transport/netlimit"
	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// Why the server accepts on its own: gnet's acceptor treats any accept
// error but EAGAIN, EINTR, ECONNRESET and ECONNABORTED (EMFILE and ENFILE
// among them) as fatal and stops the whole engine, every connection with
// it. So the server listens with the standard library (SO_REUSEADDR, and
// errors that name the address and the cause: netkit.Listen), accepts in
// one goroutine with netkit's Acceptor, which backs off on errors the way
// net/http does, and hands each accepted socket to gnet's event loops with
// Client.EnrollContext. What is served on the loops, OnTraffic, is
// unchanged.

// ListenAndServe listens on Options.Addr and serves until Shutdown, then
// returns nil. It returns a *netkit.BindError, naming the address and the
// cause, if it cannot listen, an error if it cannot start the event
// loops, and one wrapping the accept error if the listener fails for good
// (then call Shutdown). When ctx ends, the server is shut down at once, as
// by Shutdown, without draining the engine; for a graceful stop follow the
// shutdown order of package mcpedge (see Shutdown), or serve with
// mcpedge.Server, which does.
func (s *Server) ListenAndServe(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { _ = s.Shutdown(context.Background()) })
	defer stop()
	defer s.readyOnce.Do(func() { close(s.ready) }) // release Addr waiters on failure
	network, addr := "tcp", s.opts.Addr
	if scheme, rest, ok := strings.Cut(addr, "://"); ok {
		network, addr = scheme, rest
	}
	lc := net.ListenConfig{KeepAlive: time.Minute}
	if s.opts.ReusePort {
		lc.Control = func(_, _ string, rc syscall.RawConn) error {
			var serr error
			if err := rc.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
			}); err != nil {
				return err
			}
			return serr
		}
	}
	ln, err := netkit.Listen(lc, network, addr)
	if err != nil {
		return err // "listen tcp 127.0.0.1:7400: address already in use"
	}
	cli, err := gnet.NewClient(&events{s: s},
		gnet.WithMulticore(true),
		gnet.WithNumEventLoop(s.opts.Loops),
		// The accepted socket already has TCP_NODELAY and keep-alive
		// (net.ListenConfig): gnet need not set them again.
		gnet.WithTCPNoDelay(gnet.TCPDelay),
		gnet.WithLogger(gnetLogger{s.log}),
	)
	if err == nil {
		err = cli.Start()
	}
	if err != nil {
		_ = ln.Close()
		return err
	}

	acc := netkit.NewAcceptor(ln, netkit.AcceptConfig{
		Transport: "tcp", Log: s.log, Conns: s.limit, Refuse: s.refuse, Observer: s.cobs,
	})
	s.mu.Lock()
	if s.stopping || s.noAccept {
		s.mu.Unlock()
		_ = acc.Close()
		_ = cli.Stop()
		return nil
	}
	s.acc, s.cli, s.started = acc, cli, true
	s.mu.Unlock()
	a := ln.Addr()
	s.addr.Store(&a)
	s.tickClock()
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		s.sweep(s.quit)
	}()
	s.readyOnce.Do(func() { close(s.ready) })
	err = s.acceptLoop(acc)
	close(s.acceptDone)
	return err
}

// acceptLoop accepts until the listener is closed (nil), or fails for good
// (its error). Transient accept errors (EMFILE, ENFILE, ENOBUFS, ...)
// never end it: the Acceptor sleeps, 5 ms doubling up to 1 s, and tries
// again, leaving pending connections in the kernel's backlog until
// descriptors free up.
func (s *Server) acceptLoop(acc *netkit.Acceptor) error {
	for {
		nc, ip, err := acc.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			s.log.Error("accept failed: the listener stops", "addr", acc.Addr().String(), "err", err)
			return fmt.Errorf("tcp: accept: %w", err)
		}
		s.enroll(nc, ip)
	}
}

// enroll enrolls nc, admitted under ip by the connection limit, in an
// event loop on its own goroutine (enrolment waits for the loop). At most
// cap(s.enrolling) enrolments run at once: each holds two descriptors
// (the accepted socket and gnet's dup) until the loop takes the
// connection, and a burst of connections must not turn that into twice
// the descriptors the connection limit allows.
func (s *Server) enroll(nc net.Conn, ip netip.Addr) {
	k := &conn{s: s, id: s.ids.Add(1), ip: ip, remote: nc.RemoteAddr(), slot: -1, pp: s.proxyState(ip)}
	if s.tlsConf != nil {
		s.serveTLS(k, nc) // tls.go: a goroutine of its own, no event loop
		return
	}
	s.enrolling <- struct{}{}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		defer func() { <-s.enrolling }()
		_, err := s.cli.EnrollContext(nc, k) // closes nc; gnet serves a dup
		if err != nil || !k.opened.Load() {
			s.limit.Release(ip)
			if err != nil && s.enrollLogs.allow() {
				s.log.Error("cannot serve an accepted connection", "remote", k.remote, "err", err)
			}
		}
	}()
}

// refuse answers a connection over a limit (counted and logged by the
// Acceptor) with a JSON-RPC error whose data names the limit, and closes
// it. The write goes to a fresh socket's empty send buffer, so it does not
// block; what the client already sent is drained first so that the close
// is a FIN, not a reset that could destroy the answer.
func (s *Server) refuse(nc net.Conn, err error) {
	limit := "max-conns"
	if errors.Is(err, netlimit.ErrTooManyConnsPerIP) {
		limit = "max-conns-per-ip"
	}
	line := codec.AppendError(nil, nil, codec.CodeServerBusy, "connection limit reached", []byte(`{"limit":"`+limit+`"}`))
	_ = nc.SetDeadline(time.Now().Add(10 * time.Millisecond))
	_, _ = nc.Write(s.framer.AppendFrame(nil, line))
	_ = nc.SetReadDeadline(time.Now())
	var drain [4096]byte
	for range 16 {
		if _, err := nc.Read(drain[:]); err != nil {
			break
		}
	}
	_ = nc.Close()
}

// Shutdown stops accepting, closes every connection and stops the event
// loops; it returns once nothing of the server runs, or with ctx's error.
// It is the last step of the shutdown order documented in package
// mcpedge (whose Server.Shutdown runs the whole order): StopAccepting and
// Drain, then drain the engine (engine.Server.Shutdown: new requests
// refused with -32000, those in flight finished and their answers
// written), then call Shutdown.
// Called before ListenAndServe, it makes ListenAndServe return at once and
// Addr return nil.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	first := !s.stopping
	s.stopping = true
	started, acc, cli := s.started, s.acc, s.cli
	s.mu.Unlock()
	draining := s.drain.Draining()
	if first {
		defer s.detachBudgets()
	}
	if !started {
		s.readyOnce.Do(func() { close(s.ready) }) // release Addr waiters
		return nil
	}
	if first && draining {
		s.settle(ctx)
	}
	if first {
		_ = acc.Close()
		close(s.quit)
		go func() {
			<-s.acceptDone // no enrolment starts after this
			s.closeTLS()   // TLS connections have no event loop to stop
			s.bg.Wait()    // the sweeper and enrolments under way
			s.drain.Wait() // the drain's closing of idle connections
			_ = cli.Stop()
			close(s.stopped)
		}()
	}
	select {
	case <-s.stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// detachBudgets takes the server's connections out of the byte budgets,
// which other transports may go on sharing.
func (s *Server) detachBudgets() {
	for _, d := range s.detach {
		d()
	}
}

// logLimit lets through at most 10 log lines a second, so that a flood of
// failing enrolments does not become a flood of logs.
type logLimit struct {
	window atomic.Int64 // unix second of the current window
	n      atomic.Int64 // lines logged in it
}

func (l *logLimit) allow() bool {
	now := time.Now().Unix()
	if w := l.window.Load(); w != now && l.window.CompareAndSwap(w, now) {
		l.n.Store(0)
	}
	return l.n.Add(1) <= 10
}

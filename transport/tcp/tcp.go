// Package tcp serves MCP over raw TCP on a gnet v2 reactor: one event loop
// per core by default, newline-delimited or Content-Length framed JSON-RPC.
//
// Each connection is one session. Inbound bytes are framed and dispatched on
// the event loop without copying (engine.HandleFrame); cheap answers are
// written back in the same loop iteration, in one write per read. Handler
// answers arrive from the worker pool through the connection's Sink, which
// queues them with AsyncWrite; outbound bytes are bounded per connection,
// and a client that stops reading is closed as a slow consumer.
package tcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/session"
	"github.com/panjf2000/gnet/v2"
)

// Options configure a Server. The zero value serves newline framing on
// 127.0.0.1:7400 with one loop per core.
type Options struct {
	// Addr is host:port to listen on; empty means 127.0.0.1:7400.
	Addr string
	// Loops is the number of event loops; <= 0 means one per core.
	Loops int
	// Framer frames messages; nil means newline-delimited JSON.
	Framer codec.Framer
	// MaxOutbound bounds the bytes queued for one connection; a client that
	// lets more pile up is closed as a slow consumer. <= 0 means 8 MiB.
	MaxOutbound int
	// MaxConns bounds open connections; <= 0 means no limit.
	MaxConns int
	// ReusePort sets SO_REUSEPORT (several processes on one port).
	ReusePort bool
}

// DefaultAddr is where the TCP transport listens by default.
const DefaultAddr = "127.0.0.1:7400"

// Sentinel errors, the logged causes of closed connections.
var (
	ErrSlowConsumer = errors.New("tcp: slow consumer: outbound bytes over the limit")
	ErrTooLarge     = errors.New("tcp: inbound message over the size limit")
	ErrFraming      = errors.New("tcp: malformed frame header")
	ErrTooManyConns = errors.New("tcp: connection limit reached")
)

// Server is the TCP transport. Serve it with ListenAndServe; stop it with
// Shutdown. Its methods are safe for concurrent use.
type Server struct {
	gnet.BuiltinEventEngine

	eng    *engine.Server
	opts   Options
	framer codec.Framer
	log    *slog.Logger

	ready  chan struct{}
	addr   atomic.Pointer[net.Addr]
	gnetMu sync.Mutex
	gnet   gnet.Engine
	booted bool
	conns  atomic.Int64
}

// New returns a TCP transport serving eng.
func New(eng *engine.Server, opts Options) *Server {
	if opts.Addr == "" {
		opts.Addr = DefaultAddr
	}
	if opts.Loops <= 0 {
		opts.Loops = runtime.NumCPU()
	}
	if opts.MaxOutbound <= 0 {
		opts.MaxOutbound = 8 << 20
	}
	f := opts.Framer
	if f == nil {
		f = codec.NewlineFramer{MaxSize: eng.Options().MaxMessage}
	}
	return &Server{eng: eng, opts: opts, framer: f, log: eng.Logger(), ready: make(chan struct{})}
}

// ListenAndServe listens on Options.Addr and serves until Shutdown. It
// returns an error if it cannot listen.
func (s *Server) ListenAndServe() error {
	addr := s.opts.Addr
	if !strings.Contains(addr, "://") {
		addr = "tcp://" + addr
	}
	err := gnet.Run(s, addr,
		gnet.WithMulticore(true),
		gnet.WithNumEventLoop(s.opts.Loops),
		gnet.WithReusePort(s.opts.ReusePort),
		gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		gnet.WithTCPKeepAlive(time.Minute),
		gnet.WithLogger(gnetLogger{s.log}),
	)
	select {
	case <-s.ready:
	default:
		close(s.ready) // failed before boot: release Addr waiters
	}
	return err
}

// Addr waits until the server listens and returns its address (useful with
// port 0), or nil if it failed to start or ctx ended first.
func (s *Server) Addr(ctx context.Context) net.Addr {
	select {
	case <-s.ready:
	case <-ctx.Done():
		return nil
	}
	if p := s.addr.Load(); p != nil {
		return *p
	}
	return nil
}

// Shutdown stops the event loops and closes every connection. Drain the
// engine first (engine.Server.Shutdown) so in-flight answers are written.
func (s *Server) Shutdown(ctx context.Context) error {
	s.gnetMu.Lock()
	eng, booted := s.gnet, s.booted
	s.gnetMu.Unlock()
	if !booted {
		return nil
	}
	return eng.Stop(ctx)
}

// Conns returns the number of open connections.
func (s *Server) Conns() int64 { return s.conns.Load() }

// OnBoot implements gnet.EventHandler.
func (s *Server) OnBoot(e gnet.Engine) gnet.Action {
	s.gnetMu.Lock()
	s.gnet, s.booted = e, true
	s.gnetMu.Unlock()
	if fd, err := e.Dup(); err == nil {
		// Resolve the bound address (port 0) from the listener.
		if a, err := localAddr(fd); err == nil {
			s.addr.Store(&a)
		}
	}
	close(s.ready)
	return gnet.None
}

// conn is one connection's state: the session and its Sink.
type conn struct {
	s       *Server
	c       gnet.Conn
	remote  net.Addr // c.RemoteAddr, kept: gnet clears it on close, racing with Send
	sess    *session.Session
	pending atomic.Int64 // bytes queued by Send, not yet handed to the socket
	closed  atomic.Bool
}

// OnOpen implements gnet.EventHandler.
func (s *Server) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	if n := s.conns.Add(1); s.opts.MaxConns > 0 && n > int64(s.opts.MaxConns) {
		s.log.Warn("connection refused", "remote", c.RemoteAddr(), "cause", ErrTooManyConns)
		return nil, gnet.Close
	}
	k := &conn{s: s, c: c, remote: c.RemoteAddr()}
	k.sess = s.eng.NewSession(k)
	c.SetContext(k)
	return nil, gnet.None
}

// OnClose implements gnet.EventHandler.
func (s *Server) OnClose(c gnet.Conn, err error) gnet.Action {
	s.conns.Add(-1)
	k, ok := c.Context().(*conn)
	if !ok {
		return gnet.None
	}
	k.closed.Store(true)
	cause := err
	if cause == nil {
		cause = session.ErrClosed
	}
	s.eng.CloseSession(k.sess, fmt.Errorf("tcp: connection closed: %w", cause))
	return gnet.None
}

// OnTraffic implements gnet.EventHandler. It frames every complete message
// in the inbound buffer, dispatches each, and writes the immediate answers
// in one write. The inbound buffer is not retained.
func (s *Server) OnTraffic(c gnet.Conn) gnet.Action {
	k, ok := c.Context().(*conn)
	if !ok {
		return gnet.Close
	}
	buf, _ := c.Peek(-1)
	consumed := 0
	// Pooled for the length of this call only, so an idle connection
	// holds no output buffer.
	scratch, out := codec.GetBuffer(), codec.GetBuffer()
	defer codec.PutBuffer(scratch)
	defer codec.PutBuffer(out)
	action := gnet.None
	for consumed < len(buf) {
		frame, n, err := s.framer.Next(buf[consumed:])
		if err != nil {
			action = s.framingError(k, err, out)
			consumed = len(buf)
			break
		}
		if n == 0 {
			break
		}
		consumed += n
		if len(frame) == 0 {
			continue
		}
		scratch.B = s.eng.HandleFrame(k.sess, frame, scratch.B[:0])
		if len(scratch.B) > 0 {
			out.B = s.framer.AppendFrame(out.B, scratch.B)
		}
	}
	if consumed > 0 {
		// Discard(0) would drop everything buffered: a partial frame must
		// stay for the next read.
		_, _ = c.Discard(consumed)
	}
	if len(out.B) > 0 {
		_, _ = c.Write(out.B) // gnet copies what the socket does not take
	}
	if action == gnet.None && c.OutboundBuffered() > s.opts.MaxOutbound {
		s.log.Warn("closing slow consumer", "remote", c.RemoteAddr(), "session", k.sess.ID(), "outbound", c.OutboundBuffered())
		return gnet.Close
	}
	return action
}

// framingError answers a stream that cannot be framed and closes it: the
// bad bytes cannot be skipped reliably. out holds the answers already
// due for this read; the error goes after them.
func (s *Server) framingError(k *conn, err error, out *codec.Buffer) gnet.Action {
	cause, msg := ErrFraming, "parse error: malformed frame"
	if errors.Is(err, codec.ErrTooLarge) {
		cause, msg = ErrTooLarge, "parse error: message exceeds the size limit"
	}
	s.log.Warn("closing connection", "remote", k.c.RemoteAddr(), "session", k.sess.ID(), "cause", cause)
	e := codec.AppendError(nil, nil, codec.CodeParseError, msg, nil)
	out.B = s.framer.AppendFrame(out.B, e)
	_, _ = k.c.Write(out.B)
	out.B = out.B[:0]
	return gnet.Close
}

// Send implements session.Sink: it frames b and queues it on the
// connection's event loop. It takes ownership of b. Safe for concurrent use.
func (k *conn) Send(b *codec.Buffer) error {
	if k.closed.Load() {
		codec.PutBuffer(b)
		return session.ErrClosed
	}
	if _, nl := k.s.framer.(codec.NewlineFramer); nl {
		b.B = append(b.B, '\n')
	} else {
		f := codec.GetBuffer()
		f.B = k.s.framer.AppendFrame(f.B, b.B)
		codec.PutBuffer(b)
		b = f
	}
	n := int64(len(b.B))
	if k.pending.Add(n) > int64(k.s.opts.MaxOutbound) {
		k.pending.Add(-n)
		codec.PutBuffer(b)
		k.slow()
		return session.ErrSlowConsumer
	}
	err := k.c.AsyncWrite(b.B, func(c gnet.Conn, err error) error {
		k.pending.Add(-n)
		codec.PutBuffer(b)
		if err == nil && c != nil && c.OutboundBuffered() > k.s.opts.MaxOutbound {
			k.slow()
		}
		return nil
	})
	if err != nil {
		k.pending.Add(-n)
		codec.PutBuffer(b)
		return fmt.Errorf("tcp: write: %w", err)
	}
	return nil
}

func (k *conn) slow() {
	if k.closed.CompareAndSwap(false, true) {
		k.s.log.Warn("closing slow consumer", "remote", k.remote, "session", k.sess.ID(), "cause", ErrSlowConsumer)
		_ = k.c.Close()
	}
}

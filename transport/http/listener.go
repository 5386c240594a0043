package http

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mcpedge/mcpedge/transport/netlimit"
	"github.com/valyala/fasthttp"
)

// Accept back-off, as net/http's: 5 ms, doubling, at most 1 s.
const (
	acceptDelayMin = 5 * time.Millisecond
	acceptDelayMax = time.Second
	// acceptLogEvery rate-limits the warnings of a run of accept errors.
	acceptLogEvery = time.Second
	// refuseWriteTimeout bounds writing the 503 to a connection over the
	// connection limit; the socket is fresh, its buffer empty.
	refuseWriteTimeout = 100 * time.Millisecond
	// refuseLinger is how long a refused connection is drained after the
	// 503 so that closing it sends FIN, not a reset that could destroy the
	// answer before the client reads it; maxLingering bounds how many are
	// drained at once (the others are closed at once).
	refuseLinger = 250 * time.Millisecond
	maxLingering = 64
	// retryAfterConns is the Retry-After, in seconds, of a connection
	// refused over the limit.
	retryAfterConns = 1
)

// listener is the server's view of the listener it serves: accept errors
// that a later accept may not have (out of descriptors, a connection
// aborted before it was accepted) are retried with back-off and logged
// instead of ending Serve, and every connection counts against
// Options.Conns until it closes.
type listener struct {
	net.Listener
	s     *Server
	conns *netlimit.Limiter

	closeOnce sync.Once
	done      chan struct{}

	lastLog    time.Time // accept-error warnings; used by Accept only
	suppressed int
	lastRefuse atomic.Int64 // UnixNano of the last warning of a refusal
}

func (s *Server) wrapListener(ln net.Listener) *listener {
	return &listener{Listener: ln, s: s, conns: s.opts.Conns, done: make(chan struct{})}
}

// Close closes the listener and ends a back-off in progress.
func (l *listener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// Accept returns the next connection admitted by the connection limit.
func (l *listener) Accept() (net.Conn, error) {
	var delay time.Duration
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if !retryAccept(err) {
				return nil, err
			}
			delay = min(max(2*delay, acceptDelayMin), acceptDelayMax)
			l.logAcceptError(err, delay)
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-l.done:
				t.Stop()
				return nil, net.ErrClosed // fasthttp's Serve returns nil on it
			}
			continue
		}
		delay = 0
		if l.conns == nil {
			return l.s.proxyState(newLimitedConn(c, nil, netip.Addr{})), nil // for its state (connState)
		}
		ip := remoteIP(c)
		if err := l.conns.Acquire(ip); err != nil {
			l.refuse(c, err)
			continue
		}
		return l.s.proxyState(newLimitedConn(c, l.conns, ip)), nil
	}
}

// retryAccept reports whether an accept error is transient: the listener
// stays usable and a later accept may succeed.
func retryAccept(err error) bool {
	if errors.Is(err, net.ErrClosed) {
		return false
	}
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ECONNABORTED, syscall.ECONNRESET,
		syscall.ENOBUFS, syscall.ENOMEM, syscall.EINTR, syscall.EAGAIN, syscall.EPROTO, syscall.EPERM, syscall.ETIMEDOUT} {
		if errors.Is(err, e) {
			return true
		}
	}
	var ne interface{ Temporary() bool }
	if errors.As(err, &ne) && ne.Temporary() {
		return true
	}
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

// logAcceptError warns of an accept error, at most once a second, with
// the count of those not logged since.
func (l *listener) logAcceptError(err error, delay time.Duration) {
	now := time.Now()
	if now.Sub(l.lastLog) < acceptLogEvery {
		l.suppressed++
		return
	}
	l.s.log.Warn("HTTP accept failed; retrying", "err", err, "retry_in", delay, "not_logged", l.suppressed)
	l.lastLog, l.suppressed = now, 0
}

// refuse answers a connection over the connection limit with 503 and
// closes it.
func (l *listener) refuse(c net.Conn, why error) {
	if l.s.cobs != nil {
		l.s.cobs.ConnRefused("http", why)
	}
	if now := time.Now().UnixNano(); now-l.lastRefuse.Load() > int64(acceptLogEvery) {
		l.lastRefuse.Store(now)
		l.s.log.Warn("HTTP connection refused", "remote", c.RemoteAddr().String(), "cause", why, "open", l.conns.Open())
	}
	if l.s.opts.TLS != nil {
		// A plain-text answer means nothing to a TLS client.
		_ = c.Close()
		return
	}
	msg := "Service Unavailable: connection limit reached"
	if errors.Is(why, netlimit.ErrTooManyConnsPerIP) {
		msg = "Service Unavailable: per-address connection limit reached"
	}
	_ = c.SetWriteDeadline(time.Now().Add(refuseWriteTimeout))
	_, err := c.Write(refusal(msg))
	l.s.lingerClose(c, err == nil)
}

// refusal is the whole HTTP response to a connection refused at accept.
func refusal(msg string) []byte {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":null,"error":{"code":%d,"message":%q}}`, codeTransport, msg)
	return fmt.Appendf(nil, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: %d\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		retryAfterConns, len(body), body)
}

// lingerClose closes c after its answer: when answered, it half-closes
// and drains what the client sent for a moment, so that the answer is not
// lost to a reset, unless too many are lingering already.
func (s *Server) lingerClose(c net.Conn, answered bool) {
	cw, ok := c.(interface{ CloseWrite() error })
	if !answered || !ok || s.lingering.Add(1) > maxLingering {
		if answered && ok {
			s.lingering.Add(-1)
		}
		_ = c.Close()
		return
	}
	s.lingerWG.Add(1)
	go func() {
		defer s.lingerWG.Done()
		defer s.lingering.Add(-1)
		_ = cw.CloseWrite()
		_ = c.SetReadDeadline(time.Now().Add(refuseLinger))
		var buf [512]byte
		for {
			if _, err := c.Read(buf[:]); err != nil {
				break
			}
		}
		_ = c.Close()
	}()
}

// remoteIP is the client address of c; the zero Addr when it has none.
func remoteIP(c net.Conn) netip.Addr { return addrIP(c.RemoteAddr()) }

// addrIP is the IP address of a TCP address; the zero Addr for others.
func addrIP(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// limitedConn is a connection counted by a Limiter (when conns is not
// nil), released once when it closes. It keeps the methods of
// *net.TCPConn that fasthttp and the connection watcher use, and its state
// for a drain: fasthttp's ConnState, and stateReading as soon as a read
// returns bytes on an idle connection (fasthttp reports StateActive only
// once the headers are parsed), so that a drain never closes a connection
// whose next request it has begun to read.
type limitedConn struct {
	net.Conn
	conns    *netlimit.Limiter
	ip       netip.Addr // counted under it; under mu once pp was set
	released atomic.Bool
	info     connInfo // for a drain (connState)

	// The PROXY header (proxied.go): pp says what the first bytes may
	// hold, pre keeps what was read past the header, client is the
	// client it named. s logs the refusals.
	s      *Server
	pp     uint8
	pre    []byte
	client atomic.Pointer[net.TCPAddr]
	mu     sync.Mutex
}

// Read reads, and marks an idle connection that got bytes as reading.
func (c *limitedConn) Read(p []byte) (n int, err error) {
	switch {
	case len(c.pre) > 0:
		n = copy(p, c.pre)
		if c.pre = c.pre[n:]; len(c.pre) == 0 {
			c.pre = nil
		}
	case c.pp != ppNone:
		n, err = c.proxyRead(p)
	default:
		n, err = c.Conn.Read(p)
	}
	if n > 0 {
		if st := c.info.state.Load(); st == int32(fasthttp.StateIdle) || st == stateClosing {
			c.info.state.CompareAndSwap(st, stateReading)
		}
	}
	return n, err
}

func newLimitedConn(c net.Conn, l *netlimit.Limiter, ip netip.Addr) *limitedConn {
	return &limitedConn{Conn: c, conns: l, ip: ip}
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	if c.conns != nil {
		c.mu.Lock()
		if c.released.CompareAndSwap(false, true) {
			c.conns.Release(c.ip)
		}
		c.mu.Unlock()
	}
	return err
}

// SyscallConn lets the connection watcher peek at the socket.
func (c *limitedConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

// SetKeepAlive and SetKeepAlivePeriod serve fasthttp's TCPKeepalive.
func (c *limitedConn) SetKeepAlive(on bool) error {
	if kc, ok := c.Conn.(interface{ SetKeepAlive(bool) error }); ok {
		return kc.SetKeepAlive(on)
	}
	return nil
}

func (c *limitedConn) SetKeepAlivePeriod(d time.Duration) error {
	if kc, ok := c.Conn.(interface{ SetKeepAlivePeriod(time.Duration) error }); ok {
		return kc.SetKeepAlivePeriod(d)
	}
	return nil
}

// CloseWrite half-closes the connection where the transport can.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// listen opens the TCP listener of ListenAndServe. Go sets SO_REUSEADDR
// on listening sockets on Unix, so a restart does not wait out TIME_WAIT;
// the error names the address and the cause: "listen tcp
// 127.0.0.1:7401: address already in use".
func listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		cause := oe.Err
		var se *os.SyscallError
		if errors.As(cause, &se) {
			cause = se.Err
		}
		return nil, fmt.Errorf("listen tcp %s: %w", addr, cause)
	}
	return nil, err
}

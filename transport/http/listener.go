package http

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mcpedge/mcpedge/transport/netkit"
	"github.com/mcpedge/mcpedge/transport/netlimit"
	"github.com/valyala/fasthttp"
)

const (
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

// admitted is the listener fasthttp serves: the connections of the
// transport's netkit.Acceptor (accept errors that a later accept may not
// have are retried with back-off instead of ending Serve; connections
// over Options.Conns are refused), each counted until it closes.
type admitted struct {
	*netkit.Acceptor
	conns *netlimit.Limiter
	s     *Server
}

// Accept returns the next connection admitted by the connection limit.
func (l admitted) Accept() (net.Conn, error) {
	c, ip, err := l.Acceptor.Accept()
	if err != nil {
		return nil, err // net.ErrClosed: fasthttp's Serve returns nil on it
	}
	return l.s.proxyState(newLimitedConn(c, l.conns, ip)), nil // counted, and for its state (connState)
}

// refuse answers a connection over the connection limit (counted and
// logged by the Acceptor) with 503 and closes it.
func (s *Server) refuse(c net.Conn, why error) {
	if s.opts.TLS != nil {
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
	s.lingerClose(c, err == nil)
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
func remoteIP(c net.Conn) netip.Addr { return netkit.AddrIP(c.RemoteAddr()) }

// addrIP is the IP address of a TCP address; the zero Addr for others.
func addrIP(a net.Addr) netip.Addr { return netkit.AddrIP(a) }

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

// listen opens the TCP listener of ListenAndServe (netkit.Listen:
// SO_REUSEADDR, so that a restart does not wait out TIME_WAIT; an error
// that names the address and the cause, "listen tcp 127.0.0.1:7401:
// address already in use").
func listen(addr string) (net.Listener, error) {
	return netkit.Listen(net.ListenConfig{}, "tcp", addr)
}

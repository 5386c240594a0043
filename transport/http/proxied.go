package http

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/transport/proxied"
	"github.com/valyala/fasthttp"
)

// The client's address behind trusted proxies (Options.TrustedProxies,
// package proxied): a PROXY header at the start of a trusted peer's
// connection names the client of the whole connection (its RemoteAddr
// reports it from then on, so everything that reads ctx.RemoteAddr, logs
// included, sees the client); on a connection without one, each request's
// Forwarded or X-Forwarded-For header names its client (clientIP). A
// PROXY header from any other peer ends its connection, logged at a
// bounded rate per address; a forwarding header from one is ignored.

// ErrProxyHeader is the cause of a connection closed for its PROXY
// header: malformed, or sent by a peer not in Options.TrustedProxies.
var ErrProxyHeader = codec.ReasonProxyHeader.Err("mcphttp: PROXY header refused")

// clientIP is the client's address of a request: the connection's peer
// (the client a PROXY header named), or, from a trusted proxy, the
// address its forwarding headers name.
func (s *Server) clientIP(ctx *fasthttp.RequestCtx) netip.Addr {
	peer := addrIP(ctx.RemoteAddr())
	t := s.opts.TrustedProxies
	if !t.Contains(peer) {
		return peer
	}
	h := &ctx.Request.Header
	// PeekAll reuses one buffer: the first result is used before the
	// second call.
	if fwd := h.PeekAll(fasthttp.HeaderForwarded); len(fwd) > 0 {
		return t.FromHeaders(peer, fwd, nil)
	}
	return t.FromHeaders(peer, nil, h.PeekAll(fasthttp.HeaderXForwardedFor))
}

// proxyState sets what c's first bytes may hold: with trusted proxies
// configured, a trusted peer's PROXY header, and none from another peer.
func (s *Server) proxyState(c *limitedConn) *limitedConn {
	if t := s.opts.TrustedProxies; t != nil {
		c.s, c.pp = s, ppUntrusted
		if t.Contains(c.ip) || t.Contains(remoteIP(c.Conn)) {
			c.pp = ppTrusted
		}
	}
	return c
}

// PROXY header states of a limitedConn.
const (
	ppNone      uint8 = iota // nothing expected: read through
	ppTrusted                // a trusted peer's first bytes: a header, or none
	ppUntrusted              // another peer's first bytes: a header is refused
)

// proxyRead reads the first bytes of a connection whose state is not
// ppNone: a trusted peer's PROXY header is parsed and consumed (what came
// after it is kept for the next reads), and the connection is counted
// under the client's address from then on; a header from another peer,
// or a malformed one, fails the read, which closes the connection.
func (c *limitedConn) proxyRead(p []byte) (int, error) {
	var buf [proxied.MaxHeader]byte
	n := 0
	for {
		m, err := c.Conn.Read(buf[n:])
		n += m
		b := buf[:n]
		switch {
		case !proxied.Begins(b): // the connection's own bytes
			c.pp = ppNone
			return c.keep(p, b, err)
		case n < 6 && err == nil: // "P" may begin "POST": too short to tell
			continue
		case n < 6:
			c.pp = ppNone
			return c.keep(p, b, err)
		case c.pp == ppUntrusted:
			return 0, c.refuseProxy(fmt.Errorf("%w: %w", ErrProxyHeader, proxied.ErrUntrusted))
		}
		h, perr := proxied.ParseHeader(b)
		if perr != nil {
			return 0, c.refuseProxy(fmt.Errorf("%w: %w", ErrProxyHeader, perr))
		}
		if h.Len == 0 {
			if err == nil {
				continue
			}
			return 0, err
		}
		c.pp = ppNone
		if h.Client.IsValid() {
			if rerr := c.bind(h.Client); rerr != nil {
				return 0, rerr
			}
		}
		return c.keep(p, b[h.Len:], err)
	}
}

// keep returns what fits of b in p and keeps the rest for the next reads.
func (c *limitedConn) keep(p, b []byte, err error) (int, error) {
	k := copy(p, b)
	if k < len(b) {
		c.pre = append([]byte(nil), b[k:]...)
		return k, nil
	}
	if k > 0 {
		return k, nil // err comes again at the next read
	}
	return 0, err
}

// bind counts the connection under the client a PROXY header named, and
// reports the client as its remote address.
func (c *limitedConn) bind(client netip.AddrPort) error {
	ip := client.Addr()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conns != nil && !c.released.Load() {
		if err := c.conns.Rebind(c.ip, ip); err != nil {
			return c.refuseLocked(err)
		}
		c.ip = ip
	}
	c.client.Store(net.TCPAddrFromAddrPort(client))
	return nil
}

// refuseProxy logs a refused PROXY header, at a bounded rate per address.
func (c *limitedConn) refuseProxy(cause error) error {
	if c.s != nil {
		c.s.warns.Warn(c.s.log, remoteIP(c.Conn), "HTTP connection refused", "remote", c.Conn.RemoteAddr().String(), "cause", cause)
	}
	return cause
}

// refuseLocked logs a connection whose client is over the per-address
// connection limit; the failed read ends it (503, httpError).
func (c *limitedConn) refuseLocked(err error) error {
	if c.s != nil {
		c.s.warns.Warn(c.s.log, remoteIP(c.Conn), "HTTP connection refused", "remote", c.Conn.RemoteAddr().String(), "cause", err)
	}
	return err
}

// RemoteAddr is the client a PROXY header named, else the peer.
func (c *limitedConn) RemoteAddr() net.Addr {
	if a := c.client.Load(); a != nil {
		return a
	}
	return c.Conn.RemoteAddr()
}

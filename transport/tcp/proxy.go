package tcp

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/transport/netlimit"
	"github.com/mcpedge/mcpedge/transport/proxied"
	"github.com/panjf2000/gnet/v2"
)

// The PROXY protocol (Options.TrustedProxies, package proxied): a trusted
// load balancer starts each connection with a header naming the client
// (v1 text or v2 binary), before the first byte of MCP (or of TLS). It is
// read from the connection's first bytes where they arrive, in OnTraffic
// (or by a TLS connection's reader), without waiting: a header not whole
// yet stays in gnet's buffer for the next read, bounded by ReadTimeout
// like any message. From then on the connection is counted, limited and
// logged under the client's address. A connection from a trusted proxy
// without a header is the proxy's own. A PROXY header from any other peer,
// or a malformed one, closes the connection (ErrProxyHeader), logged at a
// bounded rate per address; the check costs the connection's first read
// only.

// ErrProxyHeader is the cause of a connection closed for its PROXY
// header: malformed, or sent by a peer not in Options.TrustedProxies.
var ErrProxyHeader = codec.ReasonProxyHeader.Err("tcp: PROXY header refused")

// PROXY header states of a conn.
const (
	ppNone      uint8 = iota // nothing expected: serve the bytes
	ppTrusted                // a trusted peer's first bytes: a header, or none
	ppUntrusted              // another peer's first bytes: a header is refused
)

// proxyState is the PROXY header state of a connection from ip.
func (s *Server) proxyState(ip netip.Addr) uint8 {
	switch t := s.opts.TrustedProxies; {
	case t == nil:
		return ppNone
	case t.Contains(ip):
		return ppTrusted
	}
	return ppUntrusted
}

// proxyHeader looks at a connection's first bytes, buf, for a PROXY
// header: it returns the header's length once it is whole (0 for none),
// done false while buf is too short to tell, and gnet.Close for a header
// refused. On the connection's reader only.
func (k *conn) proxyHeader(buf []byte) (n int, done bool, action gnet.Action) {
	switch {
	case !proxied.Begins(buf):
		k.pp = ppNone
		return 0, true, gnet.None
	case len(buf) < 6: // "\r\n" may begin a blank line: too short to tell
		return 0, false, gnet.None
	case k.pp == ppUntrusted:
		return 0, false, k.refuseProxy(fmt.Errorf("%w: %w", ErrProxyHeader, proxied.ErrUntrusted))
	}
	h, err := proxied.ParseHeader(buf)
	if err != nil {
		return 0, false, k.refuseProxy(fmt.Errorf("%w: %w", ErrProxyHeader, err))
	}
	if h.Len == 0 {
		return 0, false, gnet.None
	}
	k.pp = ppNone
	if h.Client.IsValid() {
		if err := k.s.limit.Rebind(k.ip, h.Client.Addr()); err != nil {
			return 0, false, k.refusePerIP(h.Client, err)
		}
		c := h.Client
		k.client.Store(&c)
		k.sess.SetRemote(c.Addr())
	}
	return h.Len, true, gnet.None
}

// refuseProxy closes k for a PROXY header refused: logged (markClosing)
// with the cause, no answer (the peer speaks no MCP yet).
func (k *conn) refuseProxy(cause error) gnet.Action {
	if k.markClosing(ErrProxyHeader) {
		k.s.warns.Warn(k.s.log, k.ip, "PROXY header refused", "remote", k.remote, "err", cause)
	}
	return gnet.Close
}

// refusePerIP closes k, whose client (named by a PROXY header) is at the
// per-address connection limit, with the answer accept gives.
func (k *conn) refusePerIP(client netip.AddrPort, err error) gnet.Action {
	if k.s.cobs != nil {
		k.s.cobs.ConnRefused("tcp", err)
	}
	k.s.warns.Warn(k.s.log, client.Addr(), "connection refused", "remote", client.String(), "cause", err)
	if errors.Is(err, netlimit.ErrTooManyConnsPerIP) {
		line := codec.AppendError(nil, nil, codec.CodeServerBusy, "connection limit reached", []byte(`{"limit":"max-conns-per-ip"}`))
		_, _ = k.c.Write(k.s.framer.AppendFrame(nil, line))
	}
	k.markClosing(err)
	return gnet.Close
}

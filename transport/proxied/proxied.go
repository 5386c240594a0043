// Package proxied finds a client's address behind the proxies the server
// trusts (-trusted-proxies): load balancers and reverse proxies that
// connect on the clients' behalf and say who the client is, in the PROXY
// protocol (v1 or v2, before the first byte of the connection's own
// traffic: TCP and HTTP) or in the X-Forwarded-For and Forwarded headers
// (HTTP). What a peer outside the list says is never believed: its own
// address is the client's.
//
// Everything that counts or logs client addresses (-max-conns-per-ip,
// -rate-ip, -max-sessions-per-ip, the tasks' shares, the logs) uses the
// address found here, so that clients behind one load balancer are told
// apart.
package proxied

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/mcpedge/mcpedge/internal/bytesconv"
	"github.com/pires/go-proxyproto"
)

// Sentinel errors.
var (
	// ErrMalformed is a PROXY header that cannot be parsed, or one longer
	// than the protocol allows (MaxHeader).
	ErrMalformed = errors.New("proxied: malformed PROXY header")
	// ErrUntrusted is a PROXY header from a peer not in the trusted list.
	ErrUntrusted = errors.New("proxied: PROXY header from an untrusted peer")
)

// Trusted is the set of networks whose peers are believed when they name
// the client: a trusted proxy's connection is counted as its client's.
// A nil *Trusted trusts nobody. It is immutable and safe for concurrent
// use.
type Trusted struct {
	nets []netip.Prefix
	raw  []string
}

// Parse returns the set of the CIDRs (or single addresses) in list,
// "10.0.0.0/8", "192.0.2.7", "fd00::/8"; empty items are skipped. It
// returns nil for an empty list, and an error naming a bad item.
func Parse(list []string) (*Trusted, error) {
	t := &Trusted{}
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		var p netip.Prefix
		var err error
		if strings.Contains(s, "/") {
			p, err = netip.ParsePrefix(s)
		} else {
			var a netip.Addr
			if a, err = netip.ParseAddr(s); err == nil {
				p = netip.PrefixFrom(a, a.BitLen())
			}
		}
		if err != nil || strings.Contains(s, "%") {
			return nil, fmt.Errorf("proxied: trusted proxy %q: want a CIDR (10.0.0.0/8) or an address", s)
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0))
		}
		t.nets = append(t.nets, p.Masked())
		t.raw = append(t.raw, s)
	}
	if len(t.nets) == 0 {
		return nil, nil
	}
	return t, nil
}

// Contains reports whether a is the address of a trusted proxy.
func (t *Trusted) Contains(a netip.Addr) bool {
	if t == nil || !a.IsValid() {
		return false
	}
	a = a.Unmap()
	for _, p := range t.nets {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// String returns the list as given, comma-separated.
func (t *Trusted) String() string {
	if t == nil {
		return ""
	}
	return strings.Join(t.raw, ",")
}

// FromHeaders returns the client's address of an HTTP request that peer
// sent, from its Forwarded (RFC 7239) header lines, else its
// X-Forwarded-For ones, each list in the order its lines came: when peer
// is trusted, the entries are read from the right, past every trusted
// proxy, and the first one that is not trusted is the client. An entry
// that is not an address ("unknown", an obfuscated name) stops the walk at
// the proxy that wrote it. From a peer not trusted, or without such a
// header, the client is peer. It does not allocate.
func (t *Trusted) FromHeaders(peer netip.Addr, forwarded, xff [][]byte) netip.Addr {
	if !t.Contains(peer) {
		return peer
	}
	if len(forwarded) > 0 {
		return t.walk(peer, forwarded, forwardedFor)
	}
	return t.walk(peer, xff, plainEntry)
}

// walk reads the comma-separated entries of lines from the right.
func (t *Trusted) walk(peer netip.Addr, lines [][]byte, entry func([]byte) (netip.Addr, bool)) netip.Addr {
	client := peer
	for i := len(lines) - 1; i >= 0; i-- {
		v := lines[i]
		for len(v) > 0 {
			var item []byte
			if j := bytes.LastIndexByte(v, ','); j >= 0 {
				item, v = v[j+1:], v[:j]
			} else {
				item, v = v, nil
			}
			item = bytes.TrimSpace(item)
			if len(item) == 0 {
				continue
			}
			a, ok := entry(item)
			if !ok {
				return client // the proxy that wrote it is as far as we can see
			}
			client = a
			if !t.Contains(a) {
				return a
			}
		}
	}
	return client
}

// plainEntry parses an X-Forwarded-For entry: an address, maybe with a
// port ("192.0.2.1:4711", "[2001:db8::1]:4711").
func plainEntry(b []byte) (netip.Addr, bool) {
	return parseHost(b)
}

// forwardedFor parses the for= parameter of a Forwarded element
// (RFC 7239: for=192.0.2.60;proto=http, for="[2001:db8:cafe::17]:4711").
func forwardedFor(elem []byte) (netip.Addr, bool) {
	for len(elem) > 0 {
		var pair []byte
		pair, elem, _ = bytes.Cut(elem, []byte(";"))
		k, v, ok := bytes.Cut(bytes.TrimSpace(pair), []byte("="))
		if !ok || !bytes.EqualFold(bytes.TrimSpace(k), []byte("for")) {
			continue
		}
		v = bytes.TrimSpace(v)
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
			v = v[1 : len(v)-1]
		}
		return parseHost(v)
	}
	return netip.Addr{}, false
}

// parseHost parses an address with an optional port; IPv6 with a port is
// bracketed. Zones are refused: no client address has one.
func parseHost(b []byte) (netip.Addr, bool) {
	if len(b) > 0 && b[0] == '[' {
		end := bytes.IndexByte(b, ']')
		if end < 0 {
			return netip.Addr{}, false
		}
		b = b[1:end]
	} else if i := bytes.IndexByte(b, ':'); i >= 0 && bytes.IndexByte(b[i+1:], ':') < 0 {
		b = b[:i] // IPv4 with a port
	}
	if len(b) == 0 || bytes.IndexByte(b, '%') >= 0 {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(bytesconv.B2S(b))
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// MaxHeader is the longest PROXY header accepted: a v1 line is at most
// 107 bytes; a v2 header is 16 bytes and up to 65535 of addresses and
// TLVs, of which a load balancer sends a few dozen. Past this it is
// ErrMalformed.
const MaxHeader = 1024

var (
	sigV1 = []byte("PROXY ")
	sigV2 = proxyproto.SIGV2
)

// Begins reports whether b, the first bytes of a connection, is or may be
// the start of a PROXY header: true on a prefix of either signature too
// short to tell.
func Begins(b []byte) bool {
	for _, sig := range [2][]byte{sigV1, sigV2} {
		n := min(len(b), len(sig))
		if n > 0 && bytes.Equal(b[:n], sig[:n]) {
			return true
		}
	}
	return false
}

// Header is a parsed PROXY header: the client's address (the zero Addr
// for a v2 LOCAL command or v1 UNKNOWN: the connection is the proxy's
// own, a health check) and the header's length.
type Header struct {
	Client netip.AddrPort
	Len    int
}

// ParseHeader parses the PROXY header at the start of b, the first bytes
// of a connection, with go-proxyproto. It returns n == 0 and no error
// while b is a prefix of a header too short to parse (read more and call
// again), ErrMalformed for bytes that are not a header, or one that is
// malformed or longer than MaxHeader.
func ParseHeader(b []byte) (Header, error) {
	n, err := headerLen(b)
	if err != nil || n == 0 {
		return Header{}, err
	}
	br := bufio.NewReaderSize(bytes.NewReader(b[:n]), max(n, 16))
	h, err := proxyproto.Read(br)
	if err != nil {
		return Header{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	out := Header{Len: n}
	if h.Command.IsProxy() {
		switch a := h.SourceAddr.(type) {
		case *net.TCPAddr:
			out.Client = a.AddrPort()
		case *net.UDPAddr:
			out.Client = a.AddrPort()
		}
		out.Client = netip.AddrPortFrom(out.Client.Addr().Unmap(), out.Client.Port())
	}
	return out, nil
}

// headerLen returns the length of the header at the start of b, 0 while
// b is too short to tell.
func headerLen(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	if !Begins(b) {
		return 0, ErrMalformed
	}
	switch {
	case len(b) >= len(sigV1) && bytes.HasPrefix(b, sigV1):
		i := bytes.IndexByte(b[:min(len(b), 108)], '\n')
		if i < 0 {
			if len(b) >= 108 {
				return 0, fmt.Errorf("%w: v1 line longer than 107 bytes", ErrMalformed)
			}
			return 0, nil
		}
		return i + 1, nil
	case len(b) >= 16:
		n := 16 + int(binary.BigEndian.Uint16(b[14:16]))
		if n > MaxHeader {
			return 0, fmt.Errorf("%w: v2 header of %d bytes", ErrMalformed, n)
		}
		if len(b) < n {
			return 0, nil
		}
		return n, nil
	}
	return 0, nil
}

// Package hostcheck is the check of a request's Host header against DNS
// rebinding that every HTTP listener of the process makes: the MCP
// endpoint (transport/http, which checks Origin with the same names) and
// the admin listener. A loopback name ("localhost", 127.0.0.1, [::1])
// always passes; so does a value of the allow-list ("example.com" any
// port, "example.com:8443" that port only, "*" any host). With an empty
// list, a listener bound to loopback takes loopback names only, and one
// bound elsewhere any Host.
package hostcheck

import (
	"bytes"
	"net"
	"net/netip"
	"strings"

	"github.com/mcpedge/mcpedge/internal/bytesconv"
)

// Check is the Host check of a listener bound to loopback (or not) with
// an allow-list. A Check is immutable.
type Check struct {
	hosts    []string // lower-cased
	any      bool
	loopback bool
}

// New returns the check of a listener bound to loopback (or not) with
// the allow-list allowed.
func New(allowed []string, loopback bool) *Check {
	c := &Check{loopback: loopback}
	c.hosts, c.any = LowerList(allowed)
	return c
}

// Allowed reports whether a request with this Host header value passes.
func (c *Check) Allowed(host []byte) bool { return Host(host, c.hosts, c.any, c.loopback) }

// Host is the check itself: hosts is the lower-cased allow-list (as
// LowerList makes it), any its "*", loopback whether the listener is
// bound to loopback only.
func Host(host []byte, hosts []string, any, loopback bool) bool {
	if any {
		return true
	}
	name := Hostname(host)
	if Loopback(name) {
		return true
	}
	for _, h := range hosts {
		if bytes.EqualFold(host, []byte(h)) || bytes.EqualFold(name, []byte(h)) {
			return true
		}
	}
	return len(hosts) == 0 && !loopback
}

// LowerList returns an allow-list lower-cased and trimmed, without its
// empty values and its "*", and whether it held "*".
func LowerList(in []string) (out []string, any bool) {
	for _, v := range in {
		v = strings.ToLower(strings.TrimSpace(v))
		switch v {
		case "":
		case "*":
			any = true
		default:
			out = append(out, strings.TrimSuffix(v, "/"))
		}
	}
	return out, any
}

// Hostname strips the port from a Host value or an origin's authority:
// "[::1]:80" → "::1", "localhost:80" → "localhost".
func Hostname(h []byte) []byte {
	if len(h) > 0 && h[0] == '[' {
		if i := bytes.IndexByte(h, ']'); i > 0 {
			return h[1:i]
		}
		return h
	}
	if i := bytes.LastIndexByte(h, ':'); i >= 0 && bytes.IndexByte(h[:i], ':') < 0 {
		return h[:i]
	}
	return h
}

// Loopback reports whether a host name is localhost or a loopback IP.
func Loopback(n []byte) bool {
	n = bytes.TrimSuffix(n, []byte("."))
	if bytes.EqualFold(n, []byte("localhost")) {
		return true
	}
	if len(n) == 0 || bytes.IndexByte(n, '%') >= 0 {
		return false
	}
	a, err := netip.ParseAddr(bytesconv.B2S(n))
	return err == nil && a.IsLoopback()
}

// LoopbackAddr reports whether a listen address binds loopback only.
func LoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	return Loopback([]byte(host))
}

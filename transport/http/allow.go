package http

// allowLists are the Host and Origin allow-lists in effect, swapped whole
// by SetAllowed.
type allowLists struct {
	hosts, origins     []string // lower-cased
	anyHost, anyOrigin bool
	rawHosts, rawOrig  []string // as given, for Options
}

// SetAllowed replaces Options.AllowedHosts and Options.AllowedOrigins of a
// running server, as a configuration reload does: the next request is
// checked against the new lists. Checking costs the request an atomic
// load. It is safe for concurrent use.
func (s *Server) SetAllowed(hosts, origins []string) {
	al := &allowLists{rawHosts: append([]string(nil), hosts...), rawOrig: append([]string(nil), origins...)}
	al.hosts, al.anyHost = lowerList(hosts)
	al.origins, al.anyOrigin = lowerList(origins)
	s.allow.Store(al)
}

// HostCheck is the check of a request's Host header against DNS
// rebinding that the MCP listener makes, for another listener of the
// process to make the same (the admin listener): a loopback name
// ("localhost", 127.0.0.1, [::1]) always passes; so does a value of the
// allow-list (Options.AllowedHosts, -allowed-hosts: "example.com" any
// port, "example.com:8443" that port only, "*" any host). With an empty
// list, a listener bound to loopback takes loopback names only, and one
// bound elsewhere any Host. A HostCheck is immutable.
type HostCheck struct {
	hosts    []string // lower-cased
	any      bool
	loopback bool
}

// NewHostCheck returns the check of a listener bound to loopback (or
// not) with the allow-list allowed.
func NewHostCheck(allowed []string, loopback bool) *HostCheck {
	c := &HostCheck{loopback: loopback}
	c.hosts, c.any = lowerList(allowed)
	return c
}

// Allowed reports whether a request with this Host header value passes.
func (c *HostCheck) Allowed(host []byte) bool { return hostAllowed(host, c.hosts, c.any, c.loopback) }

package http

import "github.com/mcpedge/mcpedge/internal/hostcheck"

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
	al.hosts, al.anyHost = hostcheck.LowerList(hosts)
	al.origins, al.anyOrigin = hostcheck.LowerList(origins)
	s.allow.Store(al)
}

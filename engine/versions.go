package engine

import (
	"slices"
	"strings"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
)

// Gating by revision. A session sees only what its negotiated revision
// defines, where that is cheap to hold back: the initialize result's
// capabilities and serverInfo fields, progress messages, task-augmented
// calls. (List pages are encoded once for every session and keep their
// newer optional fields, title, icons, annotations, outputSchema, which
// older clients ignore.)

// atLeast reports whether revision v is min or later: revisions are
// dates, so they order as strings. The empty revision (a session not yet
// initialized) is before every other.
func atLeast(v, min string) bool { return v >= min }

// capabilitiesFor returns Capabilities as a client of revision version
// knows them: tasks since 2025-11-25, completions since 2025-03-26.
func (s *Server) capabilitiesFor(version string) mcp.ServerCapabilities {
	c := s.Capabilities()
	if !atLeast(version, mcp.Version20251125) {
		c.Tasks = nil
	}
	if !atLeast(version, mcp.Version20250326) {
		c.Completions = nil
	}
	return c
}

// implementationFor returns info as a client of revision version knows
// it: title since 2025-06-18; description, websiteUrl and icons since
// 2025-11-25.
func implementationFor(info mcp.Implementation, version string) mcp.Implementation {
	if !atLeast(version, mcp.Version20251125) {
		info.Description, info.WebsiteURL, info.Icons = "", "", nil
	}
	if !atLeast(version, mcp.Version20250618) {
		info.Title = ""
	}
	return info
}

// offer is what Options.Versions makes of the revisions: those offered,
// newest first, and the answers that name them, encoded once.
type offer struct {
	all       []string // every revision offered, newest first
	sessions  []string // the session revisions among them, newest first
	stateless bool     // 2026-07-28 is offered
	supported []byte   // all as a JSON array
}

// newOffer returns the offer of versions: the revisions of mcp.AllVersions
// it names (all of them when it names none).
func newOffer(versions []string) offer {
	var o offer
	for _, v := range mcp.AllVersions {
		for _, w := range versions {
			if v == w {
				o.all = append(o.all, v)
				break
			}
		}
	}
	if len(o.all) == 0 {
		o.all = mcp.AllVersions[:]
	}
	o.supported = append(o.supported, '[')
	for i, v := range o.all {
		if mcp.StatelessVersion(v) {
			o.stateless = true
		} else {
			o.sessions = append(o.sessions, v)
		}
		if i > 0 {
			o.supported = append(o.supported, ',')
		}
		o.supported = codec.AppendString(o.supported, v)
	}
	o.supported = append(o.supported, ']')
	return o
}

// negotiate answers an initialize's requested revision: the same when it
// is offered, else the newest session revision offered; "" when none is.
func (o *offer) negotiate(requested string) string {
	for _, v := range o.sessions {
		if v == requested {
			return v
		}
	}
	if len(o.sessions) > 0 {
		return o.sessions[0]
	}
	return ""
}

// unsupported is UnsupportedProtocolVersionError (-32022) for a request
// of revision requested, naming the revisions offered.
func (o *offer) unsupported(requested string) *codec.Error {
	data := make([]byte, 0, len(o.supported)+48+len(requested))
	data = append(data, `{"supported":`...)
	data = append(data, o.supported...)
	data = append(data, `,"requested":`...)
	data = codec.AppendString(data, requested)
	data = append(data, '}')
	return &codec.Error{Code: mcp.CodeUnsupportedProtocolVersion, Message: "Unsupported protocol version: " + requested + " (supported: " + strings.Join(o.all, ", ") + ")", Data: data}
}

// Versions returns the protocol revisions the server offers, newest
// first (Options.Versions).
func (s *Server) Versions() []string { return slices.Clone(s.offer.all) }

package engine

import "github.com/mcpedge/mcpedge/mcp"

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

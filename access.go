package mcpedge

import mcphttp "github.com/mcpedge/mcpedge/transport/http"

// HTTPServer returns the Streamable HTTP transport, nil when Options.HTTP
// was nil: a configuration reload changes its allow-lists and its TLS
// certificate through it (SetAllowed, Options.TLS).
func (s *Server) HTTPServer() *mcphttp.Server { return s.http }

package handlers

import "github.com/mcpedge/mcpedge/mcp"

// HeaderParam is a tool argument mirrored into an Mcp-Param-* header
// (mcp.HeaderParam).
type HeaderParam = mcp.HeaderParam

// ToolHeaderParams returns the header parameters of a tool (x-mcp-header
// annotations of its inputSchema, mcp.ParseHeaderParams), computed once
// when it was registered: nil when it has none or there is no such tool.
// The slice is the Registry's own: it must not be modified. Lock-free.
func (r *Registry) ToolHeaderParams(name string) []HeaderParam {
	e, ok := r.snap.Load().tools.get(name)
	if !ok {
		return nil
	}
	return e.v.headers
}

package client

import (
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
)

// What the server said about itself. The session revisions say it in the
// initialize result; 2026-07-28 says it in the server/discover result
// (capabilities, instructions) and in every result's _meta (serverInfo).
// ServerInfo, ServerCapabilities, ProtocolVersion and Instructions answer
// in either era, from whichever the client used; InitializeResult and
// DiscoverResult are each one era's raw answer.

// ServerInfo returns the server's name, version and the rest of its
// Implementation: from initialize in a session revision, from the
// io.modelcontextprotocol/serverInfo _meta of server/discover's result in
// 2026-07-28. It is the zero Implementation before Connect, and in
// 2026-07-28 when the server does not say (the revision makes it a
// SHOULD), so c.ServerInfo().Name never panics. The Icons slice is
// shared: do not modify it.
func (c *Client) ServerInfo() mcp.Implementation {
	if c.Modern() {
		if p := c.discoveredInfo.Load(); p != nil {
			return *p
		}
		return mcp.Implementation{}
	}
	if r := c.initRes.Load(); r != nil {
		return r.ServerInfo
	}
	return mcp.Implementation{}
}

// ServerCapabilities returns what the server declared, by initialize or
// server/discover, or nil before either. The result is shared: do not
// modify it.
func (c *Client) ServerCapabilities() *mcp.ServerCapabilities {
	if d := c.discovered.Load(); d != nil && c.Modern() {
		return &d.Capabilities
	}
	if r := c.initRes.Load(); r != nil {
		return &r.Capabilities
	}
	return nil
}

// ProtocolVersion returns the negotiated protocol revision ("" before
// Connect): the one initialize settled on, or the 2026-07-28 revision the
// client speaks statelessly.
func (c *Client) ProtocolVersion() string {
	if ms := c.modern.Load(); ms != nil && Era(c.era.Load()) == EraModern {
		return ms.version
	}
	if r := c.initRes.Load(); r != nil {
		return r.ProtocolVersion
	}
	return ""
}

// Instructions returns the server's instructions for the model, from
// initialize or server/discover ("" when it gave none).
func (c *Client) Instructions() string {
	if d := c.discovered.Load(); d != nil && c.Modern() {
		return d.Instructions
	}
	if r := c.initRes.Load(); r != nil {
		return r.Instructions
	}
	return ""
}

// InitializeResult returns the server's answer to the latest initialize.
// It is era-specific: nil in 2026-07-28, which has no initialize (the
// default Options reach it with any server that speaks it), and nil
// before Connect. Use ServerInfo, ServerCapabilities, ProtocolVersion and
// Instructions for what both eras say. The result is shared: do not
// modify it.
func (c *Client) InitializeResult() *mcp.InitializeResult { return c.initRes.Load() }

// DiscoverResult returns the server's answer to the latest
// server/discover. It is era-specific: nil in a session revision, and
// before Connect. The result is shared: do not modify it.
func (c *Client) DiscoverResult() *mcp.DiscoverResult { return c.discovered.Load() }

// metaServerInfo returns the io.modelcontextprotocol/serverInfo member of
// a result's _meta, or nil when it has none or it does not parse (it is
// for display only: a malformed one does not fail the handshake).
func metaServerInfo(meta codec.RawJSON) *mcp.Implementation {
	if len(meta) == 0 {
		return nil
	}
	var m struct {
		Info *mcp.Implementation `json:"io.modelcontextprotocol/serverInfo"`
	}
	if codec.Unmarshal(meta, &m) != nil {
		return nil
	}
	return m.Info
}

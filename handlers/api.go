// Package handlers holds mcpedge's registries of tools, resources, resource
// templates, prompts and completions, and the typed registration API.
//
// A Registry is safe for concurrent use: registration and removal may happen
// while requests are served. Reads (lookups, list pages) take no lock: they
// load an immutable snapshot that every change replaces.
package handlers

import (
	"context"

	"github.com/mcpedge/mcpedge/mcp"
)

// SessionScope is implemented by a Peer that reaches the request's session
// beyond the request: the engine's Peer does. A handler keeping state per
// session asserts its Peer to it, keys the state by SessionID and frees it
// in OnSessionClose.
type SessionScope interface {
	// OnSessionClose registers fn to run once when the session closes; at
	// once if it already has. fn must not block.
	OnSessionClose(fn func())
	// NotifyResourceUpdated sends notifications/resources/updated for uri
	// to this session alone, if it is subscribed to uri (a resource whose
	// content is per session; Server.ResourceUpdated tells every session).
	NotifyResourceUpdated(uri string) error
}

// Peer is what a handler can reach of the client that sent its request:
// the session's identity and capabilities, and the request-scoped
// notifications and server-to-client requests. The engine implements it;
// every call is bound to the request being served (progress uses its
// progressToken; messages go on its stream). Peer is safe for concurrent use.
type Peer interface {
	// SessionID is the session's id ("" for a stateless request).
	SessionID() string
	// ProtocolVersion is the negotiated protocol revision.
	ProtocolVersion() string
	// ClientInfo is the client's implementation info.
	ClientInfo() mcp.Implementation
	// ClientCapabilities are the capabilities the client declared.
	ClientCapabilities() *mcp.ClientCapabilities

	// Progress reports progress against the request's progressToken; it
	// does nothing when the request carried none. total <= 0 means unknown.
	Progress(progress, total float64, message string) error
	// Log sends notifications/message if level passes the session's level.
	// data is marshalled to JSON (a string, a map, a struct).
	Log(level, logger string, data any) error

	// CreateMessage sends sampling/createMessage and waits for the answer.
	CreateMessage(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error)
	// Elicit sends elicitation/create and waits for the answer.
	Elicit(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error)
	// ListRoots sends roots/list and waits for the answer.
	ListRoots(ctx context.Context) (*mcp.ListRootsResult, error)

	// CloseStream asks the transport to end the request's response stream
	// now (SSE polling, SEP-1699): the client reconnects with Last-Event-ID
	// and receives what follows, the result included, by replay. It does
	// nothing on transports without per-request streams (TCP, stdio).
	CloseStream()
}

// CallToolRequest is a tools/call served by a ToolHandler. Params.Arguments
// have been validated against the tool's input schema. Params and its bytes
// are the handler's own (copied out of transport buffers).
type CallToolRequest struct {
	Peer   Peer
	Params *mcp.CallToolParams
}

// ToolHandler serves tools/call for one tool. A returned error becomes a
// JSON-RPC error (a *codec.Error keeps its code; anything else is -32603);
// a failure the model should see is a result with IsError set.
type ToolHandler func(ctx context.Context, req *CallToolRequest) (*mcp.CallToolResult, error)

// ReadResourceRequest is a resources/read served by a ResourceHandler. Vars
// holds the template variables extracted from the URI (nil for a static
// resource).
type ReadResourceRequest struct {
	Peer   Peer
	Params *mcp.ReadResourceParams
	Vars   map[string]string
}

// ResourceHandler serves resources/read for a resource or a template.
type ResourceHandler func(ctx context.Context, req *ReadResourceRequest) (*mcp.ReadResourceResult, error)

// GetPromptRequest is a prompts/get served by a PromptHandler; required
// arguments have been checked.
type GetPromptRequest struct {
	Peer   Peer
	Params *mcp.GetPromptParams
}

// PromptHandler serves prompts/get for one prompt.
type PromptHandler func(ctx context.Context, req *GetPromptRequest) (*mcp.GetPromptResult, error)

// CompleteRequest is a completion/complete for one prompt argument or one
// template variable.
type CompleteRequest struct {
	Peer   Peer
	Params *mcp.CompleteParams
}

// CompletionHandler proposes values for one argument or variable. The
// registry caps the answer at 100 values, setting Total and HasMore.
type CompletionHandler func(ctx context.Context, req *CompleteRequest) (*mcp.CompleteResult, error)

// ListKind names a list whose changes are announced.
type ListKind uint8

const (
	ListTools ListKind = iota + 1
	ListResources
	ListPrompts
)

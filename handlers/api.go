// Package handlers holds mcpedge's registries of tools, resources, resource
// templates, prompts and completions, and the typed registration API.
//
// A Registry is safe for concurrent use: registration and removal may happen
// while requests are served. Reads (lookups, list pages) take no lock: they
// load an immutable snapshot that every change replaces.
//
// # Registration errors
//
// Every registration (Registry.AddTool, AddToolWith, AddResource,
// AddStaticResource, AddResourceTemplate, AddPrompt, AddPromptCompletion,
// AddTemplateCompletion, and the typed AddTool) reports misuse the same way:
// it returns an error wrapping one of the ErrInvalid* sentinels (test with
// errors.Is) and registers nothing. Misuse is an empty name or URI, a nil
// handler, a schema that is not a valid JSON Schema object (or cannot be
// inferred from a Go type), invalid options. Registration never panics:
// tools and resources are often registered while the server runs, from
// data (a configuration file, an upstream server's tools/list), where a bad
// schema is an input to report, not a bug to crash on. The one panic is
// OnChange(nil), which wires code to code.
//
// # Errors from handlers
//
// A tool handler's error is part of the conversation, not of the protocol:
// it is answered as a CallToolResult with isError set and the error's text,
// as in the go-sdk, so that the model can see it and try again. A handler
// that means a protocol error returns a *codec.Error (or an error wrapping
// one, found with errors.As): it is answered as a JSON-RPC error with its
// code. So is the error of a handler that gives up because its context
// ended (the context's error or cause, errors.Is): the request was
// cancelled, by the client, its transport or shutdown, and the tool did not
// fail.
// Arguments that fail the input schema, or do not decode into the
// typed handler's In, are isError results too (SEP-1303); the handler does
// not run. Resource, prompt and completion handlers have no isError: their
// errors are JSON-RPC errors, with the *codec.Error's code or -32603.
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
// have been validated against the tool's input schema.
//
// # Lifetime
//
// The request, its Params, and the strings and bytes they hold (the name,
// the raw arguments, the _meta object) are the handler's until it
// returns, and no longer: the engine serves tools/call without copying
// the message, and reuses the request and the message's buffer for
// another call once the answer is written. So are a typed tool's decoded
// arguments (AddTool's In): their strings alias the message. A handler
// that keeps any of them past its return (in a map, in a goroutine)
// copies it first: strings.Clone, bytes.Clone, or a fresh decode of the
// raw arguments. The result a handler returns is encoded before the
// request is reused, so it may hold the arguments themselves: echoing
// in.Text back is safe.
type CallToolRequest struct {
	Peer   Peer
	Params *mcp.CallToolParams

	res     mcp.CallToolResult
	content [1]mcp.Content
}

// TextResult returns a result with one text content, text, as
// mcp.TextResult does, but without allocating: the result belongs to the
// request, and is reused with it (see the Lifetime section). Return it;
// do not keep it.
func (r *CallToolRequest) TextResult(text string) *mcp.CallToolResult {
	r.content[0] = mcp.Content{Type: mcp.ContentText, Text: text}
	r.res = mcp.CallToolResult{Content: r.content[:1]}
	return &r.res
}

// ToolHandler serves tools/call for one tool. A returned error becomes a
// result with IsError set and the error's text, unless it is a *codec.Error
// (errors.As), which becomes a JSON-RPC error with its code (see the
// package doc).
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

// TraceScope is implemented by the engine's Peer: the W3C trace context
// (traceparent, tracestate, baggage) to propagate to whatever a handler
// calls for its request. When the server traces the request (-otel-endpoint,
// engine.Options.Tracer), traceparent and tracestate are its span's, so
// the callee's spans are its children; otherwise those a 2026-07-28
// request carries in its _meta, empty for requests without one. baggage
// is the _meta's. The strings are borrowed as the request is (see
// CallToolRequest's Lifetime). A handler that starts spans of its own
// finds the request's span in its context instead (package tracing).
type TraceScope interface {
	TraceContext() (traceparent, tracestate, baggage string)
}

type inputKeyCtx struct{}

// WithInputKey names the input a handler asks its client for with ctx
// (Peer.Elicit, CreateMessage, ListRoots) in a 2026-07-28 request: its key
// in the InputRequiredResult's inputRequests, which the client's retry
// answers in inputResponses. Keys must be unique within the request.
// Without one, the engine names an input by its method and rank
// ("elicitation-1", "sampling-2"). Sessions of older revisions, where the
// input is a server-to-client request, ignore it.
func WithInputKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, inputKeyCtx{}, key)
}

// A TaskStarter is the Peer of a tools/call that may become a task of
// the 2026-07-28 tasks extension (see ToolOptions.DeferTask).
type TaskStarter interface {
	// StartTask answers the call with a CreateTaskResult and has the
	// handler, which goes on, run as the task from there: its result is
	// the task's, and its inputs (Elicit, CreateMessage, ListRoots) park
	// the task in input_required until the client answers them with
	// tasks/update. It reports false, and the call goes on as a plain
	// request, when the call cannot become a task: the client did not
	// declare the extension, the tool does not support tasks, an input
	// asked for is still unanswered, or the server keeps too many tasks.
	// It is idempotent.
	StartTask() bool
}

// StartTask calls p's StartTask when p is a TaskStarter; it reports
// whether the call now runs as a task.
func StartTask(p Peer) bool {
	if ts, ok := p.(TaskStarter); ok {
		return ts.StartTask()
	}
	return false
}

// InputKey returns the key WithInputKey set on ctx, or "".
func InputKey(ctx context.Context) string {
	k, _ := ctx.Value(inputKeyCtx{}).(string)
	return k
}

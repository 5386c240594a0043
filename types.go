package mcpedge

import (
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	mcphttp "github.com/mcpedge/mcpedge/transport/http"
	"github.com/mcpedge/mcpedge/transport/stdio"
	"github.com/mcpedge/mcpedge/transport/tcp"
)

// Options of the engine and the transports; each package documents its
// fields and defaults.
type (
	// EngineOptions are engine.Options.
	EngineOptions = engine.Options
	// TCPOptions are tcp.Options.
	TCPOptions = tcp.Options
	// HTTPOptions are mcphttp.Options (package transport/http).
	HTTPOptions = mcphttp.Options
	// StdioOptions are stdio.Options.
	StdioOptions = stdio.Options
)

// The handler API (package handlers) and the MCP wire types (package mcp)
// that registering tools, resources and prompts needs.
type (
	// Registry holds the tools, resources, templates and prompts; see
	// handlers.Registry for AddResource, AddStaticResource,
	// AddResourceTemplate, AddPrompt, the completions and removal.
	Registry = handlers.Registry

	// Tool describes a tool (mcp.Tool).
	Tool = mcp.Tool
	// ToolOptions tune how a tool is run (handlers.ToolOptions).
	ToolOptions = handlers.ToolOptions
	// CallToolRequest is a tools/call as its handler sees it: the
	// client (Peer) and the params (handlers.CallToolRequest).
	CallToolRequest = handlers.CallToolRequest
	// CallToolResult is a tool's answer (mcp.CallToolResult).
	CallToolResult = mcp.CallToolResult
	// ToolHandlerFor is a typed tool handler (handlers.ToolHandlerFor).
	ToolHandlerFor[In, Out any] = handlers.ToolHandlerFor[In, Out]
	// Content is one content block of a result or a prompt message
	// (mcp.Content).
	Content = mcp.Content

	// Resource describes a resource (mcp.Resource).
	Resource = mcp.Resource
	// ResourceTemplate describes a family of resources by an RFC 6570
	// template (mcp.ResourceTemplate).
	ResourceTemplate = mcp.ResourceTemplate
	// ReadResourceRequest is a resources/read as its handler sees it
	// (handlers.ReadResourceRequest).
	ReadResourceRequest = handlers.ReadResourceRequest
	// ReadResourceResult is a resource handler's answer
	// (mcp.ReadResourceResult).
	ReadResourceResult = mcp.ReadResourceResult
	// ResourceContents is one item of a ReadResourceResult
	// (mcp.ResourceContents).
	ResourceContents = mcp.ResourceContents

	// Prompt describes a prompt (mcp.Prompt).
	Prompt = mcp.Prompt
	// PromptArgument describes an argument of a prompt
	// (mcp.PromptArgument).
	PromptArgument = mcp.PromptArgument
	// GetPromptRequest is a prompts/get as its handler sees it
	// (handlers.GetPromptRequest).
	GetPromptRequest = handlers.GetPromptRequest
	// GetPromptResult is a prompt handler's answer (mcp.GetPromptResult).
	GetPromptResult = mcp.GetPromptResult
	// PromptMessage is one message of a GetPromptResult
	// (mcp.PromptMessage).
	PromptMessage = mcp.PromptMessage
)

// AddTool registers on s a tool whose arguments decode into In and whose
// structured output, if any, is Out: handlers.AddTool on s.Registry(). The
// input schema is inferred from In unless t.InputSchema is set, and
// arguments are validated against it before h runs. A handler's error is
// answered as a result with isError set and the error's text, so that the
// model sees it. Misuse (an empty name, a nil handler, a schema that cannot
// be inferred) is an error; registration never panics.
//
// h borrows its request: in's strings and the request's params alias the
// message, valid until h returns; a handler that keeps them copies them
// (see handlers.CallToolRequest). Returning them in the result is safe.
// req.TextResult answers with one text content without allocating.
func AddTool[In, Out any](s *Server, t *Tool, h ToolHandlerFor[In, Out], opts ...ToolOptions) error {
	return handlers.AddTool(s.Registry(), t, h, opts...)
}

// TextResult returns a tool result with one text content
// (mcp.TextResult).
func TextResult(text string) *CallToolResult { return mcp.TextResult(text) }

// ErrorResult returns a tool-execution error result (isError: true) with
// one text content (mcp.ErrorResult): the model sees it and may try again.
func ErrorResult(text string) *CallToolResult { return mcp.ErrorResult(text) }

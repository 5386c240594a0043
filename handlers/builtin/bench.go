package builtin

import (
	"context"
	"strconv"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
)

// The bench workload's schemas, exactly as the benchmarks expect them.
const (
	EchoSchema = `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`
	AddSchema  = `{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`
)

// Bench installs the benchmark workload: tools echo and add, the static
// resource mem://hello and the prompt greet. Every server in the peer
// comparison serves exactly this.
func Bench(r *handlers.Registry, _ Env) error {
	// Both tools only compute: they run on the event loop.
	pure := handlers.ToolOptions{NonBlocking: true}
	if err := handlers.AddTool(r, &mcp.Tool{
		Name:        "echo",
		Description: "Returns its text argument.",
		InputSchema: codec.RawJSON(EchoSchema),
	}, echo, pure); err != nil {
		return err
	}
	if err := handlers.AddTool(r, &mcp.Tool{
		Name:        "add",
		Description: "Adds two numbers.",
		InputSchema: codec.RawJSON(AddSchema),
	}, add, pure); err != nil {
		return err
	}
	if err := r.AddStaticResource(&mcp.Resource{
		URI: "mem://hello", Name: "hello", MimeType: "text/plain",
	}, mcp.ResourceContents{URI: "mem://hello", MimeType: "text/plain", Text: "hello"}); err != nil {
		return err
	}
	return r.AddPrompt(&mcp.Prompt{
		Name:        "greet",
		Description: "Greets someone by name.",
		Arguments:   []mcp.PromptArgument{{Name: "name", Description: "Who to greet", Required: true}},
	}, greet)
}

type echoIn struct {
	Text string `json:"text"`
}

// echo and add return their own result and no structured output (Out is
// any): the answer is exactly what the peer servers answer.
// echo answers with the request's own result, so that a call allocates
// nothing (handlers.CallToolRequest.TextResult).
func echo(_ context.Context, req *handlers.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
	return req.TextResult(in.Text), nil, nil
}

type addIn struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

func add(_ context.Context, _ *handlers.CallToolRequest, in addIn) (*mcp.CallToolResult, any, error) {
	return mcp.TextResult(strconv.FormatFloat(in.A+in.B, 'f', -1, 64)), nil, nil
}

func greet(_ context.Context, req *handlers.GetPromptRequest) (*mcp.GetPromptResult, error) {
	name := req.Params.Arguments["name"]
	return &mcp.GetPromptResult{
		Description: "A greeting for " + name,
		Messages: []mcp.PromptMessage{{
			Role:    "user",
			Content: mcp.Content{Type: mcp.ContentText, Text: "Please greet " + name + " warmly."},
		}},
	}, nil
}

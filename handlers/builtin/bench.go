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
	if err := r.AddToolWith(&mcp.Tool{
		Name:        "echo",
		Description: "Returns its text argument.",
		InputSchema: codec.RawJSON(EchoSchema),
	}, echo, pure); err != nil {
		return err
	}
	if err := r.AddToolWith(&mcp.Tool{
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

func echo(_ context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		Text string `json:"text"`
	}
	if err := codec.Unmarshal(req.Params.Arguments, &in); err != nil {
		return nil, &codec.Error{Code: codec.CodeInvalidParams, Message: "invalid arguments: " + err.Error()}
	}
	return mcp.TextResult(in.Text), nil
}

func add(_ context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		A float64 `json:"a"`
		B float64 `json:"b"`
	}
	if err := codec.Unmarshal(req.Params.Arguments, &in); err != nil {
		return nil, &codec.Error{Code: codec.CodeInvalidParams, Message: "invalid arguments: " + err.Error()}
	}
	return mcp.TextResult(strconv.FormatFloat(in.A+in.B, 'f', -1, 64)), nil
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

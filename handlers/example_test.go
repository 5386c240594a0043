package handlers_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
)

// printJSON prints v encoded, or the error.
func printJSON(v any, err error) {
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	b, err := codec.Marshal(v)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(b))
}

type sumIn struct {
	A float64 `json:"a" jsonschema:"first addend"`
	B float64 `json:"b" jsonschema:"second addend"`
}

type sumOut struct {
	Sum float64 `json:"sum"`
}

// A typed tool: the input schema is inferred from In and the output schema
// from Out; arguments are validated and decoded before the handler runs,
// and out becomes the structured result. ToolOptions say how it runs:
// NonBlocking lets the engine run it on the event loop, RequiredScopes are
// stored for an authorization middleware. An error from the handler is an
// isError result the model sees; a *codec.Error is a JSON-RPC error.
func ExampleAddTool() {
	r := handlers.NewRegistry(handlers.Options{})
	err := handlers.AddTool(r, &mcp.Tool{Name: "sum", Description: "Adds two numbers."},
		func(_ context.Context, _ *handlers.CallToolRequest, in sumIn) (*mcp.CallToolResult, sumOut, error) {
			if in.A < 0 || in.B < 0 {
				return nil, sumOut{}, errors.New("negative numbers are not supported")
			}
			return nil, sumOut{Sum: in.A + in.B}, nil
		}, handlers.ToolOptions{NonBlocking: true, RequiredScopes: []string{"math"}})
	if err != nil {
		log.Fatal(err)
	}
	opts, _ := r.ToolOptionsOf("sum")
	fmt.Println("non-blocking:", opts.NonBlocking, "scopes:", opts.RequiredScopes)

	call := func(args string) {
		printJSON(r.CallTool(context.Background(), &handlers.CallToolRequest{
			Params: &mcp.CallToolParams{Name: "sum", Arguments: codec.RawJSON(args)},
		}))
	}
	call(`{"a":1,"b":2}`)
	call(`{"a":1}`)
	call(`{"a":-1,"b":2}`)

	// Misuse is an error, never a panic.
	err = handlers.AddTool(r, &mcp.Tool{Name: "bad"},
		func(context.Context, *handlers.CallToolRequest, string) (*mcp.CallToolResult, any, error) {
			return nil, nil, nil
		})
	fmt.Println(errors.Is(err, handlers.ErrInvalidTool))
	// Output:
	// non-blocking: true scopes: [math]
	// {"content":[{"type":"text","text":"{\"sum\":3}"}],"structuredContent":{"sum":3}}
	// {"content":[{"type":"text","text":"invalid arguments for tool sum: at root: missing property 'b'"}],"isError":true}
	// {"content":[{"type":"text","text":"negative numbers are not supported"}],"isError":true}
	// true
}

// Resources: a static resource, encoded once and served without handler
// code, a resource read by a handler, and a template whose variables the
// handler receives.
func ExampleRegistry_AddResourceTemplate() {
	r := handlers.NewRegistry(handlers.Options{})
	if err := r.AddStaticResource(&mcp.Resource{URI: "docs://readme", MimeType: "text/plain"},
		mcp.ResourceContents{Text: "Read me."}); err != nil {
		log.Fatal(err)
	}
	if err := r.AddResource(&mcp.Resource{URI: "clock://now"},
		func(_ context.Context, req *handlers.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: req.Params.URI, Text: "12:00"}}}, nil
		}); err != nil {
		log.Fatal(err)
	}
	if err := r.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "users://{id}/profile", MimeType: "application/json"},
		func(_ context.Context, req *handlers.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{
				URI: req.Params.URI, MimeType: "application/json", Text: `{"id":"` + req.Vars["id"] + `"}`,
			}}}, nil
		}); err != nil {
		log.Fatal(err)
	}
	if err := r.AddTemplateCompletion("users://{id}/profile", "id",
		func(context.Context, *handlers.CompleteRequest) (*mcp.CompleteResult, error) {
			return &mcp.CompleteResult{Completion: mcp.Completion{Values: []string{"ada", "alan"}}}, nil
		}); err != nil {
		log.Fatal(err)
	}

	for _, uri := range []string{"docs://readme", "clock://now", "users://ada/profile", "users://"} {
		printJSON(r.ReadResource(context.Background(), &handlers.ReadResourceRequest{Params: &mcp.ReadResourceParams{URI: uri}}))
	}
	// Output:
	// {"contents":[{"uri":"docs://readme","text":"Read me."}]}
	// {"contents":[{"uri":"clock://now","text":"12:00"}]}
	// {"contents":[{"uri":"users://ada/profile","mimeType":"application/json","text":"{\"id\":\"ada\"}"}]}
	// error: jsonrpc error -32002: resource not found: users://
}

// A prompt with a required argument: prompts/get without it is refused
// before the handler runs.
func ExampleRegistry_AddPrompt() {
	r := handlers.NewRegistry(handlers.Options{})
	err := r.AddPrompt(&mcp.Prompt{
		Name:      "review",
		Arguments: []mcp.PromptArgument{{Name: "language", Required: true}},
	}, func(_ context.Context, req *handlers.GetPromptRequest) (*mcp.GetPromptResult, error) {
		lang := req.Params.Arguments["language"]
		return &mcp.GetPromptResult{
			Description: "Code review in " + lang,
			Messages: []mcp.PromptMessage{{Role: "user",
				Content: mcp.Content{Type: mcp.ContentText, Text: "Review this " + lang + " code."}}},
		}, nil
	})
	if err != nil {
		log.Fatal(err)
	}
	get := func(args map[string]string) {
		printJSON(r.GetPrompt(context.Background(), &handlers.GetPromptRequest{
			Params: &mcp.GetPromptParams{Name: "review", Arguments: args},
		}))
	}
	get(map[string]string{"language": "Go"})
	get(nil)
	// Output:
	// {"description":"Code review in Go","messages":[{"role":"user","content":{"type":"text","text":"Review this Go code."}}]}
	// error: jsonrpc error -32602: prompt review: missing required argument: language
}

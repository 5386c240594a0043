// Command gosdk-server serves the bench workload (tools echo and add, the
// resource mem://hello, the prompt greet) with the official MCP Go SDK,
// github.com/modelcontextprotocol/go-sdk, over Streamable HTTP or stdio, with
// the SDK's ordinary production settings: stateful sessions, SSE answers,
// input validated against each tool's schema. With -stateless it serves
// Streamable HTTP in the SDK's stateless mode, the one in which it serves
// protocol 2026-07-28 (and the session revisions without a session).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/mcpedge/mcpedge/bench/internal/peer"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	httpAddr := flag.String("http", "", "serve Streamable HTTP on `addr` at /mcp")
	stdio := flag.Bool("stdio", false, "serve on stdin/stdout")
	stateless := flag.Bool("stateless", false, "HTTP: the SDK's stateless mode (StreamableHTTPOptions.Stateless), in which it also serves protocol 2026-07-28: no sessions, a temporary one per POST")
	flag.Parse()
	if (*httpAddr == "") == !*stdio {
		fmt.Fprintln(os.Stderr, "gosdk-server: give exactly one of -http ADDR or -stdio")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *stdio {
		if err := newServer().Run(ctx, &mcp.StdioTransport{}); err != nil && !errors.Is(err, context.Canceled) {
			log.Fatal(err)
		}
		return
	}
	srv := newServer()
	opts := &mcp.StreamableHTTPOptions{SessionTimeout: 30 * time.Minute}
	if *stateless {
		opts = &mcp.StreamableHTTPOptions{Stateless: true}
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, opts)
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	hs := &http.Server{Addr: *httpAddr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	if err := peer.ServeHTTP(ctx, hs); err != nil {
		log.Fatal(err)
	}
}

type echoIn struct {
	Text string `json:"text"`
}

type addIn struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

func newServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "gosdk-bench", Version: "1.8.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "echo",
		Description: "Returns its text argument.",
		InputSchema: peer.Schema(peer.EchoSchema),
	}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{
		Name:        "add",
		Description: "Adds two numbers.",
		InputSchema: peer.Schema(peer.AddSchema),
	}, func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, any, error) {
		sum := strconv.FormatFloat(in.A+in.B, 'f', -1, 64)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: sum}}}, nil, nil
	})
	s.AddResource(&mcp.Resource{URI: "mem://hello", Name: "hello", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "hello"}}}, nil
		})
	s.AddPrompt(&mcp.Prompt{
		Name:        "greet",
		Description: "Greets someone by name.",
		Arguments:   []*mcp.PromptArgument{{Name: "name", Description: "Who to greet", Required: true}},
	}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		name := req.Params.Arguments["name"]
		return &mcp.GetPromptResult{
			Description: "A greeting for " + name,
			Messages:    []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "Please greet " + name + " warmly."}}},
		}, nil
	})
	return s
}

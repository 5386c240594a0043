// Command mcpgo-server serves the bench workload (tools echo and add, the
// resource mem://hello, the prompt greet) with github.com/mark3labs/mcp-go
// over Streamable HTTP or stdio, with that library's ordinary production
// settings: its default session handling, panic recovery, the capabilities
// declared. It serves protocol 2026-07-28 per request beside the session
// revisions; -stateless turns on the library's stateless mode
// (WithStateLess) for the session revisions too.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/mcpedge/mcpedge/bench/internal/peer"
)

func main() {
	httpAddr := flag.String("http", "", "serve Streamable HTTP on `addr` at /mcp")
	stdio := flag.Bool("stdio", false, "serve on stdin/stdout")
	stateless := flag.Bool("stateless", false, "HTTP: the library's stateless mode (WithStateLess): no session ids in the session revisions; protocol 2026-07-28 is served per request in either mode")
	flag.Parse()
	if (*httpAddr == "") == !*stdio {
		fmt.Fprintln(os.Stderr, "mcpgo-server: give exactly one of -http ADDR or -stdio")
		os.Exit(2)
	}
	s := newServer()
	if *stdio {
		if err := server.ServeStdio(s); err != nil {
			log.Fatal(err)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := []server.StreamableHTTPOption{server.WithSessionIdleTTL(30 * time.Minute)}
	if *stateless {
		opts = []server.StreamableHTTPOption{server.WithStateLess(true)}
	}
	h := server.NewStreamableHTTPServer(s, opts...)
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	hs := &http.Server{Addr: *httpAddr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	if err := peer.ServeHTTP(ctx, hs); err != nil {
		log.Fatal(err)
	}
}

func newServer() *server.MCPServer {
	s := server.NewMCPServer("mcpgo-bench", "1.2.1",
		server.WithToolCapabilities(true),
		server.WithResourceCapabilities(true, true),
		server.WithPromptCapabilities(true),
		server.WithRecovery(),
	)
	s.AddTool(mcp.NewToolWithRawSchema("echo", "Returns its text argument.", peer.Schema(peer.EchoSchema)),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			text, err := req.RequireString("text")
			if err != nil {
				return mcp.NewToolResultError(err.Error()), nil
			}
			return mcp.NewToolResultText(text), nil
		})
	s.AddTool(mcp.NewToolWithRawSchema("add", "Adds two numbers.", peer.Schema(peer.AddSchema)),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			a, err := req.RequireFloat("a")
			if err != nil {
				return mcp.NewToolResultError(err.Error()), nil
			}
			b, err := req.RequireFloat("b")
			if err != nil {
				return mcp.NewToolResultError(err.Error()), nil
			}
			return mcp.NewToolResultText(strconv.FormatFloat(a+b, 'f', -1, 64)), nil
		})
	s.AddResource(mcp.NewResource("mem://hello", "hello", mcp.WithMIMEType("text/plain")),
		func(_ context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: "text/plain", Text: "hello"}}, nil
		})
	s.AddPrompt(mcp.NewPrompt("greet",
		mcp.WithPromptDescription("Greets someone by name."),
		mcp.WithArgument("name", mcp.ArgumentDescription("Who to greet"), mcp.RequiredArgument()),
	), func(_ context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		name := req.Params.Arguments["name"]
		return mcp.NewGetPromptResult("A greeting for "+name, []mcp.PromptMessage{
			mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent("Please greet "+name+" warmly.")),
		}), nil
	})
	return s
}

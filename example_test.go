package mcpedge_test

import (
	"context"
	"fmt"
	"log"

	"github.com/mcpedge/mcpedge"
	"github.com/mcpedge/mcpedge/client"
)

type greetArgs struct {
	Name string `json:"name"`
}

// Hello world: a server with one typed tool on TCP, called by a client,
// then shut down. A program would serve on a fixed address and end Serve
// with a signal (signal.NotifyContext); this one picks a free port.
func Example() {
	srv := mcpedge.New(mcpedge.Options{
		EngineOptions: mcpedge.EngineOptions{Name: "hello", Version: "1.0.0"},
		TCP:           &mcpedge.TCPOptions{Addr: "127.0.0.1:0"},
	})

	// The input schema is inferred from greetArgs; arguments are validated
	// against it before the handler runs.
	err := mcpedge.AddTool(srv, &mcpedge.Tool{Name: "greet", Description: "Greets someone."},
		func(ctx context.Context, req *mcpedge.CallToolRequest, in greetArgs) (*mcpedge.CallToolResult, any, error) {
			return mcpedge.TextResult("Hello, " + in.Name + "!"), nil, nil
		})
	if err != nil {
		log.Fatal(err)
	}

	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()

	// A client of package client, on the port Serve picked.
	addr := srv.TCPAddr(ctx)
	if addr == nil {
		log.Fatal(<-served)
	}
	c, err := client.Dial(ctx, &client.TCPTransport{Addr: addr.String()}, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.CallTool(ctx, "greet", map[string]any{"name": "world"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Content[0].Text)
	c.Close()

	// Ending Serve's context shuts the server down gracefully: the engine
	// drains, then the listener and connections close.
	stop()
	fmt.Println("serve:", <-served)
	// Output:
	// Hello, world!
	// serve: <nil>
}

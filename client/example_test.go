package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"slices"
	"time"

	"github.com/mcpedge/mcpedge/client"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers/builtin"
	"github.com/mcpedge/mcpedge/mcp"
	mcphttp "github.com/mcpedge/mcpedge/transport/http"
	"github.com/mcpedge/mcpedge/transport/tcp"
)

// exampleServer is an in-process mcpedge server on a loopback port.
type exampleServer struct {
	eng  *engine.Server
	stop func()
	addr string // TCP: host:port; HTTP: the MCP endpoint's URL
}

// newExampleEngine returns an engine serving a built-in handler set
// ("bench": tools echo and add, resource mem://hello, prompt greet).
func newExampleEngine(set string) *engine.Server {
	eng := engine.New(engine.Options{})
	if err := builtin.Install(set, eng.Registry(), builtin.Env{ResourceUpdated: eng.ResourceUpdated}); err != nil {
		log.Fatal(err)
	}
	return eng
}

// serveExampleTCP serves a handler set over TCP on 127.0.0.1.
func serveExampleTCP(set string) *exampleServer {
	eng := newExampleEngine(set)
	ts := tcp.New(eng, tcp.Options{Addr: "127.0.0.1:0", Loops: 1})
	errc := make(chan error, 1)
	go func() { errc <- ts.ListenAndServe(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addr := ts.Addr(ctx)
	if addr == nil {
		log.Fatal(<-errc)
	}
	return &exampleServer{eng: eng, addr: addr.String(), stop: func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = eng.Shutdown(ctx)
		_ = ts.Shutdown(ctx)
		<-errc
	}}
}

// serveExampleHTTP serves a handler set over Streamable HTTP on 127.0.0.1.
func serveExampleHTTP(set string) *exampleServer {
	eng := newExampleEngine(set)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	hs := mcphttp.New(eng, mcphttp.Options{Addr: ln.Addr().String()})
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(context.Background(), ln) }()
	return &exampleServer{eng: eng, addr: "http://" + ln.Addr().String() + "/mcp", stop: func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = eng.Shutdown(ctx)
		_ = hs.Shutdown(ctx)
		<-errc
	}}
}

// A client connects to a server, learns its name, lists the tools and
// calls one.
func Example() {
	srv := serveExampleTCP("bench")
	defer srv.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// Dial connects and performs the handshake: server/discover with a
	// server that speaks 2026-07-28 (mcpedge does), else initialize.
	c, err := client.Dial(ctx, &client.TCPTransport{Addr: srv.addr}, client.Options{
		ClientInfo: mcp.Implementation{Name: "example", Version: "1.0"},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	fmt.Println("server:", c.ServerInfo().Name, c.ProtocolVersion())

	tools, err := c.AllTools(ctx)
	if err != nil {
		log.Fatal(err)
	}
	var names []string
	for _, t := range tools {
		names = append(names, t.Name)
	}
	slices.Sort(names)
	fmt.Println("tools:", names)

	res, err := c.CallTool(ctx, "add", map[string]any{"a": 2, "b": 3})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("add:", res.Content[0].Text)
	// Output:
	// server: mcpedge 2026-07-28
	// tools: [add echo]
	// add: 5
}

// ServerInfo, ServerCapabilities, ProtocolVersion and Instructions answer
// in both eras: with the default Options (2026-07-28, where the name comes
// from server/discover's _meta) and in a session revision (from
// initialize, whose result InitializeResult returns; it is nil in
// 2026-07-28).
func ExampleClient_ServerInfo() {
	srv := serveExampleHTTP("bench")
	defer srv.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	for _, opts := range []client.Options{{}, {Era: client.EraLegacy}} {
		c, err := client.Dial(ctx, &client.HTTPTransport{URL: srv.addr}, opts)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(c.ServerInfo().Name, c.ProtocolVersion(), c.ServerCapabilities().Tools != nil, c.InitializeResult() != nil)
		c.Close()
	}
	// Output:
	// mcpedge 2026-07-28 true false
	// mcpedge 2025-11-25 true true
}

// A Pool spreads calls over several connections to one server, replacing
// those that fail their health checks.
func ExampleNewPool() {
	srv := serveExampleTCP("bench")
	defer srv.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	tr := &client.TCPTransport{Addr: srv.addr}
	pool, err := client.NewPool(ctx, func(ctx context.Context) (*client.Client, error) {
		return client.Dial(ctx, tr, client.Options{})
	}, client.PoolOptions{Size: 3, Strategy: client.LeastBusy})
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	fmt.Println("members:", pool.Size(), "healthy:", pool.Healthy())

	for _, text := range []string{"one", "two", "three"} {
		err := pool.Do(ctx, func(ctx context.Context, c *client.Client) error {
			res, err := c.CallTool(ctx, "echo", map[string]any{"text": text})
			if err != nil {
				return err
			}
			fmt.Println("echo:", res.Content[0].Text)
			return nil
		})
		if err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// members: 3 healthy: 3
	// echo: one
	// echo: two
	// echo: three
}

// A Federation holds named servers over different transports, lists their
// tools under qualified names and routes calls by those names.
func ExampleFederation() {
	tcpSrv := serveExampleTCP("bench")
	defer tcpSrv.stop()
	httpSrv := serveExampleHTTP("bench")
	defer httpSrv.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	fed := client.NewFederation(client.FederationOptions{
		// Every server's notifications, with the server's name.
		OnNotification: func(server string, n client.Notification) {},
	})
	defer fed.Close(context.Background())

	// Targets name the transport: tcp://, http(s)://, sse+http(s)://, stdio:.
	for name, target := range map[string]string{"local": "tcp://" + tcpSrv.addr, "remote": httpSrv.addr} {
		t, err := client.ParseTarget(target)
		if err != nil {
			log.Fatal(err)
		}
		if err := fed.Add(ctx, name, t, client.Options{}); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("servers:", fed.Names())

	tools, err := fed.AllTools(ctx)
	if err != nil {
		// A *PartialError: the tools of the servers that answered are in
		// tools.
		log.Fatal(err)
	}
	for _, t := range tools {
		fmt.Println("tool:", t.Name())
	}

	res, err := fed.CallTool(ctx, "remote/echo", map[string]any{"text": "routed"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("remote/echo:", res.Content[0].Text)

	_, err = fed.CallTool(ctx, "elsewhere/echo", nil)
	fmt.Println(errors.Is(err, client.ErrUnknownServer))
	// Output:
	// servers: [local remote]
	// tool: local/echo
	// tool: local/add
	// tool: remote/echo
	// tool: remote/add
	// remote/echo: routed
	// true
}

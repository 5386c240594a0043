package engine_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
)

// printSink is a session.Sink that prints each message it is sent.
type printSink struct{}

func (printSink) Send(b *codec.Buffer) error {
	fmt.Println(string(b.B))
	codec.PutBuffer(b)
	return nil
}

// discardSink is a session.Sink that drops what it is sent.
type discardSink struct{}

func (discardSink) Send(b *codec.Buffer) error {
	codec.PutBuffer(b)
	return nil
}

// exampleSession is one initialized session of srv, driven in memory as a
// transport drives it: each frame is served with HandleMessage (serveFrame), and what is
// sent back for it is printed.
func exampleSession(srv *engine.Server) *session.Session {
	sess := srv.Open(discardSink{}).Session()
	serveFrame(context.Background(), srv.Conn(sess), []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"example","version":"1"}}}`), discardSink{})
	serveFrame(context.Background(), srv.Conn(sess), []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), discardSink{})
	return sess
}

func send(srv *engine.Server, sess *session.Session, frame string) {
	serveFrame(context.Background(), srv.Conn(sess), []byte(frame), printSink{})
}

type greetArgs struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

// An engine without transports: create it, register handlers on its
// Registry, serve frames. The example drives one session in memory, as a
// transport does. A program embeds mcpedge.Server (the root package),
// which serves an engine on TCP, HTTP or stdio and shuts it down in order;
// with this package and the transports alone, it serves the engine with
// tcp.New(srv, tcp.Options{}).ListenAndServe(ctx) or stdio.Serve(ctx, srv,
// os.Stdin, os.Stdout, stdio.Options{}), and stops it by draining the
// engine (srv.Shutdown(ctx)) before shutting the transports down.
func Example() {
	srv := engine.New(engine.Options{Name: "hello", Version: "1.0.0"})
	defer srv.Shutdown(context.Background())

	// The input schema is inferred from greetArgs; arguments are validated
	// against it before the handler runs.
	err := handlers.AddTool(srv.Registry(), &mcp.Tool{Name: "greet", Description: "Greets someone."},
		func(ctx context.Context, req *handlers.CallToolRequest, in greetArgs) (*mcp.CallToolResult, any, error) {
			return mcp.TextResult("Hello, " + in.Name + "!"), nil, nil
		})
	if err != nil {
		log.Fatal(err)
	}

	sess := exampleSession(srv)
	send(srv, sess, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet","arguments":{"name":"Ada"}}}`)
	send(srv, sess, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"greet","arguments":{}}}`)
	// Output:
	// {"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"Hello, Ada!"}]}}
	// {"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"invalid arguments for tool greet: at root: missing property 'name'"}],"isError":true}}
}

// A logging middleware: one line per request, with its outcome. Receiving
// middleware sees every request that is answered, those the engine answers
// itself (ping here) as well as those served by handlers.
func ExampleMiddleware_logging() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey { // deterministic output
				return slog.Attr{}
			}
			return a
		},
	}))
	logging := func(next engine.MethodHandler) engine.MethodHandler {
		return func(ctx context.Context, req *engine.Request) ([]byte, error) {
			res, err := next(ctx, req)
			if err != nil {
				logger.Warn("request failed", "method", req.Method, "id", string(req.ID), "error", err)
			} else {
				logger.Info("request", "method", req.Method, "id", string(req.ID))
			}
			return res, err
		}
	}
	srv := engine.New(engine.Options{Receive: []engine.Middleware{logging}})
	defer srv.Shutdown(context.Background())
	if err := handlers.AddTool(srv.Registry(), &mcp.Tool{Name: "greet"},
		func(ctx context.Context, req *handlers.CallToolRequest, in greetArgs) (*mcp.CallToolResult, any, error) {
			return mcp.TextResult("Hello, " + in.Name + "!"), nil, nil
		}); err != nil {
		log.Fatal(err)
	}

	sess := exampleSession(srv) // logs initialize
	serveFrame(context.Background(), srv.Conn(sess), []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`), discardSink{})
	serveFrame(context.Background(), srv.Conn(sess), []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"greet","arguments":{"name":"Ada"}}}`), discardSink{})
	serveFrame(context.Background(), srv.Conn(sess), []byte(`{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"none"}}`), discardSink{})
	// Output:
	// level=INFO msg=request method=initialize id=0
	// level=INFO msg=request method=ping id=1
	// level=INFO msg=request method=tools/call id=2
	// level=WARN msg="request failed" method=prompts/get id=3 error="jsonrpc error -32602: unknown prompt: none"
}

// grantedKey is the context key of the OAuth scopes granted to a request.
type grantedKey struct{}

// requireScopes refuses tools/call of a tool whose RequiredScopes (see
// handlers.ToolOptions) are not all among the scopes granted to the
// request, read from its context.
func requireScopes(next engine.MethodHandler) engine.MethodHandler {
	return func(ctx context.Context, req *engine.Request) ([]byte, error) {
		if req.Method != mcp.MethodToolsCall {
			return next(ctx, req)
		}
		var p struct {
			Name string `json:"name"`
		}
		if codec.Unmarshal(req.Params, &p) != nil {
			return next(ctx, req) // the engine reports malformed params
		}
		opts, _ := req.Server.Registry().ToolOptionsOf(p.Name)
		granted, _ := ctx.Value(grantedKey{}).([]string)
		for _, scope := range opts.RequiredScopes {
			if !slices.Contains(granted, scope) {
				return nil, &codec.Error{Code: codec.CodeInvalidRequest,
					Message: "insufficient scope: tool " + p.Name + " requires " + scope}
			}
		}
		return next(ctx, req)
	}
}

// An authorization middleware: tools declare the OAuth scopes they need
// (handlers.ToolOptions.RequiredScopes), and a middleware refuses calls
// whose granted scopes lack one. Here an outer middleware grants scopes per
// session, as an authenticating layer that verified the client's token
// would.
func ExampleMiddleware_authScopes() {
	grants := map[string][]string{} // session id -> granted scopes
	var mu sync.Mutex
	grant := func(next engine.MethodHandler) engine.MethodHandler {
		return func(ctx context.Context, req *engine.Request) ([]byte, error) {
			mu.Lock()
			scopes := grants[req.Session.ID()]
			mu.Unlock()
			return next(context.WithValue(ctx, grantedKey{}, scopes), req)
		}
	}
	srv := engine.New(engine.Options{Receive: []engine.Middleware{grant, requireScopes}})
	defer srv.Shutdown(context.Background())

	type fileArgs struct {
		Path string `json:"path"`
	}
	read := func(_ context.Context, _ *handlers.CallToolRequest, in fileArgs) (*mcp.CallToolResult, any, error) {
		return mcp.TextResult("contents of " + in.Path), nil, nil
	}
	if err := handlers.AddTool(srv.Registry(), &mcp.Tool{Name: "read_file"}, read,
		handlers.ToolOptions{RequiredScopes: []string{"files:read"}}); err != nil {
		log.Fatal(err)
	}

	sess := exampleSession(srv)
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/etc/motd"}}}`
	send(srv, sess, call)
	mu.Lock()
	grants[sess.ID()] = []string{"files:read"}
	mu.Unlock()
	send(srv, sess, call)
	// Output:
	// {"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"insufficient scope: tool read_file requires files:read"}}
	// {"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"contents of /etc/motd"}]}}
}

// A metrics middleware: calls and errors per method. A real one would feed
// a metrics library; counters kept per method cost a map lookup per call.
func ExampleMiddleware_metrics() {
	var mu sync.Mutex
	calls, errs := map[string]int{}, map[string]int{}
	metrics := func(next engine.MethodHandler) engine.MethodHandler {
		return func(ctx context.Context, req *engine.Request) ([]byte, error) {
			res, err := next(ctx, req)
			mu.Lock()
			calls[req.Method]++
			if err != nil {
				errs[req.Method]++
			}
			mu.Unlock()
			return res, err
		}
	}
	srv := engine.New(engine.Options{Receive: []engine.Middleware{metrics}})
	defer srv.Shutdown(context.Background())
	if err := handlers.AddTool(srv.Registry(), &mcp.Tool{Name: "greet"},
		func(ctx context.Context, req *handlers.CallToolRequest, in greetArgs) (*mcp.CallToolResult, any, error) {
			return mcp.TextResult("Hello, " + in.Name + "!"), nil, nil
		}, handlers.ToolOptions{NonBlocking: true}); err != nil {
		log.Fatal(err)
	}

	sess := exampleSession(srv)
	for _, frame := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"greet","arguments":{"name":"Ada"}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"greet","arguments":{"name":"Alan"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"nope"}}`,
		`{"jsonrpc":"2.0","id":5,"method":"ping"}`,
	} {
		serveFrame(context.Background(), srv.Conn(sess), []byte(frame), discardSink{})
	}
	mu.Lock()
	defer mu.Unlock()
	methods := make([]string, 0, len(calls))
	for m := range calls {
		methods = append(methods, m)
	}
	sort.Strings(methods)
	for _, m := range methods {
		fmt.Printf("%s calls=%d errors=%d\n", m, calls[m], errs[m])
	}
	// Output:
	// initialize calls=1 errors=0
	// ping calls=1 errors=0
	// tools/call calls=3 errors=1
	// tools/list calls=1 errors=0
}

// Sending middleware sees what the server sends on its own initiative:
// notifications and server-to-client requests, here the progress a tool
// reports. Not calling next drops a message.
func ExampleSendMiddleware() {
	quietProgress := func(next engine.Sender) engine.Sender {
		return func(ctx context.Context, out *engine.Outbound) error {
			fmt.Println("sending", out.Method)
			if out.Method == mcp.NotificationProgress && strings.Contains(string(out.Message.B), `"progress":1,`) {
				return nil // drop the first step
			}
			return next(ctx, out)
		}
	}
	srv := engine.New(engine.Options{Send: []engine.SendMiddleware{quietProgress}})
	defer srv.Shutdown(context.Background())
	if err := handlers.AddTool(srv.Registry(), &mcp.Tool{Name: "steps"},
		func(ctx context.Context, req *handlers.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			for i := 1; i <= 2; i++ {
				if err := req.Peer.Progress(float64(i), 2, ""); err != nil {
					return nil, nil, err
				}
			}
			return mcp.TextResult("done"), nil, nil
		}); err != nil {
		log.Fatal(err)
	}

	sess := exampleSession(srv)
	send(srv, sess, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"steps","_meta":{"progressToken":"t"}}}`)
	// Output:
	// sending notifications/progress
	// sending notifications/progress
	// {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":2,"total":2}}
	// {"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"done"}]}}
}

// Package mcpedge is the front door of mcpedge, a Model Context Protocol
// (MCP, JSON-RPC 2.0) server engine: one import builds a server, registers
// its tools, resources and prompts, serves it on TCP, Streamable HTTP or
// stdio, and shuts it down gracefully.
//
//	srv := mcpedge.New(mcpedge.Options{
//		EngineOptions: mcpedge.EngineOptions{Name: "hello", Version: "1.0.0"},
//		TCP:           &mcpedge.TCPOptions{Addr: "127.0.0.1:7400"},
//		HTTP:          &mcpedge.HTTPOptions{Addr: "127.0.0.1:7401"},
//	})
//	err := mcpedge.AddTool(srv, &mcpedge.Tool{Name: "greet"}, greet)
//	...
//	err = srv.Serve(ctx) // until ctx ends, then a graceful shutdown
//
// A Server is the engine (package engine: dispatch, sessions, limits,
// middleware) and the transports its Options configure (packages
// transport/tcp, transport/http, transport/stdio). Everything here is a
// thin layer over those packages, whose types it aliases; use them directly
// for what this package does not cover: a fasthttp server of your own
// (mcphttp.Server.Handler), a listener you made (mcphttp.Server.Serve),
// several transports of one kind on one engine.
//
// This package installs no signal handlers: cancel Serve's context (with
// signal.NotifyContext, for one) or call Shutdown.
//
// # Shutdown order
//
// Every graceful stop of mcpedge, whether Server.Shutdown, the end of
// Serve's or ServeStdio's context, or the mcpedge command on SIGINT or
// SIGTERM, is one sequence (as nats-server's and net/http's are), and code
// that drives the engine and the transports itself should follow it:
//
//  1. Readiness turns off: Server.Ready reports false and
//     Options.OnDraining is called, for a /readyz endpoint or a load
//     balancer to take the node out.
//  2. Every listener stops accepting (netkit.Transport.StopAccepting:
//     tcp.Server's, mcphttp.Server's): a new connection is refused.
//  3. Idle connections are closed: spread over Options.LameDuck when set
//     (nats-server's lame-duck mode), then all at once (tcp.Server.Drain,
//     mcphttp.Server.Drain), and from then on every connection as soon as
//     it is idle; HTTP answers carry Connection: close. A connection is
//     idle with nothing in flight, nothing buffered either way and no byte
//     waiting in its socket, so a request already sent is never dropped
//     unread.
//  4. The engine drains (engine.Server.Shutdown). New requests are refused
//     at once with JSON-RPC error -32000, data {"limit":"shutdown"};
//     requests in flight run to completion and their answers are written
//     to their clients; subscriptions/listen streams end with their empty
//     result. Then every session is closed. This step ends when the last
//     request in flight is done, or when the shutdown's context ends (the
//     requests still running are then cancelled, and Shutdown reports
//     context.DeadlineExceeded: the mcpedge command exits 1).
//  5. The transports stop (tcp.Server.Shutdown, mcphttp.Server.Shutdown,
//     then the stdio sessions): open connections and SSE streams are
//     closed, event loops stop. This step runs even when the drain ran out
//     of time, so that nothing is left listening.
//
// One context bounds every step: Shutdown's, or Options.DrainTimeout when
// Serve or ServeStdio stops on its own.
package mcpedge

// Package testserver starts in-process mcpedge servers on loopback for the
// tests of other packages (the client, the load generator) and stops them
// when the test ends.
package testserver

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers/builtin"
	mcphttp "github.com/mcpedge/mcpedge/transport/http"
	"github.com/mcpedge/mcpedge/transport/tcp"
)

// wait bounds starting and stopping a server.
const wait = 5 * time.Second

// Engine returns an engine serving the built-in handler set, shut down
// when the test ends.
func Engine(t testing.TB, set string, opts engine.Options) *engine.Server {
	t.Helper()
	srv := engine.New(opts)
	if err := builtin.Install(set, srv.Registry(), builtin.Env{ResourceUpdated: srv.ResourceUpdated}); err != nil {
		t.Fatalf("testserver: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return srv
}

// TCP serves srv over TCP with opts (an empty Addr means a free loopback
// port) and returns the address it listens on. The server stops when the
// test ends.
func TCP(t testing.TB, srv *engine.Server, opts tcp.Options) (string, *tcp.Server) {
	t.Helper()
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	ts := tcp.New(srv, opts)
	errc := make(chan error, 1)
	go func() { errc <- ts.ListenAndServe(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	a := ts.Addr(ctx)
	if a == nil {
		t.Fatalf("testserver: tcp server did not start: %v", <-errc)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		_ = ts.Shutdown(ctx)
		<-errc
	})
	return a.String(), ts
}

// HTTP serves srv over Streamable HTTP (and legacy SSE) with opts on a free
// loopback port and returns the base URL, http://127.0.0.1:PORT. The server
// stops when the test ends.
func HTTP(t testing.TB, srv *engine.Server, opts mcphttp.Options) (string, *mcphttp.Server) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testserver: %v", err)
	}
	opts.Addr = ln.Addr().String()
	hs := mcphttp.New(srv, opts)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(context.Background(), ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		_ = hs.Shutdown(ctx)
		<-errc
	})
	return "http://" + ln.Addr().String(), hs
}

package netlimit_test

import (
	"github.com/mcpedge/mcpedge/engine"
	mcphttp "github.com/mcpedge/mcpedge/transport/http"
	"github.com/mcpedge/mcpedge/transport/netlimit"
	"github.com/mcpedge/mcpedge/transport/tcp"
)

// One budget of connections for the TCP and the HTTP transport of a
// server: at most as many as the descriptor limit allows in all, and 100
// from one client address.
func Example() {
	srv := engine.New(engine.Options{Name: "example", Version: "1.0.0"})
	conns := netlimit.New(netlimit.DefaultMaxConns(), 100)
	t := tcp.New(srv, tcp.Options{Addr: "127.0.0.1:7400", Conns: conns})
	h := mcphttp.New(srv, mcphttp.Options{Addr: "127.0.0.1:7401", Conns: conns})
	_, _ = t, h // serve each with ListenAndServe(ctx)
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/mcpedge/mcpedge"
	"github.com/mcpedge/mcpedge/admin"
	"github.com/mcpedge/mcpedge/session"
)

// adminConfig is the admin listener's flag: -admin.
type adminConfig struct {
	addr adminAddr
}

// adminAddr is -admin's value; set records that it was given (flag or
// environment), since with -stdio the admin listener is on only then.
type adminAddr struct {
	addr string
	set  bool
}

func (a *adminAddr) String() string { return a.addr }

func (a *adminAddr) Set(v string) error { a.addr, a.set = v, true; return nil }

// adminFlags registers the admin listener's flags on fs.
func adminFlags(fs *flag.FlagSet, c *adminConfig) {
	c.addr.addr = admin.DefaultAddr
	fs.Var(&c.addr, "admin", "serve the status page (/), /status.json, /metrics, /healthz, /readyz and /debug/pprof/ on `addr`, never an MCP port, checking Host as -http does with -allowed-hosts (empty: off; with -stdio, off unless given)")
}

// adminRun is the admin listener of one run: its metrics, its readiness
// and its server; nil when -admin is off.
type adminRun struct {
	metrics *admin.Metrics
	ready   *admin.Readiness
	srv     *admin.Server
	log     *slog.Logger
}

// startAdmin checks -admin against the MCP addresses, binds it, and
// installs its metrics in opts (the engine's Observer, a counting bus).
// It returns nil when -admin is off.
func startAdmin(c *config, opts *mcpedge.Options, log *slog.Logger) (*adminRun, error) {
	addr := c.admin.addr.addr
	if addr == "" || (c.stdio && !c.admin.addr.set) {
		return nil, nil
	}
	for _, mcpAddr := range []struct{ flag, addr string }{{"-tcp", c.tcp}, {"-http", c.http}} {
		if !c.stdio && mcpAddr.addr != "" && sameAddr(addr, mcpAddr.addr) {
			return nil, fmt.Errorf("-admin %s: the same address as %s: the admin listener needs a port of its own", addr, mcpAddr.flag)
		}
	}
	m := admin.NewMetrics()
	ready := new(admin.Readiness)
	srv, err := admin.Listen(addr, m, ready, log)
	if err != nil {
		// Given or default, a port taken stops the node (listeners.go).
		return nil, fmt.Errorf("-admin %s: %w", addr, err)
	}
	// The MCP listener's Host check (DNS rebinding), with its allow-list.
	srv.SetAllowedHosts(splitList(c.allowHosts))
	opts.Observer = m
	bus := opts.Bus
	if bus == nil {
		bus = session.NewLocalBus()
	}
	opts.Bus = m.Bus(bus)
	return &adminRun{metrics: m, ready: ready, srv: srv, log: log}, nil
}

// sameAddr reports whether two listen addresses would be the same port:
// equal ports (not 0) on equal hosts, or where either is a wildcard.
func sameAddr(a, b string) bool {
	ha, pa, err1 := net.SplitHostPort(a)
	hb, pb, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil {
		return a == b
	}
	if pa != pb || pa == "0" {
		return false
	}
	wild := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" || h == "[::]" }
	return ha == hb || wild(ha) || wild(hb) || (ha == "localhost" && hb == "127.0.0.1") || (ha == "127.0.0.1" && hb == "localhost")
}

// serve attaches srv's figures and serves the admin listener; ready is
// set once the MCP listeners are up (markReady), and draining when ctx
// ends (the shutdown began).
func (a *adminRun) serve(ctx context.Context, srv *mcpedge.Server) {
	if a == nil {
		return
	}
	a.metrics.Attach(srv)
	go func() {
		if err := a.srv.Serve(); err != nil {
			a.log.Error("admin listener", "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		a.ready.SetDraining(true)
	}()
	// Not "addr=": tests and scripts read the MCP address from that key.
	a.log.Info("serving admin endpoints", "url", "http://"+a.srv.Addr().String()+"/", "metrics", "http://"+a.srv.Addr().String()+"/metrics")
}

// reloadHook applies a changed -allowed-hosts to the admin listener, as
// the HTTP allow-lists' hook does to the MCP listener.
func (a *adminRun) reloadHook() reloadHook {
	return reloadHook{name: "admin allowed hosts", keys: []string{"allowed-hosts"}, prepare: func(c *config) (func(), error) {
		hosts := splitList(c.allowHosts)
		return func() { a.srv.SetAllowedHosts(hosts) }, nil
	}}
}

// metricsOrNil returns the admin listener's metrics, nil when it is off.
func (a *adminRun) metricsOrNil() *admin.Metrics {
	if a == nil {
		return nil
	}
	return a.metrics
}

// markReady tells /readyz the MCP listeners are up.
func (a *adminRun) markReady() {
	if a != nil {
		a.ready.SetReady(true)
	}
}

// stop closes the admin listener.
func (a *adminRun) stop() {
	if a == nil {
		return
	}
	a.ready.SetDraining(true)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := a.srv.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		a.log.Warn("admin shutdown", "err", err)
	}
}

package main

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"

	"github.com/mcpedge/mcpedge/admin"
	mcphttp "github.com/mcpedge/mcpedge/transport/http"
	"github.com/mcpedge/mcpedge/transport/tcp"
)

// A node refuses to start when a listener it was asked for cannot bind,
// whether the address was given or is a default: it never turns one off
// quietly, nor serves half its listeners. An admin listener skipped
// because its default port was taken would leave /readyz and /metrics on
// that port answering for another process, the one that holds it.

// nodeListener is an address the node listens on, the flag that names
// it and the flag's default.
type nodeListener struct {
	flag, addr, def string
}

// listeners returns the addresses c asks the node to listen on.
func listeners(c *config) []nodeListener {
	var ls []nodeListener
	add := func(flag, addr, def string) {
		if addr != "" {
			ls = append(ls, nodeListener{flag, addr, def})
		}
	}
	if !c.stdio {
		add("tcp", c.tcp, tcp.DefaultAddr)
		add("http", c.http, mcphttp.DefaultAddr)
	}
	if !c.stdio || c.admin.addr.set {
		add("admin", c.admin.addr.addr, admin.DefaultAddr)
	}
	add("cluster-embed", c.cluster.embed, "")
	return ls
}

// checkListeners binds every address of ls, all at once, then releases
// them: before the node serves anything or joins a cluster, each one is
// known to be free and none is another's. The listeners themselves bind
// moments later; one that loses its port in between still stops the
// node. Port 0 and Unix sockets are not checked: they cannot collide.
func checkListeners(ls []nodeListener) error {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for i, l := range ls {
		network, addr := "tcp", l.addr
		if n, a, ok := strings.Cut(addr, "://"); ok {
			network, addr = n, a
		}
		if network == "unix" {
			continue
		}
		if _, port, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("-%s %q: %w", l.flag, l.addr, err)
		} else if port == "0" {
			continue
		}
		ln, err := net.Listen(network, addr)
		if err == nil {
			held = append(held, ln)
			continue
		}
		for _, prev := range ls[:i] {
			if sameAddr(prev.addr, l.addr) {
				return fmt.Errorf("-%s %s: the same address as -%s: each listener needs a port of its own", l.flag, l.addr, prev.flag)
			}
		}
		return bindError(l, err)
	}
	return nil
}

// bindError says which listener could not bind, why, and what to change.
func bindError(l nodeListener, err error) error {
	which := "-" + l.flag + " " + l.addr
	if l.addr == l.def {
		which += " (its default)"
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%s: %w", which, err)
	}
	host := "127.0.0.1"
	if h, _, err := net.SplitHostPort(l.addr); err == nil && h != "" {
		host = h
	}
	fix := fmt.Sprintf("give this node a port of its own (-%s %s)", l.flag, net.JoinHostPort(host, "PORT"))
	if l.flag != "cluster-embed" {
		fix += fmt.Sprintf(" or turn it off (-%s=)", l.flag)
	}
	if l.addr == l.def {
		fix = "another mcpedge on this host? " + fix
	}
	return fmt.Errorf("%s: address already in use: %s", which, fix)
}

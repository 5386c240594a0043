// Package builtin holds the handler sets that mcpedge serves by name
// (-handlers): "demo", a few useful tools and resources for trying a client
// against; "bench", the fixed workload the benchmarks measure;
// "conformance", the fixtures of the official MCP conformance suite.
package builtin

import (
	"fmt"
	"sort"

	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
)

// Env is what a handler set may need of the server besides its registry.
// The zero value works.
type Env struct {
	// ResourceUpdated, if set, announces that a resource changed (the
	// engine's Server.ResourceUpdated).
	ResourceUpdated func(uri string)
	// Publish and Subscribe, if set, are the methods of the server's
	// notification bus (engine.Server.Bus): the board is kept on every
	// node of a cluster by publishing each write on it. Unset, the board
	// is this process's alone.
	Publish   func(topic string, payload []byte)
	Subscribe func(topic string, fn func(topic string, payload []byte)) (cancel func())
}

func (e Env) updated(uri string) {
	if e.ResourceUpdated != nil {
		e.ResourceUpdated(uri)
	}
}

var sets = map[string]func(*handlers.Registry, Env) error{
	"demo":        Demo,
	"bench":       Bench,
	"conformance": Conformance,
}

// Info returns the server identity a handler set asks for, if any (the
// conformance set answers as the suite's reference server).
func Info(name string) (mcp.Implementation, bool) {
	if name == "conformance" {
		return ConformanceInfo, true
	}
	return mcp.Implementation{}, false
}

// Names lists the handler sets, sorted.
func Names() []string {
	names := make([]string, 0, len(sets))
	for n := range sets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Install registers the handler set called name on r.
func Install(name string, r *handlers.Registry, env Env) error {
	f, ok := sets[name]
	if !ok {
		return fmt.Errorf("builtin: unknown handler set %q (have %v)", name, Names())
	}
	return f(r, env)
}

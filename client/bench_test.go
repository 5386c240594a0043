package client_test

import (
	"context"
	"testing"

	"github.com/mcpedge/mcpedge/client"
	"github.com/mcpedge/mcpedge/engine"
	mcphttp "github.com/mcpedge/mcpedge/transport/http"
)

var echoParams = []byte(`{"name":"echo","arguments":{"text":"hello"}}`)

func benchCallRaw(b *testing.B, tr client.Transport) {
	c := dial(b, tr, client.Options{Era: client.EraLegacy})
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(16) // many calls in flight, as a load generator has
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.CallRaw(ctx, "tools/call", echoParams); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkCallRawTCP(b *testing.B) {
	srv := newEngine(b, "bench", engine.Options{})
	addr, _ := serveTCP(b, srv)
	benchCallRaw(b, &client.TCPTransport{Addr: addr})
}

func BenchmarkCallRawHTTP(b *testing.B) {
	srv := newEngine(b, "bench", engine.Options{})
	base, _ := serveHTTP(b, srv, mcphttp.Options{})
	benchCallRaw(b, &client.HTTPTransport{URL: base + "/mcp", NoStandaloneStream: true})
}

func BenchmarkCallToolTCP(b *testing.B) {
	srv := newEngine(b, "bench", engine.Options{})
	addr, _ := serveTCP(b, srv)
	c := dial(b, &client.TCPTransport{Addr: addr}, client.Options{Era: client.EraLegacy})
	ctx := context.Background()
	args := map[string]any{"text": "hello"}
	b.ReportAllocs()
	b.SetParallelism(16) // many calls in flight, as a load generator has
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.CallTool(ctx, "echo", args); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

package engine_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mcpedge/mcpedge/auth"
	"github.com/mcpedge/mcpedge/engine"
)

// authorizedEcho returns a server authorizing with a static token, a
// session initialized with it, and a 2026-07-28 tools/call of echo
// carrying it.
func authorizedEcho(tb testing.TB) (*fixture, engine.Conn, signalSink, []byte) {
	tb.Helper()
	v, err := auth.New(auth.Config{Audience: "http://127.0.0.1/mcp", Tokens: []string{"bench-token"}})
	require.NoError(tb, err)
	tb.Cleanup(v.Close)
	f := newFixture(tb, engine.Options{Authorize: v})
	sink := signalSink{ch: make(chan int, 1)}
	conn := f.srv.Open(sink)
	out := conn.HandleFrame([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"},"_meta":{"io.mcpedge/token":"bench-token"}}}`), nil)
	require.Nil(tb, parse(tb, out).Error)
	conn.HandleFrame([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), nil)
	stateless := []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, world"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},%q:"bench-token"}}}`, auth.MetaKey))
	return f, conn, sink, stateless
}

// BenchmarkToolsCallEchoAuthorized is BenchmarkToolsCallEcho with
// authorization on: the session's caller (a static token given in
// initialize) is rechecked for each request.
func BenchmarkToolsCallEchoAuthorized(b *testing.B) {
	_, conn, sink, _ := authorizedEcho(b)
	in := []byte(`{"jsonrpc":"2.0","id":123,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, world"}}}`)
	var out []byte
	b.ReportAllocs()
	for b.Loop() {
		if out = conn.HandleFrame(in, out[:0]); len(out) > 0 {
			b.Fatalf("immediate answer: %s", out)
		}
		if n := <-sink.ch; n < 50 {
			b.Fatalf("short answer: %d bytes", n)
		}
	}
}

// BenchmarkToolsCallEcho2026Authorized is BenchmarkToolsCallEcho2026 with
// a static token in each request's _meta, verified per request.
func BenchmarkToolsCallEcho2026Authorized(b *testing.B) {
	f, _, sink, in := authorizedEcho(b)
	conn := f.srv.Open(sink)
	var out []byte
	b.ReportAllocs()
	for b.Loop() {
		if out = conn.HandleFrame(in, out[:0]); len(out) > 0 {
			b.Fatalf("immediate answer: %s", out)
		}
		if n := <-sink.ch; n < 50 {
			b.Fatalf("short answer: %d bytes", n)
		}
	}
}

//go:build !race

package gateway_test

import (
	"strings"
	"testing"

	"github.com/mcpedge/mcpedge/gateway"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestForwardZeroAllocHTTP holds a proxied tools/call over an HTTP
// upstream at zero allocations in the gateway process, as
// TestForwardZeroAlloc does for stream upstreams.
func TestForwardZeroAllocHTTP(t *testing.T) {
	url := httpChild(t, "conformance")
	srv, _ := engineFront(t, gateway.Upstream{Name: "x", Transport: gateway.HTTP, URL: url})
	sink := countSink{ch: make(chan int, 1)}
	conn := srv.Open(sink)
	out := conn.HandleFrame([]byte(initFrame), make([]byte, 0, 4096))
	require.Contains(t, string(out), `"result"`)
	conn.HandleFrame([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), nil)
	frame := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"test_simple_text","arguments":{}}}`)
	call := func() {
		if out = conn.HandleFrame(frame, out[:0]); len(out) > 0 {
			t.Fatalf("answered at once: %s", out)
		}
		if n := <-sink.ch; n < 80 {
			t.Fatalf("short answer: %d bytes", n)
		}
	}
	for range 100 {
		call()
	}
	assert.Zero(t, testing.AllocsPerRun(1000, call))

	t.Run("2026-07-28", func(t *testing.T) {
		sink := signalSink{ch: make(chan []byte, 1)}
		conn := srv.Open(sink)
		frame := []byte(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"test_simple_text","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
		require.Empty(t, conn.HandleFrame(frame, nil))
		ans := string(<-sink.ch)
		assert.Equal(t, 1, strings.Count(ans, `"resultType"`), ans)
		assert.Equal(t, 1, strings.Count(ans, mcp.MetaServerInfo), ans)
		csink := countSink{ch: make(chan int, 1)}
		conn = srv.Open(csink)
		call := func() {
			if out := conn.HandleFrame(frame, nil); len(out) > 0 {
				t.Fatalf("answered at once: %s", out)
			}
			if n := <-csink.ch; n < 80 {
				t.Fatalf("short answer: %d bytes", n)
			}
		}
		for range 100 {
			call()
		}
		assert.Zero(t, testing.AllocsPerRun(1000, call))
	})
}

//go:build !race

// The race detector makes sync.Pool drop items at random, so allocation
// counts do not hold under it.

package gateway_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/gateway"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countSink reports sizes only: it allocates nothing.
type countSink struct{ ch chan int }

func (s countSink) Send(buf *codec.Buffer) error {
	n := len(buf.B)
	codec.PutBuffer(buf)
	s.ch <- n
	return nil
}

// engineFront is a gateway behind a bare engine, driven frame by frame.
func engineFront(t testing.TB, ups ...gateway.Upstream) (*engine.Server, *gateway.Gateway) {
	t.Helper()
	gw, err := gateway.New(gateway.Options{Upstreams: ups, StartTimeout: 20 * time.Second})
	require.NoError(t, err)
	srv := engine.New(engine.Options{Bus: gw.Bus(nil)})
	require.NoError(t, gw.Start(context.Background(), srv))
	t.Cleanup(func() {
		_ = srv.Shutdown(context.Background())
		gw.Close()
	})
	return srv, gw
}

const initFrame = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// TestForwardZeroAlloc holds a proxied tools/call at zero allocations in
// the gateway process, end to end: the downstream frame in, the engine's
// worker, the raw handler, the upstream id and write, the upstream's
// answer read and matched, the result appended to the downstream answer.
// (The upstream is another process.)
func TestForwardZeroAlloc(t *testing.T) {
	srv, _ := engineFront(t, selfUpstream("x", "conformance"))
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
		// A stateless request: forwarded to the 2026-07-28 connection,
		// its result completed by the engine (resultType, the gateway's
		// identity) once.
		sink := signalSink{ch: make(chan []byte, 1)}
		conn := srv.Open(sink)
		frame := []byte(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"test_simple_text","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
		out := conn.HandleFrame(frame, nil)
		require.Empty(t, out)
		ans := string(<-sink.ch)
		assert.Contains(t, ans, `"resultType":"complete"`)
		assert.Equal(t, 1, strings.Count(ans, `"resultType"`), ans)
		assert.Equal(t, 1, strings.Count(ans, mcp.MetaServerInfo), ans)
		assert.Contains(t, ans, `{"name":"mcpedge"`, "the gateway's identity, not the upstream's: %s", ans)
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

// BenchmarkForward measures one proxied tools/call end to end through
// the gateway (the upstream, another process, is included in the time,
// not in the allocations).
func BenchmarkForward(b *testing.B) {
	srv, _ := engineFront(b, selfUpstream("x", "conformance"))
	sink := countSink{ch: make(chan int, 1)}
	conn := srv.Open(sink)
	out := conn.HandleFrame([]byte(initFrame), make([]byte, 0, 4096))
	require.Contains(b, string(out), `"result"`)
	conn.HandleFrame([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), nil)
	frame := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"test_simple_text","arguments":{}}}`)
	b.ReportAllocs()
	for b.Loop() {
		conn.HandleFrame(frame, out[:0])
		<-sink.ch
	}
}

// TestPlaceZeroAlloc holds Gateway.Place, which a cluster's node asks on
// every request of a session, at zero allocations: with no upstream of
// share = "session" and none down (the fast path), with a pooled one
// down here (its calls go elsewhere), and with one of share = "session",
// whose tool, prompt, resource and completion requests go to the
// session's home.
func TestPlaceZeroAlloc(t *testing.T) {
	pooled := selfUpstream("x", "conformance")
	bound := selfUpstream("x", "conformance")
	bound.Share = gateway.Share{Session: true}
	for _, tt := range []struct {
		name  string
		up    gateway.Upstream
		frame string
		home  bool
		down  string // the upstream marked down here first
	}{
		{"pooled tool", pooled, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test_simple_text","arguments":{}}}`, false, ""},
		{"pooled tool, down here", pooled, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test_simple_text","arguments":{}}}`, false, "x"},
		{"session tool", bound, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test_simple_text","arguments":{}}}`, true, ""},
		{"session prompt", bound, `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"test_simple_prompt"}}`, true, ""},
		{"session resource", bound, `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"test://static-text"}}`, true, ""},
		{"session completion", bound, `{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"test_prompt_with_arguments"},"argument":{"name":"arg1","value":"a"}}}`, true, ""},
		{"session unknown tool", bound, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope","arguments":{}}}`, false, ""},
		{"session ping", bound, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, false, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, gw := engineFront(t, tt.up)
			if tt.down != "" {
				gw.MarkDown(tt.down)
			}
			var m codec.Message
			require.NoError(t, codec.Decode([]byte(tt.frame), &m))
			home, down := gw.Place(&m)
			assert.Equal(t, tt.home, home)
			assert.Equal(t, tt.down, down)
			assert.Zero(t, testing.AllocsPerRun(1000, func() { gw.Place(&m) }))
		})
	}
}

// BenchmarkPlace measures Gateway.Place for a session's tools/call of a
// share = "session" upstream (the slow path: the params scanned, the
// name looked up).
func BenchmarkPlace(b *testing.B) {
	u := selfUpstream("x", "conformance")
	u.Share = gateway.Share{Session: true}
	_, gw := engineFront(b, u)
	var m codec.Message
	require.NoError(b, codec.Decode([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test_simple_text","arguments":{"a":1,"b":"two"}}}`), &m))
	b.ReportAllocs()
	for b.Loop() {
		if home, _ := gw.Place(&m); !home {
			b.Fatal("not home")
		}
	}
}

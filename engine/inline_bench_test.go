package engine_test

import (
	"testing"

	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers/builtin"
)

// BenchmarkHandleFrameInlineEcho is the bench workload's tools/call echo as
// the TCP event loop serves it: decode, route, validate, run, encode.
func BenchmarkHandleFrameInlineEcho(b *testing.B) {
	srv := engine.New(engine.Options{})
	defer srv.Shutdown(b.Context())
	if err := builtin.Install("bench", srv.Registry(), builtin.Env{}); err != nil {
		b.Fatal(err)
	}
	sink := newChanSink()
	sess := srv.Open(sink).Session()
	srv.Conn(sess).HandleFrame([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`), nil)
	frame := []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello world"}}}`)
	out := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		out = srv.Conn(sess).HandleFrame(frame, out[:0])
		if len(out) == 0 {
			b.Fatal("no inline answer")
		}
	}
}

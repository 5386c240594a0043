package engine_test

import (
	"sync/atomic"
	"testing"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
)

// benchFrame runs frame through HandleFrame on an initialized session with
// a reused output buffer: the event-loop path of an answer that needs no
// handler.
func benchFrame(b *testing.B, frame string) {
	f := newFixture(b, engine.Options{})
	c := f.ready(b, `{}`)
	in := []byte(frame)
	out := make([]byte, 0, 64<<10)
	out = f.srv.Conn(c.sess).HandleFrame(in, out[:0])
	if m := parse(b, out); m.Error != nil {
		b.Fatalf("error answer: %+v", m.Error)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		out = f.srv.Conn(c.sess).HandleFrame(in, out[:0])
	}
	if len(out) == 0 {
		b.Fatal("no answer")
	}
}

func BenchmarkHandleFrameToolsList(b *testing.B) {
	benchFrame(b, `{"jsonrpc":"2.0","id":12345,"method":"tools/list"}`)
}

func BenchmarkHandleFramePing(b *testing.B) {
	benchFrame(b, `{"jsonrpc":"2.0","id":12345,"method":"ping"}`)
}

// signalSink hands each answer's length to a channel: the cheapest Sink a
// transport could be.
type signalSink struct{ ch chan int }

func (s signalSink) Send(buf *codec.Buffer) error {
	n := len(buf.B)
	codec.PutBuffer(buf)
	s.ch <- n
	return nil
}

// BenchmarkToolsCallEcho measures one tools/call of echo end to end:
// HandleFrame copies the frame, the worker pool runs the handler (schema
// validation, argument decoding, result encoding) and the answer reaches
// the session's sink.
func BenchmarkToolsCallEcho(b *testing.B) {
	f := newFixture(b, engine.Options{})
	sink := signalSink{ch: make(chan int, 1)}
	sess := f.srv.Open(sink).Session()
	out := f.srv.Conn(sess).HandleFrame([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`), nil)
	if m := parse(b, out); m.Error != nil {
		b.Fatalf("initialize: %+v", m.Error)
	}
	f.srv.Conn(sess).HandleFrame([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), nil)
	in := []byte(`{"jsonrpc":"2.0","id":123,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, world"}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if out := f.srv.Conn(sess).HandleFrame(in, out[:0]); len(out) > 0 {
			b.Fatalf("immediate answer: %s", out)
		}
		if n := <-sink.ch; n < 50 {
			b.Fatalf("short answer: %d bytes", n)
		}
	}
}

// BenchmarkToolsCallEcho2026 is BenchmarkToolsCallEcho in the stateless
// revision: the same call carrying its version and capabilities in _meta,
// on a connection that never initialized.
func BenchmarkToolsCallEcho2026(b *testing.B) {
	f := newFixture(b, engine.Options{})
	sink := signalSink{ch: make(chan int, 1)}
	conn := f.srv.Open(sink)
	in := []byte(req26(123, "tools/call", `"name":"echo","arguments":{"text":"hello, world"}`, `{}`))
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

// countSink counts what it is sent and recycles it.
type countSink struct{ n atomic.Int64 }

func (s *countSink) Send(b *codec.Buffer) error {
	codec.PutBuffer(b)
	s.n.Add(1)
	return nil
}

// BenchmarkResourceUpdatedPopular updates a resource that 64,000 sessions
// subscribe to: one op is one ResourceUpdated, a notification built and
// handed to each session's sink.
func BenchmarkResourceUpdatedPopular(b *testing.B) {
	const n = 64000
	f := newFixture(b, engine.Options{})
	sink := &countSink{}
	init := []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`)
	sub := []byte(`{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"mem://popular"}}`)
	var out []byte
	for range n {
		conn := f.srv.Open(sink)
		out = conn.HandleFrame(init, out[:0])
		out = conn.HandleFrame(sub, out[:0])
	}
	if m := parse(b, out); m.Error != nil {
		b.Fatalf("subscribe: %+v", m.Error)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		f.srv.ResourceUpdated("mem://popular")
	}
	b.StopTimer()
	if got := sink.n.Load(); got != int64(b.N)*n {
		b.Fatalf("%d notifications, want %d", got, int64(b.N)*n)
	}
}

package codec

import "testing"

func BenchmarkAppendSSEEvent(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchCall)))
	buf := make([]byte, 0, 512)
	for b.Loop() {
		buf = AppendSSEEvent(buf[:0], "s-1", "message", benchCall)
	}
}

// BenchmarkSSEParser measures Next on a stream of 64 events carrying a
// tools/call envelope each, without ids; one op is one event.
func BenchmarkSSEParser(b *testing.B) {
	const events = 64
	var stream []byte
	for range events {
		stream = AppendSSEEvent(stream, "", "message", benchCall)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(stream) / events))
	var p SSEParser
	buf := stream
	for b.Loop() {
		if len(buf) == 0 {
			buf = stream
		}
		_, n, ok, err := p.Next(buf)
		if err != nil || !ok {
			b.Fatalf("ok=%v err=%v", ok, err)
		}
		buf = buf[n:]
	}
}

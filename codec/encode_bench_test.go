package codec

import "testing"

var (
	benchID     = []byte(`42`)
	benchResult = []byte(`{"content":[{"type":"text","text":"hello world from the benchmark"}],"isError":false}`)
	benchText   = "The quick brown fox jumps over the lazy dog; \"quoted\", tabbed\tand\nnew-lined, with UTF-8: héllo wörld 世界."
)

func BenchmarkAppendResult(b *testing.B) {
	b.ReportAllocs()
	buf := make([]byte, 0, 512)
	for b.Loop() {
		buf = AppendResult(buf[:0], benchID, benchResult)
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkAppendError(b *testing.B) {
	b.ReportAllocs()
	buf := make([]byte, 0, 512)
	for b.Loop() {
		buf = AppendError(buf[:0], benchID, CodeMethodNotFound, "Method not found: tools/unknown", nil)
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkAppendString(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchText)))
	buf := make([]byte, 0, 512)
	for b.Loop() {
		buf = AppendString(buf[:0], benchText)
	}
}

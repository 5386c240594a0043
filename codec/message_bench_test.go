package codec

import "testing"

var benchCall = []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello world from the benchmark"}}}`)

func BenchmarkDecodeToolsCall(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchCall)))
	var m Message
	for i := 0; i < b.N; i++ {
		if err := Decode(benchCall, &m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeParallel(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchCall)))
	b.RunParallel(func(pb *testing.PB) {
		var m Message
		for pb.Next() {
			if err := Decode(benchCall, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
}

package codec

import "testing"

// benchFramer measures Next on a buffer of 64 framed tools/call envelopes; one
// op is one frame.
func benchFramer(b *testing.B, f Framer) {
	const frames = 64
	var stream []byte
	for range frames {
		stream = f.AppendFrame(stream, benchCall)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(stream) / frames))
	buf := stream
	for b.Loop() {
		if len(buf) == 0 {
			buf = stream
		}
		_, n, err := f.Next(buf)
		if err != nil || n == 0 {
			b.Fatalf("n=%d err=%v", n, err)
		}
		buf = buf[n:]
	}
}

func BenchmarkNewlineFramer(b *testing.B) { benchFramer(b, NewlineFramer{}) }

func BenchmarkContentLengthFramer(b *testing.B) { benchFramer(b, ContentLengthFramer{}) }

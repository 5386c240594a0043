package codec

import "testing"

func BenchmarkZChecks(b *testing.B) {
	var m Message
	_ = Decode(benchCall, &m)
	for b.Loop() {
		if !validEscapes(m.Params) || !validEscapes(m.Result) || !validEscapes(m.Error) || idStatus(m.ID) != idOK {
			b.Fatal()
		}
	}
}

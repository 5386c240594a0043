package loadtest

import (
	"bufio"
	"context"
	"net"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/codec"
)

// BenchmarkVerifyEcho is the check every echo answer goes through.
func BenchmarkVerifyEcho(b *testing.B) {
	st, _ := Builtin("echo")
	result := []byte(`{"content":[{"type":"text","text":"mcpload abcdefgh 12345"}]}`)
	want := []byte("mcpload abcdefgh 12345")
	var vf verifier
	b.ReportAllocs()
	for b.Loop() {
		if e := vf.check(&st, result, want); e != nil {
			b.Fatal(e)
		}
	}
}

// BenchmarkRenderEcho renders one echo request's params and expectation.
func BenchmarkRenderEcho(b *testing.B) {
	m, err := newMix(echoStep())
	if err != nil {
		b.Fatal(err)
	}
	st := &m.steps[0]
	var v vars
	rng := rand64{s: 1}
	var params, want []byte
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		v.fill(&rng, 0, uint64(i))
		params = render(params[:0], st.params, &v)
		want = render(want[:0], st.expect, &v)
	}
}

// BenchmarkStreamCall is one call's client side over an in-memory pipe
// whose far end answers every request at once.
func BenchmarkStreamCall(b *testing.B) {
	cli, srv := net.Pipe()
	go func() {
		br := bufio.NewReader(srv)
		var msg codec.Message
		var out []byte
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				return
			}
			if codec.Decode(line[:len(line)-1], &msg) != nil {
				return
			}
			out = append(codec.AppendResult(out[:0], msg.ID, []byte(`{"content":[{"type":"text","text":"x"}]}`)), '\n')
			if _, err := srv.Write(out); err != nil {
				return
			}
		}
	}()
	s := newStreamSession(cli, cli, cli, 1, &sessionOpts{timeout: 10 * time.Second, maxFrame: 1 << 20})
	defer s.Close()
	ctx := context.Background()
	params := []byte(`{"name":"echo","arguments":{"text":"x"}}`)
	var dst []byte
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if dst, err = s.Call(ctx, "tools/call", params, dst[:0]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRecord is one measured answer's bookkeeping.
func BenchmarkRecord(b *testing.B) {
	m, _ := newMix(echoStep())
	r := newRecorder(m, 1)
	r.start(time.Now(), time.Minute)
	sh := r.shard(0)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		sh.record(0, 150*time.Microsecond, nil, now)
	}
}

package loadtest

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nopStream is a stream that takes every write and has nothing to read.
type nopStream struct{}

func (nopStream) Read([]byte) (int, error)         { return 0, net.ErrClosed }
func (nopStream) Write(b []byte) (int, error)      { return len(b), nil }
func (nopStream) Close() error                     { return nil }
func (nopStream) SetReadDeadline(time.Time) error  { return nil }
func (nopStream) SetWriteDeadline(time.Time) error { return nil }

// echoAnswers appends the floor's answer to every echo request in reqs
// (with "resultType":"complete" for modern, as 2026-07-28 answers).
func echoAnswers(dst, reqs []byte, modern bool) []byte {
	for len(reqs) > 0 {
		i := bytes.IndexByte(reqs, '\n')
		line := reqs[:i]
		reqs = reqs[i+1:]
		rest := line[len(envelopeHead):]
		id := rest[:bytes.IndexByte(rest, ',')]
		t := bytes.Index(line, []byte(`"text":"`)) + len(`"text":"`)
		text := line[t : t+bytes.IndexByte(line[t:], '"')]
		dst = append(dst, envelopeHead...)
		dst = append(dst, id...)
		dst = append(dst, `,"result":{"content":[{"type":"text","text":"`...)
		dst = append(dst, text...)
		if modern {
			dst = append(dst, "\"}],\"resultType\":\"complete\"}}\n"...)
			continue
		}
		dst = append(dst, "\"}]}}\n"...)
	}
	return dst
}

// pipeBench is one connection of the pipelined driver without a network:
// round renders a request for every slot, answers them all as the floor
// would, and reads the answers back.
type pipeBench struct {
	modern bool
	c      *pipeConn
	s      *pipeSession
	r      *recorder
	ans    []byte
	ctx    context.Context
}

func newPipeBench(t testing.TB, inflight int, protocol string) *pipeBench {
	cfg := &Config{Timeout: time.Minute, MaxMessage: 1 << 20, Connections: 1, InFlight: inflight, Protocol: protocol}
	m, err := newMix(echoStep())
	require.NoError(t, err)
	if cfg.stateless() {
		require.NoError(t, m.modernize())
	}
	r := newRecorder(m, 1)
	r.start(time.Now(), time.Minute)
	c := newPipeConn(newPipeRun(cfg, m, r), 0, inflight, 1)
	s := &pipeSession{st: nopStream{}, wake: make(chan struct{}, 1), wdone: make(chan struct{})}
	pb := &pipeBench{modern: cfg.stateless(), c: c, s: s, r: r, ctx: context.Background()}
	var all []int32
	for i := range c.slots {
		all = append(all, int32(i))
	}
	s.wmu.Lock()
	_, err = c.send(pb.ctx, s, time.Now(), all)
	s.wmu.Unlock()
	require.NoError(t, err)
	return pb
}

// round answers the requests last sent; the reader sends the next ones
// itself, as it does when the window is small.
func (b *pipeBench) round() {
	b.ans = echoAnswers(b.ans[:0], b.c.w.out, b.modern)
	b.c.n = copy(b.c.buf, b.ans)
	if e := b.c.chunk(b.ctx, b.s, time.Now()); e != nil {
		panic(e)
	}
	if len(b.s.free) > 0 {
		panic("the slots were handed to the writer")
	}
}

// TestPipelineNoAllocs holds the pipelined driver's per-message path,
// request and answer, to no allocation once the answers' shape is learned,
// in both protocol revisions (2026-07-28's _meta is part of the
// pre-encoded template).
func TestPipelineNoAllocs(t *testing.T) {
	for _, protocol := range Protocols() {
		t.Run(protocol, func(t *testing.T) {
			pb := newPipeBench(t, 16, protocol)
			pb.round() // learns the shape
			allocs := testing.AllocsPerRun(200, pb.round)
			assert.Zero(t, allocs, "allocations per 16 messages")
			n, bad := pb.r.counts()
			assert.Equal(t, int64((1+200+1)*16), n) // AllocsPerRun runs it once more to warm up
			assert.Zero(t, bad)
			for _, sh := range pb.c.vf.shapes {
				assert.NotNil(t, sh.prefix, "the echo answers' shape is learned")
			}
		})
	}
}

// BenchmarkPipelineMessage is one request and its answer through the
// pipelined driver, without the system calls: render, match, verify,
// record.
func BenchmarkPipelineMessage(b *testing.B) {
	for _, protocol := range Protocols() {
		b.Run(protocol, func(b *testing.B) {
			pb := newPipeBench(b, 16, protocol)
			pb.round()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += 16 {
				pb.round()
			}
		})
	}
}

func TestVerifierShape(t *testing.T) {
	st, _ := Builtin("echo")
	var vf verifier
	res := func(text string) []byte {
		return []byte(`{"content":[{"type":"text","text":"` + text + `"}],"structuredContent":{"n":1}}`)
	}
	require.Nil(t, vf.checkLearn(0, &st, res("mcpload abc 1"), []byte("mcpload abc 1")))
	require.NotNil(t, vf.shapes[0].prefix)
	assert.True(t, vf.quick(0, &st, res("mcpload xyz 22"), []byte("mcpload xyz 22")))
	assert.False(t, vf.quick(0, &st, res("mcpload xyz 22"), []byte("mcpload xyz 23")), "another text")
	assert.False(t, vf.quick(0, &st, res("mcpload xyz 22"), []byte("mcpload xyz 2")), "a shorter text")
	assert.False(t, vf.quick(0, &st, []byte(`{"content":[{"type":"text","text":"a"}],"isError":true}`), []byte("a")), "another shape")
	assert.False(t, vf.quick(0, &st, res(`a\"b`), []byte(`a"b`)), "a text JSON escapes is left to check")
	assert.False(t, vf.quick(1, &st, res("a"), []byte("a")), "a step not learned")

	// A text that occurs twice gives no prefix: the exact answer is
	// remembered instead.
	var vf2 verifier
	twice := []byte(`{"content":[{"type":"text","text":"dup"}],"meta":"dup"}`)
	require.Nil(t, vf2.checkLearn(0, &st, twice, []byte("dup")))
	assert.Nil(t, vf2.shapes[0].prefix)
	assert.True(t, vf2.quick(0, &st, twice, []byte("dup")))
	assert.False(t, vf2.quick(0, &st, twice, []byte("dupe")))

	// A text that is not the checked one is not learned as the shape.
	var vf3 verifier
	other := []byte(`{"content":[{"type":"text","text":"hello"},{"type":"text","text":"second"}]}`)
	st3 := Step{Name: "x", Method: "tools/call", Match: MatchEqual}
	require.Nil(t, vf3.checkLearn(0, &st3, other, []byte("hello")))
	assert.False(t, vf3.quick(0, &st3, []byte(`{"content":[{"type":"text","text":"hello"},{"type":"text","text":"other"}]}`), []byte("other")))

	// A wrong answer is never learned.
	var vf4 verifier
	assert.NotNil(t, vf4.checkLearn(0, &st, res("wrong"), []byte("right")))
	assert.False(t, vf4.quick(0, &st, res("right"), []byte("right")))
}

// TestPipelinedAnswerShapes runs the pipelined driver against servers that
// answer in shapes the fast path does not expect: every answer is still
// verified, none wrongly.
func TestPipelinedAnswerShapes(t *testing.T) {
	tests := []struct {
		name string
		// answer rewrites the right answer line.
		answer func(n int64, line []byte) [][]byte
		ok     bool
	}{
		{"members reordered", func(_ int64, line []byte) [][]byte {
			var msg codec.Message
			_ = codec.Decode(line, &msg)
			return [][]byte{append(append(append([]byte(`{"id":`), msg.ID...), `,"result":`...), append(msg.Result, `,"jsonrpc":"2.0"}`...)...)}
		}, true},
		{"shape changes", func(n int64, line []byte) [][]byte {
			if n%3 == 0 {
				line = bytes.Replace(line, []byte(`}]}}`), []byte(`}],"isError":false}}`), 1)
			}
			return [][]byte{line}
		}, true},
		{"server requests and notifications between answers", func(n int64, line []byte) [][]byte {
			return [][]byte{
				[]byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`),
				[]byte(`{"jsonrpc":"2.0","id":"srv-` + string(rune('a'+n%26)) + `","method":"ping"}`),
				line,
			}
		}, true},
		{"whitespace", func(_ int64, line []byte) [][]byte {
			return [][]byte{append(bytes.ReplaceAll(line, []byte(`":`), []byte(`": `)), ' ', '\r')}
		}, true},
		{"text changed in the learned shape", func(n int64, line []byte) [][]byte {
			if n > 20 {
				line = bytes.Replace(line, []byte(`"text":"mcpload `), []byte(`"text":"mcpl0ad `), 1)
			}
			return [][]byte{line}
		}, false},
		{"error after result", func(n int64, line []byte) [][]byte {
			if n > 20 {
				line = append(line[:len(line)-1], `,"error":{"code":1,"message":"x"}}`...)
			}
			return [][]byte{line}
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var seen atomic.Int64
			target, err := ParseTarget(startFakeTCP(t, func(_ net.Conn, msg *codec.Message, _ []byte) fakeReply {
				return fakeReply{lines: tt.answer(seen.Add(1), fakeAnswer(msg))}
			}))
			require.NoError(t, err)
			n := int64(400)
			if !tt.ok {
				n = 60 // a failing session is re-dialled every 100 ms
			}
			res := runBounded(t, Config{Target: target, Connections: 2, InFlight: 4, Requests: n, Timeout: 2 * time.Second, Steps: echoStep()}, 20*time.Second)
			if tt.ok {
				assert.Zero(t, res.Errors, "%v %v", res.ErrorsByKind, res.ErrorSamples)
				assert.Equal(t, int64(400), res.OK)
				return
			}
			assert.Positive(t, res.Errors)
			assert.LessOrEqual(t, res.OK, int64(20+8))
		})
	}
}

// TestPipelinedLargeAnswers reads answers longer than the read buffer, and
// fails the session on one longer than MaxMessage.
func TestPipelinedLargeAnswers(t *testing.T) {
	pad := strings.Repeat("x", 200<<10)
	target, err := ParseTarget(startFakeTCP(t, func(_ net.Conn, msg *codec.Message, _ []byte) fakeReply {
		line := fakeAnswer(msg)
		return fakeReply{lines: [][]byte{bytes.Replace(line, []byte(`}]}}`), []byte(`}],"pad":"`+pad+`"}}`), 1)}}
	}))
	require.NoError(t, err)
	res := runBounded(t, Config{Target: target, Connections: 1, InFlight: 4, Requests: 50, Timeout: 2 * time.Second, Steps: echoStep()}, 20*time.Second)
	assert.Zero(t, res.Errors, "%v %v", res.ErrorsByKind, res.ErrorSamples)
	assert.Equal(t, int64(50), res.OK)

	res = runBounded(t, Config{Target: target, Connections: 1, InFlight: 4, Requests: 20, Timeout: 2 * time.Second, MaxMessage: 100 << 10, Steps: echoStep()}, 20*time.Second)
	assert.Zero(t, res.OK)
	assert.Positive(t, res.ErrorsByKind[KindProtocol.String()], "%v %v", res.ErrorsByKind, res.ErrorSamples)
}

// TestPipelinedDurationEnds checks that a duration run ends on time with
// every connection's calls answered or dropped, and the slots kept full
// meanwhile.
func TestPipelinedDurationEnds(t *testing.T) {
	target, err := ParseTarget(startFakeTCP(t, func(_ net.Conn, msg *codec.Message, _ []byte) fakeReply {
		return fakeReply{lines: [][]byte{fakeAnswer(msg)}, delay: 2 * time.Millisecond}
	}))
	require.NoError(t, err)
	start := time.Now()
	res := runBounded(t, Config{Target: target, Connections: 3, InFlight: 8, Duration: 600 * time.Millisecond, Warmup: 100 * time.Millisecond, Timeout: 2 * time.Second, Steps: echoStep()}, 10*time.Second)
	assert.Less(t, time.Since(start), 3*time.Second)
	assert.Zero(t, res.Errors, "%v %v", res.ErrorsByKind, res.ErrorSamples)
	// 24 in flight, each answered after 2 ms: well over 1000 in 0.6 s.
	assert.Greater(t, res.OK, int64(1000))
	require.NotNil(t, res.Load)
	assert.Positive(t, res.Load.CPUSeconds)
}

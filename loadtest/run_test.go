package loadtest

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runBounded runs cfg and fails the test if Run takes longer than limit:
// mcpload must never hang, whatever the server does.
func runBounded(t *testing.T, cfg Config, limit time.Duration) *Result {
	t.Helper()
	type out struct {
		res *Result
		err error
	}
	ch := make(chan out, 1)
	go func() {
		res, err := Run(context.Background(), cfg)
		ch <- out{res, err}
	}()
	select {
	case o := <-ch:
		require.NoError(t, o.err)
		return o.res
	case <-time.After(limit):
		t.Fatalf("Run did not return within %s", limit)
		return nil
	}
}

func echoStep() []Step {
	st, _ := Builtin("echo")
	st.Weight = 1
	return []Step{st}
}

func TestBadServersTCP(t *testing.T) {
	tests := []struct {
		name  string
		serve func(c net.Conn, msg *codec.Message, raw []byte) fakeReply
		want  ErrorKind
	}{
		{"wrong text", func(_ net.Conn, msg *codec.Message, _ []byte) fakeReply {
			return fakeReply{lines: [][]byte{codec.AppendResult(nil, msg.ID, []byte(`{"content":[{"type":"text","text":"not what was asked"}]}`))}}
		}, KindUnexpected},
		{"tool error", func(_ net.Conn, msg *codec.Message, _ []byte) fakeReply {
			return fakeReply{lines: [][]byte{codec.AppendResult(nil, msg.ID, []byte(`{"content":[{"type":"text","text":"boom"}],"isError":true}`))}}
		}, KindUnexpected},
		{"rpc error", func(_ net.Conn, msg *codec.Message, _ []byte) fakeReply {
			return fakeReply{lines: [][]byte{codec.AppendError(nil, msg.ID, codec.CodeInternalError, "nope", nil)}}
		}, KindRPCError},
		{"foreign id", func(_ net.Conn, msg *codec.Message, _ []byte) fakeReply {
			return fakeReply{lines: [][]byte{codec.AppendResult(nil, []byte("987654321"), []byte(`{}`))}}
		}, KindIDMismatch},
		{"string id", func(_ net.Conn, msg *codec.Message, _ []byte) fakeReply {
			return fakeReply{lines: [][]byte{codec.AppendResult(nil, []byte(`"x"`), []byte(`{}`))}}
		}, KindIDMismatch},
		{"not json", func(_ net.Conn, _ *codec.Message, _ []byte) fakeReply {
			return fakeReply{lines: [][]byte{[]byte(`{"jsonrpc":"2.0","id":`)}}
		}, KindProtocol},
		{"result not an object", func(_ net.Conn, msg *codec.Message, _ []byte) fakeReply {
			return fakeReply{lines: [][]byte{codec.AppendResult(nil, msg.ID, []byte(`[1,2]`))}}
		}, KindUnexpected},
		{"silent", func(_ net.Conn, _ *codec.Message, _ []byte) fakeReply {
			return fakeReply{}
		}, KindTimeout},
		{"slow", func(_ net.Conn, msg *codec.Message, _ []byte) fakeReply {
			return fakeReply{lines: [][]byte{fakeAnswer(msg)}, delay: 400 * time.Millisecond}
		}, KindTimeout},
		{"closes", func(_ net.Conn, _ *codec.Message, _ []byte) fakeReply {
			return fakeReply{close: true}
		}, KindClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target, err := ParseTarget(startFakeTCP(t, tt.serve))
			require.NoError(t, err)
			res := runBounded(t, Config{
				Target: target, Connections: 2, Requests: 10, Timeout: 150 * time.Millisecond, Steps: echoStep(),
			}, 10*time.Second)
			assert.Zero(t, res.OK, "no answer may pass verification")
			assert.Positive(t, res.ErrorsByKind[tt.want.String()], "errors by kind: %v", res.ErrorsByKind)
			for k, n := range res.ErrorsByKind {
				if k != tt.want.String() && k != KindConnect.String() {
					t.Errorf("unexpected %d errors of kind %s (want only %s): %v", n, k, tt.want, res.ErrorSamples)
				}
			}
			assert.Equal(t, res.Requests, res.Errors)
		})
	}
}

func TestOutOfOrderAnswersMatchByID(t *testing.T) {
	// The server holds each answer until the next request arrives and then
	// answers the newer one first: every answer is still right for its id.
	var held atomic.Pointer[[]byte]
	target, err := ParseTarget(startFakeTCP(t, func(_ net.Conn, msg *codec.Message, _ []byte) fakeReply {
		ans := fakeAnswer(msg)
		if prev := held.Swap(nil); prev != nil {
			return fakeReply{lines: [][]byte{ans, *prev}}
		}
		held.Store(&ans)
		return fakeReply{}
	}))
	require.NoError(t, err)
	res := runBounded(t, Config{Target: target, Connections: 1, InFlight: 2, Requests: 200, Timeout: 2 * time.Second, Steps: echoStep()}, 20*time.Second)
	// At most the last request is left without a partner and times out.
	assert.LessOrEqual(t, res.Errors, int64(1), "errors: %v %v", res.ErrorsByKind, res.ErrorSamples)
	assert.GreaterOrEqual(t, res.OK, int64(199))
}

func TestSwappedAnswersAreUnexpected(t *testing.T) {
	// Two requests in flight; each is answered with the other's content
	// under its own id.
	var held atomic.Pointer[codec.Message]
	target, err := ParseTarget(startFakeTCP(t, func(_ net.Conn, msg *codec.Message, _ []byte) fakeReply {
		cp := &codec.Message{ID: append([]byte(nil), msg.ID...), Method: msg.Method, Params: append([]byte(nil), msg.Params...)}
		prev := held.Swap(nil)
		if prev == nil {
			held.Store(cp)
			return fakeReply{}
		}
		a, b := fakeAnswer(prev), fakeAnswer(cp)
		// Swap the ids.
		a = bytes.Replace(a, prev.ID, []byte("@@"), 1)
		b = bytes.Replace(b, cp.ID, prev.ID, 1)
		a = bytes.Replace(a, []byte("@@"), cp.ID, 1)
		return fakeReply{lines: [][]byte{a, b}}
	}))
	require.NoError(t, err)
	res := runBounded(t, Config{Target: target, Connections: 1, InFlight: 2, Requests: 50, Timeout: 500 * time.Millisecond, Steps: echoStep()}, 20*time.Second)
	assert.Positive(t, res.ErrorsByKind[KindUnexpected.String()], "%v", res.ErrorsByKind)
	assert.LessOrEqual(t, res.OK, int64(1))
}

func TestBadServersHTTP(t *testing.T) {
	tests := []struct {
		name  string
		serve func(w http.ResponseWriter, msg *codec.Message)
		want  ErrorKind
	}{
		{"wrong text", func(w http.ResponseWriter, msg *codec.Message) {
			writeJSON(w, codec.AppendResult(nil, msg.ID, []byte(`{"content":[{"type":"text","text":"other"}]}`)))
		}, KindUnexpected},
		{"rpc error", func(w http.ResponseWriter, msg *codec.Message) {
			writeJSON(w, codec.AppendError(nil, msg.ID, codec.CodeInvalidParams, "bad", nil))
		}, KindRPCError},
		{"other id", func(w http.ResponseWriter, msg *codec.Message) {
			writeJSON(w, codec.AppendResult(nil, []byte("424242"), []byte(`{}`)))
		}, KindIDMismatch},
		{"status 500", func(w http.ResponseWriter, _ *codec.Message) {
			w.WriteHeader(http.StatusInternalServerError)
		}, KindTransport},
		{"session lost", func(w http.ResponseWriter, _ *codec.Message) {
			w.WriteHeader(http.StatusNotFound)
		}, KindTransport},
		{"202 to a request", func(w http.ResponseWriter, _ *codec.Message) {
			w.WriteHeader(http.StatusAccepted)
		}, KindTransport},
		{"not json", func(w http.ResponseWriter, _ *codec.Message) {
			writeJSON(w, []byte(`<html>`))
		}, KindProtocol},
		{"sse without the answer", func(w http.ResponseWriter, _ *codec.Message) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n"))
		}, KindProtocol},
		{"slow", func(w http.ResponseWriter, msg *codec.Message) {
			time.Sleep(400 * time.Millisecond) // answering past the client's timeout: what is tested
			writeJSON(w, fakeAnswer(msg))
		}, KindTimeout},
		{"closes", func(w http.ResponseWriter, _ *codec.Message) {
			c, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				c.Close()
			}
		}, KindClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target, err := ParseTarget(startFakeHTTP(t, tt.serve))
			require.NoError(t, err)
			res := runBounded(t, Config{
				Target: target, Connections: 2, Requests: 10, Timeout: 150 * time.Millisecond, Steps: echoStep(),
			}, 10*time.Second)
			assert.Zero(t, res.OK)
			assert.Positive(t, res.ErrorsByKind[tt.want.String()], "errors by kind: %v %v", res.ErrorsByKind, res.ErrorSamples)
			for k := range res.ErrorsByKind {
				if k != tt.want.String() && k != KindConnect.String() {
					t.Errorf("errors of kind %s (want only %s): %v", k, tt.want, res.ErrorSamples)
				}
			}
		})
	}
}

func TestHTTPAnswersJSONAndSSE(t *testing.T) {
	var n atomic.Int64
	target, err := ParseTarget(startFakeHTTP(t, func(w http.ResponseWriter, msg *codec.Message) {
		if n.Add(1)%2 == 0 {
			writeJSON(w, fakeAnswer(msg))
			return
		}
		// An SSE answer: a priming event, a notification, then the answer.
		w.Header().Set("Content-Type", "text/event-stream")
		var b []byte
		b = append(b, "id: 1\ndata:\n\n"...)
		b = codec.AppendSSEEvent(b, "2", "message", codec.AppendNotification(nil, "notifications/progress", []byte(`{"progress":1}`)))
		b = codec.AppendSSEEvent(b, "3", "message", fakeAnswer(msg))
		_, _ = w.Write(b)
	}))
	require.NoError(t, err)
	mixSteps, err := ParseMix("echo=3,read=1,ping=1")
	require.NoError(t, err)
	res := runBounded(t, Config{Target: target, Connections: 4, Requests: 400, Timeout: 2 * time.Second, Steps: mixSteps}, 20*time.Second)
	assert.Zero(t, res.Errors, "%v %v", res.ErrorsByKind, res.ErrorSamples)
	assert.Equal(t, int64(400), res.OK)
	require.Len(t, res.Steps, 3)
	var total int64
	for _, s := range res.Steps {
		assert.Positive(t, s.Requests, s.Name)
		total += s.Requests
	}
	assert.Equal(t, int64(400), total)
}

func TestNoServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	for _, spec := range []string{"tcp://" + addr, "http://" + addr + "/mcp", "stdio:/nonexistent/server"} {
		t.Run(spec, func(t *testing.T) {
			target, err := ParseTarget(spec)
			require.NoError(t, err)
			start := time.Now()
			_, err = Run(context.Background(), Config{Target: target, Requests: 1, Timeout: time.Second})
			require.Error(t, err)
			assert.Less(t, time.Since(start), 5*time.Second)
		})
	}
}

// TestOpenLoopCountsStalls checks that open-loop latency runs from the
// intended send time: one 300 ms stall delays every request scheduled
// behind it, and they all show it, while closed loop records one slow
// request.
func TestOpenLoopCountsStalls(t *testing.T) {
	var stalled atomic.Bool
	var measuring atomic.Bool
	target, err := ParseTarget(startFakeTCP(t, func(_ net.Conn, msg *codec.Message, _ []byte) fakeReply {
		if measuring.Load() && stalled.CompareAndSwap(false, true) {
			time.Sleep(300 * time.Millisecond) // the stall is what is tested
		}
		return fakeReply{lines: [][]byte{fakeAnswer(msg)}}
	}))
	require.NoError(t, err)
	run := func(rate float64) *Result {
		stalled.Store(false)
		measuring.Store(false)
		time.AfterFunc(200*time.Millisecond, func() { measuring.Store(true) })
		return runBounded(t, Config{Target: target, Rate: rate, Duration: time.Second, Warmup: 100 * time.Millisecond, Timeout: 2 * time.Second, Steps: echoStep()}, 10*time.Second)
	}
	open := run(200)
	require.NotNil(t, open.Latency)
	assert.Equal(t, "open", open.Mode)
	// About 60 requests were scheduled during the stall: over 10% of 200.
	assert.Greater(t, open.Latency.P90, 50_000.0, "open-loop p90 %vµs", open.Latency.P90)
	assert.InDelta(t, 200, open.Throughput, 40)

	closed := run(0)
	require.NotNil(t, closed.Latency)
	assert.Less(t, closed.Latency.P90, 50_000.0, "closed-loop p90 %vµs", closed.Latency.P90)
	assert.Greater(t, closed.Latency.Max, 250_000.0)
}

func TestDurationAndTimeline(t *testing.T) {
	target, err := ParseTarget(startFakeTCP(t, func(_ net.Conn, msg *codec.Message, _ []byte) fakeReply {
		return fakeReply{lines: [][]byte{fakeAnswer(msg)}}
	}))
	require.NoError(t, err)
	var ticks atomic.Int64
	res := runBounded(t, Config{
		Target: target, Connections: 2, Duration: 1500 * time.Millisecond, Warmup: 200 * time.Millisecond,
		Steps: echoStep(), Progress: func(Progress) { ticks.Add(1) },
	}, 10*time.Second)
	assert.InDelta(t, 1.5, res.DurationS, 0.1)
	assert.Positive(t, res.OK)
	assert.Len(t, res.Timeline, 2)
	var sum int64
	for _, s := range res.Timeline {
		sum += s.OK
	}
	assert.Equal(t, res.OK, sum)
	assert.Positive(t, ticks.Load())
	require.NotNil(t, res.Latency)
	l := res.Latency
	assert.True(t, l.Min <= l.P50 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.P999 && l.P999 <= l.Max, "%+v", l)
	var text strings.Builder
	require.NoError(t, res.WriteText(&text))
	assert.Contains(t, text.String(), "p99.9")
}

func TestCheck(t *testing.T) {
	res := &Result{Requests: 100, Errors: 5, ErrorRate: 0.05, Latency: &LatencyStats{P99: 2000}}
	assert.True(t, res.Check(0, 0))
	assert.True(t, res.Check(3*time.Millisecond, 0.1))
	assert.False(t, res.Check(time.Millisecond, 0))
	assert.Len(t, res.Thresholds.Violations, 1)
	assert.False(t, res.Check(0, 0.01))
	assert.False(t, res.Check(time.Millisecond, 0.01))
	assert.Len(t, res.Thresholds.Violations, 2)
}

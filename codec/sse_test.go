package codec

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAppendSSEEvent(t *testing.T) {
	tests := []struct {
		name, id, event, data, want string
	}{
		{"data only", "", "", `{"jsonrpc":"2.0"}`, "data: {\"jsonrpc\":\"2.0\"}\n\n"},
		{"all fields", "7", "message", "x", "id: 7\nevent: message\ndata: x\n\n"},
		{"empty data", "s1-0", "", "", "id: s1-0\ndata:\n\n"},
		{"multi-line", "", "", "a\nb", "data: a\ndata: b\n\n"},
		{"all line ends", "", "", "a\r\nb\rc\nd", "data: a\ndata: b\ndata: c\ndata: d\n\n"},
		{"trailing newline", "", "", "a\n", "data: a\ndata:\n\n"},
		{"blank line inside", "", "", "a\n\nb", "data: a\ndata:\ndata: b\n\n"},
		{"leading space kept", "", "", " a", "data:  a\n\n"},
		{"colons kept", "", "", "a: b", "data: a: b\n\n"},
		{"id line ends dropped", "1\r\n2\x003", "", "x", "id: 123\ndata: x\n\n"},
		{"event line ends dropped", "", "up\ndate\r", "x", "event: update\ndata: x\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AppendSSEEvent([]byte("pre"), tt.id, tt.event, []byte(tt.data))
			assert.Equal(t, "pre"+tt.want, string(got))
		})
	}
}

func TestAppendSSERetryAndComment(t *testing.T) {
	assert.Equal(t, "retry: 3000\n\n", string(AppendSSERetry(nil, 3000)))
	assert.Equal(t, "retry: 0\n\n", string(AppendSSERetry(nil, -5)))
	assert.Equal(t, ": ping\n", string(AppendSSEComment(nil, "ping")))
	assert.Equal(t, ":\n", string(AppendSSEComment(nil, "")))
	assert.Equal(t, ": a\n: b\n:\n", string(AppendSSEComment(nil, "a\r\nb\n")))
}

// sseResult is what a stream yields when fed to an SSEParser.
type sseResult struct {
	events  []SSEEvent // dispatched events, Data copied
	retries []int      // every retry applied, in order
	lastID  string
	err     error
}

// feedSSE feeds chunks to p as reads would arrive and collects what it reports.
func feedSSE(t testing.TB, p *SSEParser, chunks ...[]byte) sseResult {
	var out sseResult
	var buf []byte
	for _, c := range chunks {
		buf = append(buf, c...)
		for {
			ev, n, ok, err := p.Next(buf)
			if err != nil {
				out.err = err
				return out
			}
			if n == 0 {
				require.False(t, ok)
				break
			}
			require.LessOrEqual(t, n, len(buf))
			if ev.HasRetry {
				out.retries = append(out.retries, ev.Retry)
			}
			if ok {
				ev.Data = bytes.Clone(ev.Data)
				if ev.Data == nil {
					ev.Data = []byte{}
				}
				out.events = append(out.events, ev)
			}
			buf = buf[n:]
		}
	}
	out.lastID = p.LastEventID()
	return out
}

func ev(id, event, data string) SSEEvent {
	return SSEEvent{ID: id, Event: event, Data: []byte(data)}
}

func TestSSEParser(t *testing.T) {
	tests := []struct {
		name string
		max  int
		in   string
		want sseResult
	}{
		{"one event", 0, "data: {\"a\":1}\n\n", sseResult{events: []SSEEvent{ev("", "message", `{"a":1}`)}}},
		{"multi-line data", 0, "data: YHOO\ndata: +2\ndata: 10\n\n",
			sseResult{events: []SSEEvent{ev("", "message", "YHOO\n+2\n10")}}},
		{"standard example", 0, ": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n\n",
			sseResult{events: []SSEEvent{ev("1", "message", "first event"), ev("", "message", "second event"), ev("", "message", " third event")}}},
		{"empty data fields", 0, "data\n\ndata\ndata\n\ndata:",
			sseResult{events: []SSEEvent{ev("", "message", ""), ev("", "message", "\n")}}},
		{"space optional", 0, "data:test\n\ndata: test\n\n",
			sseResult{events: []SSEEvent{ev("", "message", "test"), ev("", "message", "test")}}},
		{"event type", 0, "event: add\ndata: 73857293\n\nevent: remove\ndata: 2153\n\ndata: x\n\n",
			sseResult{events: []SSEEvent{ev("", "add", "73857293"), ev("", "remove", "2153"), ev("", "message", "x")}}},
		{"empty event type", 0, "event:\ndata: x\n\n", sseResult{events: []SSEEvent{ev("", "message", "x")}}},
		{"last event field wins", 0, "event: a\nevent: b\ndata: x\n\n", sseResult{events: []SSEEvent{ev("", "b", "x")}}},
		{"crlf", 0, "id: 1\r\ndata: a\r\ndata: b\r\n\r\n", sseResult{events: []SSEEvent{ev("1", "message", "a\nb")}, lastID: "1"}},
		{"cr", 0, "data: a\rdata: b\r\rdata: c\r\r", sseResult{events: []SSEEvent{ev("", "message", "a\nb"), ev("", "message", "c")}}},
		{"mixed line ends", 0, "data: a\r\ndata: b\rdata: c\n\r\n", sseResult{events: []SSEEvent{ev("", "message", "a\nb\nc")}}},
		{"id persists", 0, "id: 5\ndata: a\n\ndata: b\n\n",
			sseResult{events: []SSEEvent{ev("5", "message", "a"), ev("5", "message", "b")}, lastID: "5"}},
		{"id only block", 0, "id: 9\n\ndata: a\n\n", sseResult{events: []SSEEvent{ev("9", "message", "a")}, lastID: "9"}},
		{"priming event", 0, "id: s-0\ndata:\n\n", sseResult{events: []SSEEvent{ev("s-0", "message", "")}, lastID: "s-0"}},
		{"id with NUL ignored", 0, "id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n",
			sseResult{events: []SSEEvent{ev("1", "message", "a"), ev("1", "message", "b")}, lastID: "1"}},
		{"empty id resets", 0, "id: 1\n\nid:\ndata: a\n\n", sseResult{events: []SSEEvent{ev("", "message", "a")}}},
		{"retry", 0, "retry: 1500\n\n", sseResult{retries: []int{1500}}},
		{"retry with event", 0, "retry: 10\ndata: a\n\n", sseResult{events: []SSEEvent{{Event: "message", Data: []byte("a"), Retry: 10, HasRetry: true}}, retries: []int{10}}},
		{"retry invalid", 0, "retry: 15a\n\nretry:\n\nretry: -1\n\nretry: 1 \n\nretry: 99999999999999999999999\n\n", sseResult{}},
		{"retry last wins", 0, "retry: 1\nretry: x\nretry: 2\n\n", sseResult{retries: []int{2}}},
		{"unknown fields ignored", 0, "foo: bar\nDATA: no\ndata : no\ndata: yes\n\n", sseResult{events: []SSEEvent{ev("", "message", "yes")}}},
		{"comments", 0, ": one\ndata: a\n: two\ndata: b\n\n:three\n", sseResult{events: []SSEEvent{ev("", "message", "a\nb")}}},
		{"blank lines only", 0, "\n\r\n\r\n\n", sseResult{}},
		{"incomplete block dropped", 0, "data: a\n\ndata: b\n", sseResult{events: []SSEEvent{ev("", "message", "a")}}},
		{"incomplete id not applied", 0, "id: 1\ndata: a\n\nid: 2\n", sseResult{events: []SSEEvent{ev("1", "message", "a")}, lastID: "1"}},
		{"BOM", 0, "\xEF\xBB\xBFdata: a\n\n", sseResult{events: []SSEEvent{ev("", "message", "a")}}},
		{"BOM before comment", 0, "\xEF\xBB\xBF: hi\ndata: a\n\n", sseResult{events: []SSEEvent{ev("", "message", "a")}}},
		{"second BOM not stripped", 0, "\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\ndata: b\n\n", sseResult{events: []SSEEvent{ev("", "message", "b")}}},
		{"block at limit", 10, "data: 012\n\n", sseResult{events: []SSEEvent{ev("", "message", "012")}}},
		{"block at limit cr", 10, "data: 012\r\r\n", sseResult{events: []SSEEvent{ev("", "message", "012")}}},
		{"block over limit", 10, "data: 0123\n\n", sseResult{err: ErrTooLarge}},
		{"block over limit crlf", 10, "data: 012\r\n\r\n", sseResult{err: ErrTooLarge}},
		{"block over limit no end yet", 10, "data: 01234", sseResult{err: ErrTooLarge}},
		{"block over limit across lines", 10, "data: 0\ndata: 1\n", sseResult{err: ErrTooLarge}},
		{"comments inside count", 10, "data: 0\n: 12\n\n", sseResult{err: ErrTooLarge}},
		{"leading comments do not count", 10, ": 12345678\n: 12345678\ndata: 012\n\n", sseResult{events: []SSEEvent{ev("", "message", "012")}}},
		{"comment over limit", 10, ": 123456789\n", sseResult{err: ErrTooLarge}},
		{"comment over limit no end yet", 10, ": 123456789", sseResult{err: ErrTooLarge}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, feedSSE(t, &SSEParser{MaxSize: tt.max}, []byte(tt.in)), "whole")
			assert.Equal(t, tt.want, feedSSE(t, &SSEParser{MaxSize: tt.max}, bytewise(tt.in)...), "byte by byte")
		})
	}
}

func TestSSEParserSteps(t *testing.T) {
	var p SSEParser

	// Comments are consumed as soon as they are complete, even while the
	// block after them is not.
	buf := []byte(": keep-alive\n: again\r\ndata: {\"a\"")
	e, n, ok, err := p.Next(buf)
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Equal(t, len(": keep-alive\n: again\r\n"), n)
	assert.Equal(t, SSEEvent{}, e)
	buf = buf[n:]

	_, n, ok, err = p.Next(buf)
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Zero(t, n, "incomplete block")

	buf = append(buf, ":1}\nid: 4\n\nretry: 20\n\n"...)
	e, n, ok, err = p.Next(buf)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, `{"a":1}`, string(e.Data))
	assert.True(t, aliases(e.Data, buf), "single-line data aliases the buffer")
	assert.Equal(t, "4", e.ID)
	assert.Equal(t, "message", e.Event)
	assert.False(t, e.HasRetry)
	buf = buf[n:]

	e, n, ok, err = p.Next(buf)
	require.NoError(t, err)
	assert.False(t, ok, "a retry block is not an event")
	assert.Equal(t, SSEEvent{ID: "4", Retry: 20, HasRetry: true}, e)
	assert.Equal(t, len(buf), n)
	assert.Equal(t, "4", p.LastEventID())

	multi := []byte("data: a\ndata: b\n\n")
	e, _, ok, err = p.Next(multi)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "a\nb", string(e.Data))
	assert.False(t, aliases(e.Data, multi), "joined data is held by the parser")

	p.Reset()
	assert.Empty(t, p.LastEventID())
	e, _, ok, err = p.Next([]byte("\xEF\xBB\xBFdata: c\n\n"))
	require.NoError(t, err)
	require.True(t, ok, "after Reset a byte order mark is skipped again")
	assert.Equal(t, "c", string(e.Data))
}

func TestSSERoundTrip(t *testing.T) {
	tests := []struct{ id, event, data string }{
		{"", "", `{"jsonrpc":"2.0","id":1,"result":{}}`},
		{"stream-1:42", "message", `{"jsonrpc":"2.0","method":"notifications/progress"}`},
		{"1", "custom", "line one\nline two\r\nline three\rfour"},
		{"2", "", ""},
		{"3", "", "\n"},
		{"4", "", " leading and trailing spaces "},
		{"5", "", ": not a comment\ndata: not a field\n\nnot a blank line"},
	}
	var stream []byte
	var want []SSEEvent
	for _, tt := range tests {
		stream = AppendSSEEvent(stream, tt.id, tt.event, []byte(tt.data))
		stream = AppendSSEComment(stream, "keep-alive")
		e := ev(tt.id, tt.event, strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(tt.data))
		if e.Event == "" {
			e.Event = "message"
		}
		want = append(want, e)
	}
	stream = AppendSSERetry(stream, 2500)
	got := feedSSE(t, &SSEParser{}, stream)
	require.NoError(t, got.err)
	assert.Equal(t, want, got.events)
	assert.Equal(t, []int{2500}, got.retries)
	assert.Equal(t, "5", got.lastID)
	assert.Equal(t, got, feedSSE(t, &SSEParser{}, bytewise(string(stream))...))
}

func TestSSEAllocs(t *testing.T) {
	event := AppendSSEEvent(nil, "", "", benchCall)
	withID := AppendSSEEvent(nil, "s-1", "message", benchCall)
	var p SSEParser
	tests := map[string][]byte{"no id": event, "unchanged id": withID}
	for name, buf := range tests {
		t.Run(name, func(t *testing.T) {
			allocs := testing.AllocsPerRun(200, func() {
				_, n, ok, err := p.Next(buf)
				if err != nil || !ok || n != len(buf) {
					t.Fatalf("n=%d ok=%v err=%v", n, ok, err)
				}
			})
			assert.Zero(t, allocs)
		})
	}
	out := make([]byte, 0, 1024)
	assert.Zero(t, testing.AllocsPerRun(200, func() {
		out = AppendSSEEvent(out[:0], "s-1", "message", benchCall)
	}))
}

func FuzzSSE(f *testing.F) {
	f.Add([]byte("id: s-0\ndata:\n\nretry: 1000\n\n: ping\nevent: message\ndata: "+string(benchCall)+"\n\n"), []byte{7, 0, 9, 30}, uint16(0))
	f.Add([]byte("\xEF\xBB\xBFdata: a\r\ndata: b\r\r\nid: 1\x00\rdata\r\r"), []byte{1, 2, 1, 1, 1, 1, 1, 1}, uint16(12))
	f.Add([]byte(": c\r\ndata: x\n\n: 1234567\r: 89\ndata: yyyyyyy\n\n"), []byte{4, 1, 10, 3}, uint16(10))
	f.Fuzz(func(t *testing.T, data, cuts []byte, limit uint16) {
		whole := feedSSE(t, &SSEParser{MaxSize: int(limit)}, data)
		split := feedSSE(t, &SSEParser{MaxSize: int(limit)}, splitAt(data, cuts)...)
		if whole.err != nil {
			whole.lastID, split.lastID = "", ""
		}
		require.Equal(t, whole, split)
		maxSize := (&SSEParser{MaxSize: int(limit)}).max()
		for _, e := range whole.events {
			require.LessOrEqual(t, len(e.Data), maxSize)
			require.NotEmpty(t, e.Event)
			require.NotContains(t, e.ID, "\x00")
		}
	})
}

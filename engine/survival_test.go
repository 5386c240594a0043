package engine_test

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
	"github.com/stretchr/testify/require"
)

// Invalid UTF-8 makes the decoder work on a corrected copy of the frame, so
// the decoded message does not alias the frame. The pool path must not
// assume it does (it panicked in rebase and took the process down).
func TestInvalidUTF8DoesNotAliasFrame(t *testing.T) {
	f := newFixture(t, engine.Options{})
	c := f.ready(t, `{}`)
	for _, tc := range []struct {
		name, frame, id string
	}{
		{"prompt argument", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"prompts/get\",\"params\":{\"name\":\"greet\",\"arguments\":{\"name\":\"a\xffb\"}}}", "1"},
		{"tool argument", "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"text\":\"\xc3\x28\"}}}", "2"},
		{"string id", "{\"jsonrpc\":\"2.0\",\"id\":\"\xfe\",\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"text\":\"x\"}}}", "\"\xef\xbf\xbd\""},
		{"method", "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/\xffcall\",\"params\":{}}", "4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := c.call(tc.frame)
			require.Equal(t, tc.id, string(m.ID))
		})
	}
	c.echo(5, "still serving")
}

// The same frames through HandleMessage, as Streamable HTTP serves them.
func TestInvalidUTF8HandleMessage(t *testing.T) {
	f := newFixture(t, engine.Options{})
	c := f.ready(t, `{}`)
	sink := newChanSink()
	serveFrame(t.Context(), f.srv.Conn(c.sess), []byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"prompts/get\",\"params\":{\"name\":\"greet\",\"arguments\":{\"name\":\"a\xffb\"}}}"), sink)
	m := sink.next(t)
	require.Equal(t, "1", string(m.ID))
	require.Nil(t, m.Error)
	var res mcp.GetPromptResult
	require.NoError(t, codec.Unmarshal(m.Result, &res), "%s", m.Result)
	require.Equal(t, "Hello a\uFFFDb", res.Messages[0].Content.Text)
}

// limitData is the data of a LimitError answer.
type limitData struct {
	Limit        string `json:"limit"`
	RetryAfterMs int64  `json:"retryAfterMs"`
}

func requireLimit(t *testing.T, m msg, id, limit string) limitData {
	t.Helper()
	requireError(t, m, id, codec.CodeServerBusy)
	var d limitData
	require.NoError(t, codec.Unmarshal(m.Error.Data, &d), "data %s", m.Error.Data)
	require.Equal(t, limit, d.Limit)
	return d
}

// One session pipelining slow calls takes at most MaxInflight workers; the
// others keep being served (defect 6: one session took every worker).
func TestMaxInflightPerSession(t *testing.T) {
	f := newFixture(t, engine.Options{Workers: 8, MaxInflight: 3})
	greedy := f.ready(t, `{}`)
	other := f.ready(t, `{}`)
	for i := range 3 {
		require.Empty(t, greedy.handle(slowCall(strconv.Itoa(i), "g")))
		f.startedTag(t)
	}
	for i := 3; i < 10; i++ {
		out := greedy.handle(slowCall(strconv.Itoa(i), "g"))
		require.NotEmpty(t, out, "call %d over the session's share must be refused at once", i)
		d := requireLimit(t, parse(t, out), strconv.Itoa(i), engine.LimitInflight)
		require.Positive(t, d.RetryAfterMs)
	}
	require.Equal(t, 3, greedy.sess.InFlight())
	other.echo(1, "served")
	// Fast answers are not in flight and are not refused.
	require.Nil(t, greedy.call(`{"jsonrpc":"2.0","id":"l","method":"tools/list"}`).Error)
	close(f.release)
	for range 3 {
		require.Equal(t, "released g", greedy.sink.next(t).text(t))
	}
	f.idle(t)
	greedy.echo(11, "served again")
}

func TestRateLimits(t *testing.T) {
	t.Run("session", func(t *testing.T) {
		f := newFixture(t, engine.Options{Rate: 0.001, RateBurst: 3})
		c := f.client(t)
		c.init(`{}`) // one token
		other := f.ready(t, `{}`)
		c.echo(1, "a")
		c.echo(2, "b")
		m := c.call(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
		d := requireLimit(t, m, "3", engine.LimitRate)
		require.Greater(t, d.RetryAfterMs, int64(1000), "one token per 1000 s")
		other.echo(1, "another session has its own budget")
	})
	t.Run("address", func(t *testing.T) {
		f := newFixture(t, engine.Options{RateIP: 0.001, RateBurst: 2})
		a1, a2, b := f.client(t), f.client(t), f.client(t)
		a1.sess.SetRemote(netip.MustParseAddr("127.0.0.2"))
		a2.sess.SetRemote(netip.MustParseAddr("127.0.0.2"))
		b.sess.SetRemote(netip.MustParseAddr("127.0.0.3"))
		require.Nil(t, a1.call(`{"jsonrpc":"2.0","id":1,"method":"ping"}`).Error)
		require.Nil(t, a2.call(`{"jsonrpc":"2.0","id":1,"method":"ping"}`).Error)
		requireLimit(t, a1.call(`{"jsonrpc":"2.0","id":2,"method":"ping"}`), "2", engine.LimitRateIP)
		requireLimit(t, a2.call(`{"jsonrpc":"2.0","id":2,"method":"ping"}`), "2", engine.LimitRateIP)
		require.Nil(t, b.call(`{"jsonrpc":"2.0","id":1,"method":"ping"}`).Error)
	})
	t.Run("HandleMessage refuses through a Refuser", func(t *testing.T) {
		f := newFixture(t, engine.Options{Rate: 0.001, RateBurst: 1})
		c := f.client(t)
		c.init(`{}`)
		r := &refuser{chanSink: newChanSink()}
		serveFrame(t.Context(), f.srv.Conn(c.sess), []byte(`{"jsonrpc":"2.0","id":7,"method":"ping"}`), r)
		require.Equal(t, "7", string(r.id))
		require.Equal(t, engine.LimitRate, r.err.Limit)
		require.Positive(t, r.err.RetryAfter)
		r.none(t, 10*time.Millisecond)
	})
}

type refuser struct {
	*chanSink
	id  []byte
	err *engine.LimitError
}

func (r *refuser) Refuse(id []byte, err *engine.LimitError) {
	r.id, r.err = append([]byte(nil), id...), err
}

// A panic outside any handler (here, a notification callback) is recovered,
// logged and counted; the message gets no answer, so its session is closed
// and the others are untouched.
func TestPanicOutsideHandlerClosesOnlyItsSession(t *testing.T) {
	f := newFixture(t, engine.Options{OnRootsListChanged: func(*session.Session) { panic("callback bug") }})
	c := f.ready(t, `{}`)
	other := f.ready(t, `{}`)
	out := c.handle(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	require.Empty(t, out)
	require.Equal(t, uint64(1), f.srv.Panics())
	require.Equal(t, session.StateClosed, c.sess.State())
	require.ErrorIs(t, context.Cause(c.sess.Context()), engine.ErrPanic)
	other.echo(1, "unaffected")

	// Through HandleMessage too.
	c2 := f.ready(t, `{}`)
	sink := newChanSink()
	serveFrame(t.Context(), f.srv.Conn(c2.sess), []byte(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`), sink)
	require.Equal(t, uint64(2), f.srv.Panics())
	require.Equal(t, session.StateClosed, c2.sess.State())
	other.echo(2, "unaffected")
}

func TestHandlerPanicCounted(t *testing.T) {
	f := newFixture(t, engine.Options{})
	c := f.ready(t, `{}`)
	sink := newChanSink()
	serveFrame(t.Context(), f.srv.Conn(c.sess), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"panic"}}`), sink)
	requireError(t, sink.next(t), "1", codec.CodeInternalError)
	require.Equal(t, uint64(1), f.srv.Panics())
	c.echo(2, "session lives on")
}

// A frame over BigMessage is decoded and served on the worker pool: the
// event loop's call returns at once with nothing, and the answer comes
// through the session's sink (defect 8: a 3.9 MiB echo held its loop for
// 150 ms).
func TestBigFrameLeavesTheLoop(t *testing.T) {
	f := newFixture(t, engine.Options{BigMessage: 1024})
	c := f.ready(t, `{}`)
	text := strings.Repeat("x", 4096)
	frame := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`, text)
	require.Empty(t, c.handle(frame), "a big frame is not served on the caller's goroutine")
	require.Equal(t, text, c.sink.next(t).text(t))

	// Cheap methods, malformed frames and notifications take the same road.
	pad := strings.Repeat(" ", 2048)
	require.Empty(t, c.handle(`{"jsonrpc":"2.0","id":2,"method":"ping"}`+pad))
	m := c.sink.next(t)
	require.Equal(t, "2", string(m.ID))
	require.Nil(t, m.Error)
	require.Empty(t, c.handle(`{"jsonrpc":"2.0","id":3,`+pad))
	requireError(t, c.sink.next(t), "null", codec.CodeParseError)
	require.Empty(t, c.handle(`{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`+pad))
	c.sink.none(t, 20*time.Millisecond)

	// Small frames are still answered inline.
	require.NotEmpty(t, c.handle(`{"jsonrpc":"2.0","id":4,"method":"ping"}`))
}

// A request's context ended by its transport just as its handler returns
// (an HTTP client gone at that moment) must not reach the request after it
// is released: the cancel callback called a nil function there, on a
// goroutine of its own, and ended the process.
func TestCancelAtReturnDoesNotTouchReleasedRequest(t *testing.T) {
	f := newFixture(t, engine.Options{})
	cancels := make(chan context.CancelFunc, 1)
	require.NoError(t, f.srv.Registry().AddTool(&mcp.Tool{Name: "cutoff"}, func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		(<-cancels)() // the transport's context ends as the handler returns
		return mcp.TextResult("done"), nil
	}))
	c := f.ready(t, `{}`) // after the tool is added: no list_changed notice
	for i := range 2000 {
		ctx, cancel := context.WithCancel(context.Background())
		cancels <- cancel
		sink := newChanSink()
		serveFrame(ctx, f.srv.Conn(c.sess), []byte(`{"jsonrpc":"2.0","id":`+strconv.Itoa(i)+`,"method":"tools/call","params":{"name":"cutoff"}}`), sink)
		// Other requests keep reusing the pooled request objects.
		c.echo(i, "next")
	}
}

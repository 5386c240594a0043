package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// trace records what middleware saw, in order.
type trace struct {
	mu  sync.Mutex
	log []string
}

func (tr *trace) add(s string) {
	tr.mu.Lock()
	tr.log = append(tr.log, s)
	tr.mu.Unlock()
}

func (tr *trace) take() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	l := tr.log
	tr.log = nil
	return l
}

// tracing is a middleware that records "name>method" before next and
// "<name method error?" after.
func (tr *trace) tracing(name string) engine.Middleware {
	return func(next engine.MethodHandler) engine.MethodHandler {
		return func(ctx context.Context, req *engine.Request) ([]byte, error) {
			tr.add(name + ">" + req.Method)
			res, err := next(ctx, req)
			after := "<" + name + " " + req.Method
			if err != nil {
				after += " error"
			}
			tr.add(after)
			return res, err
		}
	}
}

type ctxKey struct{}

// TestReceiveMiddlewareEveryPath checks that receiving middleware wraps the
// requests the engine answers itself, those served on the worker pool and
// NonBlocking tools on the event loop, in order, and that answers pass
// through unchanged.
func TestReceiveMiddlewareEveryPath(t *testing.T) {
	tr := &trace{}
	f := newFixture(t, engine.Options{Receive: []engine.Middleware{tr.tracing("a"), tr.tracing("b")}})
	require.NoError(t, handlers.AddTool(f.srv.Registry(), &mcp.Tool{Name: "inline"},
		func(context.Context, *handlers.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return mcp.TextResult("inline"), nil, nil
		}, handlers.ToolOptions{NonBlocking: true}))
	c := f.client(t)
	c.init(`{}`)
	assert.Equal(t, []string{"a>initialize", "b>initialize", "<b initialize", "<a initialize"}, tr.take(),
		"initialize is seen; notifications are not")

	cases := []struct {
		name, frame string
		check       func(t *testing.T, m msg)
	}{
		{"ping", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, func(t *testing.T, m msg) { assert.JSONEq(t, `{}`, string(m.Result)) }},
		{"tools/list", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, func(t *testing.T, m msg) { assert.Contains(t, string(m.Result), `"name":"echo"`) }},
		{"resources/read", `{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"mem://static"}}`, func(t *testing.T, m msg) {
			assert.Contains(t, string(m.Result), "static text")
		}},
		{"resources/read", `{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"mem://dynamic"}}`, func(t *testing.T, m msg) {
			assert.Contains(t, string(m.Result), "dynamic text")
		}},
		{"tools/call", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":"pooled"}}}`, func(t *testing.T, m msg) {
			assert.Equal(t, "pooled", m.text(t))
		}},
		{"tools/call", `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"inline"}}`, func(t *testing.T, m msg) { assert.Equal(t, "inline", m.text(t)) }},
		{"prompts/get", `{"jsonrpc":"2.0","id":7,"method":"prompts/get","params":{"name":"greet","arguments":{"name":"x"}}}`, func(t *testing.T, m msg) {
			assert.Contains(t, string(m.Result), "Hello x")
		}},
		{"logging/setLevel", `{"jsonrpc":"2.0","id":8,"method":"logging/setLevel","params":{"level":"bogus"}}`, func(t *testing.T, m msg) {
			requireError(t, m, "8", codec.CodeInvalidParams)
		}},
		{"no/such", `{"jsonrpc":"2.0","id":9,"method":"no/such"}`, func(t *testing.T, m msg) { requireError(t, m, "9", codec.CodeMethodNotFound) }},
	}
	for _, tc := range cases {
		m := c.call(tc.frame)
		tc.check(t, m)
		f.idle(t)
		after := "<b " + tc.name
		if m.Error != nil {
			after += " error"
		}
		assert.Equal(t, []string{"a>" + tc.name, "b>" + tc.name, after, strings.Replace(after, "<b", "<a", 1)}, tr.take(), tc.frame)
	}

	// A session not yet initialized is refused before dispatch.
	c2 := f.client(t)
	requireError(t, c2.call(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), "1", codec.CodeInvalidRequest)
	assert.Empty(t, tr.take())

	// HandleMessage with a Replier (Streamable HTTP) goes through the same chain.
	reply := newChanSink()
	serveFrame(context.Background(), f.srv.Conn(c.sess), []byte(`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"echo","arguments":{"text":"sync"}}}`), reply)
	assert.Equal(t, "sync", reply.next(t).text(t))
	serveFrame(context.Background(), f.srv.Conn(c.sess), []byte(`{"jsonrpc":"2.0","id":11,"method":"ping"}`), reply)
	assert.JSONEq(t, `{}`, string(reply.next(t).Result))
	assert.Len(t, tr.take(), 8)
}

// TestReceiveMiddlewareChanges checks what a middleware may do: refuse,
// replace the result, rewrite params, and hand the handler a context value.
func TestReceiveMiddlewareChanges(t *testing.T) {
	mw := func(next engine.MethodHandler) engine.MethodHandler {
		return func(ctx context.Context, req *engine.Request) ([]byte, error) {
			switch {
			case strings.Contains(string(req.Params), `"forbidden"`):
				return nil, &codec.Error{Code: codec.CodeInvalidRequest, Message: "refused by middleware"}
			case strings.Contains(string(req.Params), `"plain error"`):
				return nil, errors.New("plain")
			case strings.Contains(string(req.Params), `"rewrite"`):
				req.Params = []byte(strings.Replace(string(req.Params), `"rewrite"`, `"rewritten"`, 1))
			case req.Method == mcp.MethodPing:
				return []byte(`{"pong":true}`), nil
			}
			res, err := next(context.WithValue(ctx, ctxKey{}, "from middleware"), req)
			if err == nil && req.Method == mcp.MethodToolsList {
				return []byte(`{"tools":[]}`), nil
			}
			return res, err
		}
	}
	f := newFixture(t, engine.Options{Receive: []engine.Middleware{mw}})
	r := f.srv.Registry()
	for _, nb := range []bool{false, true} {
		name := "ctx"
		if nb {
			name = "ctx-inline"
		}
		require.NoError(t, handlers.AddTool(r, &mcp.Tool{Name: name},
			func(ctx context.Context, _ *handlers.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
				v, _ := ctx.Value(ctxKey{}).(string)
				return mcp.TextResult(v), nil, nil
			}, handlers.ToolOptions{NonBlocking: nb}))
	}
	c := f.ready(t, `{}`)

	requireError(t, c.call(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"forbidden"}}}`), "1", codec.CodeInvalidRequest)
	requireError(t, c.call(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"plain error"}}}`), "2", codec.CodeInternalError)
	assert.Equal(t, "rewritten", c.call(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"rewrite"}}}`).text(t))
	assert.JSONEq(t, `{"pong":true}`, string(c.call(`{"jsonrpc":"2.0","id":4,"method":"ping"}`).Result))
	assert.JSONEq(t, `{"tools":[]}`, string(c.call(`{"jsonrpc":"2.0","id":5,"method":"tools/list"}`).Result))
	assert.Equal(t, "from middleware", c.call(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"ctx"}}`).text(t))
	assert.Equal(t, "from middleware", c.call(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ctx-inline"}}`).text(t))
	requireError(t, c.call(`{"jsonrpc":"2.0","id":8,"method":"resources/read","params":{"uri":"forbidden"}}`), "8", codec.CodeInvalidRequest)

	// Several frames answered into one event-loop output keep their order.
	out := f.srv.Conn(c.sess).HandleFrame([]byte(`{"jsonrpc":"2.0","id":9,"method":"ping"}`), nil)
	out = f.srv.Conn(c.sess).HandleFrame([]byte(`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"ctx-inline"}}`), out)
	lines := strings.SplitAfter(string(out), "}}")
	require.GreaterOrEqual(t, len(lines), 2, "%s", out)
	assert.Equal(t, "9", string(parse(t, []byte(lines[0])).ID))
}

// TestInlinePanicKeepsEarlierAnswers checks that a NonBlocking tool that
// panics on the event loop is answered after, not instead of, the answers
// already in the loop's output.
func TestInlinePanicKeepsEarlierAnswers(t *testing.T) {
	f := newFixture(t, engine.Options{})
	require.NoError(t, f.srv.Registry().AddTool(&mcp.Tool{Name: "inline-panic"}, func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		panic("boom")
	}, handlers.ToolOptions{NonBlocking: true}))
	c := f.ready(t, `{}`)
	out := f.srv.Conn(c.sess).HandleFrame([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`), nil)
	first := string(out)
	out = f.srv.Conn(c.sess).HandleFrame([]byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"inline-panic"}}`), out)
	require.True(t, strings.HasPrefix(string(out), first), "earlier answer lost: %s", out)
	requireError(t, parse(t, out[len(first):]), "2", codec.CodeInternalError)
	assert.EqualValues(t, 1, f.srv.Panics())
}

// TestSendMiddleware checks that sending middleware sees notifications and
// server-to-client requests, and may drop or fail them.
func TestSendMiddleware(t *testing.T) {
	tr := &trace{}
	mw := func(next engine.Sender) engine.Sender {
		return func(ctx context.Context, out *engine.Outbound) error {
			require.NotNil(t, out.Session)
			require.Contains(t, string(out.Message.B), `"method":"`+out.Method+`"`)
			tr.add(out.Method)
			switch {
			case out.Method == mcp.NotificationProgress && strings.Contains(string(out.Message.B), `"progress":2`):
				return nil // dropped
			case out.Method == mcp.NotificationMessage && strings.Contains(string(out.Message.B), `"level":"error"`):
				return errors.New("refused by middleware")
			}
			return next(ctx, out)
		}
	}
	f := newFixture(t, engine.Options{Send: []engine.SendMiddleware{mw}})
	c := f.ready(t, `{"sampling":{}}`)

	c.handle(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"progress","_meta":{"progressToken":"p"}}}`)
	for _, want := range []string{`"progress":1`, `"progress":3`} {
		m := c.sink.next(t)
		assert.Equal(t, mcp.NotificationProgress, m.Method)
		assert.Contains(t, string(m.Params), want)
	}
	assert.Equal(t, "done", c.sink.next(t).text(t))
	assert.Equal(t, []string{mcp.NotificationProgress, mcp.NotificationProgress, mcp.NotificationProgress}, tr.take())

	c.handle(`{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}`)
	c.handle(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"log"}}`)
	for range 3 {
		assert.Equal(t, mcp.NotificationMessage, c.sink.next(t).Method)
	}
	m := c.sink.next(t)
	assert.Equal(t, "3", string(m.ID))
	var res mcp.CallToolResult
	require.NoError(t, codec.Unmarshal(m.Result, &res))
	assert.True(t, res.IsError)
	assert.Contains(t, res.Content[0].Text, "refused by middleware", "the handler sees the send fail")
	tr.take()

	// A server-to-client request.
	c.handle(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"peer","arguments":{"kind":"sampling"}}}`)
	req := c.sink.next(t)
	assert.Equal(t, mcp.MethodSamplingCreateMessage, req.Method)
	c.notify(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"role":"assistant","content":{"type":"text","text":"hi"},"model":"m"}}`)
	assert.Equal(t, "model m", c.sink.next(t).text(t))
	assert.Equal(t, []string{mcp.MethodSamplingCreateMessage}, tr.take())

	// A list change, sent by the engine to every session.
	require.NoError(t, f.srv.Registry().AddTool(&mcp.Tool{Name: "late"}, noopTool))
	assert.Equal(t, mcp.NotificationToolListChanged, c.sink.next(t).Method)
	assert.Equal(t, []string{mcp.NotificationToolListChanged}, tr.take())
}

// passThrough is the cheapest middleware: it calls next.
func passThrough(next engine.MethodHandler) engine.MethodHandler {
	return func(ctx context.Context, req *engine.Request) ([]byte, error) { return next(ctx, req) }
}

// BenchmarkHandleFramePingMiddleware and
// BenchmarkHandleFrameInlineEchoMiddleware measure what one pass-through
// middleware costs on the event loop (compare BenchmarkHandleFramePing and
// BenchmarkHandleFrameInlineEcho).
func BenchmarkHandleFramePingMiddleware(b *testing.B) {
	f := newFixture(b, engine.Options{Receive: []engine.Middleware{passThrough}})
	c := f.ready(b, `{}`)
	in := []byte(`{"jsonrpc":"2.0","id":12345,"method":"ping"}`)
	out := make([]byte, 0, 64<<10)
	b.ReportAllocs()
	for b.Loop() {
		out = f.srv.Conn(c.sess).HandleFrame(in, out[:0])
	}
	if m := parse(b, out); m.Error != nil {
		b.Fatalf("error answer: %+v", m.Error)
	}
}

func BenchmarkHandleFrameInlineEchoMiddleware(b *testing.B) {
	f := newFixture(b, engine.Options{Receive: []engine.Middleware{passThrough}})
	require.NoError(b, handlers.AddTool(f.srv.Registry(), &mcp.Tool{Name: "iecho", InputSchema: codec.RawJSON(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)},
		func(_ context.Context, _ *handlers.CallToolRequest, in struct {
			Text string `json:"text"`
		}) (*mcp.CallToolResult, any, error) {
			return mcp.TextResult(in.Text), nil, nil
		}, handlers.ToolOptions{NonBlocking: true}))
	c := f.ready(b, `{}`)
	in := []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"iecho","arguments":{"text":"hello world"}}}`)
	out := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		out = f.srv.Conn(c.sess).HandleFrame(in, out[:0])
	}
	if len(out) == 0 {
		b.Fatal("no inline answer")
	}
}

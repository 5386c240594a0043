package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
	"github.com/stretchr/testify/require"
)

// wait bounds every blocking step of these tests.
const wait = 5 * time.Second

// msg is any JSON-RPC message as a test reads it.
type msg struct {
	ID     codec.RawJSON `json:"id"`
	Method string        `json:"method"`
	Params codec.RawJSON `json:"params"`
	Result codec.RawJSON `json:"result"`
	Error  *codec.Error  `json:"error"`
}

func parse(t testing.TB, b []byte) msg {
	t.Helper()
	var m msg
	require.NoError(t, codec.Unmarshal(b, &m), "not a JSON-RPC message: %s", b)
	return m
}

// text returns the text of the first content block of a tools/call result.
func (m msg) text(t testing.TB) string {
	t.Helper()
	require.Nil(t, m.Error, "error answer: %+v", m.Error)
	var r mcp.CallToolResult
	require.NoError(t, codec.Unmarshal(m.Result, &r), "result %s", m.Result)
	require.NotEmpty(t, r.Content, "result %s", m.Result)
	return r.Content[0].Text
}

// chanSink is a session.Sink that hands copies of what it is sent to a
// channel.
type chanSink struct {
	ch     chan []byte
	closed atomic.Bool
}

func newChanSink() *chanSink { return &chanSink{ch: make(chan []byte, 4096)} }

func (s *chanSink) Send(b *codec.Buffer) error {
	if s.closed.Load() {
		codec.PutBuffer(b)
		return session.ErrClosed
	}
	c := append([]byte(nil), b.B...)
	codec.PutBuffer(b)
	select {
	case s.ch <- c:
		return nil
	default:
		return session.ErrSlowConsumer
	}
}

// next returns the next message sent, failing after wait.
func (s *chanSink) next(t testing.TB) msg {
	t.Helper()
	select {
	case b := <-s.ch:
		return parse(t, b)
	case <-time.After(wait):
		t.Fatal("no message sent")
	}
	return msg{}
}

// none asserts nothing is sent for d.
func (s *chanSink) none(t testing.TB, d time.Duration) {
	t.Helper()
	select {
	case b := <-s.ch:
		t.Fatalf("unexpected message: %s", b)
	case <-time.After(d):
	}
}

// fixture is a server with the test tools registered and the hooks they
// report through.
type fixture struct {
	srv *engine.Server
	// started receives the id of each slow call when its handler runs.
	started chan string
	// release ends every slow call waiting.
	release chan struct{}
	// causes receives the cause of each slow call's ctx ending.
	causes chan error
}

func newFixture(t testing.TB, opts engine.Options) *fixture {
	t.Helper()
	f := &fixture{
		srv:     engine.New(opts),
		started: make(chan string, 1024),
		release: make(chan struct{}),
		causes:  make(chan error, 1024),
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		_ = f.srv.Shutdown(ctx)
	})
	r := f.srv.Registry()
	must := func(err error) { t.Helper(); require.NoError(t, err) }
	// echo is a typed tool written as the engine's zero-allocation path
	// wants (BenchmarkToolsCallEcho): pooled arguments, the request's own
	// result.
	must(handlers.AddTool(r, &mcp.Tool{Name: "echo", InputSchema: codec.RawJSON(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)},
		func(_ context.Context, req *handlers.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
			return req.TextResult(in.Text), nil, nil
		}))
	must(r.AddTool(&mcp.Tool{Name: "slow", InputSchema: codec.RawJSON(`{"type":"object","properties":{"tag":{"type":"string"}}}`)},
		func(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct {
				Tag string `json:"tag"`
			}
			_ = codec.Unmarshal(req.Params.Arguments, &in)
			f.started <- in.Tag
			select {
			case <-ctx.Done():
				f.causes <- context.Cause(ctx)
				return nil, context.Cause(ctx)
			case <-f.release:
				return mcp.TextResult("released " + in.Tag), nil
			}
		}))
	must(r.AddTool(&mcp.Tool{Name: "panic"}, func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		panic("boom")
	}))
	must(r.AddTool(&mcp.Tool{Name: "progress"}, func(_ context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		for i := 1; i <= 3; i++ {
			if err := req.Peer.Progress(float64(i), 3, "step "+strconv.Itoa(i)); err != nil {
				return nil, err
			}
		}
		return mcp.TextResult("done"), nil
	}))
	must(r.AddTool(&mcp.Tool{Name: "log"}, func(_ context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		for _, level := range []string{"debug", "info", "warning", "error"} {
			if err := req.Peer.Log(level, "test", map[string]string{"level": level}); err != nil {
				return nil, err
			}
		}
		if err := req.Peer.Log("loud", "test", "x"); err == nil {
			return nil, errors.New("an unknown level was accepted")
		}
		return mcp.TextResult("logged"), nil
	}))
	must(r.AddTool(&mcp.Tool{Name: "peer", InputSchema: codec.RawJSON(`{"type":"object","properties":{"kind":{"type":"string"}},"required":["kind"]}`)},
		func(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct {
				Kind string `json:"kind"`
			}
			if err := codec.Unmarshal(req.Params.Arguments, &in); err != nil {
				return nil, err
			}
			var out string
			var err error
			switch in.Kind {
			case "sampling":
				var res *mcp.CreateMessageResult
				res, err = req.Peer.CreateMessage(ctx, &mcp.CreateMessageParams{
					Messages:  []mcp.SamplingMessage{{Role: "user", Content: codec.RawJSON(`{"type":"text","text":"hi"}`)}},
					MaxTokens: 10,
				})
				if err == nil {
					out = "model " + res.Model
				}
			case "elicitation":
				var res *mcp.ElicitResult
				res, err = req.Peer.Elicit(ctx, &mcp.ElicitParams{Message: "name?", RequestedSchema: codec.RawJSON(`{"type":"object","properties":{}}`)})
				if err == nil {
					out = "action " + res.Action
				}
			case "roots":
				var res *mcp.ListRootsResult
				res, err = req.Peer.ListRoots(ctx)
				if err == nil {
					uris := make([]string, len(res.Roots))
					for i, r := range res.Roots {
						uris[i] = r.URI
					}
					out = "roots " + strings.Join(uris, ",")
				}
			default:
				return nil, fmt.Errorf("unknown kind %q", in.Kind)
			}
			if err != nil {
				var ce *codec.Error
				switch {
				case errors.Is(err, session.ErrTimeout):
					out = "timeout"
				case errors.Is(err, engine.ErrCapability):
					out = "no capability: " + err.Error()
				case errors.As(err, &ce):
					out = "client error " + strconv.Itoa(ce.Code) + " " + ce.Message
				default:
					out = "error: " + err.Error()
				}
			}
			return mcp.TextResult(out), nil
		}))
	must(r.AddStaticResource(&mcp.Resource{URI: "mem://static", Name: "static", MimeType: "text/plain"},
		mcp.ResourceContents{URI: "mem://static", MimeType: "text/plain", Text: "static text"}))
	must(r.AddResource(&mcp.Resource{URI: "mem://dynamic", Name: "dynamic"},
		func(_ context.Context, req *handlers.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: req.Params.URI, Text: "dynamic text"}}}, nil
		}))
	must(r.AddPrompt(&mcp.Prompt{Name: "greet", Arguments: []mcp.PromptArgument{{Name: "name", Required: true}}},
		func(_ context.Context, req *handlers.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []mcp.PromptMessage{{Role: "user",
				Content: mcp.Content{Type: mcp.ContentText, Text: "Hello " + req.Params.Arguments["name"]}}}}, nil
		}))
	return f
}

// startedTag waits for a slow call to start and returns its tag.
func (f *fixture) startedTag(t testing.TB) string {
	t.Helper()
	select {
	case tag := <-f.started:
		return tag
	case <-time.After(wait):
		t.Fatal("slow handler did not start")
	}
	return ""
}

// cause waits for a slow call's ctx to end and returns its cause.
func (f *fixture) cause(t testing.TB) error {
	t.Helper()
	select {
	case err := <-f.causes:
		return err
	case <-time.After(wait):
		t.Fatal("slow handler's context did not end")
	}
	return nil
}

// idle waits until no request is being served.
func (f *fixture) idle(t testing.TB) {
	t.Helper()
	require.Eventually(t, func() bool { return f.srv.Active() == 0 }, wait, time.Millisecond)
}

// client is one session of the fixture's server, driven through HandleFrame
// as an event-loop transport would.
type client struct {
	t    testing.TB
	srv  *engine.Server
	sess *session.Session
	sink *chanSink
}

func (f *fixture) client(t testing.TB) *client {
	sink := newChanSink()
	return &client{t: t, srv: f.srv, sess: f.srv.Open(sink).Session(), sink: sink}
}

// handle runs one frame and returns the immediate output.
func (c *client) handle(frame string) []byte {
	return c.srv.Conn(c.sess).HandleFrame([]byte(frame), nil)
}

// call sends a request frame and returns its answer, immediate or from the
// worker pool.
func (c *client) call(frame string) msg {
	c.t.Helper()
	if out := c.handle(frame); len(out) > 0 {
		return parse(c.t, out)
	}
	return c.sink.next(c.t)
}

// notify sends a notification (or a response), which has no answer.
func (c *client) notify(frame string) {
	c.t.Helper()
	require.Empty(c.t, string(c.handle(frame)), "answer to %s", frame)
}

const initFrame = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":%s,"clientInfo":{"name":"t","version":"1"}}}`

// init initializes the session declaring caps (a JSON object).
func (c *client) init(caps string) {
	c.t.Helper()
	m := c.call(fmt.Sprintf(initFrame, caps))
	require.Nil(c.t, m.Error, "initialize: %+v", m.Error)
	c.notify(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	require.Equal(c.t, session.StateReady, c.sess.State())
}

// ready returns an initialized client.
func (f *fixture) ready(t testing.TB, caps string) *client {
	c := f.client(t)
	c.init(caps)
	return c
}

// echo checks the session serves tools/call.
func (c *client) echo(id int, text string) {
	c.t.Helper()
	m := c.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`, id, text))
	require.Equal(c.t, strconv.Itoa(id), string(m.ID))
	require.Equal(c.t, text, m.text(c.t))
}

func requireError(t testing.TB, m msg, id string, code int) {
	t.Helper()
	require.NotNil(t, m.Error, "want error %d, got result %s", code, m.Result)
	require.Equal(t, code, m.Error.Code, "message %q", m.Error.Message)
	require.Equal(t, id, string(m.ID))
	require.Nil(t, m.Result)
}

// serveFrame serves frame as a transport with a goroutine per request does
// (Streamable HTTP): it decodes it, hands it to HandleMessage, and waits
// for a queued request's Final. Every answer and message goes to reply,
// whose Refuse is used when it is a Refuser. When ctx ends first, the
// request is cancelled with ctx's cause (a client gone). It returns the
// message's kind, KindInvalid when the frame does not decode.
func serveFrame(ctx context.Context, conn engine.Conn, frame []byte, reply session.Sink) codec.Kind {
	var m codec.Message
	if err := codec.Decode(frame, &m); err != nil {
		b := codec.GetBuffer()
		b.B = codec.AppendDecodeError(b.B, &m, err)
		if len(b.B) > 0 {
			_ = reply.Send(b)
		}
		return codec.KindInvalid
	}
	w := &waiter{Sink: reply, done: make(chan struct{})}
	var sink session.Sink = w
	if r, ok := reply.(engine.Refuser); ok {
		sink = refusingWaiter{w, r}
	}
	b := codec.GetBuffer()
	out, queued := conn.HandleMessage(&m, frame, b.B, sink)
	b.B = out
	if len(out) > 0 {
		_ = reply.Send(b)
	} else {
		codec.PutBuffer(b)
	}
	if queued {
		select {
		case <-w.done:
		case <-ctx.Done():
			conn.Session().CancelRequest(m.ID, context.Cause(ctx))
			<-w.done
		}
	}
	return m.Kind
}

// waiter is a Replier passing everything to its Sink and closing done on
// Final.
type waiter struct {
	session.Sink
	done chan struct{}
}

func (w *waiter) Final(b *codec.Buffer) {
	if b != nil {
		_ = w.Sink.Send(b)
	}
	close(w.done)
}

type refusingWaiter struct {
	*waiter
	r engine.Refuser
}

func (w refusingWaiter) Refuse(id []byte, err *engine.LimitError) { w.r.Refuse(id, err) }

type echoArgs struct {
	Text string `json:"text"`
}

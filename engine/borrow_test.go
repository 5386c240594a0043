package engine_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/handlers/builtin"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/require"
)

// A tool's arguments alias the request's buffer, which the engine reuses:
// a handler that keeps them must copy them (handlers.CallToolRequest's
// Lifetime). The demo's note store does; what it stored survives many
// later calls through the same pooled requests.
func TestKeptArgumentsSurviveBufferReuse(t *testing.T) {
	// One P: a request released by a worker is the next one taken (pools
	// keep a private item per P), so the buffer is surely reused.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	f := newFixture(t, engine.Options{})
	require.NoError(t, builtin.Install("demo", f.srv.Registry(), builtin.Env{}))
	// The demo's echo runs inline; this one takes the worker pool, and so
	// the pooled requests' buffers.
	require.NoError(t, handlers.AddTool(f.srv.Registry(), &mcp.Tool{Name: "echo"},
		func(_ context.Context, req *handlers.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
			return req.TextResult(in.Text), nil, nil
		}))
	c := f.ready(t, `{}`)
	m := c.call(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"note_write","arguments":{"text":"the original text","name":"kept"}}}`)
	require.Nil(t, m.Error)
	for i := range 200 { // reuse every pooled request and buffer
		c.echo(i+2, fmt.Sprintf("overwrite%03d", i)) // shorter frames: the same buffer
	}
	m = c.call(`{"jsonrpc":"2.0","id":999,"method":"resources/read","params":{"uri":"mem://notes/kept"}}`)
	require.Nil(t, m.Error)
	require.Contains(t, string(m.Result), "the original text")
}

// A handler may return a result holding its arguments (an echo): the
// result is encoded before the request is reused.
func TestResultMayHoldArguments(t *testing.T) {
	f := newFixture(t, engine.Options{})
	require.NoError(t, handlers.AddTool(f.srv.Registry(), &mcp.Tool{Name: "echo_struct"},
		func(_ context.Context, req *handlers.CallToolRequest, in echoArgs) (*mcp.CallToolResult, echoArgs, error) {
			return nil, in, nil
		}))
	c := f.ready(t, `{}`)
	for i := range 50 {
		text := fmt.Sprintf("text %d", i)
		m := c.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo_struct","arguments":{"text":%q}}}`, i, text))
		require.Nil(t, m.Error)
		require.Contains(t, string(m.Result), `"structuredContent":{"text":"`+text+`"}`)
	}
}

// blockingSink holds each Send until released, reporting it has begun.
type blockingSink struct {
	sending chan struct{}
	release chan struct{}
}

func (s *blockingSink) Send(b *codec.Buffer) error {
	s.sending <- struct{}{}
	<-s.release
	codec.PutBuffer(b)
	return nil
}

// A request counts in its session's InFlight until its answer is handed
// to the transport, though its id is free for reuse as soon as the handler
// returns: stdio closes a session whose input ended once InFlight is 0,
// and an answer still on its way was lost.
func TestInFlightUntilAnswered(t *testing.T) {
	f := newFixture(t, engine.Options{})
	sink := &blockingSink{sending: make(chan struct{}), release: make(chan struct{})}
	sess := f.srv.Open(sink).Session()
	conn := f.srv.Conn(sess)
	require.Nil(t, parse(t, conn.HandleFrame([]byte(fmt.Sprintf(initFrame, `{}`)), nil)).Error)
	conn.HandleFrame([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), nil)
	require.Empty(t, conn.HandleFrame([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a"}}}`), nil))
	<-sink.sending
	require.Equal(t, 1, sess.InFlight(), "the answer is not sent yet")
	// The id is free again: a client may reuse it once it has the answer.
	require.Empty(t, conn.HandleFrame([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"b"}}}`), nil))
	sink.release <- struct{}{}
	<-sink.sending
	sink.release <- struct{}{}
	require.Eventually(t, func() bool { return sess.InFlight() == 0 }, wait, time.Millisecond)
}

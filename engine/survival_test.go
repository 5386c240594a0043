package engine_test

import (
	"testing"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/mcp"
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

// The same frames through ServeFrame, the goroutine transports' entry.
func TestInvalidUTF8ServeFrame(t *testing.T) {
	f := newFixture(t, engine.Options{})
	c := f.ready(t, `{}`)
	sink := newChanSink()
	f.srv.ServeFrame(t.Context(), c.sess, []byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"prompts/get\",\"params\":{\"name\":\"greet\",\"arguments\":{\"name\":\"a\xffb\"}}}"), sink)
	m := sink.next(t)
	require.Equal(t, "1", string(m.ID))
	require.Nil(t, m.Error)
	var res mcp.GetPromptResult
	require.NoError(t, codec.Unmarshal(m.Result, &res), "%s", m.Result)
	require.Equal(t, "Hello a\uFFFDb", res.Messages[0].Content.Text)
}

package tcp_test

import (
	"testing"

	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/transport/tcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const meta26 = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// TestStatelessOverTCP serves the stateless revision on a connection that
// never initializes, pipelined, beside a session-based connection, and
// keeps a subscriptions/listen stream on the connection until it closes.
func TestStatelessOverTCP(t *testing.T) {
	s := start(t, engine.Options{ListChangedDelay: 1}, tcp.Options{})
	legacy := dial(t, s.addr)
	legacy.init(t)

	c := dial(t, s.addr)
	require.NoError(t, c.write(
		`{"jsonrpc":"2.0","id":"sub","method":"subscriptions/listen","params":{"notifications":{"resourcesListChanged":true},`+meta26+`}}`,
		`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+meta26+`}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"one"},`+meta26+`}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"two"},`+meta26+`}}`,
		`{"jsonrpc":"2.0","id":4,"method":"logging/setLevel","params":{"level":"debug",`+meta26+`}}`,
	))
	got := map[string]msg{}
	for len(got) < 5 {
		m, err := c.read()
		require.NoError(t, err)
		key := string(m.ID)
		if m.Method != "" {
			key = m.Method
		}
		got[key] = m
	}
	assert.Contains(t, got, mcp.NotificationSubscriptionsAcked)
	assert.Contains(t, string(got["1"].Result), `"supportedVersions"`)
	for id, want := range map[string]string{"2": "one", "3": "two"} {
		text, err := got[id].text()
		require.NoError(t, err)
		assert.Equal(t, want, text)
	}
	require.NotNil(t, got["4"].Error)
	assert.Equal(t, -32601, got["4"].Error.Code)

	legacy.echo(t, 9, "sessions unaffected")
}

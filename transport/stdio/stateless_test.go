package stdio_test

import (
	"context"
	"strings"
	"testing"

	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/transport/stdio"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const meta26 = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"stdio-test","version":"1"}}`

// TestStatelessOverStdio serves the stateless revision on a pipe that never
// initializes: the server/discover probe, tools, a subscriptions/listen
// stream ended by notifications/cancelled, and a clean end of input.
func TestStatelessOverStdio(t *testing.T) {
	eng := newEngine(t, engine.Options{ListChangedDelay: 1})
	p := serve(t, eng, stdio.Options{})

	p.write(t, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+meta26+`}}`+"\n")
	m := p.next(t)
	require.Nil(t, m.Error)
	assert.Contains(t, string(m.Result), `"supportedVersions":["2026-07-28"`)

	p.write(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"pecho","arguments":{"text":"hi"},`+meta26+`}}`+"\n")
	m = p.next(t)
	assert.Equal(t, "hi", m.text(t))
	assert.Contains(t, string(m.Result), `"resultType":"complete"`)

	p.write(t, `{"jsonrpc":"2.0","id":3,"method":"ping","params":{`+meta26+`}}`+"\n")
	m = p.next(t)
	require.NotNil(t, m.Error)
	assert.Equal(t, -32601, m.Error.Code)

	p.write(t, `{"jsonrpc":"2.0","id":"sub","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},`+meta26+`}}`+"\n")
	m = p.next(t)
	assert.Equal(t, mcp.NotificationSubscriptionsAcked, m.Method)
	require.NoError(t, eng.Registry().AddTool(&mcp.Tool{Name: "added"}, func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.TextResult("added"), nil
	}))
	m = p.next(t)
	assert.Equal(t, mcp.NotificationToolListChanged, m.Method)

	p.write(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"sub"}}`+"\n")
	p.in.Close()
	require.NoError(t, p.end(t))
}

// TestInitializeScopesStdio: after initialize the process speaks the
// session revisions; a request naming 2026-07-28 is served as the
// session's.
func TestInitializeScopesStdio(t *testing.T) {
	eng := newEngine(t, engine.Options{})
	p := serve(t, eng, stdio.Options{})
	p.init(t)
	p.write(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"pecho","arguments":{"text":"hi"},`+meta26+`}}`+"\n")
	m := p.next(t)
	assert.Equal(t, "hi", m.text(t))
	assert.False(t, strings.Contains(string(m.Result), "resultType"))
	p.in.Close()
	require.NoError(t, p.end(t))
}

// TestListenEndsWithInput: a subscriptions/listen stream does not hold a
// pipe open once its input ends.
func TestListenEndsWithInput(t *testing.T) {
	eng := newEngine(t, engine.Options{})
	p := serve(t, eng, stdio.Options{})
	p.write(t, `{"jsonrpc":"2.0","id":"sub","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},`+meta26+`}}`+"\n")
	assert.Equal(t, mcp.NotificationSubscriptionsAcked, p.next(t).Method)
	p.in.Close()
	require.NoError(t, p.end(t))
}

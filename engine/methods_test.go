package engine_test

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/assert"
)

// anyParams get past the params checks of every method far enough to be
// routed (they may still be refused for their content, never as an
// unknown method).
const anyParams = `"name":"echo","arguments":{"text":"x"},"uri":"demo://x","taskId":"t1","level":"info",` +
	`"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"},` +
	`"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":"b"},"notifications":{"toolsListChanged":true}`

// TestRoutingPerRevision: each method of the table is served in the
// revisions its row names and answered -32601 in every other, on a
// session of each revision and statelessly, and so is a method the
// table does not hold.
func TestRoutingPerRevision(t *testing.T) {
	names := []string{"x/unknown"}
	for i := range engine.NumMethods {
		names = append(names, engine.MethodLabel(i))
	}
	served := func(t *testing.T, name string, m msg) bool {
		t.Helper()
		if m.Error == nil {
			return true
		}
		assert.NotEqual(t, codec.CodeInternalError, m.Error.Code, "%s: %s", name, m.Error.Message)
		return m.Error.Code != codec.CodeMethodNotFound
	}
	for _, v := range mcp.SessionVersions {
		t.Run(v, func(t *testing.T) {
			f := newFixture(t, engine.Options{})
			c := f.client(t)
			m := c.call(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + v + `","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
			assert.Nil(t, m.Error)
			c.notify(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			n := 0
			for i, name := range names {
				got := c.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{%s}}`, i+1, name, anyParams))
				assert.Equal(t, strconv.Itoa(i+1), string(got.ID))
				if served(t, name, got) {
					n++
				}
				assert.Equal(t, sessionServes(name, v), served(t, name, got), "%s in %s: %+v", name, v, got.Error)
			}
			assert.GreaterOrEqual(t, n, 13)
		})
	}
	t.Run(mcp.Version20260728, func(t *testing.T) {
		f := newFixture(t, engine.Options{})
		n := 0
		for i, name := range names {
			// A stateless exchange each, as Streamable HTTP serves a POST.
			c := &client{t: t, srv: f.srv, sink: newChanSink()}
			c.sess = f.srv.OpenStateless(c.sink).Session()
			got := c.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{%s,%s}}`, i+1, name, anyParams, meta26(`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`)))
			if got.Method == mcp.NotificationSubscriptionsAcked { // a listen stream opened
				got = msg{ID: got.ID}
			} else {
				assert.Equal(t, strconv.Itoa(i+1), string(got.ID))
			}
			f.srv.Conn(c.sess).Close(nil)
			if served(t, name, got) {
				n++
			}
			assert.Equal(t, statelessServes(name), served(t, name, got), "%s: %+v", name, got.Error)
		}
		assert.Equal(t, 13, n)
	})
}

// sessionServes and statelessServes are what the spec says each revision
// serves (testdata/client_requests.json has them from the schemas).
func sessionServes(name, version string) bool {
	switch name {
	case mcp.MethodTasksGet, mcp.MethodTasksResult, mcp.MethodTasksList, mcp.MethodTasksCancel:
		return version >= mcp.Version20251125
	case mcp.MethodServerDiscover:
		return true // a stateless request on any connection
	case mcp.MethodTasksUpdate, mcp.MethodSubscriptionsListen, "x/unknown":
		return false
	}
	return true
}

func statelessServes(name string) bool {
	switch name {
	case mcp.MethodInitialize, mcp.MethodPing, mcp.MethodLoggingSetLevel, mcp.MethodResourcesSubscribe,
		mcp.MethodResourcesUnsubscribe, mcp.MethodTasksResult, mcp.MethodTasksList, "x/unknown":
		return false
	}
	return true
}

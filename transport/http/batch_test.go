package http

import (
	"net/http"
	"sort"
	"testing"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/stretchr/testify/require"
)

// TestBatch: a session at 2025-03-26 may POST a JSON-RPC batch, answered
// with one array (202 when no answer is due); other revisions have it
// refused as before.
func TestBatch(t *testing.T) {
	e := newEnv(t, envOpts{})
	open := func(version string) string {
		resp := e.do(t, req{body: `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`, headers: map[string]string{"Mcp-Protocol-Version": ""}})
		b := body(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode, b)
		sid := resp.Header.Get("Mcp-Session-Id")
		resp = e.do(t, req{sid: sid, body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, headers: map[string]string{"Mcp-Protocol-Version": ""}})
		require.Equal(t, http.StatusAccepted, resp.StatusCode, body(t, resp))
		return sid
	}
	const batch = `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}]`

	sid := open("2025-03-26")
	resp := e.do(t, req{sid: sid, body: batch, headers: map[string]string{"Mcp-Protocol-Version": ""}})
	b := body(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, b)
	var ms []struct {
		ID     codec.RawJSON `json:"id"`
		Result codec.RawJSON `json:"result"`
		Error  *codec.Error  `json:"error"`
	}
	require.NoError(t, codec.Unmarshal([]byte(b), &ms), b)
	require.Len(t, ms, 2, b)
	sort.Slice(ms, func(i, j int) bool { return string(ms[i].ID) < string(ms[j].ID) })
	require.Equal(t, "1", string(ms[0].ID))
	require.Equal(t, "2", string(ms[1].ID))
	require.Nil(t, ms[0].Error)
	require.Nil(t, ms[1].Error, b)
	require.Contains(t, string(ms[1].Result), `"hi"`)

	resp = e.do(t, req{sid: sid, body: `[{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}]`, headers: map[string]string{"Mcp-Protocol-Version": ""}})
	require.Equal(t, http.StatusAccepted, resp.StatusCode, body(t, resp))

	sid = open("2025-11-25")
	resp = e.do(t, req{sid: sid, body: batch})
	b = body(t, resp)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, b)
	require.Contains(t, b, `"code":-32600`)
}

package http

import (
	"net/http"
	"testing"

	"github.com/mcpedge/mcpedge/auth"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const webApp = "https://app.example"

func preflight(origin, method, headers string) req {
	h := map[string]string{
		"Origin": origin, "Access-Control-Request-Method": method,
		"Accept": "", "Mcp-Protocol-Version": "", "Content-Type": "",
	}
	if headers != "" {
		h["Access-Control-Request-Headers"] = headers
	}
	return req{method: http.MethodOptions, headers: h}
}

// TestCORSPreflight: a preflight is answered before credentials (the
// server requires a token here), with the MCP headers asked for echoed,
// Mcp-Param-* by prefix; one from an origin not listed, or asking for a
// header an MCP client does not send, gets no grant of it.
func TestCORSPreflight(t *testing.T) {
	v, err := auth.New(auth.Config{Audience: "http://127.0.0.1/mcp", Tokens: []string{"good-token"}})
	require.NoError(t, err)
	t.Cleanup(v.Close)
	e := newEnv(t, envOpts{opts: Options{Auth: v, CORSOrigins: []string{webApp + "/"}}})
	for _, tc := range []struct {
		name       string
		r          req
		status     int
		origin     string // Access-Control-Allow-Origin, "" none
		allowHdrs  string
		allowMeths string
	}{
		{"granted", preflight(webApp, "POST", "content-type, mcp-protocol-version, authorization"), 204, webApp,
			"content-type, mcp-protocol-version, authorization", "GET, POST, DELETE, OPTIONS"},
		{"every MCP header", preflight("HTTPS://APP.EXAMPLE", "POST", "Mcp-Session-Id,MCP-Protocol-Version,Mcp-Method,Mcp-Name,Mcp-Param-Region,mcp-param-x,Last-Event-ID,Authorization,Content-Type"), 204, "HTTPS://APP.EXAMPLE",
			"Mcp-Session-Id, MCP-Protocol-Version, Mcp-Method, Mcp-Name, Mcp-Param-Region, mcp-param-x, Last-Event-ID, Authorization, Content-Type", "GET, POST, DELETE, OPTIONS"},
		{"foreign header left out", preflight(webApp, "POST", "content-type, x-evil, cookie, mcp-param-"), 204, webApp, "content-type", "GET, POST, DELETE, OPTIONS"},
		{"no headers asked", preflight(webApp, "GET", ""), 204, webApp, "", "GET, POST, DELETE, OPTIONS"},
		{"disallowed origin", preflight("https://evil.example", "POST", "content-type"), 403, "", "", ""},
		{"legacy endpoint", func() req { r := preflight(webApp, "POST", "content-type"); r.path = "/message"; return r }(), 204, webApp, "content-type", "GET, POST, OPTIONS"},
		{"unknown path", func() req { r := preflight(webApp, "POST", "content-type"); r.path = "/elsewhere"; return r }(), 404, "", "", ""},
		{"not a preflight", req{method: http.MethodOptions, headers: map[string]string{"Origin": webApp}}, 401, webApp, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := e.do(t, tc.r)
			b := body(t, resp)
			require.Equal(t, tc.status, resp.StatusCode, b)
			assert.Equal(t, tc.origin, resp.Header.Get("Access-Control-Allow-Origin"))
			assert.Equal(t, tc.allowHdrs, resp.Header.Get("Access-Control-Allow-Headers"))
			assert.Equal(t, tc.allowMeths, resp.Header.Get("Access-Control-Allow-Methods"))
			if tc.status == 204 {
				assert.Equal(t, "true", resp.Header.Get("Access-Control-Allow-Credentials"))
				assert.Contains(t, resp.Header.Values("Vary"), "Origin")
				assert.Equal(t, "7200", resp.Header.Get("Access-Control-Max-Age"))
			}
		})
	}
}

// TestCORSAnswers: the answers to a granted origin carry the grant and
// expose Mcp-Session-Id, refusals included (a browser reads a 401's
// WWW-Authenticate only so); "*" grants any origin without credentials;
// an origin of neither list is refused 403 without a grant; without an
// Origin nothing changes; SetCORS changes the list of a running server.
func TestCORSAnswers(t *testing.T) {
	e := newEnv(t, envOpts{opts: Options{CORSOrigins: []string{webApp}}})
	with := func(origin string) map[string]string {
		return map[string]string{"Origin": origin, "Mcp-Protocol-Version": ""}
	}
	resp := e.do(t, req{body: initBody, headers: with(webApp)})
	b := body(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, b)
	assert.Equal(t, webApp, resp.Header.Get("Access-Control-Allow-Origin"))
	assert.Equal(t, "true", resp.Header.Get("Access-Control-Allow-Credentials"))
	assert.Contains(t, resp.Header.Get("Access-Control-Expose-Headers"), "Mcp-Session-Id")
	sid := resp.Header.Get("Mcp-Session-Id")
	require.NotEmpty(t, sid)

	resp = e.do(t, req{sid: "0123456789abcdef0123456789abcdef", body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`, headers: with(webApp)})
	body(t, resp)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Equal(t, webApp, resp.Header.Get("Access-Control-Allow-Origin"), "a refusal carries the grant")

	resp = e.do(t, req{body: initBody, headers: with("https://evil.example")})
	body(t, resp)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))

	resp = e.do(t, req{body: initBody, headers: with("http://localhost:6274")}) // passes the Origin check, not granted
	body(t, resp)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))

	resp = e.do(t, req{body: initBody, headers: map[string]string{"Mcp-Protocol-Version": ""}})
	body(t, resp)
	assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))

	e.srv.SetCORS([]string{"*"})
	assert.Equal(t, []string{"*"}, e.srv.Options().CORSOrigins)
	resp = e.do(t, req{body: initBody, headers: with("https://evil.example")})
	body(t, resp)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "*", resp.Header.Get("Access-Control-Allow-Origin"))
	assert.Empty(t, resp.Header.Get("Access-Control-Allow-Credentials"), "* never with credentials")

	e.srv.SetCORS(nil)
	resp = e.do(t, preflight(webApp, "POST", "content-type"))
	body(t, resp)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "CORS off: the origin is not allowed either")
	resp = e.do(t, req{method: http.MethodOptions})
	body(t, resp)
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

func TestCORSHeaderAllowedAllocs(t *testing.T) {
	dst := make([]byte, 0, 256)
	asked := []byte("content-type, mcp-protocol-version, mcp-param-region, x-evil")
	if n := testing.AllocsPerRun(100, func() { dst = appendAllowedHeaders(dst[:0], asked) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

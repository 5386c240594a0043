package mcpedge_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpedge/mcpedge"
	"github.com/mcpedge/mcpedge/auth"
	"github.com/mcpedge/mcpedge/internal/authtest"
)

const stateless26 = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}%s}`

// authServer serves TCP and HTTP with auth: JWTs of is, the static token
// "tcp-token" (every scope) and "reader" (scope mcp only); tool "whoami"
// needs files:write and answers the caller's subject.
func authServer(t *testing.T, is *authtest.Issuer) (*mcpedge.Server, string, string, *auth.Verifier) {
	t.Helper()
	v, err := auth.New(auth.Config{Audience: "http://mcp.test/mcp", Issuer: "https://as.test", JWKSURL: is.URL(),
		Scopes: []string{"mcp"}, Tokens: []string{"tcp-token", "reader mcp"}, FetchTimeout: time.Second})
	require.NoError(t, err)
	t.Cleanup(v.Close)
	srv, _, _ := newServer(t, mcpedge.Options{
		TCP:  &mcpedge.TCPOptions{Addr: "127.0.0.1:0", Loops: 1},
		HTTP: &mcpedge.HTTPOptions{Addr: "127.0.0.1:0", WriteTimeout: 2 * time.Second, AllowedHosts: []string{"*"}},
		Auth: v,
	})
	require.NoError(t, mcpedge.AddTool(srv, &mcpedge.Tool{Name: "whoami"},
		func(ctx context.Context, _ *mcpedge.CallToolRequest, _ struct{}) (*mcpedge.CallToolResult, any, error) {
			info, ok := auth.FromContext(ctx)
			if !ok {
				return mcpedge.TextResult("nobody"), nil, nil
			}
			return mcpedge.TextResult(info.Subject + " " + strings.Join(info.Scopes, ",")), nil, nil
		}, mcpedge.ToolOptions{RequiredScopes: []string{"files:write"}}))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	serve(ctx, srv)
	return srv, srv.TCPAddr(ctx).String(), "http://" + srv.HTTPAddr(ctx).String(), v
}

type httpAnswer struct {
	status int
	header http.Header
	body   string
}

func post(t *testing.T, url, token, body string, hdr map[string]string) httpAnswer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return httpAnswer{resp.StatusCode, resp.Header, string(b)}
}

const initBody = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

func TestAuthHTTP(t *testing.T) {
	is := authtest.NewIssuer()
	defer is.Server.Close()
	_, _, base, _ := authServer(t, is)
	url := base + "/mcp"
	prm := "http://mcp.test/.well-known/oauth-protected-resource/mcp"
	good := "Bearer " + authtest.Sign("rsa1", "RS256", authtest.Good("http://mcp.test/mcp", "https://as.test", "mcp files:write"))
	reader := "Bearer " + authtest.Sign("ec1", "ES256", authtest.Good("http://mcp.test/mcp", "https://as.test", "mcp"))

	// Metadata at both well-known paths.
	for _, p := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		resp, err := http.Get(base + p)
		require.NoError(t, err)
		var doc map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&doc))
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, "http://mcp.test/mcp", doc["resource"])
		assert.Equal(t, []any{"https://as.test"}, doc["authorization_servers"])
		assert.Equal(t, []any{"header"}, doc["bearer_methods_supported"])
	}

	// No token, bad ones.
	a := post(t, url, "", initBody, nil)
	assert.Equal(t, 401, a.status)
	assert.Equal(t, `Bearer scope="mcp", resource_metadata="`+prm+`"`, a.header.Get("WWW-Authenticate"))
	for _, bad := range []string{"Basic dXNlcjpwdw==", "Bearer", "Bearer a b", "Bearer " + strings.Repeat("x", 3000), "Bearer not-a-token", "Bearer " + authtest.Sign("rsa1", "RS256", authtest.Good("http://other/mcp", "https://as.test", "mcp"))} {
		a := post(t, url, bad, initBody, nil)
		assert.Equal(t, 401, a.status, len(bad))
		assert.Contains(t, a.header.Get("WWW-Authenticate"), `error="invalid_token"`)
		assert.Contains(t, a.header.Get("WWW-Authenticate"), `resource_metadata="`+prm+`"`)
		assert.Contains(t, a.body, `"code":-31001`)
		if len(bad) > 7 {
			assert.NotContains(t, a.body, bad[7:])
			assert.NotContains(t, a.header.Get("WWW-Authenticate"), bad[7:])
		}
	}
	// Headers too big for the server's buffer never reach the verifier.
	a = post(t, url, "Bearer "+strings.Repeat("x", 9000), initBody, nil)
	assert.Contains(t, []int{401, 431}, a.status)

	// Missing the scope every request needs.
	a = post(t, url, "Bearer "+authtest.Sign("rsa1", "RS256", authtest.Good("http://mcp.test/mcp", "https://as.test", "other")), initBody, nil)
	assert.Equal(t, 403, a.status)
	assert.Contains(t, a.header.Get("WWW-Authenticate"), `error="insufficient_scope", error_description="insufficient scope: requires mcp", scope="mcp"`)

	// A session: initialize, then a tool needing files:write.
	a = post(t, url, good, initBody, nil)
	require.Equal(t, 200, a.status, a.body)
	sid := a.header.Get("Mcp-Session-Id")
	require.NotEmpty(t, sid)
	h := map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`
	a = post(t, url, good, call, h)
	assert.Equal(t, 200, a.status)
	assert.Contains(t, a.body, `alice mcp,files:write`)
	a = post(t, url, "", call, h)
	assert.Equal(t, 401, a.status)

	// Same subject, a token without files:write: 403 insufficient_scope.
	a = post(t, url, reader, call, h)
	assert.Equal(t, 403, a.status)
	assert.Contains(t, a.header.Get("WWW-Authenticate"), `error="insufficient_scope"`)
	assert.Contains(t, a.header.Get("WWW-Authenticate"), `scope="files:write"`)
	assert.Contains(t, a.body, `"code":-31003`)
	// Tools without required scopes still work with it.
	a = post(t, url, reader, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`, h)
	assert.Equal(t, 200, a.status)
	assert.Contains(t, a.body, `"hi"`)

	// Another subject cannot use the session.
	a = post(t, url, "Bearer tcp-token", call, h)
	assert.Equal(t, 403, a.status)

	// 2026-07-28 requests: the same checks, per request.
	stateless := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"whoami","arguments":{},` + strings.Replace(stateless26, "%s", "", 1) + `}}`
	mh := map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "whoami"}
	a = post(t, url, good, stateless, mh)
	assert.Equal(t, 200, a.status, a.body)
	assert.Contains(t, a.body, `alice mcp,files:write`)
	a = post(t, url, reader, stateless, mh)
	assert.Equal(t, 403, a.status)
	a = post(t, url, "", stateless, mh)
	assert.Equal(t, 401, a.status)
}

func TestAuthTCP(t *testing.T) {
	is := authtest.NewIssuer()
	defer is.Server.Close()
	_, addr, _, _ := authServer(t, is)
	tcpAddr := addr

	initWith := func(tok string) string {
		meta := ""
		if tok != "" {
			meta = `,"_meta":{"io.mcpedge/token":"` + tok + `"}`
		}
		return `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}` + meta + `}}`
	}
	dial := func(tok string) (*rawConn, message) {
		c := dialConn(t, tcpAddr)
		c.send(initWith(tok))
		return c, c.read()
	}
	for _, tok := range []string{"", "wrong", authtest.Sign("rsa1", "RS256", authtest.Good("http://other", "https://as.test", "mcp"))} {
		c, m := dial(tok)
		require.NotNil(t, m.Error, tok)
		assert.Equal(t, auth.CodeUnauthorized, m.Error.Code)
		// Nothing else is served.
		c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		m = c.read()
		require.NotNil(t, m.Error, "an uninitialized session serves nothing")
	}

	// A static token with every scope.
	c, m := dial("tcp-token")
	require.Nil(t, m.Error)
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`)
	m = c.read()
	require.Nil(t, m.Error)
	assert.Equal(t, "static:1 ", m.Result.Content[0].Text)

	// A static token lacking files:write: the tool is refused, others work.
	c, m = dial("reader")
	require.Nil(t, m.Error)
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`)
	m = c.read()
	require.NotNil(t, m.Error)
	assert.Equal(t, auth.CodeForbidden, m.Error.Code)
	assert.JSONEq(t, `{"error":"insufficient_scope","scope":"files:write"}`, string(m.Error.Data))
	c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)
	assert.Nil(t, c.read().Error)

	// A JWT in initialize.
	c, m = dial(authtest.Sign("rsa1", "RS256", authtest.Good("http://mcp.test/mcp", "https://as.test", "mcp files:write")))
	require.Nil(t, m.Error)
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`)
	m = c.read()
	require.Nil(t, m.Error)
	assert.Equal(t, "alice mcp,files:write", m.Result.Content[0].Text)

	// 2026-07-28 requests on TCP carry the token in each request's _meta.
	c = dialConn(t, tcpAddr)
	stateless := func(id int, tok string) string {
		extra := ""
		if tok != "" {
			extra = `,"io.mcpedge/token":"` + tok + `"`
		}
		return `{"jsonrpc":"2.0","id":` + string(rune('0'+id)) + `,"method":"tools/call","params":{"name":"whoami","arguments":{},` + strings.Replace(stateless26, "%s", extra, 1) + `}}`
	}
	c.send(stateless(1, ""))
	m = c.read()
	require.NotNil(t, m.Error)
	assert.Equal(t, auth.CodeUnauthorized, m.Error.Code)
	c.send(stateless(2, "reader"))
	m = c.read()
	require.NotNil(t, m.Error)
	assert.Equal(t, auth.CodeForbidden, m.Error.Code)
	c.send(stateless(3, "tcp-token"))
	m = c.read()
	require.Nil(t, m.Error)
	assert.Equal(t, "static:1 ", m.Result.Content[0].Text)
	c.send(stateless(4, "")) // no token: refused again, nothing kept
	m = c.read()
	require.NotNil(t, m.Error)
}

// dialConn connects to addr without initializing.
func dialConn(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	require.NoError(t, nc.SetDeadline(time.Now().Add(wait)))
	return &rawConn{t: t, nc: nc, r: bufio.NewReader(nc)}
}

// TestAuthSlowKeyServerNeverStallsTheLoop: a JWT whose kid is unknown
// makes the verifier fetch the key set, and the key server holds that
// fetch. The verification waits on a worker, not on the event loop: another
// session on the same loop (one loop) has its ping answered meanwhile, and
// on stdio a ping sent after the initialize is answered before it. No
// sleep: the test waits for the key server's handler to be entered.
func TestAuthSlowKeyServerNeverStallsTheLoop(t *testing.T) {
	const audience = "http://mcp.test/mcp"
	is := authtest.NewIssuer()
	defer is.Server.Close()
	v, err := auth.New(auth.Config{Audience: audience, Issuer: "https://as.test", JWKSURL: is.URL(),
		Scopes: []string{"mcp"}, Tokens: []string{"tcp-token"}, FetchTimeout: time.Minute})
	require.NoError(t, err)
	t.Cleanup(v.Close)
	rotated := authtest.Sign("rsa2", "RS256", authtest.Good(audience, "https://as.test", "mcp"))
	initWith := func(id, tok string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"},"_meta":{"io.mcpedge/token":"` + tok + `"}}}`
	}

	t.Run("tcp", func(t *testing.T) {
		srv := authEnumServer(t, v, true)
		addr := srv.TCPAddr(context.Background()).String()
		other := dialConn(t, addr)
		other.send(initWith("0", "tcp-token"), `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		require.Nil(t, other.read().Error)

		entered, release := is.Hold()
		defer release()
		is.Rotate()
		slow := dialConn(t, addr)
		slow.send(initWith("0", rotated))
		select {
		case <-entered: // the fetch for rsa2 is held by the key server
		case <-time.After(wait):
			t.Fatal("the unknown kid caused no fetch")
		}
		other.send(`{"jsonrpc":"2.0","id":7,"method":"ping"}`)
		m := other.read() // on a loop stalled by the fetch, this times out
		require.Nil(t, m.Error)
		assert.JSONEq(t, "7", string(m.ID))
		release()
		m = slow.read()
		require.Nil(t, m.Error, "the rotated key was fetched and the token verified")
	})

	t.Run("stdio", func(t *testing.T) {
		srv := authEnumServer(t, v, false)
		// A fresh key set, whose unknown-kid refetch is allowed at once.
		require.NoError(t, v.Reload(v.Config()))
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		done := make(chan error, 1)
		go func() { done <- srv.ServeStdio(context.Background(), inR, outW) }()
		r := bufio.NewReader(outR)
		read := func() message {
			b, err := r.ReadBytes('\n')
			require.NoError(t, err)
			var m message
			require.NoError(t, json.Unmarshal(b, &m))
			return m
		}
		entered, release := is.Hold()
		defer release()
		_, err := io.WriteString(inW, initWith("0", authtest.Sign("nokid", "RS256", authtest.Good(audience, "https://as.test", "mcp")))+"\n")
		require.NoError(t, err)
		select {
		case <-entered:
		case <-time.After(wait):
			t.Fatal("the unknown kid caused no fetch")
		}
		_, err = io.WriteString(inW, `{"jsonrpc":"2.0","id":7,"method":"ping"}`+"\n")
		require.NoError(t, err)
		m := read() // the reader was not stalled: the ping, not yet authorized, is refused first
		assert.JSONEq(t, "7", string(m.ID))
		require.NotNil(t, m.Error)
		assert.Equal(t, auth.CodeUnauthorized, m.Error.Code)
		release()
		m = read()
		assert.JSONEq(t, "0", string(m.ID))
		require.NotNil(t, m.Error, "no key has kid nokid")
		assert.Equal(t, auth.CodeUnauthorized, m.Error.Code)
		inW.Close()
		go io.Copy(io.Discard, r) //nolint:errcheck // drains what the shutdown writes
		require.NoError(t, result(t, done))
		outR.Close()
	})
}

// TestAuthRevokedOnReload: a static token removed from the token file and
// reloaded stops working on the TCP sessions it opened before (they
// recheck their caller against the configuration in force), while a
// session of a token kept goes on.
func TestAuthRevokedOnReload(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	require.NoError(t, os.WriteFile(file, []byte("gone\nkept\n"), 0o600))
	v, err := auth.New(auth.Config{Audience: "http://mcp.test/mcp", TokenFile: file})
	require.NoError(t, err)
	t.Cleanup(v.Close)
	srv := authEnumServer(t, v, true)
	addr := srv.TCPAddr(context.Background()).String()
	open := func(tok string) *rawConn {
		c := dialConn(t, addr)
		c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"},"_meta":{"io.mcpedge/token":"`+tok+`"}}}`,
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		require.Nil(t, c.read().Error)
		return c
	}
	echo := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`
	gone, kept := open("gone"), open("kept")
	gone.send(echo)
	require.Nil(t, gone.read().Error)

	require.NoError(t, os.WriteFile(file, []byte("kept\n"), 0o600))
	require.NoError(t, v.Reload(v.Config()))
	for _, req := range []string{echo, `{"jsonrpc":"2.0","id":2,"method":"ping"}`, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`} {
		gone.send(req)
		m := gone.read()
		require.NotNil(t, m.Error, req)
		assert.Equal(t, auth.CodeUnauthorized, m.Error.Code, req)
	}
	kept.send(echo)
	m := kept.read()
	require.Nil(t, m.Error)
	assert.Equal(t, "hi", m.Result.Content[0].Text)
}

// TestAuthRefusalsCounted: every refusal reaches the Verifier's failure
// hook once, whoever decides it (no token, a bad one, a tool's scope, on
// HTTP and on TCP), with its reason and, where the path knows it, the
// client's address.
func TestAuthRefusalsCounted(t *testing.T) {
	is := authtest.NewIssuer()
	defer is.Server.Close()
	_, addr, url, v := authServer(t, is)
	var mu sync.Mutex
	var got []auth.Failure
	v.OnFailure(func(f auth.Failure) { mu.Lock(); got = append(got, f); mu.Unlock() })
	url += "/mcp"
	loopback := netip.MustParseAddr("127.0.0.1")
	expect := func(n int, reason string, src netip.Addr, what string) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, got, n, what)
		for _, f := range got {
			assert.Equal(t, reason, f.Reason, what)
			assert.Equal(t, src, f.Source, what)
			assert.NotNil(t, f.Err, what)
		}
		got = got[:0]
	}

	post(t, url, "", initBody, nil)
	expect(1, auth.ReasonMissing, loopback, "HTTP without a header")
	post(t, url, "Basic x", initBody, nil)
	expect(1, auth.ReasonInvalid, loopback, "HTTP with a malformed header")
	post(t, url, "Bearer wrong", initBody, nil)
	expect(1, auth.ReasonInvalid, loopback, "HTTP with a bad token")
	a := post(t, url, "Bearer reader", initBody, nil)
	require.Equal(t, 200, a.status)
	expect(0, "", loopback, "HTTP with a good token")
	sid := a.header.Get("Mcp-Session-Id")
	a = post(t, url, "Bearer reader", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`,
		map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"})
	assert.Equal(t, 403, a.status)
	expect(1, auth.ReasonInsufficientScope, loopback, "HTTP without a tool's scope")

	c := dialConn(t, addr)
	c.send(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	require.NotNil(t, c.read().Error)
	expect(1, auth.ReasonMissing, loopback, "TCP without a token")
	c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"},"_meta":{"io.mcpedge/token":"reader"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	require.Nil(t, c.read().Error)
	expect(0, "", loopback, "TCP with a good token")
	c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`)
	require.NotNil(t, c.read().Error)
	expect(1, auth.ReasonInsufficientScope, netip.Addr{}, "TCP without a tool's scope (the engine's AuthorizeTool knows no address)")
}

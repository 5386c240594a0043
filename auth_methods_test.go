package mcpedge_test

import (
	"bufio"
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpedge/mcpedge"
	"github.com/mcpedge/mcpedge/auth"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/internal/authtest"
	"github.com/mcpedge/mcpedge/mcp"
)

// methodsToAuthorize returns every method a client may send, for
// TestAuthEveryMethod: each method of the engine's method table
// (engine.MethodLabel), every mcp.Method* constant (client-side methods,
// which must be refused as well), and a method nobody serves. A method the
// engine learns is in it without editing the test.
func methodsToAuthorize(t *testing.T) []string {
	t.Helper()
	parse := func(dir string) []*ast.File {
		names, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		var files []*ast.File
		fset := token.NewFileSet()
		for _, n := range names {
			if strings.HasSuffix(n, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, n, nil, 0)
			require.NoError(t, err)
			files = append(files, f)
		}
		require.NotEmpty(t, files, dir)
		return files
	}
	consts := map[string]string{} // mcp.MethodX → its value
	for _, f := range parse("mcp") {
		ast.Inspect(f, func(n ast.Node) bool {
			if vs, ok := n.(*ast.ValueSpec); ok {
				for i, name := range vs.Names {
					if strings.HasPrefix(name.Name, "Method") && i < len(vs.Values) {
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							v, err := strconv.Unquote(lit.Value)
							require.NoError(t, err)
							consts[name.Name] = v
						}
					}
				}
			}
			return true
		})
	}
	routed := map[string]bool{}
	for i := range engine.NumMethods {
		routed[engine.MethodLabel(i)] = true
	}
	for _, m := range []string{mcp.MethodToolsCall, mcp.MethodPing, mcp.MethodServerDiscover, mcp.MethodSubscriptionsListen, mcp.MethodTasksUpdate} {
		require.True(t, routed[m], "the engine's method table was not read: %s is missing", m)
	}
	seen := map[string]bool{"x/unknown": true}
	for _, v := range consts {
		seen[v] = true
	}
	for m := range routed {
		seen[m] = true
	}
	var out []string
	for m := range seen {
		if m != mcp.MethodInitialize {
			out = append(out, m)
		}
	}
	slices.Sort(out)
	// initialize last: on TCP and stdio, one that succeeds makes the
	// connection a session of the older revisions.
	return append(out, mcp.MethodInitialize)
}

// authFields are params fields that let each method get past its
// params' checks, when it gets that far.
func authFields(method string) string {
	switch method {
	case mcp.MethodToolsCall:
		return `"name":"echo","arguments":{"text":"x"}`
	case mcp.MethodResourcesRead, mcp.MethodResourcesSubscribe, mcp.MethodResourcesUnsubscribe:
		return `"uri":"mem://a"`
	case mcp.MethodPromptsGet:
		return `"name":"p"`
	case mcp.MethodTasksGet, mcp.MethodTasksCancel, mcp.MethodTasksResult, mcp.MethodTasksUpdate:
		return `"taskId":"nope"`
	case mcp.MethodLoggingSetLevel:
		return `"level":"info"`
	case mcp.MethodCompletionComplete:
		return `"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":"v"}`
	case mcp.MethodSubscriptionsListen:
		return `"notifications":{"toolsListChanged":true}`
	case mcp.MethodInitialize:
		return `"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}`
	}
	return ""
}

// authName is the value a 2026-07-28 POST mirrors in Mcp-Name.
func authName(method string) string {
	switch method {
	case mcp.MethodToolsCall:
		return "echo"
	case mcp.MethodResourcesRead:
		return "mem://a"
	case mcp.MethodPromptsGet:
		return "p"
	case mcp.MethodTasksGet, mcp.MethodTasksCancel, mcp.MethodTasksUpdate:
		return "nope"
	}
	return ""
}

// authParams are method's params: in the stateless revision with its
// _meta, carrying tok when not empty; in a session only initialize
// carries a token.
func authParams(method string, stateless bool, tok string) string {
	var meta []string
	if stateless {
		meta = append(meta, `"io.modelcontextprotocol/protocolVersion":"2026-07-28"`,
			`"io.modelcontextprotocol/clientCapabilities":{}`, `"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}`)
	}
	if tok != "" && (stateless || method == mcp.MethodInitialize) {
		meta = append(meta, `"io.mcpedge/token":`+strconv.Quote(tok))
	}
	fields := authFields(method)
	if len(meta) > 0 {
		if fields != "" {
			fields += ","
		}
		fields += `"_meta":{` + strings.Join(meta, ",") + `}`
	}
	return "{" + fields + "}"
}

// authAnswer is what the enumeration reads of an answer.
type authAnswer struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code int `json:"code"`
	} `json:"error"`
}

// code is the answer's error code, 0 for a result or a listen's
// acknowledgement.
func (a authAnswer) code() int {
	if a.Error != nil {
		return a.Error.Code
	}
	return 0
}

// lineClient speaks newline-delimited JSON-RPC: a TCP connection or a
// stdio pipe pair.
type lineClient struct {
	t  *testing.T
	w  io.Writer
	r  *bufio.Reader
	id int
}

// call sends a request and returns its answer: the message with its id,
// or a listen's acknowledgement; other messages are skipped.
func (c *lineClient) call(method, params string) authAnswer {
	c.t.Helper()
	c.id++
	id := strconv.Itoa(c.id)
	_, err := io.WriteString(c.w, `{"jsonrpc":"2.0","id":`+id+`,"method":"`+method+`","params":`+params+"}\n")
	require.NoError(c.t, err)
	for {
		line, err := c.r.ReadBytes('\n')
		require.NoError(c.t, err, method)
		var a authAnswer
		require.NoError(c.t, json.Unmarshal(line, &a), "%s", line)
		if string(a.ID) == id || (a.ID == nil && a.Method == mcp.NotificationSubscriptionsAcked && method == mcp.MethodSubscriptionsListen) {
			return a
		}
	}
}

// authHTTP posts one request to url, with the headers of its revision and
// Authorization when bearer is not empty; it returns the status and the
// answer (the first event of a stream: a listen's acknowledgement).
func authHTTP(t *testing.T, url, sid, bearer, method, params string, stateless bool) (int, authAnswer, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + "}"
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if stateless {
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", method)
		if n := authName(method); n != "" {
			req.Header.Set("Mcp-Name", n)
		}
	} else if sid != "" {
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		req.Header.Set("Mcp-Session-Id", sid)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var a authAnswer
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		r := bufio.NewReader(resp.Body)
		for {
			line, err := r.ReadString('\n')
			require.NoError(t, err, method)
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				require.NoError(t, json.Unmarshal([]byte(data), &a), data)
				break
			}
		}
	} else if b, _ := io.ReadAll(resp.Body); len(b) > 0 {
		require.NoError(t, json.Unmarshal(b, &a), "%s: %s", method, b)
	}
	return resp.StatusCode, a, resp.Header.Get("Mcp-Session-Id")
}

// authEnumServer serves TCP and HTTP (or neither, for stdio) with v.
func authEnumServer(t *testing.T, v *auth.Verifier, listen bool) *mcpedge.Server {
	t.Helper()
	opts := mcpedge.Options{Auth: v}
	if listen {
		opts.TCP = &mcpedge.TCPOptions{Addr: "127.0.0.1:0", Loops: 1}
		opts.HTTP = &mcpedge.HTTPOptions{Addr: "127.0.0.1:0", WriteTimeout: 2 * time.Second, AllowedHosts: []string{"*"}}
	}
	srv, _, _ := newServer(t, opts)
	if listen {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		serve(ctx, srv)
	}
	return srv
}

// TestAuthEveryMethod: with authorization on, every method (the engine's
// own answers included: ping, list pages, server/discover,
// subscriptions/listen, tasks) is refused without a valid token, in both
// eras (a session's requests, 2026-07-28 requests) and on TCP, stdio and
// Streamable HTTP; with a valid one, none is refused. The token is a JWT
// verified in full each time (no cache), so on TCP and stdio each request
// carrying one is verified on a worker, not on the event loop.
func TestAuthEveryMethod(t *testing.T) {
	methods := methodsToAuthorize(t)
	is := authtest.NewIssuer()
	defer is.Server.Close()
	v, err := auth.New(auth.Config{Audience: "http://mcp.test/mcp", Issuer: "https://as.test", JWKSURL: is.URL(),
		Scopes: []string{"mcp"}, CacheTTL: -1, FetchTimeout: wait})
	require.NoError(t, err)
	t.Cleanup(v.Close)
	good := authtest.Sign("rsa1", "RS256", authtest.Good("http://mcp.test/mcp", "https://as.test", "mcp"))
	tokens := []struct{ name, tok string }{{"none", ""}, {"bad", "wrong"}, {"expired", authtest.Sign("rsa1", "RS256", authtest.Claims{
		"sub": "alice", "aud": "http://mcp.test/mcp", "iss": "https://as.test", "scope": "mcp", "exp": time.Now().Add(-time.Hour).Unix()})}, {"good", good}}

	srv := authEnumServer(t, v, true)
	ctx := context.Background()
	tcpAddr, httpURL := srv.TCPAddr(ctx).String(), "http://"+srv.HTTPAddr(ctx).String()+"/mcp"

	// check asserts the answer to method with tok: refused with
	// CodeUnauthorized without a valid token, never refused with one
	// (and tools/call served).
	check := func(t *testing.T, tok, method string, a authAnswer) {
		t.Helper()
		if tok != good {
			assert.Equal(t, auth.CodeUnauthorized, a.code(), "%s without a valid token", method)
			return
		}
		assert.NotContains(t, []int{auth.CodeUnauthorized, auth.CodeForbidden}, a.code(), "%s with a valid token", method)
		if method == mcp.MethodToolsCall {
			assert.Equal(t, 0, a.code(), "tools/call served")
		}
	}
	// lines runs the enumeration over a newline-delimited transport: the
	// session era initializes first (with tok), the stateless era does not.
	lines := func(t *testing.T, c *lineClient, tok string, stateless bool) {
		if !stateless {
			a := c.call(mcp.MethodInitialize, authParams(mcp.MethodInitialize, false, tok))
			check(t, tok, mcp.MethodInitialize, a)
			_, err := io.WriteString(c.w, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
			require.NoError(t, err)
		}
		for _, m := range methods {
			check(t, tok, m, c.call(m, authParams(m, stateless, tok)))
		}
	}
	for _, era := range []struct {
		name      string
		stateless bool
	}{{"session", false}, {"2026-07-28", true}} {
		for _, tk := range tokens {
			t.Run("tcp/"+era.name+"/"+tk.name, func(t *testing.T) {
				nc, err := net.Dial("tcp", tcpAddr)
				require.NoError(t, err)
				defer nc.Close()
				require.NoError(t, nc.SetDeadline(time.Now().Add(wait)))
				lines(t, &lineClient{t: t, w: nc, r: bufio.NewReader(nc)}, tk.tok, era.stateless)
			})
			t.Run("stdio/"+era.name+"/"+tk.name, func(t *testing.T) {
				srv := authEnumServer(t, v, false)
				inR, inW := io.Pipe()
				outR, outW := io.Pipe()
				done := make(chan error, 1)
				go func() { done <- srv.ServeStdio(context.Background(), inR, outW) }()
				lines(t, &lineClient{t: t, w: inW, r: bufio.NewReader(outR)}, tk.tok, era.stateless)
				inW.Close()
				go io.Copy(io.Discard, outR) //nolint:errcheck // drains what the shutdown writes
				require.NoError(t, result(t, done))
				outR.Close()
			})
			t.Run("http/"+era.name+"/"+tk.name, func(t *testing.T) {
				sid := ""
				if !era.stateless && tk.tok == good {
					st, a, id := authHTTP(t, httpURL, "", good, mcp.MethodInitialize, authParams(mcp.MethodInitialize, false, ""), false)
					require.Equal(t, http.StatusOK, st)
					require.Nil(t, a.Error)
					sid = id
				}
				for _, m := range methods {
					st, a, _ := authHTTP(t, httpURL, sid, tk.tok, m, authParams(m, era.stateless, ""), era.stateless)
					if tk.tok != good {
						assert.Equal(t, http.StatusUnauthorized, st, m)
					} else {
						assert.NotContains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, st, m)
					}
					check(t, tk.tok, m, a)
				}
			})
		}
	}
}

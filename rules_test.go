package mcpedge_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpedge/mcpedge"
	"github.com/mcpedge/mcpedge/auth"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/internal/authtest"
	"github.com/mcpedge/mcpedge/mcp"
)

// Authorization rules, end to end: callers with different tokens see
// different lists and pages, in both revisions, on TCP and stdio (the
// token in _meta) and Streamable HTTP (the Authorization header); an item
// hidden from a caller is answered as one that does not exist, whichever
// method names it; list_changed still reaches the callers; a reload
// changes what each sees.

const (
	rulesAud = "http://mcp.test/mcp"
	rulesIss = "https://as.test"
)

// testRules: admin_* tools, secret* prompts, mem://secret/* resources and
// the mem://vault/{id} template are for callers with the admin scope;
// ops_* tools for callers whose token says team "ops" (a static token
// has no claims: the condition fails on it, and a deny rule then holds).
var testRules = []auth.Rule{
	{Effect: "allow", Tools: []string{"admin_*"}, Prompts: []string{"secret*"}, Resources: []string{"mem://secret/*", "mem://vault/*"}, When: `"admin" in scopes`},
	{Effect: "deny", Tools: []string{"admin_*"}, Prompts: []string{"secret*"}, Resources: []string{"mem://secret/*", "mem://vault/*"}},
	{Effect: "deny", Tools: []string{"ops_*"}, When: `claims.team != "ops"`},
}

func rulesConfig(t *testing.T, is *authtest.Issuer, rules []auth.Rule) auth.Config {
	t.Helper()
	p, err := auth.CompileRules(rules, 0)
	require.NoError(t, err)
	return auth.Config{Audience: rulesAud, Issuer: rulesIss, JWKSURL: is.URL(), Scopes: []string{"mcp"},
		Tokens: []string{"guest-token mcp", "admin-token mcp admin"}, FetchTimeout: time.Second,
		Rules: p, ToolScopes: map[string][]string{"ops_deploy": {"deploy"}}}
}

// rulesServer serves TCP and HTTP (listen false: neither, for stdio) with
// v, lists of two items a page, and: tools echo, block (newServer),
// admin_reset (which requires the admin scope itself), ops_deploy;
// prompts greet and secret_plan, each completing its argument;
// resources mem://public/a and mem://secret/b; template mem://vault/{id}.
func rulesServer(t *testing.T, v *auth.Verifier, listen bool) *mcpedge.Server {
	t.Helper()
	opts := mcpedge.Options{Auth: v, EngineOptions: mcpedge.EngineOptions{PageSize: 2}}
	if listen {
		opts.TCP = &mcpedge.TCPOptions{Addr: "127.0.0.1:0", Loops: 1}
		opts.HTTP = &mcpedge.HTTPOptions{Addr: "127.0.0.1:0", WriteTimeout: 2 * time.Second, AllowedHosts: []string{"*"}}
	}
	srv, _, _ := newServer(t, opts)
	ok := func(ctx context.Context, _ *mcpedge.CallToolRequest, _ struct{}) (*mcpedge.CallToolResult, any, error) {
		return mcpedge.TextResult("done"), nil, nil
	}
	require.NoError(t, mcpedge.AddTool(srv, &mcpedge.Tool{Name: "admin_reset"}, ok, mcpedge.ToolOptions{RequiredScopes: []string{"admin"}}))
	require.NoError(t, mcpedge.AddTool(srv, &mcpedge.Tool{Name: "ops_deploy"}, ok, mcpedge.ToolOptions{NonBlocking: true}))
	reg := srv.Registry()
	prompt := func(_ context.Context, req *handlers.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Description: req.Params.Name}, nil
	}
	complete := func(context.Context, *handlers.CompleteRequest) (*mcp.CompleteResult, error) {
		return &mcp.CompleteResult{Completion: mcp.Completion{Values: []string{"x"}}}, nil
	}
	for _, name := range []string{"greet", "secret_plan"} {
		require.NoError(t, reg.AddPrompt(&mcp.Prompt{Name: name, Arguments: []mcp.PromptArgument{{Name: "a"}}}, prompt))
		require.NoError(t, reg.AddPromptCompletion(name, "a", complete))
	}
	require.NoError(t, reg.AddStaticResource(&mcp.Resource{URI: "mem://public/a"}, mcp.ResourceContents{Text: "a"}))
	require.NoError(t, reg.AddStaticResource(&mcp.Resource{URI: "mem://secret/b"}, mcp.ResourceContents{Text: "b"}))
	require.NoError(t, reg.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "mem://vault/{id}"},
		func(_ context.Context, req *handlers.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: req.Params.URI, Text: req.Vars["id"]}}}, nil
		}))
	if listen {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		serve(ctx, srv)
	}
	return srv
}

// rpcAnswer is an answer, or a listen's acknowledgement, or a
// notification.
type rpcAnswer struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// rpcCall sends method with params members fields (no _meta), name being
// what Mcp-Name mirrors, and returns its answer.
type rpcCall func(method, fields, name string) rpcAnswer

// statelessMeta is the _meta of a 2026-07-28 request, with tok when not
// empty.
func statelessMeta(tok string) string {
	m := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}`
	if tok != "" {
		m += `,"io.mcpedge/token":` + strconv.Quote(tok)
	}
	return m + "}"
}

func joinFields(fields, meta string) string {
	switch {
	case fields == "":
		return "{" + meta + "}"
	case meta == "":
		return "{" + fields + "}"
	}
	return "{" + fields + "," + meta + "}"
}

// lineCaller speaks to a newline-delimited transport (TCP, stdio) as the
// holder of tok: a session initialized with it, or 2026-07-28 requests
// each carrying it. Notifications read on the way are kept in notes.
type lineCaller struct {
	t         *testing.T
	w         io.Writer
	r         *bufio.Reader
	id        int
	tok       string
	stateless bool
	notes     []string
}

func newLineCaller(t *testing.T, w io.Writer, r io.Reader, tok string, stateless bool) *lineCaller {
	c := &lineCaller{t: t, w: w, r: bufio.NewReader(r), tok: tok, stateless: stateless}
	if !stateless {
		a := c.call(mcp.MethodInitialize, `"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"},"_meta":{"io.mcpedge/token":`+strconv.Quote(tok)+`}`, "")
		require.Nil(t, a.Error, "initialize")
		c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	}
	return c
}

func (c *lineCaller) send(line string) {
	_, err := io.WriteString(c.w, line+"\n")
	require.NoError(c.t, err)
}

func (c *lineCaller) call(method, fields, _ string) rpcAnswer {
	c.t.Helper()
	c.id++
	id := strconv.Itoa(c.id)
	meta := ""
	if c.stateless {
		meta = statelessMeta(c.tok)
	}
	c.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":` + joinFields(fields, meta) + "}")
	for {
		a := c.read()
		if string(a.ID) == id || (a.ID == nil && a.Method == mcp.NotificationSubscriptionsAcked && method == mcp.MethodSubscriptionsListen) {
			return a
		}
		if a.ID == nil && a.Method != "" {
			c.notes = append(c.notes, a.Method)
		}
	}
}

func (c *lineCaller) read() rpcAnswer {
	line, err := c.r.ReadBytes('\n')
	require.NoError(c.t, err)
	var a rpcAnswer
	require.NoError(c.t, json.Unmarshal(line, &a), "%s", line)
	return a
}

// httpCaller posts to url with Authorization: Bearer tok: in a session it
// initializes, or as 2026-07-28 requests with their headers.
func httpCaller(t *testing.T, url, tok string, stateless bool) rpcCall {
	sid := ""
	do := func(method, fields, name string) rpcAnswer {
		meta := ""
		if stateless {
			meta = statelessMeta("")
		}
		body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + joinFields(fields, meta) + "}"
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+tok)
		if stateless {
			req.Header.Set("MCP-Protocol-Version", "2026-07-28")
			req.Header.Set("Mcp-Method", method)
			if name != "" {
				req.Header.Set("Mcp-Name", name)
			}
		} else if sid != "" {
			req.Header.Set("MCP-Protocol-Version", "2025-11-25")
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		// 403: a scope missing (insufficient_scope), its body the error.
		require.Contains(t, []int{http.StatusOK, http.StatusForbidden}, resp.StatusCode, "%s %s", method, fields)
		var a rpcAnswer
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			r := bufio.NewReader(resp.Body)
			for {
				line, err := r.ReadString('\n')
				require.NoError(t, err, method)
				if data, ok := strings.CutPrefix(line, "data: "); ok {
					require.NoError(t, json.Unmarshal([]byte(data), &a), data)
					if a.ID != nil || a.Method == mcp.NotificationSubscriptionsAcked {
						break
					}
				}
			}
		} else {
			b, _ := io.ReadAll(resp.Body)
			require.NoError(t, json.Unmarshal(b, &a), "%s: %s", method, b)
		}
		if method == mcp.MethodInitialize {
			sid = resp.Header.Get("Mcp-Session-Id")
		}
		return a
	}
	if !stateless {
		a := do(mcp.MethodInitialize, `"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}`, "")
		require.Nil(t, a.Error)
		require.NotEmpty(t, sid)
	}
	return do
}

// listAll follows a list's cursors and returns the keys of its items,
// and the number of pages.
func listAll(t *testing.T, call rpcCall, method, field, key string) (keys []string, pages int) {
	t.Helper()
	cursor := ""
	for {
		fields := ""
		if cursor != "" {
			fields = `"cursor":` + strconv.Quote(cursor)
		}
		a := call(method, fields, "")
		require.Nil(t, a.Error, "%s: %+v", method, a.Error)
		var page map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(a.Result, &page))
		var items []map[string]any
		require.NoError(t, json.Unmarshal(page[field], &items))
		for _, it := range items {
			keys = append(keys, it[key].(string))
		}
		pages++
		cursor = ""
		if raw, ok := page["nextCursor"]; ok {
			require.NoError(t, json.Unmarshal(raw, &cursor))
		}
		if cursor == "" {
			return keys, pages
		}
		require.Less(t, pages, 10, "runaway cursors")
	}
}

// rulesCaller is one caller of the matrix and what it may see.
type rulesCaller struct {
	name                        string
	tok                         string // a token, as TCP and stdio carry it, and HTTP's bearer
	tools, prompts, res, tmpls  []string
	hiddenTool, hiddenPrompt    string
	hiddenURI, hiddenTmplURI    string
	visibleURI, visibleTmplURI  string
	opsDeploy                   int // the code of a tools/call of ops_deploy: 0, or the scope's
	listenAcked, listenNotAcked []string
}

func rulesCallers() []rulesCaller {
	ops := authtest.Good(rulesAud, rulesIss, "mcp")
	ops["team"] = "ops"
	opsDeployer := authtest.Good(rulesAud, rulesIss, "mcp deploy")
	opsDeployer["team"] = "ops"
	opsDeployer["sub"] = "bob"
	return []rulesCaller{
		{name: "guest", tok: "guest-token", tools: []string{"echo", "block"}, prompts: []string{"greet"},
			res: []string{"mem://public/a"}, tmpls: nil, hiddenTool: "admin_reset", hiddenPrompt: "secret_plan",
			hiddenURI: "mem://secret/b", hiddenTmplURI: "mem://vault/7", visibleURI: "mem://public/a",
			opsDeploy: codeHidden, listenAcked: []string{"mem://public/a"}, listenNotAcked: []string{"mem://secret/b", "mem://vault/7"}},
		{name: "admin", tok: "admin-token", tools: []string{"echo", "block", "admin_reset"}, prompts: []string{"greet", "secret_plan"},
			res: []string{"mem://public/a", "mem://secret/b"}, tmpls: []string{"mem://vault/{id}"},
			visibleURI: "mem://secret/b", visibleTmplURI: "mem://vault/7", hiddenTool: "ops_deploy",
			opsDeploy: codeHidden, listenAcked: []string{"mem://secret/b", "mem://vault/7"}},
		{name: "ops", tok: authtest.Sign("rsa1", "RS256", ops), tools: []string{"echo", "block", "ops_deploy"}, prompts: []string{"greet"},
			res: []string{"mem://public/a"}, hiddenTool: "admin_reset", hiddenPrompt: "secret_plan", hiddenURI: "mem://secret/b",
			visibleURI: "mem://public/a", opsDeploy: auth.CodeForbidden, listenNotAcked: []string{"mem://secret/b"}},
		{name: "ops-deployer", tok: authtest.Sign("rsa1", "RS256", opsDeployer), tools: []string{"echo", "block", "ops_deploy"},
			prompts: []string{"greet"}, res: []string{"mem://public/a"}, hiddenTool: "admin_reset", opsDeploy: 0},
	}
}

// codeHidden stands for the answer to a tool hidden: that of a tool that
// does not exist.
const codeHidden = -1

// checkCaller runs every check of c over call.
func checkCaller(t *testing.T, call rpcCall, c rulesCaller, stateless bool) {
	t.Helper()
	tools, pages := listAll(t, call, mcp.MethodToolsList, "tools", "name")
	assert.Equal(t, c.tools, tools, "tools/list")
	assert.Equal(t, (len(c.tools)+1)/2, pages, "tools/list pages of two")
	prompts, _ := listAll(t, call, mcp.MethodPromptsList, "prompts", "name")
	assert.Equal(t, c.prompts, prompts, "prompts/list")
	res, _ := listAll(t, call, mcp.MethodResourcesList, "resources", "uri")
	assert.Equal(t, c.res, res, "resources/list")
	tmpls, _ := listAll(t, call, mcp.MethodResourcesTemplatesList, "resourceTemplates", "uriTemplate")
	assert.Equal(t, c.tmpls, tmpls, "resources/templates/list")

	// What is hidden is answered as what does not exist: the same code,
	// and the same message less the name.
	same := func(method, hiddenFields, missingFields, hiddenName, missingName, hidden, missing string) {
		t.Helper()
		h, m := call(method, hiddenFields, hiddenName), call(method, missingFields, missingName)
		require.NotNil(t, h.Error, "%s of hidden %s", method, hidden)
		require.NotNil(t, m.Error, "%s of missing %s", method, missing)
		assert.Equal(t, m.Error.Code, h.Error.Code, "%s: hidden as missing", method)
		assert.Equal(t, strings.ReplaceAll(m.Error.Message, missing, "X"), strings.ReplaceAll(h.Error.Message, hidden, "X"), method)
		assert.Equal(t, strings.ReplaceAll(string(m.Error.Data), missing, "X"), strings.ReplaceAll(string(h.Error.Data), hidden, "X"), method)
	}
	if c.hiddenTool != "" {
		same(mcp.MethodToolsCall, `"name":"`+c.hiddenTool+`","arguments":{}`, `"name":"no_such_tool","arguments":{}`,
			c.hiddenTool, "no_such_tool", c.hiddenTool, "no_such_tool")
	}
	for _, name := range c.tools {
		if name == "block" {
			continue
		}
		a := call(mcp.MethodToolsCall, `"name":"`+name+`","arguments":{"text":"x"}`, name)
		switch {
		case name == "ops_deploy" && c.opsDeploy == auth.CodeForbidden:
			require.NotNil(t, a.Error, "ops_deploy without the deploy scope")
			assert.Equal(t, auth.CodeForbidden, a.Error.Code)
		default:
			assert.Nil(t, a.Error, "tools/call %s", name)
		}
	}
	if c.hiddenPrompt != "" {
		same(mcp.MethodPromptsGet, `"name":"`+c.hiddenPrompt+`"`, `"name":"no_such_prompt"`, c.hiddenPrompt, "no_such_prompt", c.hiddenPrompt, "no_such_prompt")
		same(mcp.MethodCompletionComplete, `"ref":{"type":"ref/prompt","name":"`+c.hiddenPrompt+`"},"argument":{"name":"a","value":""}`,
			`"ref":{"type":"ref/prompt","name":"no_such_prompt"},"argument":{"name":"a","value":""}`, "", "", c.hiddenPrompt, "no_such_prompt")
	}
	for _, name := range c.prompts {
		a := call(mcp.MethodPromptsGet, `"name":"`+name+`"`, name)
		assert.Nil(t, a.Error, "prompts/get %s", name)
		a = call(mcp.MethodCompletionComplete, `"ref":{"type":"ref/prompt","name":"`+name+`"},"argument":{"name":"a","value":""}`, "")
		assert.Nil(t, a.Error, "completion/complete %s", name)
	}
	for _, uri := range []string{c.hiddenURI, c.hiddenTmplURI} {
		if uri != "" {
			same(mcp.MethodResourcesRead, `"uri":"`+uri+`"`, `"uri":"mem://nothing/here"`, uri, "mem://nothing/here", uri, "mem://nothing/here")
		}
	}
	for _, uri := range []string{c.visibleURI, c.visibleTmplURI} {
		if uri != "" {
			a := call(mcp.MethodResourcesRead, `"uri":"`+uri+`"`, uri)
			assert.Nil(t, a.Error, "resources/read %s", uri)
		}
	}
	if len(c.tmpls) == 0 {
		same(mcp.MethodCompletionComplete, `"ref":{"type":"ref/resource","uri":"mem://vault/{id}"},"argument":{"name":"id","value":""}`,
			`"ref":{"type":"ref/resource","uri":"mem://none/{id}"},"argument":{"name":"id","value":""}`, "", "", "mem://vault/{id}", "mem://none/{id}")
	}

	// Subscriptions: none to what the caller may not read.
	if stateless {
		uris := append(append([]string{}, c.listenAcked...), c.listenNotAcked...)
		q := make([]string, len(uris))
		for i, u := range uris {
			q[i] = strconv.Quote(u)
		}
		a := call(mcp.MethodSubscriptionsListen, `"notifications":{"toolsListChanged":true,"resourceSubscriptions":[`+strings.Join(q, ",")+`]}`, "")
		require.Equal(t, mcp.NotificationSubscriptionsAcked, a.Method, "%+v", a.Error)
		var p struct {
			Notifications mcp.SubscriptionFilter `json:"notifications"`
		}
		require.NoError(t, json.Unmarshal(a.Params, &p))
		assert.True(t, p.Notifications.ToolsListChanged)
		assert.Equal(t, c.listenAcked, p.Notifications.ResourceSubscriptions, "the URIs honoured are those the caller may read")
		return
	}
	for _, uri := range c.listenNotAcked {
		h, m := call(mcp.MethodResourcesSubscribe, `"uri":"`+uri+`"`, ""), call(mcp.MethodResourcesSubscribe, `"uri":"mem://nothing/here"`, "")
		require.NotNil(t, h.Error, "resources/subscribe %s", uri)
		require.NotNil(t, m.Error)
		assert.Equal(t, m.Error.Code, h.Error.Code)
	}
	for _, uri := range c.listenAcked {
		a := call(mcp.MethodResourcesSubscribe, `"uri":"`+uri+`"`, "")
		assert.Nil(t, a.Error, "resources/subscribe %s", uri)
	}
}

func TestRulesFilterPerCaller(t *testing.T) {
	is := authtest.NewIssuer()
	defer is.Server.Close()
	v, err := auth.New(rulesConfig(t, is, testRules))
	require.NoError(t, err)
	t.Cleanup(v.Close)
	srv := rulesServer(t, v, true)
	ctx := context.Background()
	tcpAddr, httpURL := srv.TCPAddr(ctx).String(), "http://"+srv.HTTPAddr(ctx).String()+"/mcp"

	for _, era := range []struct {
		name      string
		stateless bool
	}{{"session", false}, {"2026-07-28", true}} {
		for _, c := range rulesCallers() {
			t.Run("tcp/"+era.name+"/"+c.name, func(t *testing.T) {
				nc, err := net.Dial("tcp", tcpAddr)
				require.NoError(t, err)
				defer nc.Close()
				require.NoError(t, nc.SetDeadline(time.Now().Add(wait)))
				checkCaller(t, newLineCaller(t, nc, nc, c.tok, era.stateless).call, c, era.stateless)
			})
			t.Run("stdio/"+era.name+"/"+c.name, func(t *testing.T) {
				srv := rulesServer(t, v, false)
				inR, inW := io.Pipe()
				outR, outW := io.Pipe()
				done := make(chan error, 1)
				go func() { done <- srv.ServeStdio(context.Background(), inR, outW) }()
				checkCaller(t, newLineCaller(t, inW, outR, c.tok, era.stateless).call, c, era.stateless)
				inW.Close()
				go io.Copy(io.Discard, outR) //nolint:errcheck // drains what the shutdown writes
				require.NoError(t, result(t, done))
				outR.Close()
			})
			t.Run("http/"+era.name+"/"+c.name, func(t *testing.T) {
				checkCaller(t, httpCaller(t, httpURL, c.tok, era.stateless), c, era.stateless)
			})
		}
	}
}

// TestRulesListChangedAndReload: a change of the registry reaches the
// callers who listed, and each then lists what its class sees of the new
// list; a reload with other rules changes what a caller's open session
// sees.
func TestRulesListChangedAndReload(t *testing.T) {
	is := authtest.NewIssuer()
	defer is.Server.Close()
	cfg := rulesConfig(t, is, testRules)
	v, err := auth.New(cfg)
	require.NoError(t, err)
	t.Cleanup(v.Close)
	srv := rulesServer(t, v, true)
	addr := srv.TCPAddr(context.Background()).String()
	dial := func(tok string) *lineCaller {
		nc, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { nc.Close() })
		require.NoError(t, nc.SetDeadline(time.Now().Add(wait)))
		return newLineCaller(t, nc, nc, tok, false)
	}
	guest, admin := dial("guest-token"), dial("admin-token")
	opsClaims := authtest.Good(rulesAud, rulesIss, "mcp")
	opsClaims["team"] = "ops"
	ops := dial(authtest.Sign("rsa1", "RS256", opsClaims))
	names := func(c *lineCaller) []string {
		n, _ := listAll(t, c.call, mcp.MethodToolsList, "tools", "name")
		return n
	}
	assert.Equal(t, []string{"echo", "block"}, names(guest))
	assert.Equal(t, []string{"echo", "block", "admin_reset"}, names(admin))
	assert.Equal(t, []string{"echo", "block", "ops_deploy"}, names(ops))

	ok := func(context.Context, *mcpedge.CallToolRequest, struct{}) (*mcpedge.CallToolResult, any, error) {
		return mcpedge.TextResult("ok"), nil, nil
	}
	require.NoError(t, mcpedge.AddTool(srv, &mcpedge.Tool{Name: "admin_audit"}, ok))
	require.NoError(t, mcpedge.AddTool(srv, &mcpedge.Tool{Name: "status"}, ok))
	for _, c := range []*lineCaller{guest, admin} {
		a := c.read() // the list change, coalesced: one notice
		assert.Equal(t, mcp.NotificationToolListChanged, a.Method)
	}
	assert.Equal(t, []string{"echo", "block", "status"}, names(guest))
	assert.Equal(t, []string{"echo", "block", "admin_reset", "admin_audit", "status"}, names(admin))

	// New rules: admin_* for no one, the rest for everyone.
	p, err := auth.CompileRules([]auth.Rule{{Effect: "deny", Tools: []string{"admin_*"}}}, 0)
	require.NoError(t, err)
	cfg.Rules = p
	require.NoError(t, v.Reload(cfg))
	assert.Equal(t, []string{"echo", "block", "ops_deploy", "status"}, names(guest))
	assert.Equal(t, []string{"echo", "block", "ops_deploy", "status"}, names(admin))
	assert.Equal(t, []string{"echo", "block", "ops_deploy", "status"}, names(ops), "a JWT's session, its rules evaluated again")
	a := admin.call(mcp.MethodToolsCall, `"name":"admin_reset","arguments":{}`, "")
	require.NotNil(t, a.Error)
	assert.Equal(t, "unknown tool: admin_reset", a.Error.Message)
	prompts, _ := listAll(t, guest.call, mcp.MethodPromptsList, "prompts", "name")
	assert.Equal(t, []string{"greet", "secret_plan"}, prompts, "the reloaded rules hide no prompt")

	// No rules at all: every item, for everyone.
	cfg.Rules = nil
	require.NoError(t, v.Reload(cfg))
	assert.Equal(t, []string{"echo", "block", "admin_reset", "ops_deploy", "admin_audit", "status"}, names(guest))
}

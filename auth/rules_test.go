package auth_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpedge/mcpedge/auth"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/internal/authtest"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
)

func TestCompileRulesErrors(t *testing.T) {
	tools := []string{"*"}
	for _, tc := range []struct {
		name  string
		rules []auth.Rule
		want  string // in the error; "" for none
	}{
		{"none", nil, ""},
		{"allow", []auth.Rule{{Effect: "allow", Tools: tools}}, ""},
		{"with when", []auth.Rule{{Effect: "deny", Prompts: tools, When: `"a" in scopes && subject != "x" && claims.team == "ops" && sets.intersects(scopes, ["b"]) && client_id.lowerAscii() == "c"`}}, ""},
		{"effect", []auth.Rule{{Effect: "permit", Tools: tools}}, `rule 1: effect "permit"`},
		{"no effect", []auth.Rule{{Tools: tools}}, `rule 1: effect ""`},
		{"no pattern", []auth.Rule{{Effect: "allow"}, {Effect: "deny"}}, "rule 1: no tools, prompts or resources"},
		{"empty pattern", []auth.Rule{{Effect: "allow", Tools: tools}, {Effect: "allow", Resources: []string{""}}}, "rule 2: pattern"},
		{"long pattern", []auth.Rule{{Effect: "allow", Tools: []string{strings.Repeat("x", auth.MaxPatternLen+1)}}}, "longer than"},
		{"syntax", []auth.Rule{{Effect: "allow", Tools: tools, When: `scopes in`}}, "rule 1: when:"},
		{"not bool", []auth.Rule{{Effect: "allow", Tools: tools, When: `subject`}}, "not bool"},
		{"unknown variable", []auth.Rule{{Effect: "allow", Tools: tools, When: `token == "x"`}}, "undeclared reference"},
		{"long when", []auth.Rule{{Effect: "allow", Tools: tools, When: strings.Repeat("true && ", 600) + "true"}}, "longer than"},
		{"deep when", []auth.Rule{{Effect: "allow", Tools: tools, When: strings.Repeat("(", 100) + "true" + strings.Repeat(")", 100)}}, "rule 1: when:"},
		{"too many", make([]auth.Rule, auth.MaxRules+1), "rules, at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := auth.CompileRules(tc.rules, 0)
			if tc.want == "" {
				require.NoError(t, err)
				assert.Equal(t, len(tc.rules), p.Len())
				return
			}
			require.Error(t, err)
			assert.True(t, errors.Is(err, auth.ErrRules))
			assert.Contains(t, err.Error(), tc.want)
			assert.Nil(t, p)
		})
	}
}

func TestGlob(t *testing.T) {
	for _, tc := range []struct {
		pattern, name string
		want          bool
	}{
		{"*", "", true},
		{"*", "anything/at/all", true},
		{"", "", true},
		{"", "x", false},
		{"echo", "echo", true},
		{"echo", "echo2", false},
		{"admin_*", "admin_reset", true},
		{"admin_*", "admin_", true},
		{"admin_*", "xadmin_reset", false},
		{"*_write", "file_write", true},
		{"*_write", "file_writer", false},
		{"file:///etc/*", "file:///etc/passwd", true},
		{"file:///etc/*", "file:///etc/ssh/key", true},
		{"file:///etc/*", "file:///var/x", false},
		{"a*b*c", "abc", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"a**", "a", true},
		{"mem://vault/{id}", "mem://vault/{id}", true},
		{"[x]?", "[x]?", true}, // no other metacharacter
		{"[x]?", "x?", false},
	} {
		assert.Equal(t, tc.want, auth.Glob(tc.pattern, tc.name), "%q %q", tc.pattern, tc.name)
	}
}

// FuzzGlob holds Glob to the regular expression its pattern means.
func FuzzGlob(f *testing.F) {
	for _, s := range [][2]string{{"*", ""}, {"a*b", "acb"}, {"**x", "yx"}, {"a*", "b"}, {"*a*a*a", "aaaa"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		if len(pattern) > 64 || len(name) > 256 {
			return
		}
		parts := strings.Split(pattern, "*")
		for i, p := range parts {
			parts[i] = regexp.QuoteMeta(p)
		}
		re, err := regexp.Compile(`(?s)\A` + strings.Join(parts, ".*") + `\z`)
		if err != nil {
			return // bytes that are not UTF-8: regexp would read them otherwise
		}
		if !isUTF8(pattern) || !isUTF8(name) {
			return
		}
		if got, want := auth.Glob(pattern, name), re.MatchString(name); got != want {
			t.Fatalf("Glob(%q, %q) = %v, want %v", pattern, name, got, want)
		}
	})
}

func isUTF8(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

// classOf returns the class the verifier gives the holder of tok.
func classOf(t *testing.T, v *auth.Verifier, tok string) handlers.Class {
	t.Helper()
	info, err := v.Verify(context.Background(), tok)
	require.NoError(t, err)
	return v.Class(info)
}

// TestRulesClasses: the first rule that includes an item and applies to
// a caller decides; a condition that fails (a claim missing) applies a
// deny rule, not an allow rule; callers with the same outcomes share a
// class; a reload brings the new rules to callers already verified.
func TestRulesClasses(t *testing.T) {
	is := authtest.NewIssuer()
	defer is.Server.Close()
	rules := []auth.Rule{
		{Effect: "allow", Tools: []string{"admin_*"}, When: `"admin" in scopes`},
		{Effect: "deny", Tools: []string{"admin_*"}},
		{Effect: "allow", Tools: []string{"ops_*"}, When: `claims.team == "ops"`},
		{Effect: "deny", Tools: []string{"ops_*"}},
		{Effect: "deny", Prompts: []string{"*"}, Resources: []string{"secret://*"}, When: `claims.level < 3`},
	}
	p, err := auth.CompileRules(rules, 0)
	require.NoError(t, err)
	v := newVerifier(t, is, func(c *auth.Config) {
		c.Tokens = []string{"admin mcp admin", "guest mcp", "guest2 mcp"}
		c.Rules = p
	})
	ops := authtest.Good(aud, iss, "mcp")
	ops["team"], ops["level"] = "ops", 5
	low := authtest.Good(aud, iss, "mcp admin")
	low["level"] = 1

	admin, guest, guest2 := classOf(t, v, "admin"), classOf(t, v, "guest"), classOf(t, v, "guest2")
	opsC, lowC := classOf(t, v, authtest.Sign("rsa1", "RS256", ops)), classOf(t, v, authtest.Sign("ec1", "ES256", low))
	assert.Same(t, guest, guest2, "the same outcomes, one class")
	assert.NotSame(t, guest, admin)
	for _, tc := range []struct {
		class handlers.Class
		list  handlers.ListName
		key   string
		want  bool
	}{
		{admin, handlers.ListNameTools, "admin_reset", true},
		{guest, handlers.ListNameTools, "admin_reset", false},
		{guest, handlers.ListNameTools, "echo", true},
		{guest, handlers.ListNameTools, "ops_deploy", false}, // no claims: the allow rule fails, the deny holds
		{opsC, handlers.ListNameTools, "ops_deploy", true},
		{opsC, handlers.ListNameTools, "admin_reset", false},
		{lowC, handlers.ListNameTools, "admin_reset", true},
		{lowC, handlers.ListNamePrompts, "any", false},
		{lowC, handlers.ListNameResources, "secret://a", false},
		{lowC, handlers.ListNameTemplates, "secret://{x}", false},
		{lowC, handlers.ListNameResources, "public://a", true},
		{opsC, handlers.ListNamePrompts, "any", true},
		{guest, handlers.ListNamePrompts, "any", false}, // claims.level fails: the deny rule holds
	} {
		assert.Equal(t, tc.want, tc.class.Allows(tc.list, tc.key), "%v %v %q", tc.class, tc.list, tc.key)
	}
	assert.Equal(t, "rules 2,4,5", guest.(*auth.Class).String())

	// A session's caller, verified before a reload, gets the new rules.
	info, err := v.Verify(context.Background(), "guest")
	require.NoError(t, err)
	p2, err := auth.CompileRules([]auth.Rule{{Effect: "allow", Tools: []string{"*"}}}, 0)
	require.NoError(t, err)
	cfg := v.Config()
	cfg.Rules = p2
	require.NoError(t, v.Reload(cfg))
	assert.True(t, v.Class(info).Allows(handlers.ListNameTools, "admin_reset"), "the new rules, before the recheck")
	assert.True(t, classOf(t, v, "guest").Allows(handlers.ListNameTools, "admin_reset"))
	cfg.Rules = nil
	require.NoError(t, v.Reload(cfg))
	assert.Nil(t, v.Class(info), "no rules, no class")
	assert.Nil(t, v.Class(nil))
}

// A condition whose evaluation costs more than RuleCostLimit fails, on
// that token: an allow rule does not apply, a deny rule does.
func TestRulesCostLimit(t *testing.T) {
	is := authtest.NewIssuer()
	defer is.Server.Close()
	heavy := `claims.groups.all(a, claims.groups.all(b, claims.groups.all(c, a + b + c != "")))`
	p, err := auth.CompileRules([]auth.Rule{
		{Effect: "allow", Tools: []string{"a"}, When: heavy},
		{Effect: "deny", Tools: []string{"a"}},
		{Effect: "deny", Tools: []string{"b"}, When: "!(" + heavy + ")"},
	}, 0)
	require.NoError(t, err)
	v := newVerifier(t, is, func(c *auth.Config) { c.Rules = p })
	claims := authtest.Good(aud, iss, "mcp")
	groups := make([]string, 100) // 100³ steps: past the limit
	for i := range groups {
		groups[i] = "g"
	}
	claims["groups"] = groups
	c := classOf(t, v, authtest.Sign("rsa1", "RS256", claims))
	assert.False(t, c.Allows(handlers.ListNameTools, "a"), "the allow rule failed")
	assert.False(t, c.Allows(handlers.ListNameTools, "b"), "the deny rule failed, and holds")
	claims["groups"] = groups[:3]
	c = classOf(t, v, authtest.Sign("rsa1", "RS256", claims))
	assert.True(t, c.Allows(handlers.ListNameTools, "a"), "within the limit")
	assert.True(t, c.Allows(handlers.ListNameTools, "b"))
}

// Past maxClasses, classes are still right, shared by no one.
func TestRulesMaxClasses(t *testing.T) {
	is := authtest.NewIssuer()
	defer is.Server.Close()
	p, err := auth.CompileRules([]auth.Rule{
		{Effect: "deny", Tools: []string{"a"}, When: `"a" in scopes`},
		{Effect: "deny", Tools: []string{"b"}, When: `"b" in scopes`},
	}, 2)
	require.NoError(t, err)
	v := newVerifier(t, is, func(c *auth.Config) {
		c.Tokens = []string{"t1 mcp", "t2 mcp a", "t3 mcp b", "t4 mcp b"}
		c.Rules = p
	})
	c1, c2, c3, c4 := classOf(t, v, "t1"), classOf(t, v, "t2"), classOf(t, v, "t3"), classOf(t, v, "t4")
	assert.NotSame(t, c3, c4, "not interned past the bound")
	assert.NotSame(t, c1, c2)
	assert.False(t, c3.Allows(handlers.ListNameTools, "b"))
	assert.False(t, c4.Allows(handlers.ListNameTools, "b"))
	assert.True(t, c4.Allows(handlers.ListNameTools, "a"))
}

// The config's tool scopes are required besides the tool's own; ToolScopes
// names nothing for a tool the caller's class hides.
func TestToolScopesConfigured(t *testing.T) {
	is := authtest.NewIssuer()
	defer is.Server.Close()
	p, err := auth.CompileRules([]auth.Rule{{Effect: "deny", Tools: []string{"hidden"}}}, 0)
	require.NoError(t, err)
	v := newVerifier(t, is, func(c *auth.Config) {
		c.Tokens = []string{"reader mcp files:read", "writer mcp files:read files:write"}
		c.ToolScopes = map[string][]string{"write": {"files:write"}, "both": {"files:write"}, "hidden": {"x"}}
		c.Rules = p
	})
	ctx := context.Background()
	reader, err := v.Verify(ctx, "reader")
	require.NoError(t, err)
	writer, err := v.Verify(ctx, "writer")
	require.NoError(t, err)
	assert.Equal(t, auth.CodeForbidden, code(t, v.AuthorizeTool(reader, "write", nil)))
	assert.Equal(t, auth.CodeForbidden, code(t, v.AuthorizeTool(reader, "write", []string{"files:read", "files:write"})))
	assert.NoError(t, v.AuthorizeTool(writer, "write", []string{"files:read"}))
	assert.NoError(t, v.AuthorizeTool(reader, "read", []string{"files:read"}))

	srv := newEngine(t, v)
	assert.Equal(t, []string{"files:write"}, v.ToolScopes(srv, reader, []byte(`{"name":"write"}`)))
	assert.Equal(t, []string{"files:read", "files:write"}, v.ToolScopes(srv, reader, []byte(`{"name":"both"}`)))
	assert.Nil(t, v.ToolScopes(srv, reader, []byte(`{"name":"hidden"}`)), "nothing named of a hidden tool")
	assert.Nil(t, v.ToolScopes(srv, reader, []byte(`{"name":"free"}`)))
}

// newEngine returns an engine authorizing with v, with the tools write,
// both (which requires files:read itself), hidden and free.
func newEngine(t *testing.T, v *auth.Verifier) *engine.Server {
	t.Helper()
	srv := engine.New(engine.Options{Authorize: v})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	h := func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.TextResult("ok"), nil
	}
	for _, name := range []string{"write", "hidden", "free"} {
		require.NoError(t, srv.Registry().AddTool(&mcp.Tool{Name: name}, h))
	}
	require.NoError(t, srv.Registry().AddTool(&mcp.Tool{Name: "both"}, h, handlers.ToolOptions{RequiredScopes: []string{"files:read"}}))
	return srv
}

// BenchmarkClass measures the policy class lookup of a verified caller
// (what the engine asks per request that lists or names an item), with
// and without rules, and the evaluation of five rules' conditions on a
// token (what a new token costs once).
func BenchmarkClass(b *testing.B) {
	is := authtest.NewIssuer()
	defer is.Server.Close()
	rules := []auth.Rule{
		{Effect: "allow", Tools: []string{"admin_*"}, When: `"admin" in scopes`},
		{Effect: "deny", Tools: []string{"admin_*"}},
		{Effect: "deny", Tools: []string{"ops_*"}, When: `!has(claims.team) || claims.team != "ops"`},
		{Effect: "allow", Tools: []string{"*"}, When: `"mcp" in scopes && subject.startsWith("al")`},
		{Effect: "deny", Tools: []string{"*"}, When: `sets.intersects(scopes, ["banned", "suspended"])`},
	}
	p, err := auth.CompileRules(rules, 0)
	if err != nil {
		b.Fatal(err)
	}
	tok := authtest.Sign("rsa1", "RS256", authtest.Good(aud, iss, "mcp files:read"))
	for _, bc := range []struct {
		name  string
		rules *auth.Rules
	}{{"rules-off", nil}, {"rules-on", p}} {
		b.Run("lookup/"+bc.name, func(b *testing.B) {
			v := newVerifier(b, is, func(c *auth.Config) { c.Rules = bc.rules })
			info, err := v.Verify(context.Background(), tok)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				_ = v.Class(info)
			}
		})
	}
	b.Run("evaluate/5-rules", func(b *testing.B) {
		v := newVerifier(b, is, func(c *auth.Config) { c.Rules = p })
		info, err := v.Verify(context.Background(), tok)
		if err != nil {
			b.Fatal(err)
		}
		p2, _ := auth.CompileRules(rules, 0)
		cfg := v.Config()
		cfg.Rules = p2 // info's class is of p: Class evaluates anew
		v2 := newVerifier(b, is, func(c *auth.Config) { *c = cfg })
		b.ReportAllocs()
		for b.Loop() {
			_ = v2.Class(info)
		}
	})
}

// The members of an introspection answer are claims to rules, and what
// Info.Claims returns; a JWT's claims likewise.
func TestRulesIntrospectedClaims(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		team := strings.TrimPrefix(r.PostForm.Get("token"), "opaque-")
		_ = json.NewEncoder(w).Encode(map[string]any{"active": true, "scope": "mcp", "sub": "bob", "team": team,
			"exp": time.Now().Add(time.Hour).Unix()})
	}))
	defer srv.Close()
	p, err := auth.CompileRules([]auth.Rule{{Effect: "deny", Tools: []string{"ops_*"}, When: `claims.team != "ops"`}}, 0)
	require.NoError(t, err)
	v, err := auth.New(auth.Config{Audience: aud, Scopes: []string{"mcp"}, IntrospectionURL: srv.URL, Rules: p})
	require.NoError(t, err)
	defer v.Close()
	ctx := context.Background()
	ops, err := v.Verify(ctx, "opaque-ops")
	require.NoError(t, err)
	assert.Equal(t, "ops", ops.Claims()["team"])
	assert.True(t, v.Class(ops).Allows(handlers.ListNameTools, "ops_deploy"))
	dev, err := v.Verify(ctx, "opaque-dev")
	require.NoError(t, err)
	assert.False(t, v.Class(dev).Allows(handlers.ListNameTools, "ops_deploy"))

	is := authtest.NewIssuer()
	defer is.Server.Close()
	jv := newVerifier(t, is, nil)
	c := authtest.Good(aud, iss, "mcp")
	c["groups"] = []string{"a", "b"}
	info, err := jv.Verify(ctx, authtest.Sign("rsa1", "RS256", c))
	require.NoError(t, err)
	assert.Equal(t, []any{"a", "b"}, info.Claims()["groups"])
	assert.Equal(t, "alice", info.Claims()["sub"])
	static, err := auth.New(auth.Config{Audience: aud, Tokens: []string{"tok"}})
	require.NoError(t, err)
	defer static.Close()
	si, err := static.Verify(ctx, "tok")
	require.NoError(t, err)
	assert.Nil(t, si.Claims())
}

// After a reload that changes the rules, a session's JWT caller has its
// conditions evaluated again on a worker, not on the event loop: asked
// without leave to block, Authorize defers it once.
func TestRulesRecheckOffTheLoop(t *testing.T) {
	is := authtest.NewIssuer()
	defer is.Server.Close()
	p1, err := auth.CompileRules([]auth.Rule{{Effect: "deny", Tools: []string{"a"}, When: `"mcp" in scopes`}}, 0)
	require.NoError(t, err)
	v := newVerifier(t, is, func(c *auth.Config) { c.Rules = p1; c.Tokens = []string{"static mcp"} })
	ctx := context.Background()
	jwtInfo, err := v.Verify(ctx, authtest.Sign("rsa1", "RS256", authtest.Good(aud, iss, "mcp")))
	require.NoError(t, err)
	staticInfo, err := v.Verify(ctx, "static")
	require.NoError(t, err)
	jwtSess, staticSess := session.New(ctx, nil), session.New(ctx, nil)
	jwtSess.SetAuth(jwtInfo)
	staticSess.SetAuth(staticInfo)

	p2, err := auth.CompileRules([]auth.Rule{{Effect: "deny", Tools: []string{"b"}, When: `"mcp" in scopes`}}, 0)
	require.NoError(t, err)
	cfg := v.Config()
	cfg.Rules = p2
	require.NoError(t, v.Reload(cfg))
	_, err = v.Authorize(ctx, jwtSess, "tools/list", nil, false)
	require.ErrorIs(t, err, engine.ErrAuthWouldBlock)
	c, err := v.Authorize(ctx, jwtSess, "tools/list", nil, true)
	require.NoError(t, err)
	assert.False(t, v.Class(c).Allows(handlers.ListNameTools, "b"))
	assert.True(t, v.Class(c).Allows(handlers.ListNameTools, "a"))
	_, err = v.Authorize(ctx, jwtSess, "tools/list", nil, false)
	require.NoError(t, err, "once rechecked, decided on the loop")
	c, err = v.Authorize(ctx, staticSess, "tools/list", nil, false)
	require.NoError(t, err, "a static token's class comes with its entry")
	assert.False(t, v.Class(c).Allows(handlers.ListNameTools, "b"))
}

package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpedge/mcpedge/auth"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
)

// tokenFile writes a static-token file and returns the config lines that
// turn authorization on with it.
func tokenFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tokens")
	require.NoError(t, os.WriteFile(p, []byte("admin-token mcp admin\nguest-token mcp\n"), 0o600))
	return "auth-token-file = \"" + p + "\"\nauth-audience = \"http://127.0.0.1/mcp\"\n"
}

const rulesText = `
[[rule]]
effect = "allow"
tools = ["admin_*"]
when = '"admin" in scopes'

[[rule]]
effect = "deny"
tools = ["admin_*"]
prompts = ["secret*"]
resources = ["file:///etc/*"]

[tool.write_file]
scopes = ["files:write"]

[tool."a.b"]
scopes = ["x", "y"]
`

func TestConfigTables(t *testing.T) {
	c, err := parse([]string{"-config", writeConfig(t, tokenFile(t)+"max-inflight = 5\n"+rulesText)}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 5, c.maxInflight, "flags' keys beside the tables")
	require.Len(t, c.tables.rules, 2)
	assert.Equal(t, auth.Rule{Effect: "allow", Tools: []string{"admin_*"}, When: `"admin" in scopes`}, c.tables.rules[0])
	assert.Equal(t, auth.Rule{Effect: "deny", Tools: []string{"admin_*"}, Prompts: []string{"secret*"}, Resources: []string{"file:///etc/*"}}, c.tables.rules[1])
	assert.Equal(t, 2, c.auth.rules.Len())
	assert.Equal(t, map[string][]string{"write_file": {"files:write"}, "a.b": {"x", "y"}}, c.auth.toolScopes)
	cfg, err := c.auth.config(c.http, c.httpPath, nil)
	require.NoError(t, err)
	assert.Same(t, c.auth.rules, cfg.Rules)
	assert.Equal(t, c.auth.toolScopes, cfg.ToolScopes)
	assert.Equal(t, auth.DefaultMaxClasses, c.auth.maxClasses)

	c, err = parse([]string{"-config", writeConfig(t, tokenFile(t))}, io.Discard)
	require.NoError(t, err)
	assert.Nil(t, c.auth.rules, "no rules, no policy")
	assert.Nil(t, c.auth.toolScopes)
}

// TestConfigTablesRefused: a table the loader does not know, a key a
// table does not have, a value of the wrong type, a rule that does not
// compile, rules or tool scopes without authorization: each refused with
// an error naming it.
func TestConfigTablesRefused(t *testing.T) {
	authOn := tokenFile(t)
	for _, tc := range []struct{ text, want string }{
		{authOn + "[[rule]]\neffect = \"allow\"\ntools = [\"*\"]\nwhom = \"x\"\n", `[rule]: rule 1: unknown key "whom" (effect, prompts, resources, tools, when)`},
		{authOn + "[[rule]]\neffect = 1\ntools = [\"*\"]\n", `[rule]: rule 1: key "effect": must be a string`},
		{authOn + "[[rule]]\neffect = \"deny\"\ntools = \"*\"\n", `key "tools": must be an array of strings`},
		{authOn + "[[rule]]\neffect = \"deny\"\ntools = [1]\n", `key "tools": must be an array of strings, got a int64`},
		{authOn + "[rule]\neffect = \"deny\"\n", `[rule]: must be an array of tables`},
		{authOn + "rule = 3\n", `[rule]: must be an array of tables`},
		{authOn + "[[rule]]\neffect = \"permit\"\ntools = [\"*\"]\n", `rule 1: effect "permit"`},
		{authOn + "[[rule]]\neffect = \"deny\"\n", `rule 1: no tools, prompts or resources`},
		{authOn + "[[rule]]\neffect = \"deny\"\ntools = [\"*\"]\nwhen = \"scopes +\"\n", `rule 1: when:`},
		{authOn + "[[rule]]\neffect = \"deny\"\ntools = [\"*\"]\n[[rule]]\neffect = \"allow\"\ntools = [\"*\"]\nwhen = \"subject\"\n", `rule 2: when: of type string, not bool`},
		{authOn + "[tool.x]\nscope = [\"a\"]\n", `[tool]: "x": unknown key "scope" (burst, max-inflight, rate, scopes)`},
		{"[tool.x]\nrate = \"5\"\n", `[tool]: "x": key "rate": must be a number, got string`},
		{"[tool.x]\nrate = -1\n", `[tool]: "x": key "rate": -1: must be a non-negative number`},
		{"[tool.x]\nrate = nan\n", `key "rate": NaN: must be a non-negative number`},
		{"[tool.x]\nburst = 1.5\n", `[tool]: "x": key "burst": must be an integer, got float64`},
		{"[tool.x]\nmax-inflight = -2\n", `[tool]: "x": key "max-inflight": -2: must be an integer from 0`},
		{authOn + "[tool.x]\nscopes = \"a\"\n", `[tool]: "x": key "scopes": must be an array of strings`},
		{authOn + "[tool]\nscopes = [\"a\"]\n", `[tool]: "scopes": must be a table`},
		{authOn + "tool = 1\n", `[tool]: must be a table of tables`},
		{authOn + "[tools.x]\nscopes = [\"a\"]\n", `unknown key "tools"`},
		{"[[rule]]\neffect = \"deny\"\ntools = [\"*\"]\n", `[[rule]] needs authorization`},
		{"[tool.x]\nscopes = [\"a\"]\n", `[tool."x"] scopes needs authorization`},
		{authOn + "auth-max-classes = 0\n", `-auth-max-classes 0: must be positive`},
	} {
		_, err := parse([]string{"-config", writeConfig(t, tc.text)}, io.Discard)
		if assert.Error(t, err, tc.text) {
			assert.Contains(t, err.Error(), tc.want, tc.text)
		}
	}
	// A [tool.NAME] table without scopes needs no authorization.
	_, err := parse([]string{"-config", writeConfig(t, "[tool.x]\n")}, io.Discard)
	assert.NoError(t, err)
}

// TestConfigToolLimits: [tool.NAME] rate, burst and max-inflight become
// the engine's ToolLimits, without authorization; a table setting none
// of them sets no limits.
func TestConfigToolLimits(t *testing.T) {
	c, err := parse([]string{"-config", writeConfig(t, "[tool.slow]\nrate = 2.5\nburst = 4\nmax-inflight = 3\n[tool.fast]\nrate = 100\n[tool.none]\n")}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, map[string]engine.ToolLimits{"slow": {Rate: 2.5, Burst: 4, MaxInflight: 3}, "fast": {Rate: 100}}, c.tables.toolLimits())
	c, err = parse([]string{"-config", writeConfig(t, "[tool.none]\n")}, io.Discard)
	require.NoError(t, err)
	assert.Nil(t, c.tables.toolLimits())
}

// TestReloadRules: SIGHUP's reload brings a changed [[rule]] and [tool]
// to the running verifier; a file whose rule does not compile is
// rejected whole, the rules in force kept.
func TestReloadRules(t *testing.T) {
	authOn := tokenFile(t)
	e := newReloadEnv(t, authOn+rulesText)
	c, err := parse([]string{"-config", e.file}, io.Discard)
	require.NoError(t, err)
	logger := slog.New(slog.NewTextHandler(e.log, nil))
	v, err := c.auth.newVerifier(c.http, c.httpPath, logger)
	require.NoError(t, err)
	t.Cleanup(v.Close)
	reg := handlers.NewRegistry(handlers.Options{})
	e.r.hooks = append(e.r.hooks, authReloadHook(v, reg, logger))
	ctx := context.Background()
	guest, err := v.Verify(ctx, "guest-token")
	require.NoError(t, err)
	allows := func(tool string) bool { return v.Class(guest).Allows(handlers.ListNameTools, tool) }
	require.False(t, allows("admin_reset"))
	require.True(t, allows("echo"))
	assert.Equal(t, []string{"files:write"}, v.Config().ToolScopes["write_file"])

	e.rewrite(t, authOn+"auth-max-classes = 7\n[[rule]]\neffect = \"deny\"\ntools = [\"echo\"]\nwhen = 'subject == \"static:2\"'\n")
	require.NoError(t, e.r.reload())
	assert.True(t, allows("admin_reset"), "the new rules")
	assert.False(t, allows("echo"))
	assert.Empty(t, v.Config().ToolScopes, "the [tool] tables are gone")
	assert.NotContains(t, e.log.String(), "need a restart")

	e.rewrite(t, authOn+"[[rule]]\neffect = \"deny\"\ntools = [\"*\"]\nwhen = 'subject =='\n")
	require.Error(t, e.r.reload(), "a rule that does not compile rejects the file")
	assert.False(t, allows("echo"), "the rules in force are kept")
	assert.True(t, allows("admin_reset"))
}

// FuzzConfigFile feeds arbitrary bytes to the config file's loader and
// the rules' compiler: an error or a configuration, never a panic.
func FuzzConfigFile(f *testing.F) {
	f.Add([]byte(rulesText))
	f.Add([]byte("max-inflight = 3\n[tool.x]\nscopes = []\n"))
	f.Add([]byte("[[rule]]\neffect = \"allow\"\ntools = [\"*\"]\nwhen = 'claims.a.b[0] == 1'\n"))
	f.Add([]byte("[[rule]]\n[[rule]]\n[tool.\"\"]\n"))
	_, fs, err := parseFlags(nil, io.Discard)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 8<<10 {
			return
		}
		var tables fileTables
		if _, err := parseConfig(data, "fuzz.toml", fs, &tables); err != nil {
			return
		}
		_, _ = auth.CompileRules(tables.rules, 0)
	})
}

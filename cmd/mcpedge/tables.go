package main

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/mcpedge/mcpedge/auth"
	"github.com/mcpedge/mcpedge/engine"
)

// The config file's tables: what a flag cannot say. Each top-level key
// of tableKeys is a table (or an array of tables) with keys of its own,
// parsed by its entry; any other table is an unknown key, as is any key
// of a table its parser does not know. Like the flags' keys, the tables
// are read again on SIGHUP, and the whole file is rejected when any part
// is wrong.
//
//	[[rule]]                       # authorization rules, in order (docs/authorization.md)
//	effect = "deny"
//	tools = ["admin_*"]
//	when = '!("admin" in scopes)'
//
//	[tool.write_file]              # one tool's settings
//	scopes = ["files:write"]
//	rate = 5                       # calls per second, every caller, cluster-wide
//	burst = 10
//	max-inflight = 2               # calls being served at once on this node

// fileTables are the tables of a config file.
type fileTables struct {
	rules []auth.Rule            // [[rule]], in order
	tools map[string]*toolConfig // [tool.NAME], by tool name
}

// toolConfig is one [tool.NAME] table.
type toolConfig struct {
	scopes []string // required of its callers, besides its own (auth.Config.ToolScopes)
	// Its limits (engine.ToolLimits): rate and burst, max-inflight.
	limits engine.ToolLimits
}

// tableKeys are the tables a config file may hold, each with its parser.
var tableKeys = map[string]func(t *fileTables, v any) error{
	"rule": parseRuleTables,
	"tool": parseToolTables,
}

// toolKeys are the keys of a [tool.NAME] table, each setting its part of
// the tool's toolConfig from its TOML value. A setting of tools is one
// entry here and one field of toolConfig.
var toolKeys = map[string]func(t *toolConfig, v any) error{
	"scopes": func(t *toolConfig, v any) (err error) {
		t.scopes, err = stringList(v)
		return err
	},
	"rate": func(t *toolConfig, v any) (err error) {
		t.limits.Rate, err = nonNegative(v)
		return err
	},
	"burst": func(t *toolConfig, v any) (err error) {
		t.limits.Burst, err = nonNegativeInt(v)
		return err
	},
	"max-inflight": func(t *toolConfig, v any) (err error) {
		t.limits.MaxInflight, err = nonNegativeInt(v)
		return err
	},
}

// toolLimits returns the limits of the [tool.NAME] tables that set any
// (engine.Options.ToolLimits), nil when none does.
func (t *fileTables) toolLimits() map[string]engine.ToolLimits {
	var m map[string]engine.ToolLimits
	for name, tc := range t.tools {
		if tc.limits == (engine.ToolLimits{}) {
			continue
		}
		if m == nil {
			m = map[string]engine.ToolLimits{}
		}
		m[name] = tc.limits
	}
	return m
}

// ruleKeys are the keys of a [[rule]] table (auth.Rule).
var ruleKeys = map[string]func(r *auth.Rule, v any) error{
	"effect": func(r *auth.Rule, v any) (err error) {
		r.Effect, err = stringValue(v)
		return err
	},
	"tools": func(r *auth.Rule, v any) (err error) {
		r.Tools, err = stringList(v)
		return err
	},
	"prompts": func(r *auth.Rule, v any) (err error) {
		r.Prompts, err = stringList(v)
		return err
	},
	"resources": func(r *auth.Rule, v any) (err error) {
		r.Resources, err = stringList(v)
		return err
	},
	"when": func(r *auth.Rule, v any) (err error) {
		r.When, err = stringValue(v)
		return err
	},
}

// parseRuleTables parses [[rule]]: an array of tables.
func parseRuleTables(t *fileTables, v any) error {
	tables, ok := v.([]map[string]any)
	if !ok {
		return errors.New("must be an array of tables: [[rule]]")
	}
	for i, tab := range tables {
		var r auth.Rule
		if err := setKeys(tab, ruleKeys, &r); err != nil {
			return fmt.Errorf("rule %d: %w", i+1, err)
		}
		t.rules = append(t.rules, r)
	}
	return nil
}

// parseToolTables parses the [tool.NAME] tables.
func parseToolTables(t *fileTables, v any) error {
	tools, ok := v.(map[string]any)
	if !ok {
		return errors.New("must be a table of tables: [tool.NAME]")
	}
	t.tools = make(map[string]*toolConfig, len(tools))
	for _, name := range sortedKeys(tools) {
		tab, ok := tools[name].(map[string]any)
		if !ok {
			return fmt.Errorf("%q: must be a table: [tool.%q]", name, name)
		}
		if name == "" {
			return errors.New("a tool needs a name: [tool.NAME]")
		}
		tc := &toolConfig{}
		if err := setKeys(tab, toolKeys, tc); err != nil {
			return fmt.Errorf("%q: %w", name, err)
		}
		t.tools[name] = tc
	}
	return nil
}

// setKeys sets dst from a table's keys, each with its entry of keys; a
// key without one is an error naming it.
func setKeys[T any](tab map[string]any, keys map[string]func(*T, any) error, dst *T) error {
	for _, k := range sortedKeys(tab) {
		set, ok := keys[k]
		if !ok {
			return fmt.Errorf("unknown key %q (%s)", k, joinKeys(keys))
		}
		if err := set(dst, tab[k]); err != nil {
			return fmt.Errorf("key %q: %w", k, err)
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

func joinKeys[V any](m map[string]V) string {
	return strings.Join(sortedKeys(m), ", ")
}

func stringValue(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("must be a string, got %T", v)
	}
	return s, nil
}

// nonNegative is a finite number >= 0, integer or float.
func nonNegative(v any) (float64, error) {
	var f float64
	switch n := v.(type) {
	case int64:
		f = float64(n)
	case float64:
		f = n
	default:
		return 0, fmt.Errorf("must be a number, got %T", v)
	}
	if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%v: must be a non-negative number", v)
	}
	return f, nil
}

// nonNegativeInt is an integer >= 0.
func nonNegativeInt(v any) (int, error) {
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("must be an integer, got %T", v)
	}
	if n < 0 || n > math.MaxInt32 {
		return 0, fmt.Errorf("%d: must be an integer from 0 to %d", n, math.MaxInt32)
	}
	return int(n), nil
}

// stringList is an array of strings.
func stringList(v any) ([]string, error) {
	a, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("must be an array of strings, got %T", v)
	}
	out := make([]string, len(a))
	for i, item := range a {
		s, ok := item.(string)
		if !ok {
			return nil, fmt.Errorf("must be an array of strings, got a %T in it", item)
		}
		out[i] = s
	}
	return out, nil
}

// compileTables checks the tables of c's config file against its flags
// and compiles what they configure into c: the authorization rules, and
// the scopes of tools, which need authorization.
func compileTables(c *config) error {
	t := &c.tables
	scoped := map[string][]string{}
	for _, name := range sortedKeys(t.tools) {
		if s := t.tools[name].scopes; len(s) > 0 {
			scoped[name] = s
		}
	}
	if !c.auth.enabled() {
		if len(t.rules) > 0 {
			return errors.New("config: [[rule]] needs authorization: set -auth-jwks-url, -auth-token-file or -auth-introspection-url")
		}
		if len(scoped) > 0 {
			return fmt.Errorf("config: [tool.%q] scopes needs authorization: set -auth-jwks-url, -auth-token-file or -auth-introspection-url", sortedKeys(scoped)[0])
		}
		return nil
	}
	rules, err := auth.CompileRules(t.rules, c.auth.maxClasses)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	c.auth.rules, c.auth.toolScopes = rules, nil
	if len(scoped) > 0 {
		c.auth.toolScopes = scoped
	}
	return nil
}

// tableNames lists the tables a config file may hold, for error messages:
// "[rule], [tool.NAME]".
func tableNames() string {
	names := sortedKeys(tableKeys)
	for i, n := range names {
		names[i] = "[" + n + "]"
	}
	return strings.Join(names, ", ")
}

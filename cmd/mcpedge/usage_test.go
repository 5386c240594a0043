package main

import (
	"bytes"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFlagGroups: every flag the command registers has exactly one row in
// flagGroups, and every row names a registered flag. A flag added without
// a row fails here: give it one in groups.go, in its group.
func TestFlagGroups(t *testing.T) {
	fs := newFlagSet(&config{})
	rows := map[string]int{}
	for _, row := range flagGroups {
		rows[row.flag]++
		assert.Less(t, row.group, numGroups, "-%s: a group without a title", row.flag)
		assert.NotNil(t, fs.Lookup(row.flag), "groups.go names -%s, which no code registers", row.flag)
	}
	fs.VisitAll(func(f *flag.Flag) {
		assert.Equal(t, 1, rows[f.Name], "-%s: needs exactly one row in flagGroups (groups.go)", f.Name)
	})
	for g, title := range groupTitles {
		assert.NotEmpty(t, title, "group %d has no title", g)
	}
}

// TestUsage: -h goes to stdout, groups the flags under their headings in
// order, lists each flag once and prints each default at most once.
func TestUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run([]string{"-h"}, strings.NewReader(""), &stdout, &stderr))
	assert.Empty(t, stderr.String())
	out := stdout.String()
	assert.True(t, strings.HasPrefix(out, "Usage: mcpedge [flags]\n"))

	fs := newFlagSet(&config{})
	last := -1
	for g, title := range groupTitles {
		has := false
		for _, row := range flagGroups {
			has = has || row.group == flagGroup(g)
		}
		i := strings.Index(out, "\n"+title+":\n")
		if !has {
			assert.Equal(t, -1, i, "empty group %s printed", title)
			continue
		}
		require.Greater(t, i, last, "group %s missing or out of order", title)
		last = i
	}
	assert.NotContains(t, out, "\nOther:\n", "every flag has a group")
	entries := strings.Split(out, "\n  -")[1:]
	assert.Len(t, entries, len(flagNames(fs)))
	fs.VisitAll(func(f *flag.Flag) {
		n := 0
		for _, e := range entries {
			name, _, _ := strings.Cut(e, "\n")
			name, _, _ = strings.Cut(name, " ")
			if name != f.Name {
				continue
			}
			n++
			assert.LessOrEqual(t, strings.Count(e, "default"), 1, "-%s prints its default more than once:\n%s", f.Name, e)
			if !zeroDefault(f) {
				assert.Contains(t, e, "default", "-%s: its default is not printed", f.Name)
			}
		}
		assert.Equal(t, 1, n, "-%s listed %d times", f.Name, n)
	})
	for _, line := range strings.Split(out, "\n") {
		assert.LessOrEqual(t, len(line), 80, "line too long: %q", line)
	}
}

// TestFlagErrors: a bad flag is one line that names it and the fix, with
// "did you mean" for a near miss, and no usage.
func TestFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-drain", "5"}, `mcpedge: -drain "5": a duration needs a unit: add one, e.g. 5s (ms, s, m, h)`},
		{[]string{"-idle-timeout=1.5"}, `mcpedge: -idle-timeout "1.5": a duration needs a unit: add one, e.g. 1.5s`},
		{[]string{"-drain", "soon"}, `mcpedge: -drain "soon": not a duration: a number and a unit, e.g. 500ms, 10s, 1m30s`},
		{[]string{"-max-inflite", "3"}, `mcpedge: -max-inflite: unknown flag; did you mean -max-inflight?`},
		{[]string{"-inflight", "3"}, `mcpedge: -inflight: unknown flag; did you mean -max-inflight?`},
		{[]string{"-tpc", ":1"}, `mcpedge: -tpc: unknown flag; did you mean -tcp?`},
		{[]string{"-frobnicate"}, `mcpedge: -frobnicate: unknown flag (-h lists them)`},
		{[]string{"-loops", "x"}, `mcpedge: -loops "x": not a whole number`},
		{[]string{"-loops", "99999999999999999999"}, `mcpedge: -loops "99999999999999999999": out of range`},
		{[]string{"-rate", "fast"}, `mcpedge: -rate "fast": not a number (e.g. 2.5)`},
		{[]string{"-stateless=maybe"}, `mcpedge: -stateless "maybe": true or false`},
		{[]string{"-max-message", "4XB"}, `mcpedge: -max-message "4XB": not a size: bytes, or a number and a unit`},
		{[]string{"-tcp"}, `mcpedge: -tcp needs a value: -tcp addr (an empty one is -tcp=)`},
		{[]string{"-workers", "0"}, `mcpedge: -workers 0: must be positive (0 is not the default: leave -workers out for that)`},
		{[]string{"-loops", "0"}, `mcpedge: -loops 0: must be positive`},
		{[]string{"-page-size", "0"}, `mcpedge: -page-size 0: must be positive`},
		{[]string{"serve"}, `mcpedge: unexpected arguments: ["serve"] (every setting is a flag: -name value)`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			assert.Equal(t, 2, run(tc.args, strings.NewReader(""), &stdout, &stderr))
			assert.Empty(t, stdout.String())
			got := stderr.String()
			assert.True(t, strings.HasPrefix(got, tc.want), "got %q\nwant %q…", got, tc.want)
			assert.Equal(t, 1, strings.Count(got, "\n"), "one line: %q", got)
		})
	}
}

// TestUnknownEnv: an MCPEDGE_ variable that is no flag's twin is refused
// naming it, with the nearest twin; the reserved names are left alone.
func TestUnknownEnv(t *testing.T) {
	t.Run("typo", func(t *testing.T) {
		t.Setenv("MCPEDGE_MAX_INFLITE", "3")
		_, err := parse(nil, io.Discard)
		require.Error(t, err)
		assert.Equal(t, "MCPEDGE_MAX_INFLITE: unknown variable; did you mean MCPEDGE_MAX_INFLIGHT?", err.Error())
	})
	t.Run("far", func(t *testing.T) {
		t.Setenv("MCPEDGE_WHATEVER_ELSE", "")
		_, err := parse(nil, io.Discard)
		assert.ErrorContains(t, err, "MCPEDGE_WHATEVER_ELSE: unknown variable (")
	})
	t.Run("reserved", func(t *testing.T) {
		t.Setenv("MCPEDGE_BIN", "/usr/local/bin/mcpedge")
		t.Setenv("MCPEDGE_TEST_ANYTHING", "x")
		t.Setenv("MCPEDGE_MAX_INFLIGHT", "7")
		c, err := parse(nil, io.Discard)
		require.NoError(t, err)
		assert.Equal(t, 7, c.maxInflight)
	})
	t.Run("bad value", func(t *testing.T) {
		t.Setenv("MCPEDGE_DRAIN", "5")
		_, err := parse(nil, io.Discard)
		assert.EqualError(t, err, `MCPEDGE_DRAIN="5": a duration needs a unit: add one, e.g. 5s (ms, s, m, h)`)
	})
}

// TestZeroValues: no numeric flag's 0 silently means its default. Each
// one either refuses 0, naming itself, or says in its usage what 0 means
// ("0: none"). A flag added with neither fails here.
func TestZeroValues(t *testing.T) {
	fs := newFlagSet(&config{})
	fs.VisitAll(func(f *flag.Flag) {
		if !numeric(f) {
			return
		}
		t.Run(f.Name, func(t *testing.T) {
			_, err := parse([]string{"-" + f.Name, "0"}, io.Discard)
			if err != nil {
				assert.Contains(t, err.Error(), "-"+f.Name+" 0", "refused, naming the flag")
				return
			}
			_, usage := flag.UnquoteUsage(f)
			assert.Regexp(t, `\(0: |; 0: `, usage, "-%s 0 is accepted: its usage must say what 0 means, or validate must refuse it", f.Name)
		})
	})
}

// numeric reports whether f takes a number: a count, a rate, a duration
// or a size.
func numeric(f *flag.Flag) bool {
	switch flagKind(f) {
	case kindInt, kindFloat, kindDuration:
		return true
	case kindOther:
		if _, err := parseSize(f.DefValue); err == nil {
			return true
		}
		_, err := time.ParseDuration(f.DefValue)
		return err == nil
	}
	return false
}

func TestNearest(t *testing.T) {
	names := []string{"tcp", "http", "http-path", "max-inflight", "max-message", "max-outbound", "state-ttl", "rate", "rate-ip", "node"}
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"tcp", []string{"tcp"}},
		{"tpc", []string{"tcp"}},
		{"htp", []string{"http"}},
		{"max-inflite", []string{"max-inflight"}},
		{"MAX-MESSAGE", []string{"max-message"}},
		{"ttl", []string{"state-ttl"}},
		{"rat", []string{"rate"}},
		{"x", nil},
		{"zzzzzzzz", nil},
		{"max", nil}, // in three names: no guess
	} {
		assert.Equal(t, tc.want, nearest(tc.in, names), tc.in)
	}
	assert.Equal(t, 3, editDistance("inflite", "inflight"))
	assert.Equal(t, 1, editDistance("tcp", "tpc"))
	assert.Equal(t, 0, editDistance("", ""))
	assert.Equal(t, 4, editDistance("", "abcd"))
}

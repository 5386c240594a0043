package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// How the command talks about its flags: -h prints them by group
// (groups.go), each default once; a mistake is one line that names the
// flag (or its environment twin, or its config key) and the fix, with
// "did you mean" for a near miss, and never the whole usage.

const usageIntro = `Usage: mcpedge [flags]

Serves MCP with a built-in handler set over TCP, Streamable HTTP and stdio.
Every flag has an environment twin, MCPEDGE_ and the flag in upper case with
'-' as '_' (-max-message: MCPEDGE_MAX_MESSAGE), and a key in the -config
file named as the flag (max-message = "4MiB"); a flag given wins over its
twin, which wins over the file. Sizes take units (64KiB, 4MiB, 1GB);
durations need one (500ms, 10s, 5m). Other MCPEDGE_ variables are refused,
but for MCPEDGE_BIN and MCPEDGE_TEST_*, which scripts and tests use.
`

// printUsage writes -h: the intro, then every flag under its group's
// heading, in flagGroups' order. A flag without a group (TestFlagGroups
// keeps there being none) is printed last, under "Other".
func printUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, usageIntro)
	var byGroup [numGroups + 1][]*flag.Flag
	seen := map[string]bool{}
	for _, row := range flagGroups {
		if f := fs.Lookup(row.flag); f != nil && !seen[row.flag] {
			seen[row.flag] = true
			byGroup[row.group] = append(byGroup[row.group], f)
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if !seen[f.Name] {
			byGroup[numGroups] = append(byGroup[numGroups], f)
		}
	})
	for g, flags := range byGroup {
		if len(flags) == 0 {
			continue
		}
		title := "Other"
		if g < int(numGroups) {
			title = groupTitles[g]
		}
		fmt.Fprintf(w, "\n%s:\n", title)
		for _, f := range flags {
			fmt.Fprint(w, flagUsage(f))
		}
	}
}

// flagUsage is one flag's entry: "  -name value" and its usage on the
// next line, with its default appended unless the usage states it
// ("default: …") or it is the type's zero.
func flagUsage(f *flag.Flag) string {
	name, usage := flag.UnquoteUsage(f)
	var b strings.Builder
	b.WriteString("  -")
	b.WriteString(f.Name)
	if name != "" {
		b.WriteString(" ")
		b.WriteString(name)
	}
	if def := f.DefValue; !strings.Contains(usage, "default") && !zeroDefault(f) {
		switch flagKind(f) {
		case kindString:
			def = strconv.Quote(def)
		case kindDuration:
			def = shortDuration(def)
		}
		usage += " (default " + def + ")"
	}
	b.WriteString("\n")
	b.WriteString(wrap(usage, "      ", 80))
	return b.String()
}

// shortDuration drops the zero units time.Duration.String ends with:
// 10m0s is 10m, 1h0m0s 1h.
func shortDuration(s string) string {
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// wrap breaks text into lines of at most width columns (a longer word
// gets a line of its own), each starting with indent and ending with a
// newline.
func wrap(text, indent string, width int) string {
	var b strings.Builder
	line := indent
	for _, word := range strings.Fields(text) {
		if len(line) > len(indent) && len(line)+1+len(word) > width {
			b.WriteString(line)
			b.WriteString("\n")
			line = indent
		}
		if len(line) > len(indent) {
			line += " "
		}
		line += word
	}
	b.WriteString(line)
	b.WriteString("\n")
	return b.String()
}

// zeroDefault reports whether f's default is its type's zero value, which
// -h does not print.
func zeroDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "0", "false", "0s":
		return true
	}
	return false
}

// valueKind is what a flag's value parses as, for the hints of errors.
type valueKind uint8

const (
	kindOther valueKind = iota // its own Value type: its error explains itself
	kindString
	kindBool
	kindInt
	kindFloat
	kindDuration
)

// flagKind returns the kind of f's value (the standard flag types say it
// through flag.Getter).
func flagKind(f *flag.Flag) valueKind {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return kindOther
	}
	switch g.Get().(type) {
	case string:
		return kindString
	case bool:
		return kindBool
	case int, int64, uint, uint64:
		return kindInt
	case float64:
		return kindFloat
	case time.Duration:
		return kindDuration
	}
	return kindOther
}

// valueError is the error for value, refused by f: where names the source
// ("-drain 5", "MCPEDGE_DRAIN=5", `config f.toml: key "drain" = "5"`), and
// the reason says what would do. The standard types' own errors ("parse
// error") say neither.
func valueError(where string, f *flag.Flag, value string, err error) error {
	var reason string
	switch flagKind(f) {
	case kindDuration:
		if _, perr := strconv.ParseFloat(strings.TrimSpace(value), 64); perr == nil {
			reason = fmt.Sprintf("a duration needs a unit: add one, e.g. %ss (ms, s, m, h)", strings.TrimSpace(value))
		} else {
			reason = "not a duration: a number and a unit, e.g. 500ms, 10s, 1m30s"
		}
	case kindInt:
		reason = "not a whole number"
		if errors.Is(unwrapFlagErr(err), strconv.ErrRange) || strings.Contains(err.Error(), "out of range") {
			reason = "out of range"
		}
	case kindFloat:
		reason = "not a number (e.g. 2.5)"
	case kindBool:
		reason = "true or false"
	default:
		reason = unwrapFlagErr(err).Error()
	}
	return fmt.Errorf("%s: %s", where, reason)
}

// The flag package's error messages, parsed to be reworded by flagError.
var (
	errUndefined = regexp.MustCompile(`^flag provided but not defined: -(.*)$`)
	errBadValue  = regexp.MustCompile(`^invalid (?:boolean )?value (".*") for (?:flag )?-([^:\s]+): (.*)$`)
	errNoValue   = regexp.MustCompile(`^flag needs an argument: -(.*)$`)
)

// flagError rewords an error of fs.Parse: an unknown flag gets "did you
// mean", a bad value the reason and an example, a missing value the
// flag's form.
func flagError(fs *flag.FlagSet, err error) error {
	msg := err.Error()
	if m := errUndefined.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("-%s: unknown flag%s", m[1], didYouMean(m[1], flagNames(fs), "-", "-h lists them"))
	}
	if m := errBadValue.FindStringSubmatch(msg); m != nil {
		if f := fs.Lookup(m[2]); f != nil {
			value, uerr := strconv.Unquote(m[1])
			if uerr != nil {
				value = m[1]
			}
			return valueError("-"+f.Name+" "+strconv.Quote(value), f, value, errors.New(m[3]))
		}
	}
	if m := errNoValue.FindStringSubmatch(msg); m != nil {
		if f := fs.Lookup(m[1]); f != nil {
			name, _ := flag.UnquoteUsage(f)
			return fmt.Errorf("-%s needs a value: -%s %s (an empty one is -%s=)", f.Name, f.Name, name, f.Name)
		}
	}
	return err
}

// flagNames returns fs's flag names.
func flagNames(fs *flag.FlagSet) []string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}

// reservedEnv are the MCPEDGE_ variables that are not flags' twins, which
// the command leaves alone: MCPEDGE_BIN names the binary to scripts and
// test suites (interop/, the Makefile), and MCPEDGE_TEST_* pass a test's
// arguments to its child process.
var reservedEnv = []string{"MCPEDGE_BIN"}

const reservedEnvPrefix = "MCPEDGE_TEST_"

// checkEnv refuses an MCPEDGE_ variable of environ that is neither a
// flag's twin nor reserved, as the config file refuses an unknown key: a
// mistyped name would otherwise be ignored.
func checkEnv(fs *flag.FlagSet, environ []string) error {
	twins := map[string]bool{}
	var names []string
	fs.VisitAll(func(f *flag.Flag) {
		twins[envName(f.Name)] = true
		names = append(names, envName(f.Name))
	})
	var unknown []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, envPrefix) || twins[k] || slices.Contains(reservedEnv, k) || strings.HasPrefix(k, reservedEnvPrefix) {
			continue
		}
		unknown = append(unknown, k)
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	return fmt.Errorf("%s: unknown variable%s", unknown[0], didYouMean(unknown[0], names, "", "the MCPEDGE_ names are the flags' twins; -h lists the flags"))
}

// didYouMean returns "; did you mean X?" naming the candidates nearest
// to name (with prefix), or " (" + otherwise + ")" when none is near.
func didYouMean(name string, candidates []string, prefix, otherwise string) string {
	near := nearest(name, candidates)
	if len(near) == 0 {
		return " (" + otherwise + ")"
	}
	for i := range near {
		near[i] = prefix + near[i]
	}
	return "; did you mean " + strings.Join(near, " or ") + "?"
}

// nearest returns the candidates closest to name by edit distance
// (insertions, deletions, substitutions and transpositions; case
// ignored), at most a third of its length away (at least 1, at most 3),
// in the order given, three at most; else the only candidate that
// contains name, or that name contains, if it is at least three long.
func nearest(name string, candidates []string) []string {
	n := strings.ToLower(name)
	limit := min(max(len(n)/3, 1), 3)
	best, out := limit+1, []string(nil)
	for _, c := range candidates {
		d := editDistance(n, strings.ToLower(c))
		switch {
		case d > limit:
		case d < best:
			best, out = d, []string{c}
		case d == best && len(out) < 3:
			out = append(out, c)
		}
	}
	if out != nil || len(n) < 3 {
		return out
	}
	var contains []string
	for _, c := range candidates {
		lc := strings.ToLower(c)
		if strings.Contains(lc, n) || strings.Contains(n, lc) && len(lc) >= 3 {
			contains = append(contains, c)
		}
	}
	if len(contains) == 1 {
		return contains
	}
	return nil
}

// editDistance is the optimal string alignment distance of a and b.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

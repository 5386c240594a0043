package admin_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMetricsPassPromlint: /metrics, after traffic of every kind, passes
// the checks of promtool check metrics (promlint, the package promtool
// runs), and promtool itself where it is installed (CI installs it). Every
// family has a # HELP with text and a # TYPE, once, before its samples.
func TestMetricsPassPromlint(t *testing.T) {
	s := serve(t)
	tcpTraffic(t, s.tcp)
	httpTraffic(t, s.http)
	c := dialSession(t, s.tcp)
	c.tool("echo", `{"text":"hi"}`)
	c.tool("add", `{"a":1,"b":2}`)
	c.tool("nope", `{}`)
	s.m.AuthFailed("missing")
	s.srv.ResourceUpdated("bench://nothing")
	code, body := get(t, "http://"+s.admin+"/metrics")
	require.Equal(t, 200, code)

	problems, err := promlint.New(strings.NewReader(body)).Lint()
	require.NoError(t, err)
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	checkMetadata(t, body)
	for _, family := range []string{"mcpedge_requests_total", "mcpedge_tool_calls_total", "mcpedge_tool_duration_seconds", "mcpedge_request_duration_seconds", "mcpedge_received_bytes_total", "go_goroutines", "process_cpu_seconds_total"} {
		assert.Contains(t, body, "\n# TYPE "+family+" ", family)
	}

	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Log("promtool not installed: checked with promlint only")
		return
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	out, err := cmd.CombinedOutput()
	assert.NoError(t, err, "promtool check metrics:\n%s", out)
	assert.Empty(t, strings.TrimSpace(string(out)), "promtool check metrics reports nothing")
}

// checkMetadata checks the exposition's metadata: each family's # HELP
// (with text for mcpedge's) and # TYPE come once, before its samples, and
// its samples are together.
func checkMetadata(t *testing.T, body string) {
	t.Helper()
	help, typ := map[string]bool{}, map[string]string{}
	done := map[string]bool{}
	cur := ""
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "# HELP "):
			f := strings.Fields(line)
			require.GreaterOrEqual(t, len(f), 3, line)
			name := f[2]
			assert.False(t, help[name], "second HELP of %s", name)
			help[name] = true
			if strings.HasPrefix(name, "mcpedge_") {
				assert.Greater(t, len(f), 3, "%s has no help text", name)
			}
		case strings.HasPrefix(line, "# TYPE "):
			f := strings.Fields(line)
			require.Len(t, f, 4, line)
			assert.Empty(t, typ[f[2]], "second TYPE of %s", f[2])
			typ[f[2]] = f[3]
			if cur != "" {
				done[cur] = true
			}
			cur = f[2]
		case line == "" || line[0] == '#':
		default:
			name := line[:strings.IndexAny(line, "{ ")]
			family := name
			if typ[family] == "" {
				for _, suf := range []string{"_bucket", "_sum", "_count"} {
					if b, ok := strings.CutSuffix(name, suf); ok && (typ[b] == "histogram" || typ[b] == "summary") {
						family = b
					}
				}
			}
			require.NotEmpty(t, typ[family], "sample %q before its family's TYPE", line)
			assert.True(t, help[family], "family %s has no HELP", family)
			assert.Equal(t, cur, family, "samples of %s apart from its family", family)
			assert.False(t, done[family], "family %s written twice", family)
		}
	}
}

// TestAlertRulesCheck: the alerting rules in docs/operations.md pass the
// checks of promtool check rules (rulefmt, the package it runs: YAML,
// PromQL, templates, labels), name only metrics mcpedge exports, and pass
// promtool itself where it is installed.
func TestAlertRulesCheck(t *testing.T) {
	rules := docBlock(t, "groups:")
	groups, errs := parseRules(rules)
	for _, err := range errs {
		t.Error(err)
	}
	require.NotNil(t, groups)
	var names []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Alert)
			assert.NotEmpty(t, r.Annotations["summary"], r.Alert)
			assert.NotEmpty(t, r.Labels["severity"], r.Alert)
			for _, m := range metricNames(r.Expr) {
				assert.True(t, knownMetric(m), "%s: %s is not a metric mcpedge exports", r.Alert, m)
			}
		}
	}
	for _, want := range []string{"MCPEdgeDown", "MCPEdgeUpstreamDown", "MCPEdgeAuthRefusalsRising", "MCPEdgeP99High", "MCPEdgeDrainCut"} {
		assert.Contains(t, names, want)
	}
	scrape := docBlock(t, "scrape_configs:")
	assert.Contains(t, scrape, "/metrics")

	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Log("promtool not installed: checked with rulefmt only")
		return
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "rules.yml")
	require.NoError(t, os.WriteFile(file, []byte(rules), 0o600))
	out, err := exec.Command(promtool, "check", "rules", file).CombinedOutput()
	assert.NoError(t, err, "promtool check rules:\n%s", out)
	cfg := filepath.Join(dir, "prometheus.yml")
	require.NoError(t, os.WriteFile(cfg, []byte(strings.ReplaceAll(scrape, "mcpedge-rules.yml", file)), 0o600))
	out, err = exec.Command(promtool, "check", "config", cfg).CombinedOutput()
	assert.NoError(t, err, "promtool check config:\n%s", out)
}

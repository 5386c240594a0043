package admin_test

import (
	"os"
	"strings"
	"testing"

	"github.com/mcpedge/mcpedge/admin"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"
)

// docBlock returns the fenced YAML block of docs/operations.md that
// starts with first.
func docBlock(t *testing.T, first string) string {
	t.Helper()
	b, err := os.ReadFile("../docs/operations.md")
	require.NoError(t, err)
	for _, part := range strings.Split(string(b), "```yaml\n")[1:] {
		block, _, ok := strings.Cut(part, "```")
		require.True(t, ok, "an unclosed block")
		if strings.HasPrefix(block, first) {
			return block
		}
	}
	t.Fatalf("docs/operations.md has no YAML block starting with %q", first)
	return ""
}

var promql = parser.NewParser(parser.Options{})

// parseRules parses and checks rule files as promtool check rules does.
func parseRules(text string) (*rulefmt.RuleGroups, []error) {
	return rulefmt.Parse([]byte(text), false, model.UTF8Validation, promql, nil)
}

// metricNames returns the metric names an expression selects.
func metricNames(expr string) []string {
	e, err := promql.ParseExpr(expr)
	if err != nil {
		return nil
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok && vs.Name != "" {
			names = append(names, vs.Name)
		}
		return nil
	})
	return names
}

// knownMetric reports whether name is a series mcpedge exports: admin's
// families (a histogram's with its suffixes), the cluster's (cmd/mcpedge),
// Prometheus's own up, and mcpedge_upstream_up, the per-upstream health
// the gateway exports.
func knownMetric(name string) bool {
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if b, ok := strings.CutSuffix(name, suf); ok && admin.Families[b] != "" {
			return true
		}
	}
	switch name {
	case "up", "mcpedge_cluster_ready", "mcpedge_cluster_routes", "mcpedge_upstream_up":
		return true
	}
	return admin.Families[name] != ""
}

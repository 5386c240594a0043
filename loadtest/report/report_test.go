package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/loadtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sample(target string, p99 float64) *loadtest.Result {
	return &loadtest.Result{
		Schema: loadtest.SchemaVersion, Mode: "closed", Target: target, Transport: "tcp", Started: time.Unix(0, 0),
		Connections: 4, InFlight: 1, Requests: 1000, OK: 990, Errors: 10, ErrorRate: 0.01,
		ErrorsByKind: map[string]int64{"timeout": 10}, Throughput: 500,
		Latency:     &loadtest.LatencyStats{Count: 990, Min: 10, Mean: 100, P50: 90, P90: 150, P99: p99, P999: 400, Max: 900},
		Percentiles: []loadtest.PercentilePoint{{Percentile: 50, US: 90}, {Percentile: 99, US: p99}, {Percentile: 100, US: 900}},
		Timeline:    []loadtest.SecondResult{{T: 0, OK: 500, MeanUS: 100}, {T: 1, OK: 490, Errors: 10, MeanUS: 110}},
		Server:      &loadtest.ServerStats{PID: 1, CPUSeconds: 0.1, CPUPerRequestUS: 101.5},
	}
}

func TestWriteHTML(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteHTML(&b, "two <runs>", sample("tcp://a", 300), sample("tcp://b", 350)))
	html := b.String()
	// Offline: the ECharts script is inline, nothing is fetched.
	assert.NotContains(t, html, "<script src=")
	assert.NotRegexp(t, `(src|href)=["']?https?:`, html)
	assert.Contains(t, html, "echarts.init")
	assert.Greater(t, len(html), len(echartsJS))
	assert.Contains(t, html, "two &lt;runs&gt;")
	assert.Contains(t, html, "Latency by percentile")
	assert.Contains(t, html, "Throughput and mean latency over time")
	assert.Contains(t, html, "tcp://b c=4")
	assert.Contains(t, html, "101.5 µs")
	assert.Contains(t, html, "timeout=10")
	assert.Equal(t, 1, strings.Count(html, "<body>"))

	assert.ErrorIs(t, WriteHTML(&b, "none"), ErrNoResults)
}

func TestWriteHTMLWithoutLatency(t *testing.T) {
	r := &loadtest.Result{Schema: loadtest.SchemaVersion, Mode: "sessions", Target: "http://x/mcp",
		Sessions: &loadtest.SessionsResult{Requested: 10, Opened: 10, RSSPerSession: 2048}}
	var b bytes.Buffer
	require.NoError(t, WriteHTML(&b, "sessions", r))
	assert.Contains(t, b.String(), "2.00 KiB resident per idle session")
	assert.Contains(t, b.String(), "no answers")
}

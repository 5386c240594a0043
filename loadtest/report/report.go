// Package report renders mcpload results as one self-contained HTML page:
// a summary table, the latency-percentile curve and throughput and mean
// latency over time, drawn by ECharts, whose script is embedded in the page
// so that it opens offline.
package report

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"strconv"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/components"
	"github.com/go-echarts/go-echarts/v2/opts"
	"github.com/mcpedge/mcpedge/loadtest"
)

// echartsJS is Apache ECharts 5.6.0's dist/echarts.min.js (Apache-2.0, see
// echarts.LICENSE and echarts.NOTICE beside it).
//
//go:embed echarts.min.js
var echartsJS []byte

// assetsHost is where the page would load ECharts from; the script tag that
// names it is replaced by the embedded script.
const assetsHost = "mcpload-assets/"

// ErrNoResults is returned by WriteHTML without results.
var ErrNoResults = errors.New("report: no results")

// WriteHTML writes a page reporting results, each a run; several runs (of
// several targets, say) share the charts, one series each. WriteHTML is
// safe for concurrent use.
func WriteHTML(w io.Writer, title string, results ...*loadtest.Result) error {
	if len(results) == 0 {
		return ErrNoResults
	}
	page := components.NewPage()
	page.SetPageTitle(title)
	page.SetAssetsHost(assetsHost)
	page.SetLayout(components.PageFlexLayout)
	if c := percentileChart(results); c != nil {
		page.AddCharts(c)
	}
	if c := timelineChart(results); c != nil {
		page.AddCharts(c)
	}
	var buf bytes.Buffer
	if err := page.Render(&buf); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	html := buf.Bytes()
	tag := []byte(`<script src="` + assetsHost + `echarts.min.js"></script>`)
	if !bytes.Contains(html, tag) && len(page.Charts) > 0 {
		return errors.New("report: the ECharts script tag was not where expected")
	}
	inline := make([]byte, 0, len(echartsJS)+32)
	inline = append(inline, "<script>"...)
	inline = append(inline, echartsJS...)
	inline = append(inline, "</script>"...)
	html = bytes.Replace(html, tag, inline, 1)

	var sum bytes.Buffer
	if err := summary.Execute(&sum, struct {
		Title   string
		Results []*loadtest.Result
	}{title, results}); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	body := []byte("<body>")
	i := bytes.Index(html, body)
	if i < 0 {
		return errors.New("report: no <body> in the rendered page")
	}
	i += len(body)
	if _, err := w.Write(html[:i]); err != nil {
		return err
	}
	if _, err := w.Write(sum.Bytes()); err != nil {
		return err
	}
	_, err := w.Write(html[i:])
	return err
}

func label(r *loadtest.Result) string {
	s := r.Target
	if r.Connections > 0 {
		s += " c=" + strconv.Itoa(r.Connections)
	}
	if r.InFlight > 1 {
		s += " d=" + strconv.Itoa(r.InFlight)
	}
	return s
}

func percentileChart(results []*loadtest.Result) *charts.Line {
	var x []string
	for _, r := range results {
		if len(r.Percentiles) > 0 {
			for _, p := range r.Percentiles {
				x = append(x, strconv.FormatFloat(p.Percentile, 'f', -1, 64))
			}
			break
		}
	}
	if x == nil {
		return nil
	}
	line := charts.NewLine()
	line.SetGlobalOptions(
		charts.WithInitializationOpts(opts.Initialization{Width: "1100px", Height: "480px"}),
		charts.WithAnimation(false),
		charts.WithTitleOpts(opts.Title{Title: "Latency by percentile", Subtitle: "µs, log scale"}),
		charts.WithTooltipOpts(opts.Tooltip{Show: opts.Bool(true), Trigger: "axis"}),
		charts.WithLegendOpts(opts.Legend{Show: opts.Bool(true), Top: "bottom"}),
		charts.WithXAxisOpts(opts.XAxis{Name: "percentile"}),
		charts.WithYAxisOpts(opts.YAxis{Name: "µs", Type: "log"}),
	)
	line.SetXAxis(x)
	for _, r := range results {
		if len(r.Percentiles) == 0 {
			continue
		}
		data := make([]opts.LineData, len(r.Percentiles))
		for i, p := range r.Percentiles {
			data[i] = opts.LineData{Value: p.US}
		}
		line.AddSeries(label(r), data)
	}
	return line
}

func timelineChart(results []*loadtest.Result) *charts.Line {
	n := 0
	for _, r := range results {
		n = max(n, len(r.Timeline))
	}
	if n == 0 {
		return nil
	}
	x := make([]string, n)
	for i := range x {
		x[i] = strconv.Itoa(i + 1)
	}
	line := charts.NewLine()
	line.SetGlobalOptions(
		charts.WithInitializationOpts(opts.Initialization{Width: "1100px", Height: "480px"}),
		charts.WithAnimation(false),
		charts.WithTitleOpts(opts.Title{Title: "Throughput and mean latency over time", Subtitle: "per second of the measured phase"}),
		charts.WithTooltipOpts(opts.Tooltip{Show: opts.Bool(true), Trigger: "axis"}),
		charts.WithLegendOpts(opts.Legend{Show: opts.Bool(true), Top: "bottom"}),
		charts.WithXAxisOpts(opts.XAxis{Name: "second"}),
		charts.WithYAxisOpts(opts.YAxis{Name: "req/s"}),
	)
	line.ExtendYAxis(opts.YAxis{Name: "mean µs", Position: "right"})
	line.SetXAxis(x)
	for _, r := range results {
		if len(r.Timeline) == 0 {
			continue
		}
		ok := make([]opts.LineData, len(r.Timeline))
		bad := make([]opts.LineData, len(r.Timeline))
		mean := make([]opts.LineData, len(r.Timeline))
		for i, s := range r.Timeline {
			ok[i] = opts.LineData{Value: s.OK}
			bad[i] = opts.LineData{Value: s.Errors}
			mean[i] = opts.LineData{Value: s.MeanUS, YAxisIndex: 1}
		}
		name := label(r)
		line.AddSeries(name+" ok/s", ok)
		line.AddSeries(name+" errors/s", bad)
		line.AddSeries(name+" mean µs", mean, charts.WithLineChartOpts(opts.LineChart{YAxisIndex: 1}))
	}
	return line
}

var summary = template.Must(template.New("summary").Funcs(template.FuncMap{
	"us": func(v float64) string {
		switch {
		case v < 1000:
			return strconv.FormatFloat(v, 'f', 0, 64) + " µs"
		case v < 1e6:
			return strconv.FormatFloat(v/1e3, 'f', 2, 64) + " ms"
		}
		return strconv.FormatFloat(v/1e6, 'f', 2, 64) + " s"
	},
	"pct":  func(v float64) string { return strconv.FormatFloat(100*v, 'f', 3, 64) + "%" },
	"f0":   func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) },
	"f1":   func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) },
	"kib":  func(v float64) string { return strconv.FormatFloat(v/1024, 'f', 2, 64) + " KiB" },
	"kind": func() []loadtest.ErrorKind { return loadtest.Kinds() },
}).Parse(`
<style>
 body { font-family: system-ui, sans-serif; margin: 1.5em; }
 table.sum { border-collapse: collapse; margin-bottom: 1.5em; }
 table.sum th, table.sum td { border: 1px solid #ccc; padding: 4px 10px; text-align: right; }
 table.sum th:first-child, table.sum td:first-child { text-align: left; }
</style>
<h1>{{.Title}}</h1>
<table class="sum">
<tr><th>run</th><th>mode</th><th>conns × in flight</th><th>requests</th><th>errors</th><th>req/s</th>
<th>min</th><th>mean</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th><th>server CPU/req</th></tr>
{{range .Results}}<tr><td>{{.Target}}</td><td>{{.Mode}}</td><td>{{.Connections}} × {{.InFlight}}</td><td>{{.Requests}}</td>
<td>{{.Errors}} ({{pct .ErrorRate}}){{range $k, $n := .ErrorsByKind}} {{$k}}={{$n}}{{end}}</td><td>{{f0 .Throughput}}</td>
{{with .Latency}}<td>{{us .Min}}</td><td>{{us .Mean}}</td><td>{{us .P50}}</td><td>{{us .P90}}</td><td>{{us .P99}}</td><td>{{us .P999}}</td><td>{{us .Max}}</td>{{else}}<td colspan="7">no answers</td>{{end}}
<td>{{with .Server}}{{f1 .CPUPerRequestUS}} µs{{else}}-{{end}}</td></tr>
{{with .Sessions}}<tr><td colspan="14">sessions: {{.Opened}} of {{.Requested}} opened; {{if .RSSPerSession}}{{kib .RSSPerSession}} resident per idle session{{end}}</td></tr>{{end}}
{{with .Fanout}}<tr><td colspan="14">fan-out: {{.Delivered}} of {{.Expected}} notifications, {{f0 .PerSecond}}/s{{with .Delay}}, delay p50 {{us .P50}} p99 {{us .P99}}{{end}}</td></tr>{{end}}
{{end}}</table>
`))

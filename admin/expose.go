package admin

import (
	"bufio"
	"bytes"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"
)

// The exposition: every family /metrics writes has a # HELP line with its
// text and a # TYPE line, as promtool check metrics requires. The families
// counted in the Set get them from VictoriaMetrics (metrics.ExposeMetadata,
// which NewMetrics turns on: it is process-wide, and only adds metadata
// lines), with the text of families below added at scrape time; those
// written by hand (sharded counters, histograms) write their own.

// families are the help texts of mcpedge's families. Describe adds those
// of other packages (the cluster's, a gateway's).
var families = map[string]string{
	"mcpedge_requests_total":             "Requests answered, errors and refusals included, by transport and method.",
	"mcpedge_request_duration_seconds":   "Time from a request's arrival to its answer handed to the transport; requests answered at once on an event loop are sampled (one in 16).",
	"mcpedge_request_errors_total":       "Requests answered with a JSON-RPC error, by transport and code.",
	"mcpedge_requests_refused_total":     "Requests refused by a limit, by transport and limit.",
	"mcpedge_requests_in_flight":         "Requests being served by handlers now.",
	"mcpedge_workers_busy":               "Workers of the pool running a handler now.",
	"mcpedge_workers_queued":             "Submissions waiting for a worker now.",
	"mcpedge_sessions_live":              "Sessions in the engine's table now.",
	"mcpedge_sessions_closed_total":      "Sessions ended, by transport and reason.",
	"mcpedge_connections_accepted_total": "Connections accepted and served, by transport.",
	"mcpedge_connections_open":           "Connections open now, by transport.",
	"mcpedge_connections_closed_total":   "Connections closed, by transport and reason.",
	"mcpedge_connections_refused_total":  "Connections refused at accept, by transport and reason.",
	"mcpedge_received_bytes_total":       "Bytes read from clients, by transport.",
	"mcpedge_sent_bytes_total":           "Bytes written to clients, by transport.",
	"mcpedge_slow_consumers_total":       "Clients cut off for not reading, by transport.",
	"mcpedge_event_store_bytes":          "Bytes the HTTP sessions' event stores keep for resumption.",
	"mcpedge_buffered_bytes":             "Bytes of partial inbound messages held now (-max-buffered).",
	"mcpedge_outbound_bytes":             "Bytes queued for clients now (-max-outbound-total).",
	"mcpedge_bus_published_total":        "Notification bus messages published.",
	"mcpedge_bus_delivered_total":        "Notification bus messages delivered to subscribers.",
	"mcpedge_auth_failures_total":        "Requests refused by authentication or authorization, by reason.",
	"mcpedge_ready":                      "1 while /readyz answers 200 (listeners up, not draining, in the cluster), else 0.",
	"mcpedge_draining":                   "1 from the moment shutdown began (SIGTERM, SIGINT): requests in flight drain within -drain, then are cut.",
	"mcpedge_panics_total":               "Panics recovered.",
	"mcpedge_tool_calls_total":           "tools/call requests answered, by tool, upstream and outcome.",
	"mcpedge_tool_duration_seconds":      "Time from a tools/call's arrival to its answer, by tool and upstream; calls answered at once on an event loop are sampled (one in 16).",
}

// helps is a Metrics' help texts: families, and what Describe added.
type helps struct {
	mu sync.RWMutex
	m  map[string]string
}

func (h *helps) get(family string) (string, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if t, ok := h.m[family]; ok {
		return t, true
	}
	t, ok := families[family]
	return t, ok
}

// Describe sets the help text of a family that another package adds to
// the Set (a cluster's, a gateway's series), written on its # HELP line.
// Safe for concurrent use.
func (m *Metrics) Describe(family, help string) {
	m.help.mu.Lock()
	defer m.help.mu.Unlock()
	if m.help.m == nil {
		m.help.m = map[string]string{}
	}
	m.help.m[family] = help
}

// writeFamily writes the # HELP and # TYPE lines of a family written by
// hand.
func (m *Metrics) writeFamily(w io.Writer, family, typ string) {
	text, _ := m.help.get(family)
	_, _ = io.WriteString(w, "# HELP "+family+" "+escapeHelp(text)+"\n# TYPE "+family+" "+typ+"\n")
}

// addHelp copies the exposition in b to w, with the text of each family
// added to the # HELP lines that VictoriaMetrics wrote bare.
func (m *Metrics) addHelp(w io.Writer, b []byte) {
	bw := bufio.NewWriterSize(w, 32<<10)
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i+1], b[i+1:]
		} else {
			b = nil
		}
		if rest, ok := bytes.CutPrefix(line, []byte("# HELP ")); ok {
			name := strings.TrimSuffix(string(rest), "\n")
			if !strings.ContainsRune(name, ' ') {
				if text, ok := m.help.get(name); ok {
					_, _ = bw.WriteString("# HELP " + name + " " + escapeHelp(text) + "\n")
					continue
				}
			}
		}
		_, _ = bw.Write(line)
	}
	_ = bw.Flush()
}

// escapeHelp escapes a help text as the text format requires.
func escapeHelp(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s)
}

// escapeLabel escapes a label value as the text format requires.
func escapeLabel(s string) string {
	if !strings.ContainsAny(s, "\\\"\n") {
		return s
	}
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

// nBuckets is len(LatencyBuckets).
const nBuckets = 17

// latencyBounds are LatencyBuckets in nanoseconds, and les their le label
// values.
var (
	latencyBounds [nBuckets]int64
	les           [nBuckets + 1]string
)

func init() {
	if len(LatencyBuckets) != nBuckets {
		panic("admin: LatencyBuckets and nBuckets disagree")
	}
	for i, b := range LatencyBuckets {
		latencyBounds[i] = int64(b * float64(time.Second))
		les[i] = strconv.FormatFloat(b, 'g', -1, 64)
	}
	les[nBuckets] = "+Inf"
}

// histogram is a Prometheus histogram over LatencyBuckets without a lock:
// a count per bucket and the sum in nanoseconds, each one atomic addition
// per observation.
type histogram struct {
	n   [nBuckets + 1]atomic.Uint64 // per bucket, not cumulative; the last is +Inf
	sum atomic.Uint64               // nanoseconds
}

func (h *histogram) observe(d time.Duration) {
	i := 0
	for i < nBuckets && int64(d) > latencyBounds[i] {
		i++
	}
	h.n[i].Add(1)
	h.sum.Add(uint64(d))
}

// snapshot returns the counts per bucket (not cumulative), their total and
// the sum in seconds.
func (h *histogram) snapshot() (counts [nBuckets + 1]uint64, total uint64, sum float64) {
	for i := range h.n {
		counts[i] = h.n[i].Load()
		total += counts[i]
	}
	return counts, total, time.Duration(h.sum.Load()).Seconds()
}

// write writes the histogram's series with labels (`a="x",b="y"`), when it
// holds anything; it reports whether it did.
func (h *histogram) write(w io.Writer, family, labels string) bool {
	counts, total, sum := h.snapshot()
	if total == 0 {
		return false
	}
	var b []byte
	var cum uint64
	for i, n := range counts {
		cum += n
		b = append(b, family+"_bucket{"+labels+`,le="`+les[i]+`"} `...)
		b = strconv.AppendUint(b, cum, 10)
		b = append(b, '\n')
	}
	b = append(b, family+"_sum{"+labels+"} "...)
	b = strconv.AppendFloat(b, sum, 'g', -1, 64)
	b = append(b, '\n')
	b = append(b, family+"_count{"+labels+"} "...)
	b = strconv.AppendUint(b, total, 10)
	b = append(b, '\n')
	_, _ = w.Write(b)
	return true
}

// runtimeRegistry gathers the Go runtime's and the process's figures with
// client_golang's collectors: the names every Go exporter uses
// (go_goroutines, go_gc_duration_seconds, process_cpu_seconds_total...),
// which dashboards expect and promtool accepts. VictoriaMetrics' own
// (metrics.WriteProcessMetrics) fail the lint: counters named _count,
// gauges named _total, families without help.
var runtimeRegistry = sync.OnceValue(func() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
})

// writeRuntime writes the Go runtime's and the process's figures.
func writeRuntime(w io.Writer) {
	mfs, err := runtimeRegistry().Gather()
	if err != nil && len(mfs) == 0 {
		return
	}
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		_ = enc.Encode(mf)
	}
}

package loadtest

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// SchemaVersion names the layout of Result's JSON; it changes when a field
// changes meaning or goes away.
const SchemaVersion = "mcpload/v1"

// Result is what a run measured. Its JSON form is mcpload's -json output:
// every duration is in microseconds (fields ending _us), rates per second,
// memory in bytes. Fields that do not apply to a mode are omitted.
type Result struct {
	Schema    string `json:"schema"`    // SchemaVersion
	Mode      string `json:"mode"`      // "closed", "open", "sessions", "fanout", "soak" or "chaos"
	Target    string `json:"target"`    // the target spec; several: comma-separated
	Transport string `json:"transport"` // "tcp", "http" or "stdio"
	// Protocol is the revision the load spoke (load mode): ProtocolSession
	// or ProtocolStateless.
	Protocol string    `json:"protocol,omitempty"`
	Started  time.Time `json:"started"` // when the measured phase began

	Connections int      `json:"connections,omitempty"`
	InFlight    int      `json:"in_flight,omitempty"` // per connection
	Rate        float64  `json:"rate,omitempty"`      // open loop: requests/s asked
	Mix         []string `json:"mix,omitempty"`       // "name=weight" for each step
	WarmupS     float64  `json:"warmup_s"`
	DurationS   float64  `json:"duration_s"` // the measured phase's actual length

	Requests     int64            `json:"requests"` // answered or failed in the measured phase
	OK           int64            `json:"ok"`       // answered and verified
	Errors       int64            `json:"errors"`
	ErrorRate    float64          `json:"error_rate"` // Errors / Requests
	ErrorsByKind map[string]int64 `json:"errors_by_kind"`
	// ConnectFailures counts connections that could not be set up before
	// the run (each is retried by its workers; failures then are requests
	// failed with kind "connect").
	ConnectFailures int64 `json:"connect_failures"`
	// ErrorSamples holds the first message seen of each error kind, and
	// under "setup" the first set-up failure.
	ErrorSamples map[string]string `json:"error_samples,omitempty"`
	// Throughput is verified answers per second of the measured phase.
	Throughput float64 `json:"throughput_rps"`

	// Latency is of verified answers: from the send (closed loop) or the
	// intended send time (open loop) to the answer.
	Latency     *LatencyStats     `json:"latency_us,omitempty"`
	Percentiles []PercentilePoint `json:"percentiles,omitempty"`
	Steps       []StepResult      `json:"steps,omitempty"`
	Timeline    []SecondResult    `json:"timeline,omitempty"`

	// Targets is each target's share of a run on several (see
	// TargetResult); absent with one.
	Targets []TargetResult `json:"targets,omitempty"`

	Server     *ServerStats     `json:"server,omitempty"`
	Load       *LoadStats       `json:"load,omitempty"`
	Sessions   *SessionsResult  `json:"sessions,omitempty"`
	Fanout     *FanoutResult    `json:"fanout,omitempty"`
	Soak       *SoakResult      `json:"soak,omitempty"`
	Chaos      *ChaosResult     `json:"chaos,omitempty"`
	Thresholds *ThresholdResult `json:"thresholds,omitempty"`

	hist *hdrhistogram.Histogram
}

// LatencyStats summarises a latency distribution, in microseconds.
type LatencyStats struct {
	Count int64   `json:"count"`
	Min   float64 `json:"min"`
	Mean  float64 `json:"mean"`
	Stdev float64 `json:"stdev"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p99_9"`
	Max   float64 `json:"max"`
}

// PercentilePoint is one point of the latency-percentile curve.
type PercentilePoint struct {
	Percentile float64 `json:"percentile"`
	US         float64 `json:"us"`
}

// StepResult is one scenario step's share of the run.
type StepResult struct {
	Name     string  `json:"name"`
	Method   string  `json:"method"`
	Requests int64   `json:"requests"`
	Errors   int64   `json:"errors"`
	P50      float64 `json:"p50_us"`
	P99      float64 `json:"p99_us"`
}

// SecondResult is one second of the measured phase.
type SecondResult struct {
	T      int     `json:"t"` // seconds since the measured phase began
	OK     int64   `json:"ok"`
	Errors int64   `json:"errors"`
	MeanUS float64 `json:"mean_us"`
}

// TargetResult is one target's share of a run on several. Over HTTP,
// Sessions were initialized on it, and Requests were sent to it in the
// measured phase (after a warm-up, give or take the requests in flight as
// it ended), Errors of them failed at the transport or protocol level or
// were answered with an error (content checks are counted in the run's
// errors only); over TCP, Connections were opened to it.
type TargetResult struct {
	Target      string `json:"target"`
	Connections int64  `json:"connections,omitempty"`
	Sessions    int64  `json:"sessions,omitempty"`
	Requests    int64  `json:"requests"`
	Errors      int64  `json:"errors"`
}

// ServerStats is what /proc said of the server process over the measured
// phase.
type ServerStats struct {
	PID int `json:"pid"` // the first process
	// PIDs are all the processes measured (several: a local cluster,
	// whose CPU times and resident memory are summed); absent with one.
	PIDs       []int   `json:"pids,omitempty"`
	CPUSeconds float64 `json:"cpu_s"` // user + system
	// CPUPerRequestUS is CPUSeconds over Requests: the figure that decides
	// on a machine where load generator and server share the cores.
	CPUPerRequestUS float64 `json:"cpu_per_request_us"`
	RSSBytes        int64   `json:"rss_bytes"` // at the end
}

// LoadStats is mcpload's own CPU time over the measured phase (load mode),
// from /proc/self/stat: the load generator's cost, to set beside the
// server's.
type LoadStats struct {
	CPUSeconds      float64 `json:"cpu_s"`
	CPUPerRequestUS float64 `json:"cpu_per_request_us"`
}

// ThresholdResult is the outcome of Check.
type ThresholdResult struct {
	MaxP99US     float64  `json:"max_p99_us,omitempty"`
	MaxErrorRate float64  `json:"max_error_rate,omitempty"`
	Passed       bool     `json:"passed"`
	Violations   []string `json:"violations,omitempty"`
}

// percentiles drawn on the latency chart and listed in JSON.
var chartPercentiles = []float64{0, 10, 20, 30, 40, 50, 60, 70, 75, 80, 85, 90, 95, 97.5, 99, 99.5, 99.9, 99.95, 99.99, 99.999, 100}

func us(ns int64) float64 { return float64(ns) / 1e3 }

func (r *recorder) result(cfg *Config, span time.Duration) *Result {
	res := &Result{
		Schema: SchemaVersion, Mode: "closed", Target: cfg.targetsString(), Transport: cfg.Target.Transport,
		Protocol: cfg.Protocol, Started: r.t0, Connections: cfg.Connections, InFlight: cfg.InFlight, Rate: cfg.Rate,
		WarmupS: cfg.Warmup.Seconds(), DurationS: span.Seconds(),
		ErrorsByKind: map[string]int64{}, ErrorSamples: map[string]string{},
	}
	if cfg.Rate > 0 {
		res.Mode = "open"
	}
	for _, st := range r.m.steps {
		res.Mix = append(res.Mix, fmt.Sprintf("%s=%d", st.Name, st.Weight))
	}
	all := newHist(3)
	steps := make([]*hdrhistogram.Histogram, len(r.m.steps))
	res.Steps = make([]StepResult, len(r.m.steps))
	for i, st := range r.m.steps {
		steps[i] = newHist(2)
		res.Steps[i].Name, res.Steps[i].Method = st.Name, st.Method
	}
	for _, s := range r.shards {
		s.mu.Lock()
		all.Merge(s.hist)
		for i := range s.steps {
			steps[i].Merge(s.steps[i].hist)
			res.Steps[i].Requests += s.steps[i].ok + s.steps[i].errs
			res.Steps[i].Errors += s.steps[i].errs
		}
		for k := KindConnect; k < numKinds; k++ {
			if s.kinds[k] > 0 {
				res.ErrorsByKind[k.String()] += s.kinds[k]
				if _, ok := res.ErrorSamples[k.String()]; !ok && s.samples[k] != "" {
					res.ErrorSamples[k.String()] = s.samples[k]
				}
			}
		}
		s.mu.Unlock()
	}
	if len(steps) == 1 {
		steps[0] = all // recorded in the run's histogram only
	}
	for i := range res.Steps {
		res.Steps[i].P50 = us(steps[i].ValueAtQuantile(50))
		res.Steps[i].P99 = us(steps[i].ValueAtQuantile(99))
	}
	for _, n := range res.ErrorsByKind {
		res.Errors += n
	}
	res.OK = all.TotalCount()
	res.Requests = res.OK + res.Errors
	res.ConnectFailures = r.setupFailures
	if r.setupSample != "" {
		res.ErrorSamples["setup"] = r.setupSample
	}
	if res.Requests > 0 {
		res.ErrorRate = float64(res.Errors) / float64(res.Requests)
	}
	if span > 0 {
		res.Throughput = float64(res.OK) / span.Seconds()
	}
	res.setHist(all)
	last := int(span / time.Second)
	if span%time.Second != 0 {
		last++
	}
	last = min(last, len(r.slots))
	for i := 0; i < last; i++ {
		sl := &r.slots[i]
		sr := SecondResult{T: i, OK: sl.ok.Load(), Errors: sl.errs.Load()}
		if sr.OK > 0 {
			sr.MeanUS = us(sl.latNS.Load() / sr.OK)
		}
		res.Timeline = append(res.Timeline, sr)
	}
	return res
}

// setHist fills the latency fields from h.
func (res *Result) setHist(h *hdrhistogram.Histogram) {
	res.hist = h
	if h.TotalCount() == 0 {
		return
	}
	res.Latency = &LatencyStats{
		Count: h.TotalCount(),
		Min:   us(h.Min()), Mean: h.Mean() / 1e3, Stdev: h.StdDev() / 1e3,
		P50: us(h.ValueAtQuantile(50)), P90: us(h.ValueAtQuantile(90)),
		P99: us(h.ValueAtQuantile(99)), P999: us(h.ValueAtQuantile(99.9)),
		Max: us(h.Max()),
	}
	for _, q := range chartPercentiles {
		v := h.ValueAtQuantile(q)
		if q == 0 {
			v = h.Min()
		}
		res.Percentiles = append(res.Percentiles, PercentilePoint{Percentile: q, US: us(v)})
	}
}

// Check applies thresholds: a p99 latency above maxP99 or an error rate
// above maxErrorRate is a violation (zero disables either). It records the
// outcome in r.Thresholds and reports whether the run passed.
func (r *Result) Check(maxP99 time.Duration, maxErrorRate float64) bool {
	t := &ThresholdResult{MaxP99US: us(int64(maxP99)), MaxErrorRate: maxErrorRate, Passed: true}
	if maxP99 > 0 && r.Latency != nil && r.Latency.P99 > t.MaxP99US {
		t.Violations = append(t.Violations, fmt.Sprintf("p99 %s is above -max-p99 %s", fmtUS(r.Latency.P99), maxP99))
	}
	if maxP99 > 0 && r.Latency == nil && r.Requests > 0 {
		t.Violations = append(t.Violations, "no request succeeded, so p99 is unbounded")
	}
	if maxErrorRate > 0 && r.ErrorRate > maxErrorRate {
		t.Violations = append(t.Violations, fmt.Sprintf("error rate %.4g is above -max-error-rate %.4g", r.ErrorRate, maxErrorRate))
	}
	t.Passed = len(t.Violations) == 0
	r.Thresholds = t
	return t.Passed
}

// WriteJSON writes r as indented JSON.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// fmtUS formats microseconds for people: 850µs, 12.3ms, 1.20s.
func fmtUS(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case v < 1000:
		return fmt.Sprintf("%.0fµs", v)
	case v < 1e6:
		return fmt.Sprintf("%.2fms", v/1e3)
	}
	return fmt.Sprintf("%.2fs", v/1e6)
}

// WriteText writes the human summary.
func (r *Result) WriteText(w io.Writer) error {
	var b strings.Builder
	mode := r.Mode + " loop"
	switch r.Mode {
	case "sessions", "fanout", "soak", "chaos":
		mode = r.Mode + " mode"
	}
	fmt.Fprintf(&b, "target     %s (%s, %s)\n", r.Target, r.Transport, mode)
	switch r.Mode {
	case "sessions":
		r.Sessions.writeText(&b)
		r.writeTargets(&b)
		_, err := io.WriteString(w, b.String())
		return err
	case "fanout":
		r.Fanout.writeText(&b)
		_, err := io.WriteString(w, b.String())
		return err
	case "soak":
		r.Soak.writeText(&b)
		r.writeTargets(&b)
		r.writeLatency(&b)
		r.writeThresholds(&b)
		_, err := io.WriteString(w, b.String())
		return err
	case "chaos":
		r.Chaos.writeText(&b)
		r.writeThresholds(&b)
		_, err := io.WriteString(w, b.String())
		return err
	}
	fmt.Fprintf(&b, "load       %d connections x %d in flight", r.Connections, r.InFlight)
	if r.Rate > 0 {
		fmt.Fprintf(&b, ", %.0f req/s asked", r.Rate)
	}
	fmt.Fprintf(&b, "; mix %s", strings.Join(r.Mix, ","))
	if r.Protocol == ProtocolStateless {
		fmt.Fprintf(&b, "; protocol %s (stateless)", r.Protocol)
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "duration   %.2fs measured after %.2fs warm-up\n", r.DurationS, r.WarmupS)
	fmt.Fprintf(&b, "requests   %d, %d ok, %d errors (%.3f%%)\n", r.Requests, r.OK, r.Errors, 100*r.ErrorRate)
	fmt.Fprintf(&b, "throughput %.0f req/s\n", r.Throughput)
	r.writeLatency(&b)
	if len(r.Steps) > 1 {
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "step\tmethod\trequests\terrors\tp50\tp99")
		for _, s := range r.Steps {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", s.Name, s.Method, s.Requests, s.Errors, fmtUS(s.P50), fmtUS(s.P99))
		}
		_ = tw.Flush()
	}
	r.writeTargets(&b)
	if s := r.Server; s != nil {
		pids := "pid " + strconv.Itoa(s.PID)
		if len(s.PIDs) > 1 {
			pids = "pids " + joinInts(s.PIDs)
		}
		fmt.Fprintf(&b, "server     %s: cpu %.2fs, %.1fµs per request; rss %.1f MiB\n", pids, s.CPUSeconds, s.CPUPerRequestUS, float64(s.RSSBytes)/(1<<20))
	}
	if l := r.Load; l != nil {
		fmt.Fprintf(&b, "mcpload    cpu %.2fs, %.2fµs per request\n", l.CPUSeconds, l.CPUPerRequestUS)
	}
	r.writeThresholds(&b)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeTargets writes each target's share of a run on several.
func (r *Result) writeTargets(b *strings.Builder) {
	if len(r.Targets) == 0 {
		return
	}
	tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
	if r.Transport == "tcp" { // a session is its connection: nothing else counted apart
		fmt.Fprintln(tw, "target\tconnections")
		for _, t := range r.Targets {
			fmt.Fprintf(tw, "%s\t%d\n", t.Target, t.Connections)
		}
	} else {
		fmt.Fprintln(tw, "target\tsessions\trequests\terrors")
		for _, t := range r.Targets {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\n", t.Target, t.Sessions, t.Requests, t.Errors)
		}
	}
	_ = tw.Flush()
}

// joinInts writes ns as a comma-separated list.
func joinInts(ns []int) string {
	var b []byte
	for i, n := range ns {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(n), 10)
	}
	return string(b)
}

func (r *Result) writeThresholds(b *strings.Builder) {
	if t := r.Thresholds; t != nil {
		if t.Passed {
			b.WriteString("thresholds passed\n")
		}
		for _, v := range t.Violations {
			fmt.Fprintf(b, "FAIL       %s\n", v)
		}
	}
}

// writeLatency writes the latency line and the errors by kind.
func (r *Result) writeLatency(b *strings.Builder) {
	if r.Latency != nil {
		l := r.Latency
		fmt.Fprintf(b, "latency    min %s  mean %s  p50 %s  p90 %s  p99 %s  p99.9 %s  max %s\n",
			fmtUS(l.Min), fmtUS(l.Mean), fmtUS(l.P50), fmtUS(l.P90), fmtUS(l.P99), fmtUS(l.P999), fmtUS(l.Max))
	}
	if r.Errors > 0 {
		b.WriteString("errors    ")
		for _, k := range Kinds() {
			if n := r.ErrorsByKind[k.String()]; n > 0 {
				fmt.Fprintf(b, " %s=%d", k, n)
			}
		}
		b.WriteByte('\n')
		for _, k := range Kinds() {
			if s := r.ErrorSamples[k.String()]; s != "" {
				fmt.Fprintf(b, "  first %s: %s\n", k, s)
			}
		}
	}
}

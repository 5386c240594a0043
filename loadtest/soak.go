package loadtest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/valyala/fasthttp"
)

// SoakConfig describes a soak run: many connections held open for a long
// time, each making a call now and then, while the server's resident
// memory, threads, open descriptors (and goroutines, where it exposes
// them) are sampled.
type SoakConfig struct {
	Target Target // tcp or http
	// Targets, when set, replace Target. Over TCP the connections are
	// opened to each target in turn; over HTTP, session i is initialized
	// on target i % len(Targets) and each of its calls goes to the next
	// target in turn, on a connection of its own to each.
	Targets []Target
	// Connections is how many sessions are held, each on a connection of
	// its own (HTTP too: each session gets its own keep-alive connection);
	// default 1000.
	Connections int
	// Duration bounds the whole run, the opening of the connections
	// included; default 5 minutes.
	Duration time.Duration
	// Every is the time between one connection's calls; the connections'
	// schedules are spread over it. Default 5 s.
	Every time.Duration
	// Steps is the mix of calls; default the built-in "echo".
	Steps []Step
	// Concurrency is how many connections are being opened at once;
	// default 64.
	Concurrency int
	// Timeout bounds each call and each connection's set-up; default 10 s.
	Timeout time.Duration
	// PID is the server process sampled through /proc; 0 samples nothing
	// but the run's own counts.
	PID int
	// SampleEvery is the time between samples; default Duration/10,
	// between 1 s and 1 minute.
	SampleEvery time.Duration
	// GoroutinesURL, if set, is fetched at each sample for the server's
	// goroutine count: a pprof goroutine page (/debug/pprof/goroutine?debug=1
	// or debug=2), a JSON object with a "goroutines" number, or a bare
	// number.
	GoroutinesURL string
	// Settle is how long after closing every connection the last sample
	// (After) is taken; default 1 s.
	Settle time.Duration
	// Progress, if set, is called about once a second.
	Progress func(Progress)
}

// SoakSample is one reading during a soak run. T is seconds since the run
// began; the /proc members are zero without a PID.
type SoakSample struct {
	T          float64 `json:"t_s"`
	Open       int     `json:"open"`     // connections usable
	Requests   int64   `json:"requests"` // calls made so far, failed ones included
	Errors     int64   `json:"errors"`
	RSSBytes   int64   `json:"rss_bytes,omitempty"`
	Threads    int     `json:"threads,omitempty"`
	FDs        int     `json:"fds,omitempty"`
	CPUS       float64 `json:"cpu_s,omitempty"`
	Goroutines int     `json:"goroutines,omitempty"`
	Error      string  `json:"error,omitempty"` // a reading that failed
}

// SoakResult is a soak run's outcome. Start is the sample before the first
// connection, Middle the one nearest half-way, End the last with the
// connections open, After the one taken Settle after they all closed.
type SoakResult struct {
	Connections int          `json:"connections"` // asked
	Opened      int          `json:"opened"`      // set up at least once
	SetupFailed int          `json:"setup_failed"`
	Redials     int64        `json:"redials"` // sessions opened again after one broke
	Minutes     float64      `json:"minutes"`
	EveryS      float64      `json:"every_s"`
	Requests    int64        `json:"requests"`
	Errors      int64        `json:"errors"`
	Start       *SoakSample  `json:"start,omitempty"`
	Middle      *SoakSample  `json:"middle,omitempty"`
	End         *SoakSample  `json:"end,omitempty"`
	After       *SoakSample  `json:"after,omitempty"`
	Samples     []SoakSample `json:"samples"`
	FirstError  string       `json:"first_error,omitempty"`
}

func (s *SoakResult) writeText(b *strings.Builder) {
	held := time.Duration(s.Minutes * float64(time.Minute)).Round(100 * time.Millisecond)
	fmt.Fprintf(b, "soak       %d connections held at the end (%d of %d opened, %d failed, %d re-opened) for %s (%.2f min), a call every %.3gs each\n",
		s.End.orZero().Open, s.Opened, s.Connections, s.SetupFailed, s.Redials, held, s.Minutes, s.EveryS)
	fmt.Fprintf(b, "requests   %d, %d errors\n", s.Requests, s.Errors)
	b.WriteString("samples    when        t        open  requests  errors  rss MiB  threads  fds  goroutines\n")
	for _, x := range []struct {
		name string
		s    *SoakSample
	}{{"start", s.Start}, {"middle", s.Middle}, {"end", s.End}, {"after", s.After}} {
		if x.s == nil {
			continue
		}
		g := "-"
		if x.s.Goroutines > 0 {
			g = strconv.Itoa(x.s.Goroutines)
		}
		fmt.Fprintf(b, "           %-7s %7.1fs %9d %9d %7d %8.1f %8d %4d  %s\n", x.name, x.s.T, x.s.Open, x.s.Requests, x.s.Errors,
			float64(x.s.RSSBytes)/(1<<20), x.s.Threads, x.s.FDs, g)
		if x.s.Error != "" {
			fmt.Fprintf(b, "           (%s: %s)\n", x.name, x.s.Error)
		}
	}
	if s.FirstError != "" {
		fmt.Fprintf(b, "first error: %s\n", s.FirstError)
	}
}

func (s *SoakSample) orZero() *SoakSample {
	if s == nil {
		return &SoakSample{}
	}
	return s
}

// countingDialer counts the sessions it opens.
type countingDialer struct {
	dialer
	n *atomic.Int64
}

func (d countingDialer) dial(ctx context.Context, inflight int) (session, error) {
	s, err := d.dialer.dial(ctx, inflight)
	if err == nil {
		d.n.Add(1)
	}
	return s, err
}

// RunSoak runs a soak. It returns an error only when the run could not
// start; failures are counted. It returns within Duration + Timeout +
// Settle, or soon after ctx ends, having closed every connection.
func RunSoak(ctx context.Context, cfg SoakConfig) (*Result, error) {
	ts, err := targetsOf(cfg.Target, cfg.Targets)
	if err != nil {
		return nil, err
	}
	cfg.Targets, cfg.Target = ts, ts[0]
	if cfg.Target.Transport != "tcp" && cfg.Target.Transport != "http" {
		return nil, fmt.Errorf("%w: soak holds many connections: a tcp or http target", ErrConfig)
	}
	if cfg.Connections <= 0 {
		cfg.Connections = 1000
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 5 * time.Minute
	}
	if cfg.Every <= 0 {
		cfg.Every = 5 * time.Second
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 64
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.SampleEvery <= 0 {
		cfg.SampleEvery = min(max(cfg.Duration/10, time.Second), time.Minute)
	}
	if cfg.Settle <= 0 {
		cfg.Settle = time.Second
	}
	if len(cfg.Steps) == 0 {
		st, _ := Builtin("echo")
		st.Weight = 1
		cfg.Steps = []Step{st}
	}
	m, err := newMix(cfg.Steps)
	if err != nil {
		return nil, err
	}
	opts := &sessionOpts{timeout: cfg.Timeout, maxFrame: 16 << 20}
	var dials atomic.Int64
	holders := make([]*holder, cfg.Connections)
	var httpTargets []*httpTarget
	var shared dialer
	if cfg.Target.Transport == "tcp" {
		if shared, err = newDialer(ts, 1, 1, opts, io.Discard); err != nil {
			return nil, err
		}
	}
	for i := range holders {
		d := shared
		if d == nil {
			// A client of its own per session (and target), so that each
			// holds its connection instead of sharing a few busy ones.
			peers := make([]*httpTarget, len(ts))
			for k, tk := range ts {
				t := newHTTPTarget(tk.Addr, 1, 1, opts)
				if hc, ok := t.client.(*fasthttp.HostClient); ok {
					hc.MaxIdleConnDuration = max(time.Minute, 3*cfg.Every)
				}
				if len(ts) > 1 {
					t.peers, t.idx = peers, k
				}
				peers[k] = t
				httpTargets = append(httpTargets, t)
			}
			d = peers[i%len(ts)]
		}
		holders[i] = &holder{d: countingDialer{d, &dials}, inflight: 1}
	}
	defer func() {
		for _, t := range httpTargets {
			t.close()
		}
	}()

	res := &Result{Schema: SchemaVersion, Mode: "soak", Target: targetsString(ts), Transport: cfg.Target.Transport,
		Connections: cfg.Connections, InFlight: 1, ErrorsByKind: map[string]int64{}}
	sr := &SoakResult{Connections: cfg.Connections, EveryS: cfg.Every.Seconds()}
	res.Soak = sr

	start := time.Now()
	end := start.Add(cfg.Duration)
	runCtx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	stopCtx, cancelStop := context.WithDeadline(ctx, end.Add(cfg.Timeout))
	defer cancelStop()
	r := newRecorder(m, cfg.Connections)
	r.start(start, cfg.Duration)
	wcfg := &Config{}

	sampler := newSoakSampler(cfg, holders, r, start)
	sr.Start = sampler.take()

	var (
		mu       sync.Mutex
		firstErr error
		failed   int
	)
	sem := make(chan struct{}, cfg.Concurrency)
	var tickets, lastDone atomic.Int64
	var wg sync.WaitGroup
	for i, h := range holders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-runCtx.Done():
				return
			}
			_, err := h.get(runCtx)
			<-sem
			if err != nil {
				if runCtx.Err() == nil {
					mu.Lock()
					failed++
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
				return
			}
			wk := &worker{
				id: i, conn: i, h: h, m: m, r: r,
				rng: rand64{s: uint64(start.UnixNano()) ^ uint64(i+1)*0x9e3779b97f4a7c15},
				cfg: wcfg, meas: start, end: end, tickets: &tickets, lastDone: &lastDone,
				interval: cfg.Every,
			}
			wk.next = time.Now().Add(time.Duration(wk.rng.next() % uint64(cfg.Every)))
			wk.run(stopCtx)
		}()
	}

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	sampleTick := time.NewTicker(cfg.SampleEvery)
	defer sampleTick.Stop()
	progTick := time.NewTicker(time.Second)
	defer progTick.Stop()
loop:
	for {
		select {
		case <-done:
			break loop
		case <-runCtx.Done():
			// The end: sample with everything still open, then wait
			// for the calls in flight.
			if sr.End == nil {
				sr.End = sampler.take()
			}
			<-done
			break loop
		case <-sampleTick.C:
			sampler.take()
		case <-progTick.C:
			if cfg.Progress != nil {
				n, bad := r.counts()
				cfg.Progress(Progress{Elapsed: time.Since(start), Total: cfg.Duration, Requests: n, Errors: bad})
			}
		}
	}
	if sr.End == nil {
		sr.End = sampler.take()
	}
	span := min(time.Since(start), cfg.Duration)

	// Close everything, concurrently (HTTP sessions end with a DELETE).
	ch := make(chan *holder)
	var cw sync.WaitGroup
	for range cfg.Concurrency {
		cw.Add(1)
		go func() {
			defer cw.Done()
			for h := range ch {
				h.close()
			}
		}()
	}
	for _, h := range holders {
		ch <- h
	}
	close(ch)
	cw.Wait()
	for _, t := range httpTargets {
		t.close()
	}
	if ctx.Err() == nil {
		sleepCtx(ctx, cfg.Settle)
		sr.After = sampler.take()
	}

	full := r.result(&Config{Target: cfg.Target, Targets: ts, Connections: cfg.Connections, InFlight: 1}, span)
	full.Mode = "soak"
	full.Mix = nil
	for _, st := range m.steps {
		full.Mix = append(full.Mix, fmt.Sprintf("%s=%d", st.Name, st.Weight))
	}
	full.Soak = sr
	full.Started = start
	full.ConnectFailures = int64(failed)
	if firstErr != nil {
		full.ErrorSamples["setup"] = firstErr.Error()
		sr.FirstError = firstErr.Error()
	} else {
		for _, k := range Kinds() {
			if s := full.ErrorSamples[k.String()]; s != "" {
				sr.FirstError = s
				break
			}
		}
	}
	sr.SetupFailed = failed
	sr.Opened = cfg.Connections - failed
	sr.Redials = max(dials.Load()-int64(sr.Opened), 0)
	sr.Minutes = span.Minutes()
	sr.Requests, sr.Errors = full.Requests, full.Errors
	sr.Samples = sampler.all()
	// Middle: the sample nearest half-way.
	half := span.Seconds() / 2
	for i := range sr.Samples {
		s := &sr.Samples[i]
		if sr.Middle == nil || abs(s.T-half) < abs(sr.Middle.T-half) {
			c := *s
			sr.Middle = &c
		}
	}
	if sr.Opened == 0 && ctx.Err() == nil {
		return nil, fmt.Errorf("loadtest: no connection to %s: %w", full.Target, firstErr)
	}
	full.Targets = soakTargets(ts, shared, httpTargets)
	if cfg.PID > 0 && sr.End != nil {
		full.Server = &ServerStats{PID: cfg.PID, RSSBytes: sr.End.RSSBytes}
		if sr.Start != nil && sr.End.CPUS > 0 {
			full.Server.CPUSeconds = sr.End.CPUS - sr.Start.CPUS
			if full.Requests > 0 {
				full.Server.CPUPerRequestUS = full.Server.CPUSeconds * 1e6 / float64(full.Requests)
			}
		}
	}
	return full, nil
}

// soakTargets is each of several targets' share of a soak (nil with one):
// the sessions or connections opened there, and over HTTP the calls sent.
func soakTargets(ts []Target, shared dialer, hts []*httpTarget) []TargetResult {
	if len(ts) < 2 {
		return nil
	}
	if d, ok := shared.(*tcpDialer); ok {
		return d.counts()
	}
	out := make([]TargetResult, len(ts))
	for i, t := range ts {
		out[i].Target = t.String()
	}
	for _, t := range hts {
		o := &out[t.idx]
		o.Sessions += t.sessions.Load()
		o.Requests += t.calls.Load()
		o.Errors += t.failed.Load()
	}
	return out
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

// soakSampler takes and keeps the samples of a soak run.
type soakSampler struct {
	cfg     SoakConfig
	holders []*holder
	r       *recorder
	start   time.Time
	hc      *http.Client

	mu      sync.Mutex
	samples []SoakSample
}

func newSoakSampler(cfg SoakConfig, holders []*holder, r *recorder, start time.Time) *soakSampler {
	return &soakSampler{cfg: cfg, holders: holders, r: r, start: start, hc: &http.Client{Timeout: 5 * time.Second}}
}

// take reads a sample, keeps it and returns a copy.
func (s *soakSampler) take() *SoakSample {
	x := SoakSample{T: time.Since(s.start).Seconds()}
	for _, h := range s.holders {
		h.mu.Lock()
		if h.s != nil && h.s.broken() == nil {
			x.Open++
		}
		h.mu.Unlock()
	}
	x.Requests, x.Errors = s.r.counts()
	var errs []string
	if s.cfg.PID > 0 {
		st, err := ReadProc(s.cfg.PID)
		x.RSSBytes, x.Threads, x.FDs, x.CPUS = st.RSSBytes, st.Threads, st.FDs, st.CPUS
		if err != nil {
			errs = append(errs, err.Error())
		}
	}
	if s.cfg.GoroutinesURL != "" {
		n, err := fetchGoroutines(s.hc, s.cfg.GoroutinesURL)
		x.Goroutines = n
		if err != nil {
			errs = append(errs, err.Error())
		}
	}
	x.Error = strings.Join(errs, "; ")
	s.mu.Lock()
	s.samples = append(s.samples, x)
	s.mu.Unlock()
	return &x
}

func (s *soakSampler) all() []SoakSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SoakSample(nil), s.samples...)
}

// fetchGoroutines reads a goroutine count from url: a pprof goroutine
// page ("goroutine profile: total N" with debug=1, one "goroutine N [...]"
// header per goroutine with debug=2), a JSON object with a "goroutines"
// number, or a bare number.
func fetchGoroutines(hc *http.Client, url string) (int, error) {
	resp, err := hc.Get(url)
	if err != nil {
		return 0, fmt.Errorf("loadtest: goroutines: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return 0, fmt.Errorf("loadtest: goroutines: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("loadtest: goroutines: %s answered %s", url, resp.Status)
	}
	n, ok := parseGoroutines(body)
	if !ok {
		return 0, fmt.Errorf("loadtest: goroutines: no count in the answer of %s: %s", url, clip(body))
	}
	return n, nil
}

func parseGoroutines(body []byte) (int, bool) {
	body = bytes.TrimSpace(body)
	if v, ok := bytes.CutPrefix(body, []byte("goroutine profile: total ")); ok {
		if i := bytes.IndexByte(v, '\n'); i >= 0 {
			v = v[:i]
		}
		n, err := strconv.Atoi(string(bytes.TrimSpace(v)))
		return n, err == nil
	}
	if n, err := strconv.Atoi(string(body)); err == nil {
		return n, true
	}
	if len(body) > 0 && body[0] == '{' {
		var v struct {
			Goroutines *int `json:"goroutines"`
		}
		if codec.Unmarshal(body, &v) == nil && v.Goroutines != nil {
			return *v.Goroutines, true
		}
		return 0, false
	}
	if bytes.HasPrefix(body, []byte("goroutine ")) {
		n := 0
		for _, line := range bytes.Split(body, []byte{'\n'}) {
			if bytes.HasPrefix(line, []byte("goroutine ")) && bytes.HasSuffix(bytes.TrimSpace(line), []byte("]:")) {
				n++
			}
		}
		return n, n > 0
	}
	return 0, false
}

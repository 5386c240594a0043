package loadtest

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/mcpedge/mcpedge/client"
)

// Config describes one load run. Only Target (or Targets) is required.
type Config struct {
	Target Target
	// Targets, when set, are the run's targets instead of Target: nodes of
	// one cluster, all of one transport (stdio: one only). Over HTTP each
	// session is initialized on the next target in turn, and each of its
	// requests goes to the next target in turn with the session's id, so
	// that every session is used on every node; over TCP, where a session
	// is its connection, connection i goes to target i % len(Targets).
	// Result.Targets gives each target's share. Not with Client. With one
	// target, the run is the same as with Target.
	Targets []Target
	// Connections is the number of sessions, each on its own connection
	// (HTTP: the connection pool's size). A stdio target has one session:
	// there Connections multiplies InFlight instead. Default 1.
	Connections int
	// InFlight is the number of requests outstanding at once on each
	// connection (HTTP: pipelined). Default 1.
	InFlight int
	// Rate, when positive, runs open loop: that many requests per second
	// in all, each worker keeping its own schedule, and latency is
	// measured from each request's intended send time, so a stalled server
	// shows in the latencies instead of slowing the load. Zero runs closed
	// loop: each worker sends its next request when the last is answered.
	Rate float64
	// Duration is the measured phase's length, after Warmup. Default 10 s
	// unless Requests is set.
	Duration time.Duration
	// Requests, when positive, ends the measured phase after that many
	// requests instead of after Duration.
	Requests int64
	// Warmup is run before the measured phase and not recorded.
	Warmup time.Duration
	// Steps is the scenario mix; default the built-in "echo".
	Steps []Step
	// Timeout bounds each request, and each connection's set-up. Default
	// 10 s.
	Timeout time.Duration
	// MaxMessage bounds one answer; default 16 MiB.
	MaxMessage int
	// PID is the server process whose CPU time and memory are measured;
	// for a stdio target the child is measured when PID is 0.
	PID int
	// PIDs are more server processes measured with PID, such as the nodes
	// of a cluster running on this machine: the CPU time per request is
	// the sum of their CPU times over the requests, and the resident
	// memory their sum.
	PIDs []int
	// Progress, if set, is called about five times a second from one
	// goroutine.
	Progress func(Progress)
	// Stderr receives a stdio child's standard error; nil discards it.
	Stderr io.Writer
	// Client drives the load through the client library's pool
	// (client.NewPool with Connections members, CallRaw on the member
	// Strategy picks) instead of mcpload's own lean transports, which pin
	// each worker to its connection and count InFlight exactly. With it,
	// InFlight is the number of workers per member, and a stdio child's
	// CPU is not measured (the pool owns the process).
	Client   bool
	Strategy client.Strategy
	// Protocol is the revision spoken: ProtocolSession (the default,
	// initialize and a session per connection) or ProtocolStateless
	// (2026-07-28: no initialize, every request carries its _meta, over
	// HTTP its headers, and no session). Not with Client.
	Protocol string
	// Bearer, when set, are access tokens sent as "Authorization: Bearer
	// TOKEN" on every HTTP request (the handshake's too), one after
	// another, a request each: distinct tokens defeat a server's cache of
	// verified tokens. HTTP targets only, not with Client.
	Bearer []string
	// Sticky, with several HTTP targets, keeps each session on the target
	// it was initialized on instead of sending its requests to each target
	// in turn: the sessions are spread over the nodes, and no node serves
	// another's session. Against nodes that share nothing (no cluster),
	// it measures what spreading the load over several processes costs.
	Sticky bool

	// launched, if set, is called once the connections are set up, as the
	// requests begin: a chaos run starts its hostile clients then, so that
	// the well-behaved ones are in before any limit is full.
	launched func()
}

// Progress is a run's state as Config.Progress sees it.
type Progress struct {
	Warmup   bool          // still warming up
	Elapsed  time.Duration // of the current phase
	Total    time.Duration // the measured phase's planned length (0 with Requests)
	Requests int64         // answered in the measured phase
	Target   int64         // Config.Requests
	Errors   int64
}

func (c *Config) defaults() error {
	ts, err := targetsOf(c.Target, c.Targets)
	if err != nil {
		return err
	}
	c.Targets, c.Target = ts, ts[0]
	if len(ts) > 1 && c.Client {
		return fmt.Errorf("%w: several targets: the client library's pool drives one", ErrConfig)
	}
	if c.Connections <= 0 {
		c.Connections = 1
	}
	if c.InFlight <= 0 {
		c.InFlight = 1
	}
	if c.Target.Transport == "stdio" {
		c.InFlight *= c.Connections
		c.Connections = 1
	}
	if c.Duration <= 0 && c.Requests <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	if c.MaxMessage <= 0 {
		c.MaxMessage = 16 << 20
	}
	if c.Warmup < 0 || c.Rate < 0 {
		return fmt.Errorf("%w: negative warm-up or rate", ErrConfig)
	}
	if len(c.Steps) == 0 {
		st, _ := Builtin("echo")
		st.Weight = 1
		c.Steps = []Step{st}
	}
	if c.Stderr == nil {
		c.Stderr = io.Discard
	}
	switch c.Protocol {
	case "":
		c.Protocol = ProtocolSession
	case ProtocolSession:
	case ProtocolStateless:
		if c.Client {
			return fmt.Errorf("%w: protocol %s: the client library speaks the session revision only", ErrConfig, c.Protocol)
		}
	default:
		return fmt.Errorf("%w: protocol %q: want %s", ErrConfig, c.Protocol, strings.Join(Protocols(), " or "))
	}
	if len(c.Bearer) > 0 {
		if c.Target.Transport != "http" {
			return fmt.Errorf("%w: a bearer token needs an HTTP target", ErrConfig)
		}
		if c.Client {
			return fmt.Errorf("%w: a bearer token is not sent through the client library", ErrConfig)
		}
		for _, t := range c.Bearer {
			if t == "" || strings.ContainsAny(t, " \t\r\n") {
				return fmt.Errorf("%w: a bearer token is empty or has white space in it", ErrConfig)
			}
		}
	}
	return nil
}

// targetsString names the run's targets.
func (c *Config) targetsString() string {
	if len(c.Targets) == 0 {
		return c.Target.String()
	}
	return targetsString(c.Targets)
}

// stateless reports whether the run speaks 2026-07-28.
func (c *Config) stateless() bool { return c.Protocol == ProtocolStateless }

// Run drives load as cfg says and returns what it measured. It returns an
// error only when the run could not start (a bad configuration, no
// connection at all); request failures are counted in the Result. Run
// returns within Warmup + Duration + Timeout plus connection set-up time,
// or soon after ctx ends.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	m, err := newMix(cfg.Steps)
	if err != nil {
		return nil, err
	}
	if cfg.stateless() {
		if err := m.modernize(); err != nil {
			return nil, err
		}
	}
	var ld load
	if cfg.pipelined() {
		ld, err = newPipeLoad(ctx, &cfg, m)
	} else {
		ld, err = newWorkerLoad(ctx, &cfg, m)
	}
	if err != nil {
		return nil, err
	}
	defer ld.close()
	r := ld.recorder()

	pids := serverPIDs(cfg.PID, ld.pid(), cfg.PIDs)
	tc, _ := ld.(targetCounter)

	// The run's clock: warm-up from start, measurement from measStart.
	start := time.Now()
	measStart := start.Add(cfg.Warmup)
	var end time.Time
	if cfg.Requests <= 0 {
		end = measStart.Add(cfg.Duration)
	}
	r.start(measStart, cfg.Duration)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Calls still outstanding a timeout after the end are abandoned.
	var stopCtx context.Context = runCtx
	if !end.IsZero() {
		var c2 context.CancelFunc
		stopCtx, c2 = context.WithDeadline(runCtx, end.Add(cfg.Timeout))
		defer c2()
	}

	var cpu0, self0 time.Duration
	var counts0 []TargetResult
	cpuOK, selfOK := false, false
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTimer(time.Until(measStart))
		defer t.Stop()
		select {
		case <-t.C:
		case <-runCtx.Done():
			return
		}
		if len(pids) > 0 {
			if c, err := procCPUSum(pids); err == nil {
				cpu0, cpuOK = c, true
			}
		}
		if tc != nil && cfg.Warmup > 0 {
			counts0 = tc.targetCounts()
		}
		if c, err := ProcCPU(os.Getpid()); err == nil {
			self0, selfOK = c, true
		}
	}()

	if tc != nil && cfg.Warmup == 0 {
		counts0 = tc.targetCounts() // exact: before any request
	}
	var wg sync.WaitGroup
	ld.launch(stopCtx, start, measStart, end, &wg)
	if cfg.launched != nil {
		cfg.launched()
	}

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	report := func() {
		if cfg.Progress == nil {
			return
		}
		now := time.Now()
		p := Progress{Warmup: now.Before(measStart), Total: cfg.Duration, Target: cfg.Requests}
		if cfg.Requests > 0 {
			p.Total = 0
		}
		if p.Warmup {
			p.Elapsed = now.Sub(start)
		} else {
			p.Elapsed = now.Sub(measStart)
			p.Requests, p.Errors = r.counts()
		}
		cfg.Progress(p)
	}
loop:
	for {
		select {
		case <-done:
			break loop
		case <-tick.C:
			report()
		}
	}
	report()
	cancel()
	<-sampled
	finish := time.Now()
	if !end.IsZero() && finish.After(end) {
		finish = end
	}
	if ld := ld.lastDone(); cfg.Requests > 0 && ld > 0 {
		finish = time.Unix(0, ld)
	}
	res := r.result(&cfg, finish.Sub(measStart))
	if c1, err := ProcCPU(os.Getpid()); err == nil && selfOK {
		// Measured to the end of the run, which finish may precede by the
		// calls still outstanding at the end: close enough for a cost.
		res.Load = &LoadStats{CPUSeconds: (c1 - self0).Seconds()}
		if n := res.Requests; n > 0 {
			res.Load.CPUPerRequestUS = float64(c1-self0) / float64(time.Microsecond) / float64(n)
		}
	}
	if tc != nil {
		res.Targets = tc.targetCounts()
		for i := range res.Targets {
			if i < len(counts0) {
				res.Targets[i].Requests -= counts0[i].Requests
				res.Targets[i].Errors -= counts0[i].Errors
			}
		}
	}
	if len(pids) > 0 {
		res.Server = &ServerStats{PID: pids[0]}
		if len(pids) > 1 {
			res.Server.PIDs = pids
		}
		if cpuOK {
			if c1, err := procCPUSum(pids); err == nil {
				res.Server.CPUSeconds = (c1 - cpu0).Seconds()
				if n := res.Requests; n > 0 {
					res.Server.CPUPerRequestUS = float64(c1-cpu0) / float64(time.Microsecond) / float64(n)
				}
			}
		}
		if rss, err := procRSSSum(pids); err == nil {
			res.Server.RSSBytes = rss
		}
	}
	return res, nil
}

// serverPIDs lists the server processes a run measures: pid (or else the
// child the run started, if any), then more, each once.
func serverPIDs(pid, child int, more []int) []int {
	if pid == 0 {
		pid = child
	}
	var pids []int
	if pid > 0 {
		pids = append(pids, pid)
	}
	for _, p := range more {
		if p > 0 && !slices.Contains(pids, p) {
			pids = append(pids, p)
		}
	}
	return pids
}

// targetCounter is a load on several targets that counts each one's
// share: cumulative, since the load began.
type targetCounter interface {
	targetCounts() []TargetResult
}

// pipelined reports whether the run takes the pipelined driver
// (conn_pipe.go): closed loop over a stream, without the client library.
func (c *Config) pipelined() bool {
	return !c.Client && c.Rate == 0 && (c.Target.Transport == "tcp" || c.Target.Transport == "stdio")
}

// load is how a run puts its load on: workers calling through sessions,
// or the pipelined connections.
type load interface {
	recorder() *recorder
	// pid is the server process the load started (stdio), or 0.
	pid() int
	// launch starts the load's goroutines in wg; they return when the run
	// has no more for them or ctx ends.
	launch(ctx context.Context, start, measStart, end time.Time, wg *sync.WaitGroup)
	// lastDone is the unix nanos of the last measured answer.
	lastDone() int64
	close()
}

// workerLoad is a worker per request in flight, each calling through its
// connection's session: the path of HTTP, open loop and the client library.
type workerLoad struct {
	cfg       *Config
	m         *mix
	r         *recorder
	d         dialer
	holders   []*holder
	perHolder int
	tickets   atomic.Int64
	last      atomic.Int64
}

func newWorkerLoad(ctx context.Context, cfg *Config, m *mix) (*workerLoad, error) {
	opts := &sessionOpts{timeout: cfg.Timeout, maxFrame: cfg.MaxMessage, stateless: cfg.stateless(), sticky: cfg.Sticky, bearer: bearerHeaders(cfg.Bearer)}
	// nHolders connections, perHolder workers on each.
	nHolders, perHolder := cfg.Connections, cfg.InFlight
	var d dialer
	if cfg.Client {
		nHolders, perHolder = 1, cfg.Connections*cfg.InFlight // one holder: the pool
		pd, err := newPoolDialer(ctx, cfg.Target, cfg.Connections, cfg.Strategy, opts, cfg.Stderr)
		if err != nil {
			return nil, fmt.Errorf("loadtest: no connection to %s: %w", cfg.targetsString(), err)
		}
		d = pd
	} else {
		var err error
		d, err = newDialer(cfg.Targets, cfg.Connections, cfg.InFlight, opts, cfg.Stderr)
		if err != nil {
			return nil, err
		}
	}

	wl := &workerLoad{cfg: cfg, m: m, d: d, perHolder: perHolder, r: newRecorder(m, nHolders*perHolder)}
	wl.holders = make([]*holder, nHolders)
	var wg sync.WaitGroup
	var connErr error
	var mu sync.Mutex
	for i := range wl.holders {
		wl.holders[i] = &holder{d: d, inflight: perHolder}
		wg.Add(1)
		go func(h *holder) {
			defer wg.Done()
			if _, err := h.get(ctx); err != nil {
				mu.Lock()
				connErr = err
				mu.Unlock()
			}
		}(wl.holders[i])
	}
	wg.Wait()
	alive := 0
	for _, h := range wl.holders {
		if h.s != nil {
			alive++
		}
	}
	if alive == 0 {
		wl.close()
		return nil, fmt.Errorf("loadtest: no connection to %s: %w", cfg.targetsString(), connErr)
	}
	wl.r.setupFailures = int64(nHolders - alive)
	if connErr != nil {
		wl.r.setupSample = connErr.Error()
	}
	return wl, nil
}

func (wl *workerLoad) recorder() *recorder { return wl.r }
func (wl *workerLoad) pid() int            { return wl.d.pid() }
func (wl *workerLoad) lastDone() int64     { return wl.last.Load() }

// targetCounts is each target's share, with several (nil with one).
func (wl *workerLoad) targetCounts() []TargetResult {
	switch d := wl.d.(type) {
	case *httpCluster:
		return d.counts()
	case *tcpDialer:
		return d.counts()
	}
	return nil
}

func (wl *workerLoad) close() {
	for _, h := range wl.holders {
		h.close()
	}
	wl.d.close()
}

func (wl *workerLoad) launch(ctx context.Context, start, measStart, end time.Time, wg *sync.WaitGroup) {
	cfg := wl.cfg
	workers := len(wl.holders) * wl.perHolder
	for w := 0; w < workers; w++ {
		wk := &worker{
			id: w, conn: w / wl.perHolder, h: wl.holders[w/wl.perHolder], m: wl.m, r: wl.r,
			rng:  rand64{s: uint64(start.UnixNano()) ^ uint64(w+1)*0x9e3779b97f4a7c15},
			cfg:  cfg,
			meas: measStart, end: end, tickets: &wl.tickets, lastDone: &wl.last,
		}
		if cfg.Rate > 0 {
			wk.interval = time.Duration(float64(time.Second) * float64(workers) / cfg.Rate)
			wk.next = start.Add(time.Duration(float64(wk.interval) * float64(w) / float64(workers)))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			wk.run(ctx)
		}()
	}
}

// holder is a connection's current session, re-dialled when it breaks.
type holder struct {
	d        dialer
	inflight int
	mu       sync.Mutex
	s        session
	lastFail time.Time
}

func (h *holder) get(ctx context.Context) (session, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.s != nil && h.s.broken() == nil {
		return h.s, nil
	}
	if h.s != nil {
		_ = h.s.Close()
		h.s = nil
	}
	// Re-dial at most every 100 ms, so a server that refuses or drops
	// every connection is not spun on.
	if wait := time.Until(h.lastFail.Add(100 * time.Millisecond)); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	s, err := h.d.dial(ctx, h.inflight)
	if err != nil {
		h.lastFail = time.Now()
		return nil, err
	}
	h.s = s
	return s, nil
}

func (h *holder) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.s != nil {
		_ = h.s.Close()
		h.s = nil
	}
}

// worker sends one request at a time.
type worker struct {
	id, conn int
	h        *holder
	m        *mix
	r        *recorder
	rng      rand64
	cfg      *Config
	vf       verifier
	v        vars
	params   []byte
	want     []byte
	res      []byte
	seq      uint64

	meas, end time.Time
	tickets   *atomic.Int64
	lastDone  *atomic.Int64

	interval time.Duration // open loop
	next     time.Time
}

func (w *worker) run(ctx context.Context) {
	shard := w.r.shard(w.id)
	var sleep *time.Timer
	for ctx.Err() == nil {
		var sent time.Time
		if w.interval > 0 {
			sent = w.next
			w.next = w.next.Add(w.interval)
			if !w.end.IsZero() && !sent.Before(w.end) {
				return // do not sleep past the end
			}
			if d := time.Until(sent); d > 0 {
				if sleep == nil {
					sleep = time.NewTimer(d)
				} else {
					sleep.Reset(d)
				}
				select {
				case <-sleep.C:
				case <-ctx.Done():
					return
				}
			}
		} else {
			sent = time.Now()
		}
		measured := !sent.Before(w.meas)
		if measured {
			if !w.end.IsZero() && !sent.Before(w.end) {
				return
			}
			if w.cfg.Requests > 0 && w.tickets.Add(1) > w.cfg.Requests {
				return
			}
		}
		i := w.m.pick(&w.rng)
		st := &w.m.steps[i]
		w.seq++
		w.v.fill(&w.rng, w.conn, w.seq)
		w.params = render(w.params[:0], st.params, &w.v)
		var params []byte
		if len(st.params) > 0 {
			params = w.params
		}
		s, err := w.h.get(ctx)
		var res []byte
		if err == nil {
			res, err = s.Call(ctx, st.Method, params, w.res[:0])
			w.res = res
		}
		if err == nil {
			w.want = render(w.want[:0], st.expect, &w.v)
			if e := w.vf.check(st, res, w.want); e != nil {
				err = e
			}
		}
		now := time.Now()
		if ctx.Err() != nil && err != nil {
			return // the run ended under this call: not the server's failure
		}
		if !measured {
			continue
		}
		shard.record(i, now.Sub(sent), err, now)
		w.lastDone.Store(now.UnixNano())
	}
}

// maxLatency is the largest latency the histograms hold; longer ones are
// recorded as it.
const maxLatency = 120 * time.Second

// recorder collects a run's measurements in shards, each shared by a few
// workers under its own lock.
type recorder struct {
	m      *mix
	shards []*shard
	t0     time.Time

	setupFailures int64
	setupSample   string
	slots         []second
}

type second struct {
	ok, errs, latNS atomic.Int64
}

type shard struct {
	mu      sync.Mutex
	r       *recorder
	hist    *hdrhistogram.Histogram
	steps   []stepStats
	kinds   [numKinds]int64
	samples [numKinds]string
	n, bad  atomic.Int64
}

type stepStats struct {
	hist     *hdrhistogram.Histogram
	ok, errs int64
}

func newRecorder(m *mix, workers int) *recorder {
	n := min(workers, 4*runtime.GOMAXPROCS(0), 16)
	r := &recorder{m: m}
	for i := 0; i < n; i++ {
		s := &shard{r: r, hist: newHist(3), steps: make([]stepStats, len(m.steps))}
		for j := range s.steps {
			s.steps[j].hist = newHist(2)
		}
		r.shards = append(r.shards, s)
	}
	return r
}

func newHist(sig int) *hdrhistogram.Histogram {
	return hdrhistogram.New(1000, int64(maxLatency), sig) // nanoseconds, from 1 µs
}

func (r *recorder) start(t0 time.Time, d time.Duration) {
	r.t0 = t0
	n := 3600
	if d > 0 {
		n = int(d/time.Second) + 2
	}
	r.slots = make([]second, n)
}

func (r *recorder) shard(worker int) *shard { return r.shards[worker%len(r.shards)] }

func (r *recorder) counts() (n, bad int64) {
	for _, s := range r.shards {
		n += s.n.Load()
		bad += s.bad.Load()
	}
	return n, bad
}

func (s *shard) sample(k ErrorKind, err error) {
	if s.samples[k] == "" {
		s.samples[k] = err.Error()
	}
}

// slotAt returns the timeline's slot of now.
func (r *recorder) slotAt(now time.Time) *second {
	sec := int(now.Sub(r.t0) / time.Second)
	if sec < 0 {
		sec = 0
	}
	if sec >= len(r.slots) {
		sec = len(r.slots) - 1
	}
	return &r.slots[sec]
}

// recordOK records verified answers that came at once, under one lock.
func (s *shard) recordOK(recs []okRec, now time.Time) {
	var sum int64
	s.mu.Lock()
	for _, rec := range recs {
		lat := min(rec.lat, maxLatency)
		sum += int64(lat)
		_ = s.hist.RecordValue(int64(lat))
		st := &s.steps[rec.step]
		if len(s.steps) > 1 {
			_ = st.hist.RecordValue(int64(lat))
		}
		st.ok++
	}
	s.mu.Unlock()
	n := int64(len(recs))
	s.n.Add(n)
	slot := s.r.slotAt(now)
	slot.ok.Add(n)
	slot.latNS.Add(sum)
}

func (s *shard) record(step int, lat time.Duration, err error, now time.Time) {
	slot := s.r.slotAt(now)
	if lat > maxLatency {
		lat = maxLatency
	}
	s.n.Add(1)
	s.mu.Lock()
	st := &s.steps[step]
	if err != nil {
		k := KindOf(err)
		s.kinds[k]++
		s.sample(k, err)
		st.errs++
		s.mu.Unlock()
		s.bad.Add(1)
		slot.errs.Add(1)
		return
	}
	_ = s.hist.RecordValue(int64(lat))
	if len(s.steps) > 1 { // one step's latencies are the run's
		_ = st.hist.RecordValue(int64(lat))
	}
	st.ok++
	s.mu.Unlock()
	slot.ok.Add(1)
	slot.latNS.Add(int64(lat))
}

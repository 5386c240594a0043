package loadtest

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// RSSTolerance is how far above its baseline a chaos run lets the
// server's resident memory stay once the hostile clients have gone: 10%.
const RSSTolerance = 0.10

// ChaosRSS is the server's resident memory over a chaos run (Chaos.PID),
// sampled every Chaos.RSSEvery from /proc: VmRSS, and for the return to
// baseline RssAnon, the anonymous part, which is what the server
// allocated (the file-backed rest is mostly its program's code, whose
// pages stay resident once a path has run, and are not held for anyone).
type ChaosRSS struct {
	// BaselineBytes is the reading once the server has served
	// well-behaved clients alone (the first phase with Chaos.PerKind,
	// else a warm-up of RSSWarmup), after Chaos.Settle;
	// BaselineAnonBytes its anonymous part.
	BaselineBytes     int64 `json:"baseline_bytes"`
	BaselineAnonBytes int64 `json:"baseline_anon_bytes"`
	// PeakBytes is the highest sample during the run, PeakAtS when it
	// came (seconds after the run began); Samples counts them.
	PeakBytes int64   `json:"peak_bytes"`
	PeakAtS   float64 `json:"peak_at_s"`
	Samples   int     `json:"samples"`
	// BudgetBytes is Chaos.RSSBudget (0: none); WithinBudget reports
	// whether every sample stayed at or under it.
	BudgetBytes  int64 `json:"budget_bytes,omitempty"`
	WithinBudget bool  `json:"within_budget"`
	// AfterBytes is the last reading after the run, AfterAnonBytes its
	// anonymous part; Settled reports whether that came within
	// RSSTolerance of the baseline's, SettleS how long after the run that
	// reading was taken (at most Chaos.RSSSettle).
	AfterBytes     int64   `json:"after_bytes"`
	AfterAnonBytes int64   `json:"after_anon_bytes"`
	Settled        bool    `json:"settled"`
	SettleS        float64 `json:"settle_s"`
}

// RSSWarmup is how long a chaos run measuring the server's memory lets
// well-behaved clients alone warm it up before its baseline (with
// Chaos.PerKind, the first phase does).
const RSSWarmup = 2 * time.Second

// procAnonRSS returns the anonymous resident memory of process pid, the
// RssAnon line of /proc/PID/status.
func procAnonRSS(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, fmt.Errorf("loadtest: rss of pid %d: %w", pid, err)
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("RssAnon:")); ok {
			if f := bytes.Fields(v); len(f) > 0 {
				if kb, err := strconv.ParseInt(string(f[0]), 10, 64); err == nil {
					return kb << 10, nil
				}
			}
			break
		}
	}
	return 0, fmt.Errorf("loadtest: rss of pid %d: no RssAnon", pid)
}

// settledBound is the most RSS that counts as back to baseline.
func settledBound(baseline int64) int64 {
	return baseline + int64(float64(baseline)*RSSTolerance)
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func (r *ChaosRSS) writeText(b *strings.Builder) {
	fmt.Fprintf(b, "server rss baseline %s, peak %s at %.1fs (%d samples)", mib(r.BaselineBytes), mib(r.PeakBytes), r.PeakAtS, r.Samples)
	if r.BudgetBytes > 0 {
		verdict := "within"
		if !r.WithinBudget {
			verdict = "OVER"
		}
		fmt.Fprintf(b, ", %s its budget of %s", verdict, mib(r.BudgetBytes))
	}
	fmt.Fprintf(b, "; after %s; anonymous %s -> %s", mib(r.AfterBytes), mib(r.BaselineAnonBytes), mib(r.AfterAnonBytes))
	verdict := "within"
	if !r.Settled {
		verdict = "NOT within"
	}
	fmt.Fprintf(b, ", %s %.0f%% of the baseline %.1fs after the run\n", verdict, 100*RSSTolerance, r.SettleS)
}

// rssWatch samples a process's resident memory until closed, keeping the
// peak of the whole run and of the current phase.
type rssWatch struct {
	pid   int
	every time.Duration
	t0    time.Time

	mu        sync.Mutex
	peak      int64
	peakAt    time.Duration
	phasePeak int64
	samples   int

	stop chan struct{}
	done chan struct{}
}

func startRSSWatch(pid int, every time.Duration) *rssWatch {
	w := &rssWatch{pid: pid, every: every, t0: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	w.sample()
	go w.run()
	return w
}

func (w *rssWatch) run() {
	defer close(w.done)
	tick := time.NewTicker(w.every)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			w.sample()
		case <-w.stop:
			return
		}
	}
}

func (w *rssWatch) sample() {
	n, err := ProcRSS(w.pid)
	if err != nil {
		return
	}
	w.mu.Lock()
	w.samples++
	if n > w.peak {
		w.peak, w.peakAt = n, time.Since(w.t0)
	}
	w.phasePeak = max(w.phasePeak, n)
	w.mu.Unlock()
}

// endPhase samples once more and returns the peak since the last call.
func (w *rssWatch) endPhase() int64 {
	w.sample()
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.phasePeak
	w.phasePeak = 0
	return p
}

// close stops the sampling (after a last sample) and fills r's peak.
func (w *rssWatch) close(r *ChaosRSS) {
	w.sample()
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	r.PeakBytes, r.PeakAtS, r.Samples = w.peak, w.peakAt.Seconds(), w.samples
	r.WithinBudget = r.BudgetBytes <= 0 || w.peak <= r.BudgetBytes
}

// readRSS reads pid's RSS and its anonymous part after calling settle,
// if set.
func readRSS(pid int, settle func()) (rss, anon int64, err error) {
	if settle != nil {
		settle()
	}
	if rss, err = ProcRSS(pid); err != nil {
		return 0, 0, err
	}
	anon, err = procAnonRSS(pid)
	return rss, anon, err
}

// settleRSS reads pid's RSS until it is within RSSTolerance of r's
// baseline or wait has passed, polling every poll (the memory a Go server
// frees reaches the system when its runtime returns it: a garbage
// collection, then the scavenger), and records the last reading.
func settleRSS(r *ChaosRSS, pid int, settle func(), wait, poll time.Duration) {
	start := time.Now()
	bound := settledBound(r.BaselineAnonBytes)
	for {
		n, anon, err := readRSS(pid, settle)
		if err == nil {
			r.AfterBytes, r.AfterAnonBytes = n, anon
		}
		r.SettleS = time.Since(start).Seconds()
		if err == nil && anon <= bound {
			r.Settled = true
			return
		}
		if err != nil || time.Since(start)+poll > wait {
			return
		}
		time.Sleep(poll) // polling /proc: nothing to wait on
	}
}

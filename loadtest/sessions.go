package loadtest

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// SessionsConfig describes a sessions run: many sessions opened and left
// idle, to weigh what one costs the server.
type SessionsConfig struct {
	Target Target // tcp or http
	// Targets, when set, replace Target: sessions are opened on each in
	// turn (idle sessions make no requests to spread).
	Targets []Target
	// Sessions is how many to open; default 1000.
	Sessions int
	// Concurrency is how many are being opened at once; default 16.
	Concurrency int
	// PID is the server process whose resident memory is read.
	PID int
	// Settle is how long to wait before each memory reading; default 1 s.
	Settle  time.Duration
	Timeout time.Duration // per handshake; default 10 s
	// Progress, if set, is called with the sessions opened so far, every
	// hundred and once all are open (before the second memory reading).
	Progress func(opened int)
}

// SessionsResult is a sessions run's outcome.
type SessionsResult struct {
	Requested   int     `json:"requested"`
	Opened      int     `json:"opened"`
	Failed      int     `json:"failed"`
	OpenSeconds float64 `json:"open_s"`
	PerSecond   float64 `json:"opened_per_s"`
	// RSS readings of PID: before opening (with a few sessions open, so
	// that one-time costs are paid) and once all are open and idle.
	RSSBefore int64 `json:"rss_before_bytes,omitempty"`
	RSSAfter  int64 `json:"rss_after_bytes,omitempty"`
	// RSSPerSession is (RSSAfter - RSSBefore) / Opened.
	RSSPerSession float64 `json:"rss_per_session_bytes,omitempty"`
	FirstError    string  `json:"first_error,omitempty"`
}

func (s *SessionsResult) writeText(b *strings.Builder) {
	fmt.Fprintf(b, "sessions   %d opened of %d (%d failed) in %.2fs, %.0f/s\n", s.Opened, s.Requested, s.Failed, s.OpenSeconds, s.PerSecond)
	if s.RSSAfter > 0 {
		fmt.Fprintf(b, "server rss %.1f MiB before, %.1f MiB after: %.0f bytes (%.2f KiB) per idle session\n",
			float64(s.RSSBefore)/(1<<20), float64(s.RSSAfter)/(1<<20), s.RSSPerSession, s.RSSPerSession/1024)
	}
	if s.FirstError != "" {
		fmt.Fprintf(b, "first error: %s\n", s.FirstError)
	}
}

// warmSessions are opened before the first memory reading.
const warmSessions = 16

// RunSessions opens cfg.Sessions idle sessions, reads the server's memory
// before and after, and closes them all before it returns.
func RunSessions(ctx context.Context, cfg SessionsConfig) (*Result, error) {
	ts, err := targetsOf(cfg.Target, cfg.Targets)
	if err != nil {
		return nil, err
	}
	if ts[0].Transport == "stdio" {
		return nil, fmt.Errorf("%w: a stdio server has one session", ErrConfig)
	}
	if cfg.Sessions <= 0 {
		cfg.Sessions = 1000
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 16
	}
	if cfg.Settle <= 0 {
		cfg.Settle = time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	opts := &sessionOpts{timeout: cfg.Timeout, maxFrame: 16 << 20}
	d, err := newDialer(ts, cfg.Concurrency, 1, opts, io.Discard)
	if err != nil {
		return nil, err
	}
	defer d.close()
	res := &Result{Schema: SchemaVersion, Mode: "sessions", Target: targetsString(ts), Transport: ts[0].Transport, Started: time.Now(), ErrorsByKind: map[string]int64{}}
	sr := &SessionsResult{Requested: cfg.Sessions}
	res.Sessions = sr

	var (
		mu       sync.Mutex
		sessions []session
		firstErr error
	)
	open := func(n int) int {
		var next, failed atomic.Int64
		var wg sync.WaitGroup
		for w := 0; w < min(cfg.Concurrency, n); w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= int64(n) && ctx.Err() == nil {
					s, err := d.dial(ctx, 1)
					mu.Lock()
					if err != nil {
						failed.Add(1)
						if firstErr == nil {
							firstErr = err
						}
					} else {
						sessions = append(sessions, s)
						if cfg.Progress != nil && len(sessions)%100 == 0 {
							cfg.Progress(len(sessions))
						}
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return int(failed.Load())
	}
	defer func() {
		// Close concurrently: HTTP sessions are each ended with a DELETE.
		ch := make(chan session)
		var wg sync.WaitGroup
		for w := 0; w < cfg.Concurrency; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for s := range ch {
					_ = s.Close()
				}
			}()
		}
		for _, s := range sessions {
			ch <- s
		}
		close(ch)
		wg.Wait()
	}()

	warm := min(warmSessions, cfg.Sessions)
	failed := open(warm)
	if len(sessions) == 0 {
		return nil, fmt.Errorf("loadtest: no session opened on %s: %w", res.Target, firstErr)
	}
	if cfg.PID > 0 {
		sleepCtx(ctx, cfg.Settle)
		if rss, err := ProcRSS(cfg.PID); err == nil {
			sr.RSSBefore = rss
		}
	}
	t0 := time.Now()
	failed += open(cfg.Sessions - warm)
	sr.OpenSeconds = time.Since(t0).Seconds()
	if cfg.Progress != nil {
		cfg.Progress(len(sessions))
	}
	sr.Opened, sr.Failed = len(sessions), failed
	if sr.OpenSeconds > 0 {
		sr.PerSecond = float64(sr.Opened-warm) / sr.OpenSeconds
	}
	if firstErr != nil {
		sr.FirstError = firstErr.Error()
	}
	if cfg.PID > 0 {
		sleepCtx(ctx, cfg.Settle)
		if rss, err := ProcRSS(cfg.PID); err == nil {
			sr.RSSAfter = rss
			if n := sr.Opened - warm; n > 0 && sr.RSSBefore > 0 {
				sr.RSSPerSession = float64(sr.RSSAfter-sr.RSSBefore) / float64(n)
			}
		}
	}
	switch d := d.(type) {
	case *httpCluster:
		res.Targets = d.counts()
	case *tcpDialer:
		res.Targets = d.counts()
	}
	res.Requests = int64(sr.Requested)
	res.OK = int64(sr.Opened)
	res.Errors = int64(sr.Failed)
	if res.Requests > 0 {
		res.ErrorRate = float64(res.Errors) / float64(res.Requests)
	}
	return res, nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

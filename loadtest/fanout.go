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

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/mcpedge/mcpedge/codec"
)

// FanoutConfig describes a fan-out run: Subscribers sessions subscribe to
// one resource, a publisher session changes it Updates times, and every
// notifications/resources/updated that reaches a subscriber is timed from
// the publishing call's send.
type FanoutConfig struct {
	Target Target // tcp or http
	// Targets, when set, replace Target: subscriber i is a session on
	// target i % len(Targets), its requests and its stream all there (a
	// subscription is its session's); the publisher is on the first.
	Targets     []Target
	Subscribers int // default 100
	Updates     int // default 100
	// Interval separates the updates; default 10 ms.
	Interval time.Duration
	// URI is the resource subscribed to; default "mem://board/bench".
	URI string
	// Tool and Args make the update call: tools/call Tool with Args, a
	// JSON object template ({{seq}} is the update's number). Default the
	// demo set's board_write, writing the board entry the URI names (the
	// board is shared by every session; the demo notes are per session,
	// so a publisher's note would reach no subscriber).
	Tool string
	Args string
	// Drain is how long to wait for notifications after the last update;
	// default 2 s.
	Drain   time.Duration
	Timeout time.Duration // per request; default 10 s
	// Concurrency is how many subscribers are set up at once; default 16.
	Concurrency int
}

// FanoutResult is a fan-out run's outcome.
type FanoutResult struct {
	Subscribers  int           `json:"subscribers"`
	Subscribed   int           `json:"subscribed"`
	Updates      int           `json:"updates"`
	Expected     int64         `json:"expected"`  // Subscribed x Updates
	Delivered    int64         `json:"delivered"` // notifications received
	Lost         int64         `json:"lost"`      // Expected - Delivered, if positive
	PerSecond    float64       `json:"delivered_per_s"`
	SpanSeconds  float64       `json:"span_s"` // first update sent to last notification
	UpdateErrors int64         `json:"update_errors"`
	FirstError   string        `json:"first_error,omitempty"`
	Delay        *LatencyStats `json:"delay_us,omitempty"`
}

func (f *FanoutResult) writeText(b *strings.Builder) {
	fmt.Fprintf(b, "fan-out    %d of %d subscribed, %d updates: %d of %d notifications delivered (%d lost), %.0f/s over %.2fs\n",
		f.Subscribed, f.Subscribers, f.Updates, f.Delivered, f.Expected, f.Lost, f.PerSecond, f.SpanSeconds)
	if d := f.Delay; d != nil {
		fmt.Fprintf(b, "delay      min %s  mean %s  p50 %s  p90 %s  p99 %s  p99.9 %s  max %s\n",
			fmtUS(d.Min), fmtUS(d.Mean), fmtUS(d.P50), fmtUS(d.P90), fmtUS(d.P99), fmtUS(d.P999), fmtUS(d.Max))
	}
	if f.UpdateErrors > 0 {
		fmt.Fprintf(b, "update errors %d\n", f.UpdateErrors)
	}
	if f.FirstError != "" {
		fmt.Fprintf(b, "first error: %s\n", f.FirstError)
	}
}

// fanSink times the notifications of one run.
type fanSink struct {
	uri       string
	sent      []atomic.Int64 // unix nanos each update was sent
	mu        sync.Mutex
	hist      *hdrhistogram.Histogram
	delivered atomic.Int64
	last      atomic.Int64
}

// note is called for each notification a subscriber gets; count is that
// subscriber's own counter, so its k-th update notification is timed from
// the k-th update.
func (f *fanSink) note(count *atomic.Int64, method string, params []byte) {
	if method != "notifications/resources/updated" {
		return
	}
	var p struct {
		URI string `json:"uri"`
	}
	if err := codec.UnmarshalNoCopy(params, &p); err != nil || p.URI != f.uri {
		return
	}
	now := time.Now().UnixNano()
	k := count.Add(1) - 1
	f.delivered.Add(1)
	f.last.Store(now)
	if k < int64(len(f.sent)) {
		if t := f.sent[k].Load(); t > 0 {
			f.mu.Lock()
			_ = f.hist.RecordValue(max(now-t, 1000))
			f.mu.Unlock()
		}
	}
}

// RunFanout runs a fan-out measurement.
func RunFanout(ctx context.Context, cfg FanoutConfig) (*Result, error) {
	ts, err := targetsOf(cfg.Target, cfg.Targets)
	if err != nil {
		return nil, err
	}
	cfg.Target = ts[0]
	if cfg.Target.Transport == "stdio" {
		return nil, fmt.Errorf("%w: fan-out needs many sessions, and a stdio server has one", ErrConfig)
	}
	if cfg.Subscribers <= 0 {
		cfg.Subscribers = 100
	}
	if cfg.Updates <= 0 {
		cfg.Updates = 100
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 10 * time.Millisecond
	}
	if cfg.URI == "" {
		cfg.URI = "mem://board/bench"
	}
	if cfg.Tool == "" {
		if !strings.HasPrefix(cfg.URI, "mem://board/") {
			return nil, fmt.Errorf("%w: fan-out to %s needs the tool that updates it (the default, board_write, writes mem://board/...)", ErrConfig, cfg.URI)
		}
		cfg.Tool = "board_write"
		if cfg.Args == "" {
			name := strings.TrimPrefix(cfg.URI, "mem://board/")
			cfg.Args = `{"name":` + strconv.Quote(name) + `,"text":"update {{seq}}"}`
		}
	}
	if cfg.Args == "" {
		cfg.Args = "{}"
	}
	if cfg.Drain <= 0 {
		cfg.Drain = 2 * time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 16
	}
	args, err := compile(cfg.Args)
	if err != nil {
		return nil, err
	}
	sink := &fanSink{uri: cfg.URI, sent: make([]atomic.Int64, cfg.Updates), hist: newHist(3)}
	fr := &FanoutResult{Subscribers: cfg.Subscribers, Updates: cfg.Updates}
	res := &Result{Schema: SchemaVersion, Mode: "fanout", Target: targetsString(ts), Transport: cfg.Target.Transport, Fanout: fr, ErrorsByKind: map[string]int64{}}

	subCtx, stopSubs := context.WithCancel(ctx)
	defer stopSubs()
	var (
		mu       sync.Mutex
		closers  []io.Closer
		firstErr error
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	// The standalone streams stay open for the whole run: no timeout, no
	// connection limit.
	tr := &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: -1}
	streamClient := &http.Client{Transport: tr}
	var streams sync.WaitGroup
	defer func() {
		stopSubs()
		for _, c := range closers {
			_ = c.Close()
		}
		streams.Wait()
		tr.CloseIdleConnections()
	}()
	subscribe := fmt.Appendf(nil, `{"uri":%q}`, cfg.URI)
	var httpTs []*httpTarget // one per target
	if cfg.Target.Transport == "http" {
		for _, t := range ts {
			httpT := newHTTPTarget(t.Addr, cfg.Concurrency, 1, &sessionOpts{timeout: cfg.Timeout, maxFrame: 16 << 20})
			defer httpT.close()
			httpTs = append(httpTs, httpT)
		}
	}
	var next atomic.Int64
	var setup sync.WaitGroup
	for w := 0; w < min(cfg.Concurrency, cfg.Subscribers); w++ {
		setup.Add(1)
		go func() {
			defer setup.Done()
			for i := next.Add(1); i <= int64(cfg.Subscribers) && ctx.Err() == nil; i = next.Add(1) {
				t := int(i-1) % len(ts)
				count := new(atomic.Int64)
				onNote := func(method string, params []byte) { sink.note(count, method, params) }
				var s session
				var err error
				if httpTs != nil {
					httpT := httpTs[t]
					s, err = httpT.dial(ctx, 1)
					if err == nil {
						var ready chan error
						ready, err = openStream(subCtx, &streams, streamClient, httpT, s.(*httpSession), onNote)
						if err == nil {
							err = <-ready
						}
					}
				} else {
					d := &tcpDialer{addr: ts[t].Addr, tls: ts[t].TLS, opts: &sessionOpts{timeout: cfg.Timeout, maxFrame: 16 << 20, onNote: onNote}}
					s, err = d.dial(ctx, 1)
				}
				if err != nil {
					fail(err)
					continue
				}
				mu.Lock()
				closers = append(closers, s)
				mu.Unlock()
				if _, err := s.Call(ctx, "resources/subscribe", subscribe, nil); err != nil {
					fail(fmt.Errorf("resources/subscribe: %w", err))
					continue
				}
				mu.Lock()
				fr.Subscribed++
				mu.Unlock()
			}
		}()
	}
	setup.Wait()
	if fr.Subscribed == 0 {
		return nil, fmt.Errorf("loadtest: no subscriber on %s: %w", res.Target, firstErr)
	}

	var pub session
	if httpTs != nil {
		pub, err = httpTs[0].dial(ctx, 1)
	} else {
		pub, err = (&tcpDialer{addr: cfg.Target.Addr, opts: &sessionOpts{timeout: cfg.Timeout, maxFrame: 16 << 20}}).dial(ctx, 1)
	}
	if err != nil {
		return nil, fmt.Errorf("loadtest: publisher: %w", err)
	}
	closers = append(closers, pub)

	start := time.Now()
	res.Started = start
	tick := time.NewTicker(cfg.Interval)
	var v vars
	var params, argsBuf []byte
	for k := 0; k < cfg.Updates && ctx.Err() == nil; k++ {
		v.seq = uint64(k + 1)
		argsBuf = render(argsBuf[:0], args, &v)
		params = append(params[:0], `{"name":`...)
		params = codec.AppendString(params, cfg.Tool)
		params = append(params, `,"arguments":`...)
		params = append(params, argsBuf...)
		params = append(params, '}')
		sink.sent[k].Store(time.Now().UnixNano())
		if _, err := pub.Call(ctx, "tools/call", params, nil); err != nil {
			fr.UpdateErrors++
			fail(fmt.Errorf("update: %w", err))
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
	tick.Stop()
	// Wait for the stragglers: until all are in, or Drain passes with none.
	fr.Expected = int64(fr.Subscribed) * int64(cfg.Updates)
	deadline := time.Now().Add(cfg.Drain)
	for last := sink.delivered.Load(); time.Now().Before(deadline) && last < fr.Expected && ctx.Err() == nil; {
		sleepCtx(ctx, 20*time.Millisecond)
		if n := sink.delivered.Load(); n != last {
			last = n
			deadline = time.Now().Add(cfg.Drain)
		}
	}
	fr.Delivered = sink.delivered.Load()
	if fr.Expected > fr.Delivered {
		fr.Lost = fr.Expected - fr.Delivered
	}
	if l := sink.last.Load(); l > 0 {
		fr.SpanSeconds = time.Unix(0, l).Sub(start).Seconds()
		if fr.SpanSeconds > 0 {
			fr.PerSecond = float64(fr.Delivered) / fr.SpanSeconds
		}
	}
	sink.mu.Lock()
	tmp := &Result{}
	tmp.setHist(sink.hist)
	sink.mu.Unlock()
	fr.Delay = tmp.Latency
	if firstErr != nil {
		fr.FirstError = firstErr.Error()
	}
	res.Requests = int64(cfg.Updates)
	res.Errors = fr.UpdateErrors
	res.OK = res.Requests - res.Errors
	res.DurationS = fr.SpanSeconds
	return res, nil
}

// openStream opens the session's standalone GET stream and feeds its
// notifications to onNote until ctx ends. ready yields nil once the server
// answered the GET with an event stream, or the error.
func openStream(ctx context.Context, wg *sync.WaitGroup, client *http.Client, t *httpTarget, s *httpSession, onNote func(string, []byte)) (chan error, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(hSession, string(s.sid))
	req.Header.Set(hVersion, string(s.version))
	ready := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		resp, err := client.Do(req)
		if err != nil {
			ready <- &Error{Kind: KindConnect, Err: err, Msg: "GET stream"}
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			ready <- &Error{Kind: KindTransport, Code: resp.StatusCode, Msg: "GET stream answered " + resp.Status + " " + resp.Header.Get("Content-Type")}
			return
		}
		ready <- nil
		var p codec.SSEParser
		var msg codec.Message
		buf := make([]byte, 0, 16<<10)
		chunk := make([]byte, 16<<10)
		for {
			n, err := resp.Body.Read(chunk)
			buf = append(buf, chunk[:n]...)
			for {
				ev, used, ok, perr := p.Next(buf)
				if perr != nil {
					return
				}
				if used == 0 {
					break
				}
				if ok && codec.Decode(bytes.TrimSpace(ev.Data), &msg) == nil && msg.Kind == codec.KindNotification {
					onNote(msg.Method, msg.Params)
				}
				buf = buf[:copy(buf, buf[used:])]
			}
			if err != nil {
				return
			}
		}
	}()
	return ready, nil
}

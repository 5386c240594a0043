// Command mcpload puts load on an MCP server over TCP, Streamable HTTP or
// stdio and reports throughput, errors by kind and latency percentiles, as
// text, JSON (-json) and a self-contained HTML page (-html).
//
//	mcpload -c 64 -duration 10s http://127.0.0.1:7401/mcp
//	mcpload -c 16 -rate 20000 -mix echo=8,read=1,ping=1 tcp://127.0.0.1:7400
//	mcpload -c 4 stdio:bin/mcpedge -stdio -handlers bench
//	mcpload -mode sessions -sessions 10000 -pid 1234 http://127.0.0.1:7401/mcp
//	mcpload -mode fanout -subscribers 200 -updates 100 tcp://127.0.0.1:7400
//
// The exit code is 0 when the run passed its thresholds (-max-p99,
// -max-error-rate), 1 when it did not or could not run, 2 on bad usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/mcpedge/mcpedge/client"
	"github.com/mcpedge/mcpedge/loadtest"
	"github.com/mcpedge/mcpedge/loadtest/report"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, term.IsTerminal(int(os.Stdout.Fd())))
	stop()
	os.Exit(code)
}

type options struct {
	mode                      string
	conns, inflight           int
	rate                      float64
	duration, warmup, timeout time.Duration
	requests                  int64
	mix, scenario             string
	pid                       int
	jsonOut, htmlOut          string
	maxP99                    time.Duration
	maxErrRate                float64
	quiet, childStderr        bool
	viaClient                 bool
	strategy                  string

	sessions, concurrency int
	subscribers, updates  int
	interval              time.Duration
	uri                   string
}

func parse(args []string, stderr io.Writer) (*options, string, error) {
	o := &options{}
	fs := flag.NewFlagSet("mcpload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.mode, "mode", "load", "load (requests), sessions (idle sessions, memory per session) or fanout (resource update notifications)")
	fs.IntVar(&o.conns, "c", 1, "connections (sessions); for stdio, requests in flight on the one pipe")
	fs.IntVar(&o.inflight, "inflight", 1, "requests in flight per connection (HTTP: pipelined)")
	fs.Float64Var(&o.rate, "rate", 0, "open loop: requests per second in all, latency from each request's intended send time (0: closed loop)")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "length of the measured phase")
	fs.Int64Var(&o.requests, "n", 0, "measure this many requests instead of -duration")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "load before the measured phase, not recorded")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "per request and per connection set-up")
	fs.StringVar(&o.mix, "mix", "echo", "weighted built-in steps, e.g. echo=70,add=10,read=10,greet=5,tools/list=2,resources/list=1,prompts/list=1,ping=1")
	fs.StringVar(&o.scenario, "scenario", "", "JSON scenario `file` (overrides -mix): [{\"use\":\"echo\",\"weight\":5}, {\"name\":..,\"method\":..,\"params\":..,\"expect\":..,\"match\":..}]")
	fs.IntVar(&o.pid, "pid", 0, "server process to measure: CPU time per request, resident memory (stdio: the child, by default)")
	fs.StringVar(&o.jsonOut, "json", "", "write the result as JSON to `file` (- for stdout, replacing the text summary)")
	fs.StringVar(&o.htmlOut, "html", "", "write a self-contained HTML report to `file`")
	fs.DurationVar(&o.maxP99, "max-p99", 0, "fail (exit 1) when p99 latency is above this")
	fs.Float64Var(&o.maxErrRate, "max-error-rate", 0, "fail (exit 1) when the share of failed requests is above this (0.01 = 1%)")
	fs.BoolVar(&o.viaClient, "client", false, "drive the load through the client library's pool (client.NewPool, CallRaw) instead of mcpload's own lean transports")
	fs.StringVar(&o.strategy, "strategy", "round-robin", "with -client: the pool's strategy, round-robin, random or least-busy")
	fs.BoolVar(&o.quiet, "q", false, "no progress bar")
	fs.BoolVar(&o.childStderr, "stdio-stderr", false, "pass a stdio server's standard error through")
	fs.IntVar(&o.sessions, "sessions", 1000, "sessions mode: sessions to open")
	fs.IntVar(&o.concurrency, "concurrency", 16, "sessions and fanout modes: set-ups at once")
	fs.IntVar(&o.subscribers, "subscribers", 100, "fanout mode: subscribers")
	fs.IntVar(&o.updates, "updates", 100, "fanout mode: updates published")
	fs.DurationVar(&o.interval, "interval", 10*time.Millisecond, "fanout mode: time between updates")
	fs.StringVar(&o.uri, "uri", "mem://board/bench", "fanout mode: resource to subscribe to, a mem://board/NAME entry (updated with the demo tool board_write)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: mcpload [flags] TARGET\n\nTARGET is tcp://host:port, http://host:port/path or stdio:command args...\n(flags go before TARGET; a stdio command line takes the rest of the arguments).\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, "", err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return nil, "", errors.New("no target")
	}
	return o, strings.Join(fs.Args(), " "), nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, tty bool) int {
	o, spec, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "mcpload:", err)
		return 2
	}
	target, err := loadtest.ParseTarget(spec)
	if err != nil {
		fmt.Fprintln(stderr, "mcpload:", err)
		return 2
	}
	var bar *progressbar.ProgressBar
	if tty && !o.quiet && o.jsonOut != "-" {
		bar = newBar(o, stdout)
	}

	var res *loadtest.Result
	switch o.mode {
	case "load":
		steps, err := steps(o)
		if err != nil {
			fmt.Fprintln(stderr, "mcpload:", err)
			return 2
		}
		strategy, ok := strategies[o.strategy]
		if !ok {
			fmt.Fprintf(stderr, "mcpload: -strategy %q: want round-robin, random or least-busy\n", o.strategy)
			return 2
		}
		cfg := loadtest.Config{
			Target: target, Connections: o.conns, InFlight: o.inflight, Rate: o.rate,
			Duration: o.duration, Requests: o.requests, Warmup: o.warmup, Steps: steps,
			Timeout: o.timeout, PID: o.pid, Client: o.viaClient, Strategy: strategy,
		}
		if o.childStderr {
			cfg.Stderr = stderr
		}
		if bar != nil {
			cfg.Progress = func(p loadtest.Progress) {
				switch {
				case p.Warmup:
					bar.Describe("warm-up")
					_ = bar.Set64(0)
				case p.Target > 0:
					bar.Describe(fmt.Sprintf("%d errors", p.Errors))
					_ = bar.Set64(1000 * p.Requests / p.Target)
				default:
					bar.Describe(fmt.Sprintf("%d req, %d errors", p.Requests, p.Errors))
					_ = bar.Set64(int64(1000 * p.Elapsed / max(p.Total, 1)))
				}
			}
		}
		res, err = loadtest.Run(ctx, cfg)
		if err != nil {
			finishBar(bar)
			fmt.Fprintln(stderr, "mcpload:", err)
			return exitFor(err)
		}
	case "sessions":
		cfg := loadtest.SessionsConfig{Target: target, Sessions: o.sessions, Concurrency: o.concurrency, PID: o.pid, Timeout: o.timeout}
		if bar != nil {
			cfg.Progress = func(n int) { _ = bar.Set64(int64(1000 * n / max(o.sessions, 1))) }
		}
		res, err = loadtest.RunSessions(ctx, cfg)
		if err != nil {
			finishBar(bar)
			fmt.Fprintln(stderr, "mcpload:", err)
			return exitFor(err)
		}
	case "fanout":
		res, err = loadtest.RunFanout(ctx, loadtest.FanoutConfig{
			Target: target, Subscribers: o.subscribers, Updates: o.updates, Interval: o.interval,
			URI: o.uri, Timeout: o.timeout, Concurrency: o.concurrency,
		})
		if err != nil {
			finishBar(bar)
			fmt.Fprintln(stderr, "mcpload:", err)
			return exitFor(err)
		}
	default:
		fmt.Fprintf(stderr, "mcpload: -mode %q: want load, sessions or fanout\n", o.mode)
		return 2
	}
	finishBar(bar)

	passed := res.Check(o.maxP99, o.maxErrRate)
	if o.jsonOut != "-" {
		if err := res.WriteText(stdout); err != nil {
			fmt.Fprintln(stderr, "mcpload:", err)
			return 1
		}
	}
	if o.jsonOut != "" {
		if err := writeFile(o.jsonOut, stdout, res.WriteJSON); err != nil {
			fmt.Fprintln(stderr, "mcpload: -json:", err)
			return 1
		}
	}
	if o.htmlOut != "" {
		err := writeFile(o.htmlOut, stdout, func(w io.Writer) error { return report.WriteHTML(w, "mcpload "+res.Target, res) })
		if err != nil {
			fmt.Fprintln(stderr, "mcpload: -html:", err)
			return 1
		}
	}
	if !passed {
		return 1
	}
	return 0
}

var strategies = map[string]client.Strategy{"round-robin": client.RoundRobin, "random": client.Random, "least-busy": client.LeastBusy}

func exitFor(err error) int {
	if errors.Is(err, loadtest.ErrConfig) {
		return 2
	}
	return 1
}

func steps(o *options) ([]loadtest.Step, error) {
	if o.scenario != "" {
		data, err := os.ReadFile(o.scenario)
		if err != nil {
			return nil, err
		}
		return loadtest.ParseScenario(data)
	}
	return loadtest.ParseMix(o.mix)
}

func newBar(o *options, w io.Writer) *progressbar.ProgressBar {
	return progressbar.NewOptions64(1000,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetDescription(o.mode),
	)
}

func finishBar(bar *progressbar.ProgressBar) {
	if bar != nil {
		_ = bar.Finish()
	}
}

// writeFile writes with fn to path, or to stdout for "-".
func writeFile(path string, stdout io.Writer, fn func(io.Writer) error) error {
	if path == "-" {
		return fn(stdout)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

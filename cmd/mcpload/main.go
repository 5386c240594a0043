// Command mcpload puts load on an MCP server over TCP, Streamable HTTP or
// stdio and reports throughput, errors by kind and latency percentiles, as
// text, JSON (-json) and a self-contained HTML page (-html).
//
//	mcpload -c 64 -duration 10s http://127.0.0.1:7401/mcp
//	mcpload -c 16 -rate 20000 -mix echo=8,read=1,ping=1 tcp://127.0.0.1:7400
//	mcpload -c 16 -inflight 16 -protocol 2026-07-28 tcp://127.0.0.1:7400
//	mcpload -c 4 stdio:bin/mcpedge -stdio -handlers bench
//	mcpload -mode sessions -sessions 10000 -pid 1234 http://127.0.0.1:7401/mcp
//	mcpload -mode fanout -subscribers 200 -updates 100 tcp://127.0.0.1:7400
//	mcpload -mode soak -c 5000 -every 5s -duration 10m -pid 1234 tcp://127.0.0.1:7400
//	mcpload -mode chaos -hostile all=2 -c 4 -rate 200 -duration 30s tcp://127.0.0.1:7400
//	mcpload -mode chaos -per-kind -hostile all=2 -duration 8s -pid 1234 -rss-budget-mib 512 -rss-settle 3m tcp://127.0.0.1:7400
//	mcpload -c 64 -pids 1234,1235 http://127.0.0.1:7401/mcp http://127.0.0.1:7411/mcp
//
// Several targets, given as arguments or as one comma-separated list, are
// the nodes of one cluster, all of one transport. Over Streamable HTTP
// each session is initialized on the next target in turn and each of its
// requests goes to the next target in turn, with its session id; over TCP,
// where a session is its connection, connection i goes to target i % n.
// A stdio run has one target.
//
// The exit code is 0 when the run passed its thresholds (-max-p99,
// -max-error-rate), 1 when it did not or could not run, 2 on bad usage.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
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
	// tcps targets: the CAs the server's certificate must chain to, the
	// client's certificate and key (mutual TLS), or no verification.
	tlsCA, tlsCert, tlsKey string
	tlsInsecure            bool

	mode                      string
	conns, inflight           int
	rate                      float64
	duration, warmup, timeout time.Duration
	requests                  int64
	mix, scenario             string
	pid                       int
	pids                      string
	jsonOut, htmlOut          string
	maxP99                    time.Duration
	maxErrRate                float64
	quiet, childStderr        bool
	viaClient                 bool
	strategy                  string
	protocol                  string
	bearer, bearerFile        string
	sticky                    bool

	sessions, concurrency int
	subscribers, updates  int
	interval              time.Duration
	uri                   string

	every, sampleEvery time.Duration
	goroutinesURL      string

	hostile                   string
	maxMessage                int
	readTimeout, answerWithin time.Duration
	writeTimeout              time.Duration
	initTimeout, grace        time.Duration
	floodCalls                int
	floodTool, floodArgs      string
	hogSessions, hogCalls     int
	slowConsumerBytes         int
	failUnexpected            bool
	perKind                   bool
	rssBudgetMiB              int64
	rssSettle                 time.Duration
	rssGCURL                  string
	good                      string
	maxSubscriptions          int
	subFloodCalls             int
	listenURIs                int
	sessionFloodMax           int
	declareConns              int
	declareBytes              int
	noReadConns               int
	taskTool, taskArgs        string
	taskCalls                 int
	maxTasksPerClient         int
	expectAuth                bool
	natsURL                   string

	cpuProfile string // hidden: profiles mcpload itself

	set map[string]bool // the flags given
}

func parse(args []string, stderr io.Writer) (*options, []string, error) {
	o := &options{}
	fs := flag.NewFlagSet("mcpload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.mode, "mode", "load", "load (requests), sessions (idle sessions, memory per session), fanout (resource update notifications), soak (many connections held, a slow trickle of calls, server samples) or chaos (hostile clients beside well-behaved ones). With several HTTP targets, load, soak and chaos's well-behaved clients send each request to the next target; sessions opens sessions on each target in turn; fanout puts subscriber i on target i % n and the publisher on the first; chaos's hostile clients go to the first")
	fs.IntVar(&o.conns, "c", 1, "connections (sessions); for stdio, requests in flight on the one pipe; soak: connections held (default 1000); chaos: well-behaved connections (default 4)")
	fs.IntVar(&o.inflight, "inflight", 1, "requests in flight per connection (HTTP: pipelined)")
	fs.Float64Var(&o.rate, "rate", 0, "open loop: requests per second in all, latency from each request's intended send time (0: closed loop)")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "length of the measured phase")
	fs.Int64Var(&o.requests, "n", 0, "measure this many requests instead of -duration")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "load before the measured phase, not recorded")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "per request and per connection set-up")
	fs.StringVar(&o.mix, "mix", "echo", "weighted built-in steps, e.g. echo=70,add=10,read=10,greet=5,tools/list=2,resources/list=1,prompts/list=1,ping=1")
	fs.StringVar(&o.scenario, "scenario", "", "JSON scenario `file` (overrides -mix): [{\"use\":\"echo\",\"weight\":5}, {\"name\":..,\"method\":..,\"params\":..,\"expect\":..,\"match\":..}]")
	fs.IntVar(&o.pid, "pid", 0, "server process to measure: CPU time per request, resident memory (stdio: the child, by default); soak: RSS, threads, open fds sampled from /proc; chaos: read before and after")
	fs.StringVar(&o.pids, "pids", "", "server processes to measure together, e.g. 1234,1235 (a cluster's nodes on this machine): load mode sums their CPU times (CPU per request = the sum / requests) and resident memory; the other modes read the first, as -pid")
	fs.StringVar(&o.jsonOut, "json", "", "write the result as JSON to `file` (- for stdout, replacing the text summary)")
	fs.StringVar(&o.htmlOut, "html", "", "write a self-contained HTML report to `file`")
	fs.DurationVar(&o.maxP99, "max-p99", 0, "fail (exit 1) when p99 latency is above this")
	fs.Float64Var(&o.maxErrRate, "max-error-rate", 0, "fail (exit 1) when the share of failed requests is above this (0.01 = 1%)")
	fs.BoolVar(&o.viaClient, "client", false, "drive the load through the client library's pool (client.NewPool, CallRaw) instead of mcpload's own lean transports")
	fs.StringVar(&o.strategy, "strategy", "round-robin", "with -client: the pool's strategy, round-robin, random or least-busy")
	fs.StringVar(&o.protocol, "protocol", loadtest.ProtocolSession, "protocol revision: "+loadtest.ProtocolSession+" (initialize, then a session per connection) or "+loadtest.ProtocolStateless+" (stateless: no initialize, every request carries its _meta, over HTTP the revision's headers and no session); load mode only, not with -client")
	fs.StringVar(&o.bearer, "bearer", "", "send `token` as \"Authorization: Bearer TOKEN\" on every HTTP request (prefer -bearer-file: arguments are visible to other users); load mode, and chaos mode's well-behaved clients")
	fs.BoolVar(&o.sticky, "sticky", false, "several HTTP targets: keep each session on the target it was initialized on, instead of sending each request to the next target (load mode)")
	fs.StringVar(&o.bearerFile, "bearer-file", "", "bearer tokens from `file`, one a line, used in turn, one per request (distinct tokens defeat a server's cache of verified ones); load mode, and chaos mode's well-behaved clients")
	fs.BoolVar(&o.quiet, "q", false, "no progress bar")
	fs.BoolVar(&o.childStderr, "stdio-stderr", false, "pass a stdio server's standard error through")
	fs.IntVar(&o.sessions, "sessions", 1000, "sessions mode: sessions to open")
	fs.IntVar(&o.concurrency, "concurrency", 16, "sessions, fanout and soak modes: set-ups at once")
	fs.IntVar(&o.subscribers, "subscribers", 100, "fanout mode: subscribers")
	fs.IntVar(&o.updates, "updates", 100, "fanout mode: updates published")
	fs.DurationVar(&o.interval, "interval", 10*time.Millisecond, "fanout mode: time between updates")
	fs.StringVar(&o.uri, "uri", "mem://board/bench", "fanout mode: resource to subscribe to, a mem://board/NAME entry (updated with the demo tool board_write)")
	fs.DurationVar(&o.every, "every", 5*time.Second, "soak mode: time between one connection's calls")
	fs.DurationVar(&o.sampleEvery, "sample-every", 0, "soak mode: time between server samples (default duration/10, 1s to 1m)")
	fs.StringVar(&o.goroutinesURL, "goroutines-url", "", "soak mode: URL giving the server's goroutine count (a pprof goroutine page with ?debug=1, JSON {\"goroutines\":N} or a number)")
	fs.StringVar(&o.hostile, "hostile", "all=2", "chaos mode: hostile clients per kind, e.g. garbage=2,flood=1 or all=2; kinds "+strings.Join(chaosKindNames(), ", "))
	fs.IntVar(&o.maxMessage, "expect-max-message", 4<<20, "chaos mode: the server's largest inbound message (oversized sends 64 KiB more)")
	fs.DurationVar(&o.readTimeout, "expect-read-timeout", 10*time.Second, "chaos mode: the server's -read-timeout: half_sent expects its connection closed within it and -expect-grace, and a connection of another kind closed for it sooner than this after it was dialled is unexpected")
	fs.DurationVar(&o.grace, "expect-grace", time.Second, "chaos mode: how much later than the server's timeouts (-expect-read-timeout, -expect-write-timeout) its close may come")
	fs.DurationVar(&o.initTimeout, "expect-init-timeout", 0, "chaos mode: the server's -session-init-timeout: a hostile HTTP session found gone (404) at its first request at least this long after its initialize was reaped, and is undecided; 0: unknown, and that 404 is unexpected")
	fs.DurationVar(&o.writeTimeout, "expect-write-timeout", 30*time.Second, "chaos mode: how long the server lets a write to a client that reads nothing block before it closes the connection (HTTP no_read)")
	fs.DurationVar(&o.answerWithin, "expect-answer-within", 5*time.Second, "chaos mode: how soon an immediate answer or close should come")
	fs.IntVar(&o.slowConsumerBytes, "expect-slow-consumer-bytes", 64<<20, "chaos mode: unread answer bytes after which a reader that never reads should have been closed")
	fs.IntVar(&o.floodCalls, "flood-calls", 2000, "chaos mode: calls a flood client pipelines at once")
	fs.StringVar(&o.floodTool, "flood-tool", "count", "chaos mode: the tool a flood calls")
	fs.StringVar(&o.floodArgs, "flood-args", `{"n":10,"delayMs":100}`, "chaos mode: its arguments, a JSON template")
	fs.IntVar(&o.hogSessions, "hog-sessions", 10, "chaos mode: sessions a hog client opens at once, each pipelining -hog-calls calls of -flood-tool")
	fs.IntVar(&o.hogCalls, "hog-calls", 32, "chaos mode: calls each hog session pipelines (within the server's -max-inflight and -queue-per-client: every one should be served)")
	fs.BoolVar(&o.failUnexpected, "fail-unexpected", false, "chaos mode: exit 1 when a hostile episode is unexpected, the server does not answer after the run, or (with -pid) its memory passed -rss-budget-mib or did not come back within 10% of its baseline")
	fs.BoolVar(&o.perKind, "per-kind", false, "chaos mode: run the hostile kinds one at a time, each for -duration beside fresh well-behaved clients, after a phase with none, and report the well-behaved clients' latency beside each kind")
	fs.Int64Var(&o.rssBudgetMiB, "rss-budget-mib", 0, "chaos mode, with -pid: the most resident memory the server may reach during the run, in MiB (sampled every 100ms); 0: none")
	fs.DurationVar(&o.rssSettle, "rss-settle", 0, "chaos mode, with -pid: how long to wait after the run for the server's memory to come back within 10% of its baseline (0: read it once)")
	fs.StringVar(&o.rssGCURL, "rss-gc-url", "", "chaos mode, with -pid: a `URL` to GET before the baseline and each reading after the run, that makes the server collect its garbage (mcpedge's admin listener: http://127.0.0.1:9090/debug/pprof/heap?gc=1)")
	fs.StringVar(&o.good, "good", "", "chaos mode: the well-behaved clients' `target`, when not the hostile clients' (an HTTP endpoint with -bearer, beside a TCP port attacked without a token)")
	fs.IntVar(&o.maxSubscriptions, "expect-max-subscriptions", 1024, "chaos mode: the server's -max-subscriptions (sub_flood)")
	fs.IntVar(&o.subFloodCalls, "sub-flood-calls", 0, "chaos mode: resources/subscribe calls a sub_flood client sends in one session (0: four times -expect-max-subscriptions)")
	fs.IntVar(&o.listenURIs, "listen-uris", 200000, "chaos mode: how many times a dup_listen names its URI (fewer if that passes -expect-max-message)")
	fs.IntVar(&o.sessionFloodMax, "session-flood-max", 70000, "chaos mode: sessions a session_flood episode opens before it calls the server unlimited")
	fs.IntVar(&o.declareConns, "declare-conns", 100, "chaos mode: connections a body_declare episode opens at once")
	fs.IntVar(&o.declareBytes, "declare-bytes", 0, "chaos mode: the Content-Length a body_declare connection declares (0: -expect-max-message)")
	fs.IntVar(&o.noReadConns, "no-read-conns", 32, "chaos mode: never-reading clients a no_read_many episode runs at once")
	fs.StringVar(&o.taskTool, "task-tool", "", "chaos mode: a tool with task support for task_hoard (mcpedge -handlers conformance: slow_compute); none: task_hoard is skipped")
	fs.StringVar(&o.taskArgs, "task-args", "{}", "chaos mode: its arguments, a JSON template")
	fs.IntVar(&o.taskCalls, "task-calls", 64, "chaos mode: tasks a task_hoard client asks for at once")
	fs.IntVar(&o.maxTasksPerClient, "expect-tasks-per-client", 16, "chaos mode: the server's -max-tasks-per-client (task_hoard)")
	fs.BoolVar(&o.expectAuth, "expect-auth", false, "chaos mode: the server requires a token on every request; unauth runs only then")
	fs.StringVar(&o.natsURL, "nats-url", "", "chaos mode: a cluster node's embedded NATS client port, nats://127.0.0.1:PORT (ss -ltnp shows it); nats_local runs only with it")
	fs.StringVar(&o.tlsCA, "tls-ca", "", "tcps targets: verify the server's certificate against the CAs in this PEM `file` (default: the system's)")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "tcps targets: present the client certificate in this PEM `file` (with -tls-key), for a server with -tls-client-ca")
	fs.StringVar(&o.tlsKey, "tls-key", "", "the PEM private key `file` of -tls-cert")
	fs.BoolVar(&o.tlsInsecure, "tls-insecure", false, "tcps targets: do not verify the server's certificate (tests only)")
	// Hidden from the usage text: for work on mcpload itself.
	hidden := map[string]bool{"cpuprofile": true}
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write mcpload's own CPU profile to `file`")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: mcpload [flags] TARGET [TARGET...]\n\n"+
			"TARGET is tcp://host:port, tcps://host:port (TLS), http://host:port/path or stdio:command args...\n"+
			"(flags go before TARGET; a stdio command line takes the rest of the arguments).\n"+
			"Several targets (arguments, or one comma-separated list) are the nodes of one\n"+
			"cluster, all of one transport: over HTTP, sessions are initialized on each in\n"+
			"turn and every request goes to the next target, with its session id; over TCP,\n"+
			"connection i goes to target i %% n. A stdio run has one target.\n\n")
		shown := flag.NewFlagSet("mcpload", flag.ContinueOnError)
		shown.SetOutput(stderr)
		fs.VisitAll(func(f *flag.Flag) {
			if !hidden[f.Name] {
				shown.Var(f.Value, f.Name, f.Usage)
				shown.Lookup(f.Name).DefValue = f.DefValue
			}
		})
		shown.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	o.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	if fs.NArg() == 0 {
		fs.Usage()
		return nil, nil, errors.New("no target")
	}
	return o, fs.Args(), nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, tty bool) int {
	o, specs, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "mcpload:", err)
		return 2
	}
	targets, err := loadtest.ParseTargets(specs...)
	if err != nil {
		fmt.Fprintln(stderr, "mcpload:", err)
		return 2
	}
	if err := o.applyTLS(targets); err != nil {
		fmt.Fprintln(stderr, "mcpload:", err)
		return 2
	}
	target := targets[0]
	pids, err := parsePIDs(o.pids)
	if err != nil {
		fmt.Fprintln(stderr, "mcpload:", err)
		return 2
	}
	pid := o.pid // the modes other than load read one process
	if pid == 0 && len(pids) > 0 {
		pid = pids[0]
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, "mcpload: -cpuprofile:", err)
			return 2
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			fmt.Fprintln(stderr, "mcpload: -cpuprofile:", err)
			return 2
		}
		defer func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		}()
	}
	if o.mode != "load" && o.protocol != loadtest.ProtocolSession {
		fmt.Fprintf(stderr, "mcpload: -protocol %s: only in load mode (-mode %s speaks the session revision)\n", o.protocol, o.mode)
		return 2
	}
	if o.mode != "load" && o.mode != "chaos" && (o.bearer != "" || o.bearerFile != "") {
		fmt.Fprintf(stderr, "mcpload: -bearer, -bearer-file: only in load and chaos modes\n")
		return 2
	}
	bearer, err := bearerTokens(o)
	if err != nil {
		fmt.Fprintln(stderr, "mcpload:", err)
		return 2
	}
	var bar *progressbar.ProgressBar
	if tty && !o.quiet && o.jsonOut != "-" {
		bar = newBar(o, stdout)
	}

	var res *loadtest.Result
	chaosFailed := false
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
			Target: target, Targets: targets, Connections: o.conns, InFlight: o.inflight, Rate: o.rate,
			Duration: o.duration, Requests: o.requests, Warmup: o.warmup, Steps: steps,
			Timeout: o.timeout, PID: o.pid, PIDs: pids, Client: o.viaClient, Strategy: strategy, Protocol: o.protocol,
			Bearer: bearer, Sticky: o.sticky,
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
		cfg := loadtest.SessionsConfig{Target: target, Targets: targets, Sessions: o.sessions, Concurrency: o.concurrency, PID: pid, Timeout: o.timeout}
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
			Target: target, Targets: targets, Subscribers: o.subscribers, Updates: o.updates, Interval: o.interval,
			URI: o.uri, Timeout: o.timeout, Concurrency: o.concurrency,
		})
		if err != nil {
			finishBar(bar)
			fmt.Fprintln(stderr, "mcpload:", err)
			return exitFor(err)
		}
	case "soak":
		steps, err := steps(o)
		if err != nil {
			fmt.Fprintln(stderr, "mcpload:", err)
			return 2
		}
		conns := o.conns
		if !o.set["c"] {
			conns = 1000
		}
		cfg := loadtest.SoakConfig{
			Target: target, Targets: targets, Connections: conns, Duration: o.duration, Every: o.every, Steps: steps,
			Concurrency: o.concurrency, Timeout: o.timeout, PID: pid, SampleEvery: o.sampleEvery,
			GoroutinesURL: o.goroutinesURL,
		}
		if bar != nil {
			cfg.Progress = func(p loadtest.Progress) {
				bar.Describe(fmt.Sprintf("%d req, %d errors", p.Requests, p.Errors))
				_ = bar.Set64(int64(1000 * p.Elapsed / max(p.Total, 1)))
			}
		}
		res, err = loadtest.RunSoak(ctx, cfg)
		if err != nil {
			finishBar(bar)
			fmt.Fprintln(stderr, "mcpload:", err)
			return exitFor(err)
		}
	case "chaos":
		steps, err := steps(o)
		if err != nil {
			fmt.Fprintln(stderr, "mcpload:", err)
			return 2
		}
		if !o.set["mix"] && o.scenario == "" {
			steps, _ = loadtest.ParseMix("echo=4,add=1")
		}
		clients, err := loadtest.ParseChaosClients(o.hostile)
		if err != nil {
			fmt.Fprintln(stderr, "mcpload:", err)
			return 2
		}
		good := loadtest.Config{Connections: o.conns, InFlight: o.inflight, Rate: o.rate, Steps: steps, Timeout: o.timeout, Bearer: bearer}
		if !o.set["c"] && !o.set["rate"] {
			good.Connections, good.Rate = 4, 200
		}
		if o.good != "" {
			if good.Target, err = loadtest.ParseTarget(o.good); err != nil {
				fmt.Fprintln(stderr, "mcpload: -good:", err)
				return 2
			}
		}
		if (o.rssBudgetMiB > 0 || o.rssSettle > 0 || o.rssGCURL != "") && pid == 0 {
			fmt.Fprintln(stderr, "mcpload: -rss-budget-mib, -rss-settle, -rss-gc-url: need -pid")
			return 2
		}
		cc := loadtest.Chaos{
			Target: target, Targets: targets, Duration: o.duration, Clients: clients, Good: good, Timeout: o.timeout, PID: pid,
			PerKind: o.perKind, RSSBudget: o.rssBudgetMiB << 20, RSSSettle: o.rssSettle,
			Expect: loadtest.ChaosExpect{
				MaxMessage: o.maxMessage, ReadTimeout: o.readTimeout, WriteTimeout: o.writeTimeout, AnswerWithin: o.answerWithin,
				Grace: o.grace, InitTimeout: o.initTimeout,
				SlowConsumerBytes: o.slowConsumerBytes, FloodCalls: o.floodCalls, FloodTool: o.floodTool, FloodArgs: o.floodArgs,
				HogSessions: o.hogSessions, HogCalls: o.hogCalls,
				MaxSubscriptions: o.maxSubscriptions, SubFloodCalls: o.subFloodCalls, ListenURIs: o.listenURIs,
				SessionFloodMax: o.sessionFloodMax, DeclareConns: o.declareConns, DeclareBytes: o.declareBytes,
				NoReadConns: o.noReadConns, TaskTool: o.taskTool, TaskArgs: o.taskArgs, TaskCalls: o.taskCalls,
				MaxTasksPerClient: o.maxTasksPerClient, Auth: o.expectAuth, NATSURL: o.natsURL,
			},
		}
		if o.rssGCURL != "" {
			cc.Settle = collect(o.rssGCURL, o.timeout)
		}
		var cr *loadtest.ChaosResult
		cr, err = loadtest.RunChaos(ctx, cc)
		if err != nil {
			finishBar(bar)
			fmt.Fprintln(stderr, "mcpload:", err)
			return exitFor(err)
		}
		res = cr.Result()
		if o.failUnexpected && (!cr.AllAsExpected || !cr.ServerAlive || (cr.RSS != nil && (!cr.RSS.WithinBudget || !cr.RSS.Settled))) {
			chaosFailed = true
		}
	default:
		fmt.Fprintf(stderr, "mcpload: -mode %q: want load, sessions, fanout, soak or chaos\n", o.mode)
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
	if !passed || chaosFailed {
		return 1
	}
	return 0
}

// collect returns a function that GETs url, best effort, within timeout:
// a server's endpoint that makes it collect its garbage.
func collect(url string, timeout time.Duration) func() {
	hc := &http.Client{Timeout: timeout}
	return func() {
		if resp, err := hc.Get(url); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
}

func chaosKindNames() []string {
	var names []string
	for _, k := range loadtest.ChaosKinds() {
		names = append(names, string(k))
	}
	return names
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

// parsePIDs parses -pids, a comma-separated list of process ids.
func parsePIDs(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var pids []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-pids %q: want process ids separated by commas", s)
		}
		pids = append(pids, n)
	}
	return pids, nil
}

// bearerTokens returns the tokens of -bearer or -bearer-file: a file's
// non-blank lines, trimmed, in order.
func bearerTokens(o *options) ([]string, error) {
	switch {
	case o.bearer != "" && o.bearerFile != "":
		return nil, errors.New("-bearer and -bearer-file: one or the other")
	case o.bearer != "":
		return []string{o.bearer}, nil
	case o.bearerFile == "":
		return nil, nil
	}
	data, err := os.ReadFile(o.bearerFile)
	if err != nil {
		return nil, fmt.Errorf("-bearer-file: %w", err)
	}
	var tokens []string
	for line := range strings.Lines(string(data)) {
		if t := strings.TrimSpace(line); t != "" {
			tokens = append(tokens, t)
		}
	}
	if len(tokens) == 0 {
		return nil, fmt.Errorf("-bearer-file %s: no token in it", o.bearerFile)
	}
	return tokens, nil
}

// applyTLS sets the TLS flags on the tcps targets.
func (o *options) applyTLS(ts []loadtest.Target) error {
	if (o.tlsCert == "") != (o.tlsKey == "") {
		return errors.New("-tls-cert and -tls-key: give both or neither")
	}
	var roots *x509.CertPool
	if o.tlsCA != "" {
		pem, err := os.ReadFile(o.tlsCA)
		if err != nil {
			return fmt.Errorf("-tls-ca: %w", err)
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return fmt.Errorf("-tls-ca %s: no PEM certificate", o.tlsCA)
		}
	}
	var certs []tls.Certificate
	if o.tlsCert != "" {
		c, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
		if err != nil {
			return fmt.Errorf("-tls-cert: %w", err)
		}
		certs = []tls.Certificate{c}
	}
	tlsTargets := 0
	for i := range ts {
		if ts[i].TLS == nil {
			continue
		}
		tlsTargets++
		ts[i].TLS.RootCAs, ts[i].TLS.Certificates = roots, certs
		ts[i].TLS.InsecureSkipVerify = o.tlsInsecure
	}
	if tlsTargets == 0 && (o.tlsCA != "" || o.tlsCert != "" || o.tlsInsecure) {
		return errors.New("-tls-ca, -tls-cert, -tls-insecure: for tcps:// targets only")
	}
	return nil
}

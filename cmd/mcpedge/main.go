// Command mcpedge serves MCP over TCP, Streamable HTTP (with the legacy
// HTTP+SSE endpoints) and stdio with a built-in handler set. Every flag has
// an environment twin: -tcp is MCPEDGE_TCP, -max-message is
// MCPEDGE_MAX_MESSAGE.
package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/mcpedge/mcpedge"
	"github.com/mcpedge/mcpedge/cluster"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers/builtin"
	"github.com/mcpedge/mcpedge/mcp"
	mcphttp "github.com/mcpedge/mcpedge/transport/http"
	"github.com/mcpedge/mcpedge/transport/netlimit"
	"github.com/mcpedge/mcpedge/transport/proxied"
	"github.com/mcpedge/mcpedge/transport/tcp"
)

type config struct {
	tcp         string
	http        string
	httpPath    string
	stateless   bool
	allowHosts  string
	allowOrigin string
	sessionIdle time.Duration
	sseKeep     time.Duration
	eventStore  int
	stdio       bool
	handlers    string
	framing     string
	loops       int
	workers     int
	maxMessage  int
	maxOutbound int
	pageSize    int
	drain       time.Duration
	logLevel    string
	logFormat   string
	lameDuck    time.Duration
	version     bool

	// Edge limits: connections, timeouts, buffered bytes, sessions.
	maxConns         int
	maxConnsPerIP    int
	readTimeout      time.Duration
	idleTimeout      time.Duration
	writeTimeout     time.Duration
	maxBuffered      int64
	maxOutboundTotal int64
	maxInflight      int
	maxSubscriptions int
	rate             float64
	rateBurst        int
	rateIP           float64
	rateSubject      float64
	rateSubjBurst    int
	queuePerClient   int
	queueTotal       int
	sessionInit      time.Duration
	maxSessions      int
	maxSessionsPerIP int

	// Tasks: the server's and each client's, the workers they may hold,
	// how long they are kept, and when an unpolled one is abandoned.
	maxTasks          int
	maxTaskBytes      int64
	maxTasksPerClient int
	taskWorkers       int
	taskTTL           time.Duration
	taskIdle          time.Duration

	// 2026-07-28: the keys requestState is signed with, and its age.
	stateKeyFile string
	stateTTL     time.Duration

	// The protocol revisions offered (-versions).
	versions string

	// Configuration file and TLS (config.go, tls.go).
	configFile  string
	tlsCert     string
	tlsKey      string
	tlsClientCA string
	tcpTLS      bool

	// Edge: the client behind proxies, and browsers (issue 23).
	trustedProxies string
	corsOrigins    string

	auth    authFlags    // auth.go
	admin   adminConfig  // admin.go
	cluster clusterFlags // cluster.go
	otel    otelFlags    // otel.go

	tables  fileTables   // the config file's tables (tables.go)
	gateway gatewayFlags // gateway.go

	handlersSet bool // -handlers given (flag, environment or file)
}

// parseVersions reads -versions: revisions separated by commas (blanks
// allowed), each one mcpedge speaks; empty means all (nil).
func parseVersions(list string) ([]string, error) {
	var out []string
	for _, v := range strings.Split(list, ",") {
		if v = strings.TrimSpace(v); v == "" {
			continue
		}
		if !slices.Contains(mcp.AllVersions[:], v) {
			return nil, fmt.Errorf("unknown protocol revision %q (known: %s)", v, strings.Join(mcp.AllVersions[:], ", "))
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out, nil
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// parse returns the configuration of args, the environment and the
// -config file. With -h it writes the usage to usage and returns
// flag.ErrHelp.
func parse(args []string, usage io.Writer) (*config, error) {
	c, _, err := parseFlags(args, usage)
	return c, err
}

// parseFlags returns the configuration of args, the environment and the
// -config file, and the FlagSet it was parsed with.
func parseFlags(args []string, usage io.Writer) (*config, *flag.FlagSet, error) {
	c := &config{}
	fs := newFlagSet(c)
	if err := applySources(fs, args, &c.tables); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(usage, fs)
		}
		return nil, nil, err
	}
	c.handlersSet = handlersGiven(fs)
	if err := validate(c); err != nil {
		return nil, nil, err
	}
	if err := compileTables(c); err != nil {
		return nil, nil, err
	}
	return c, fs, nil
}

// newFlagSet registers every flag of the command on a new FlagSet, with
// c holding their values. The FlagSet prints nothing itself: parse errors
// are reworded by flagError, and -h is printUsage's (usage.go); each flag
// needs a row in flagGroups (groups.go).
func newFlagSet(c *config) *flag.FlagSet {
	fs := flag.NewFlagSet("mcpedge", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&c.tcp, "tcp", tcp.DefaultAddr, "serve MCP over TCP on `addr` (empty: off)")
	fs.StringVar(&c.http, "http", mcphttp.DefaultAddr, "serve MCP over Streamable HTTP on `addr` (empty: off)")
	fs.StringVar(&c.httpPath, "http-path", "/mcp", "the Streamable HTTP endpoint's `path`")
	fs.BoolVar(&c.stateless, "stateless", false, "Streamable HTTP without sessions: each POST served on its own, GET and DELETE refused")
	fs.StringVar(&c.allowHosts, "allowed-hosts", "", "comma-separated Host values accepted besides loopback ones (host or host:port, * for any)")
	fs.StringVar(&c.allowOrigin, "allowed-origins", "", "comma-separated Origin values accepted besides loopback ones (* for any)")
	fs.DurationVar(&c.sessionIdle, "session-idle", 30*time.Minute, "close HTTP sessions unused for this long")
	fs.DurationVar(&c.sseKeep, "sse-keepalive", 15*time.Second, "interval of keep-alive comments on idle SSE streams (0: none)")
	fs.Var(newSize(&c.eventStore, 1<<20), "event-store-bytes", "SSE events kept per HTTP session for resumption, in `bytes` (units: KiB, MiB, GiB, KB, MB, GB)")
	// HTTP survival: timeouts and session limits.
	fs.DurationVar(&c.writeTimeout, "write-timeout", 30*time.Second, "how long writing one HTTP response, or one write on an SSE stream, may take (streams live on; 0: none)")
	fs.DurationVar(&c.sessionInit, "session-init-timeout", 30*time.Second, "close HTTP sessions whose client sends nothing after initialize within this time")
	fs.IntVar(&c.maxSessions, "max-sessions", 1<<16, "live HTTP sessions at most (when full, one never used after initialize is evicted, else the idle one used least recently)")
	fs.IntVar(&c.maxSessionsPerIP, "max-sessions-per-ip", -1, "live HTTP sessions per client address (IPv6: per /64) at most; more get 429 (-1: a sixteenth of -max-sessions, at least 64; 0: none; raise it when clients come through a proxy or NAT, which share its address)")
	fs.BoolVar(&c.stdio, "stdio", false, "serve MCP on stdin/stdout only (logs go to stderr)")
	fs.StringVar(&c.handlers, "handlers", "demo", "handler set to serve: "+strings.Join(builtin.Names(), ", "))
	fs.StringVar(&c.framing, "framing", "newline", "TCP and stdio framing: newline or content-length")
	fs.IntVar(&c.loops, "loops", runtime.NumCPU(), "TCP event loops (default: one per CPU)")
	fs.IntVar(&c.workers, "workers", 256*runtime.NumCPU(), "handlers running at once, on every transport (default: 256 per CPU)")
	fs.Var(newSize(&c.maxMessage, codec.DefaultMaxMessage), "max-message", "largest inbound message in `bytes` (units: KiB, MiB, GiB, KB, MB, GB)")
	fs.Var(newSize(&c.maxOutbound, 8<<20), "max-outbound", "`bytes` queued per connection before it is closed as a slow consumer (units: KiB, MiB, GiB, KB, MB, GB)")
	fs.IntVar(&c.pageSize, "page-size", 100, "items per list page")
	fs.DurationVar(&c.drain, "drain", 10*time.Second, "how long shutdown (SIGINT, SIGTERM) waits for in-flight requests (0: no wait: they are cancelled at once)")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.logFormat, "log-format", "text", "log line format: text or json")
	fs.DurationVar(&c.lameDuck, "lame-duck", 0, "at shutdown, spread the closing of idle connections over this long before the drain proper, within -drain (0: close them at once)")
	fs.BoolVar(&c.version, "version", false, "print the version and exit")
	// Edge limits.
	fs.IntVar(&c.maxConns, "max-conns", netlimit.DefaultMaxConns(), "open connections, TCP and HTTP together (default: RLIMIT_NOFILE less a tenth; 0: none)")
	fs.IntVar(&c.maxConnsPerIP, "max-conns-per-ip", 0, "open connections from one client address (0: none; clients behind one NAT or proxy share an address)")
	fs.DurationVar(&c.readTimeout, "read-timeout", tcp.DefaultReadTimeout, "close a TCP connection whose started (or first) message is not complete within this, and an HTTP connection whose request (headers and body) is not; stdio ends on a partial message held this long (0: none)")
	fs.DurationVar(&c.idleTimeout, "idle-timeout", tcp.DefaultIdleTimeout, "close TCP connections with no traffic and nothing in flight, and HTTP keep-alive connections between requests, idle this long (0: none)")
	fs.IntVar(&c.maxInflight, "max-inflight", 64, "requests one session may have being served at once; more get -32000 {\"limit\":\"max-inflight\"} (0: none)")
	fs.IntVar(&c.maxSubscriptions, "max-subscriptions", engine.DefaultMaxSubscriptions, "resource subscriptions one session may hold, resources/subscribe and subscriptions/listen URIs together (a listen's repeated URIs count once), their URIs 256 bytes each on average; more get -32000 {\"limit\":\"subscriptions\"}, HTTP 429 (0: none)")
	fs.Float64Var(&c.rate, "rate", 0, "requests per second one session may send; more get -32000 {\"limit\":\"rate\",\"retryAfterMs\":N}, HTTP 429 (0: none)")
	fs.StringVar(&c.stateKeyFile, "state-key-file", "", "`file` of the keys that sign 2026-07-28 requestState, one per line (hex, at least 32 bytes each): the first signs, any verifies, so a key rotates by adding the new one first and removing the old later; give every node the same file (empty: a random key per process)")
	fs.DurationVar(&c.stateTTL, "state-ttl", 10*time.Minute, "how long a 2026-07-28 requestState stays valid")
	fs.StringVar(&c.versions, "versions", "", "comma-separated protocol revisions offered ("+strings.Join(mcp.AllVersions[:], ", ")+"; empty: all); initialize negotiates among the session revisions listed (none: -32022 naming them), a 2026-07-28 request gets -32022 unless 2026-07-28 is listed, server/discover lists only these")
	fs.IntVar(&c.maxTasks, "max-tasks", 1024, "tasks the server keeps, running or ended, both revisions (when full, the oldest ended is forgotten)")
	fs.Var(newSize(&c.maxTaskBytes, 64<<20), "max-task-bytes", "`bytes` of results the tasks kept may hold; past it the oldest ended tasks are forgotten (units: KiB, MiB, GiB, KB, MB, GB)")
	fs.IntVar(&c.maxTasksPerClient, "max-tasks-per-client", 16, "tasks one client keeps: one authenticated subject, else one address; past it its oldest ended one is forgotten, or its running one nobody polled for -task-idle cancelled, else -32000 {\"limit\":\"tasks\"}, HTTP 429 (0: none)")
	fs.IntVar(&c.taskWorkers, "task-workers", 0, "workers of -workers that task handlers may hold at once; past it -32000 {\"limit\":\"task-workers\"}, HTTP 503 (0: a quarter of -workers)")
	fs.DurationVar(&c.taskTTL, "task-ttl", 10*time.Minute, "the longest a task runs and its result is kept")
	fs.DurationVar(&c.taskIdle, "task-idle", time.Minute, "a running 2026-07-28 task nobody polled for this long is abandoned: cancelled when a new task needs its room")
	fs.IntVar(&c.rateBurst, "rate-burst", 0, "burst allowed above -rate and -rate-ip (0: the rate, rounded up)")
	fs.Float64Var(&c.rateIP, "rate-ip", 0, "requests per second all sessions of one client address may send (0: none)")
	fs.Float64Var(&c.rateSubject, "rate-subject", 0, "requests per second one client may send over all its sessions, connections and stateless requests, across a cluster's nodes: one authenticated subject (the token's sub, else client_id), else one address; a new session or connection does not refill it; more get -32000 {\"limit\":\"rate-subject\",\"retryAfterMs\":N}, HTTP 429 (0: none)")
	fs.IntVar(&c.rateSubjBurst, "rate-subject-burst", 0, "burst allowed above -rate-subject (0: the rate, rounded up)")
	fs.IntVar(&c.queuePerClient, "queue-per-client", engine.DefaultQueuePerClient, "requests of one client (an authenticated subject, else a session, else a stateless client's address) that wait for a worker while every worker is busy, served in turn with the other clients' (fair scheduling); more get -32000 {\"limit\":\"queue\"}, HTTP 429 (0: no bound but -queue-total)")
	fs.IntVar(&c.queueTotal, "queue-total", engine.DefaultQueueTotal, "requests of all clients that wait for a worker while every worker is busy; more get -32000 {\"limit\":\"workers\"}, HTTP 503")
	fs.Var(newSize(&c.maxBuffered, netlimit.DefaultMaxBuffered()), "max-buffered", "`bytes` of partial inbound messages held across connections: TCP messages and HTTP request bodies being received; past it the biggest holders are closed (default: an eighth of memory, 64 MiB to 1 GiB; 0: none)")
	fs.Var(newSize(&c.maxOutboundTotal, netlimit.DefaultMaxOutboundTotal()), "max-outbound-total", "`bytes` queued for clients across connections: TCP answers, SSE streams, large HTTP answers being written; past it the biggest holders are closed (default: an eighth of memory, 64 MiB to 1 GiB; 0: none)")
	registerAuthFlags(fs, &c.auth)
	registerClusterFlags(fs, &c.cluster)
	registerGatewayFlags(fs, &c.gateway)
	adminFlags(fs, &c.admin)
	registerOtelFlags(fs, &c.otel)
	addOpsFlags(fs, c)
	return fs
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c, err := parse(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "mcpedge:", err)
		return 2
	}
	if c.version {
		fmt.Fprintln(stdout, "mcpedge", engine.Version, runtime.Version())
		return 0
	}
	// A LevelVar, so that SIGHUP can change the level (reload.go).
	lvl, err := parseLevel(c.logLevel)
	if err != nil {
		fmt.Fprintln(stderr, "mcpedge: -log-level:", err)
		return 2
	}
	level := new(slog.LevelVar)
	level.Set(lvl)
	log, err := newLogger(stderr, c.logFormat, level)
	if err != nil {
		fmt.Fprintln(stderr, "mcpedge:", err)
		return 2
	}
	framer, ok := codec.FramerByName(c.framing, c.maxMessage)
	if !ok {
		fmt.Fprintf(stderr, "mcpedge: -framing: unknown framing %q (newline, content-length)\n", c.framing)
		return 2
	}

	if !c.stdio && c.tcp == "" && c.http == "" {
		fmt.Fprintln(stderr, "mcpedge: nothing to serve: give -tcp ADDR, -http ADDR or -stdio")
		return 2
	}

	stateKeys, err := readStateKeys(c.stateKeyFile)
	if err != nil {
		fmt.Fprintln(stderr, "mcpedge: -state-key-file:", err)
		return 2
	}
	if c.lameDuck < 0 || (c.lameDuck > 0 && c.drain > 0 && c.lameDuck >= c.drain) {
		fmt.Fprintln(stderr, "mcpedge: -lame-duck: must be positive and shorter than -drain, which it counts against")
		return 2
	}
	if c.stateTTL <= 0 {
		fmt.Fprintln(stderr, "mcpedge: -state-ttl: must be positive")
		return 2
	}
	versions, err := parseVersions(c.versions)
	if err != nil {
		fmt.Fprintln(stderr, "mcpedge: -versions:", err)
		return 2
	}

	// One TLS configuration for HTTP and TCP, reloaded together.
	var tlsState *mcphttp.TLS
	tcpTLS := c.tcpTLS && c.tcp != ""
	if c.tlsCert != "" && (c.http != "" || tcpTLS) && !c.stdio {
		cfg, err := tlsFiles(c).Load()
		if err != nil {
			fmt.Fprintln(stderr, "mcpedge: -tls-cert:", err)
			return 2
		}
		tlsState = mcphttp.NewTLS(cfg)
	} else if c.tlsCert != "" {
		log.Warn("-tls-cert ignored: TLS is for the HTTP and TCP transports, which are off (or -tcp-tls=false)")
	}
	trusted, _ := proxied.Parse(splitList(c.trustedProxies)) // validated by parse

	// Every listener the node was asked for must bind, before anything
	// is served or a cluster joined (listeners.go).
	if err := checkListeners(listeners(c)); err != nil {
		fmt.Fprintln(stderr, "mcpedge:", err)
		return 2
	}

	verifier, err := c.auth.newVerifier(c.http, c.httpPath, log)
	if err != nil {
		fmt.Fprintln(stderr, "mcpedge: auth:", err)
		return 2
	}
	if verifier != nil {
		defer verifier.Close()
	}

	info, _ := builtin.Info(c.handlers)
	useBuiltin, handlerSet := true, c.handlers
	if len(c.gateway.upstreams.specs) > 0 || len(c.gateway.upstreams.tables) > 0 {
		// A gateway: the built-in handlers only when asked for.
		useBuiltin = c.handlersSet
		if !useBuiltin {
			info.Name, info.Version, handlerSet = "mcpedge", engine.Version, "none (a gateway)"
		}
	}
	opts := mcpedge.Options{
		EngineOptions: mcpedge.EngineOptions{
			Name:             info.Name,
			Version:          info.Version,
			Workers:          c.workers,
			MaxMessage:       c.maxMessage,
			PageSize:         c.pageSize,
			MaxInflight:      orNone(c.maxInflight),
			MaxSubscriptions: orNone(c.maxSubscriptions),
			Rate:             c.rate,
			RateBurst:        c.rateBurst,
			RateIP:           c.rateIP,
			RateSubject:      c.rateSubject,
			RateSubjectBurst: c.rateSubjBurst,
			QueuePerClient:   orNone(c.queuePerClient),
			QueueTotal:       c.queueTotal,
			ToolLimits:       c.tables.toolLimits(),
			StateKeys:        stateKeys,
			StateTTL:         c.stateTTL,
			Versions:         versions,
			Logger:           log,

			MaxTasks:          c.maxTasks,
			MaxTaskBytes:      c.maxTaskBytes,
			MaxTasksPerClient: orNone(c.maxTasksPerClient),
			TaskWorkers:       c.taskWorkers,
			TaskTTL:           c.taskTTL,
			TaskIdle:          c.taskIdle,
		},
		Stdio:        mcpedge.StdioOptions{Framer: framer, MaxOutbound: c.maxOutbound, DrainTimeout: c.drain, ReadTimeout: orNone(c.readTimeout)},
		DrainTimeout: orNone(c.drain),
		Auth:         verifier,
		LameDuck:     c.lameDuck,
	}
	var buffered, outbound *netlimit.Budget
	if !c.stdio {
		// One connection budget, and one budget of each kind of bytes
		// clients make the server hold, for every network transport.
		conns := netlimit.New(c.maxConns, c.maxConnsPerIP)
		conns.SetTrusted(trusted) // a load balancer's connections count in the total only
		buffered, outbound = netlimit.NewBudget(orNone(c.maxBuffered)), netlimit.NewBudget(orNone(c.maxOutboundTotal))
		if c.tcp != "" {
			opts.TCP = &mcpedge.TCPOptions{
				Addr: c.tcp, Loops: c.loops, Framer: framer, MaxOutbound: c.maxOutbound,
				Conns:       conns,
				ReadTimeout: orNone(c.readTimeout),
				IdleTimeout: orNone(c.idleTimeout),
				Buffered:    buffered,
				Outbound:    outbound,

				TrustedProxies: trusted,
			}
			if tcpTLS {
				opts.TCP.TLS = tlsState
			}
		}
		if c.http != "" {
			opts.HTTP = &mcpedge.HTTPOptions{
				Addr:            c.http,
				Path:            c.httpPath,
				Stateless:       c.stateless,
				AllowedHosts:    splitList(c.allowHosts),
				AllowedOrigins:  splitList(c.allowOrigin),
				SessionIdle:     c.sessionIdle,
				KeepAlive:       orNone(c.sseKeep),
				EventStoreBytes: c.eventStore,
				// Edge limits: connections, timeouts, sessions.
				Conns:            conns,
				ReadTimeout:      orNone(c.readTimeout),
				WriteTimeout:     orNone(c.writeTimeout),
				IdleTimeout:      orNone(c.idleTimeout),
				InitTimeout:      c.sessionInit,
				MaxSessions:      c.maxSessions,
				MaxSessionsPerIP: sessionsPerIP(c.maxSessionsPerIP),
				Buffered:         buffered,
				Outbound:         outbound,
				TLS:              tlsState,
				TrustedProxies:   trusted,
				CORSOrigins:      splitList(c.corsOrigins),
			}
		}
	}
	tracer, err := startTracing(c, nodeName(c), log) // otel.go
	if err != nil {
		fmt.Fprintln(stderr, "mcpedge:", err)
		return 2
	}
	var clusterTracer cluster.Tracer
	if tracer != nil {
		// Last of all (deferred first): the spans of the drain are exported.
		defer stopTracing(tracer, c.drain, log)
		opts.Tracer = tracer
		clusterTracer = tracer
	}
	node, err := startCluster(c, stateKeys, log, clusterTracer) // cluster.go
	if err != nil {
		fmt.Fprintln(stderr, "mcpedge:", err)
		return 2
	}
	if node != nil {
		// After the server's shutdown (deferred earlier, run later): the
		// streams of forwarded requests have ended by then.
		defer node.Close()
		opts.Cluster = node
		opts.Bus = node.Bus() // before startAdmin, which wraps it to count
		// The cluster-wide limits (-rate-subject, [tool.NAME] rate) are
		// shared by the nodes routed to now (with -cluster-embed; else
		// each node enforces the whole rate).
		opts.Nodes = func() int { return node.Routes() + 1 }
	}
	adm, err := startAdmin(c, &opts, log) // admin.go
	if err != nil {
		fmt.Fprintln(stderr, "mcpedge:", err)
		return 2
	}
	if verifier != nil {
		verifier.OnFailure(authFailures(log, adm.metricsOrNil())) // logging.go
	}
	defer adm.stop()
	if adm != nil && tracer != nil {
		tracingMetrics(adm.metrics, tracer)
	}
	if adm != nil && node != nil {
		adm.ready.SetCheck(node.Ready)
		clusterMetrics(adm.metrics, node, len(splitList(c.cluster.routes)))
	}
	gw, err := newGateway(c, &opts, log) // gateway.go
	if err != nil {
		fmt.Fprintln(stderr, "mcpedge:", err)
		return 2
	}
	srv := mcpedge.New(opts)
	srv.Registry().SetMaxClasses(c.auth.maxClasses)
	if useBuiltin {
		if err := builtin.Install(c.handlers, srv.Registry(), builtin.Env{ResourceUpdated: srv.ResourceUpdated, Publish: srv.Engine().Bus().Publish, Subscribe: srv.Engine().Bus().Subscribe}); err != nil {
			_ = srv.Shutdown(context.Background())
			fmt.Fprintln(stderr, "mcpedge:", err)
			return 2
		}
	}

	if gw != nil {
		if err := gw.Start(context.Background(), srv.Engine()); err != nil {
			_ = srv.Shutdown(context.Background())
			fmt.Fprintln(stderr, "mcpedge:", err)
			return 2
		}
		// After the server's drain (deferred later, run earlier): the
		// upstreams answer the calls in flight.
		defer gw.Close()
		if node != nil {
			gatewayCluster(gw, node) // gateway.go
		}
		gatewayAdmin(adm, gw, node)
	}

	// SIGHUP reloads the configuration (reload.go).
	reload, err := newReloader(args, c, log, level, srv, tlsState)
	if err != nil {
		fmt.Fprintln(stderr, "mcpedge:", err)
		return 2
	}
	if verifier != nil {
		reload.hooks = append(reload.hooks, authReloadHook(verifier, srv.Registry(), log))
	}
	if adm != nil {
		reload.hooks = append(reload.hooks, adm.reloadHook()) // admin.go
	}
	if buffered != nil {
		reload.hooks = append(reload.hooks, budgetReloadHook(buffered, outbound))
	}
	if gw != nil {
		reload.hooks = append(reload.hooks, gatewayReloadHook(gw))
	}
	// SIGINT and SIGTERM end ctx: Serve and ServeStdio then shut the server
	// down in the documented order (readiness off, listeners closed, idle
	// connections closed, the engine drains, the transports stop) within
	// -drain. SIGHUP does not stop it: it reloads, one SIGHUP at a time,
	// and logs one line when done.
	ctx, stop := signals(log, reload.onHUP)
	defer stop()

	if c.stdio {
		adm.serve(ctx, srv)
		log.Info("serving MCP on stdio", "handlers", handlerSet, "framing", framer.Name())
		adm.markReady()
		// A drain that ran out of time (a request cut) exits 1, as does a
		// stdio error.
		if err := srv.ServeStdio(ctx, stdin, stdout); err != nil {
			if !errors.Is(err, context.DeadlineExceeded) {
				log.Error("stdio", "err", err)
			}
			return 1
		}
		return 0
	}

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	tcpAddr, httpAddr := srv.TCPAddr(ctx), srv.HTTPAddr(ctx)
	if (opts.TCP != nil && tcpAddr == nil) || (opts.HTTP != nil && httpAddr == nil) {
		// A listener lost its port since checkListeners (or ctx ended):
		// Serve has stopped the rest; nothing was ready.
		err := <-served
		if ctx.Err() != nil {
			return 0
		}
		var te *mcpedge.TransportError
		if errors.As(err, &te) {
			for _, l := range listeners(c) {
				if l.flag == te.Transport {
					err = bindError(l, te.Err)
				}
			}
		}
		fmt.Fprintln(stderr, "mcpedge:", err)
		return 2
	}
	if tcpAddr != nil {
		tcpScheme := "tcp"
		if opts.TCP.TLS != nil {
			tcpScheme = "tcps"
		}
		log.Info("serving MCP over TCP", "addr", tcpAddr.String(), "url", tcpScheme+"://"+tcpAddr.String(), "handlers", handlerSet, "framing", framer.Name(), "loops", c.loops, "max_conns", c.maxConns, "read_timeout", c.readTimeout, "idle_timeout", c.idleTimeout, "max_buffered", c.maxBuffered, "max_outbound_total", c.maxOutboundTotal)
	}
	scheme := "http"
	if tlsState != nil {
		scheme = "https"
	}
	if httpAddr != nil {
		log.Info("serving MCP over Streamable HTTP", "addr", httpAddr.String(), "url", scheme+"://"+httpAddr.String()+c.httpPath, "handlers", handlerSet, "stateless", c.stateless)
	}
	adm.serve(ctx, srv)
	adm.markReady()
	code := 0
	// A listener that failed is logged by the server; so is a drain that
	// ran out of time, with requests still in flight that were cut: both
	// exit 1.
	if err := <-served; errors.As(err, new(*mcpedge.TransportError)) || errors.Is(err, context.DeadlineExceeded) {
		code = 1
	}
	log.Info("stopped", "exit", code)
	return code
}

// signals returns a context that ends at the first SIGTERM or SIGINT: the
// server then drains (mcpedge.Server.Shutdown) within -drain. SIGHUP does
// not end the process: onHUP is called for each one (configuration
// reload hooks in here); nil logs that it is ignored. stop releases the
// signals.
func signals(log *slog.Logger, onHUP func()) (ctx context.Context, stop func()) {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-hup:
				if onHUP != nil {
					onHUP()
				} else {
					log.Info("SIGHUP ignored: nothing to reload")
				}
			}
		}
	}()
	return ctx, func() {
		signal.Stop(hup)
		close(done)
		cancel()
	}
}

// orNone maps a flag's 0 ("none") to the Options' -1 (their 0 is "the
// default").
func orNone[T int | int64 | time.Duration](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

// sessionsPerIP maps -max-sessions-per-ip to HTTPOptions.MaxSessionsPerIP:
// the flag's -1 (the default share) is the option's 0, and its 0 (none)
// the option's -1.
func sessionsPerIP(v int) int {
	switch v {
	case -1:
		return 0
	case 0:
		return -1
	}
	return v
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(v string) []string {
	var out []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// readStateKeys reads -state-key-file: one hex key per line, at least 32
// bytes each; blank lines and lines starting with # are skipped.
func readStateKeys(path string) ([][]byte, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var keys [][]byte
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := hex.DecodeString(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: not hex: %w", path, i+1, err)
		}
		if len(k) < 32 {
			return nil, fmt.Errorf("%s:%d: a key needs at least 32 bytes, got %d", path, i+1, len(k))
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s: no key", path)
	}
	return keys, nil
}

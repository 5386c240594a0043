// Package loadtest is the engine of mcpload, mcpedge's load generator: it
// drives MCP servers over TCP, Streamable HTTP and stdio and measures them.
//
// Run puts load on a Target: closed loop (Connections sessions, InFlight
// requests outstanding on each, the next sent as soon as one is answered)
// or open loop (Rate requests per second in all, each worker on its own
// schedule, latency measured from each request's intended send time as wrk2
// does, so a server stall shows in every request queued behind it instead
// of slowing the load down). A run lasts Duration or Requests after a
// Warmup that is not recorded. Each request is a Step drawn from a weighted
// mix, rendered from a template, and every answer is verified: its id must
// be one that was asked, it must be a result, and its content must be what
// the step expects. Failures are counted by ErrorKind. RunSessions opens
// many idle sessions and weighs them in the server's resident memory;
// RunFanout subscribes many sessions to one resource (an entry of the demo
// set's shared board), publishes updates and times the notifications.
// RunSoak holds many connections for minutes, each making a call now and
// then, and samples the server's memory, threads, descriptors (and
// goroutines, where exposed) from /proc. RunChaos runs hostile clients
// (garbage, invalid UTF-8, oversized and half-sent messages, readers that
// never read, alone and by the dozen, floods, hogs (sessions that
// together fill the worker pool with slow calls), abandoned sessions,
// connection churn, listens naming one URI 200,000 times, subscription
// and session floods, bodies declared and never sent, task hoarders,
// requests without a token, a local client on a cluster node's NATS port;
// see ChaosKind) beside well-behaved ones, records what each hostile
// episode met against what a sound server does, reports the well-behaved
// clients' errors and latency apart (with PerKind, beside each kind
// alone), and samples the server's memory against a budget and until it
// is back near its baseline; it is a library, for go tests as much as for
// mcpload.
//
// By default mcpload uses its own lean connections: a fasthttp HostClient
// (PipelineClient when more than one request is in flight per connection)
// for HTTP, whose answers may be JSON or SSE. Over TCP and stdio a closed
// loop is pipelined (conn_pipe.go): each connection has a reader, which
// reads answers in large chunks, matches them to their slots by id,
// verifies them (by a byte comparison against the answer's shape learned
// from the first one fully decoded, else by decoding), records a chunk at
// a time and sends the freed slots' next requests in one write, and a
// writer goroutine for what the reader does not send itself; timeouts are
// a sweep of the slots, not a timer per request, and no message allocates.
// It is meant never to be what limits a measurement: bench/cmd/refclient,
// the least a pipelined client can do, is its yardstick (make
// bench-cores). Open loop over TCP and stdio uses a stream multiplexed by
// id with a goroutine, slot and timer per in-flight request.
// Config.Client runs the same load through the client library's Pool
// instead.
//
// # Several targets
//
// Config.Targets (and the Targets of the other modes' configs; mcpload
// takes several TARGET arguments or a comma-separated list) are the nodes
// of one cluster, any of which takes any request: all of one transport,
// and stdio only alone (else ErrConfig). Over Streamable HTTP each session
// is initialized on the next target in turn, and then each of its
// requests goes to the next target in turn with the session's
// Mcp-Session-Id, so that every session is used on every node (load, soak
// and chaos's well-behaved clients; sessions mode opens sessions on each
// in turn; fanout puts subscriber i, its requests and its stream, on
// target i % n and the publisher on the first; chaos's hostile clients go
// to the first). With Config.Sticky (mcpload -sticky; load mode) each
// session's requests all go to the target it was opened on instead: the
// sessions are spread, and no node serves another's. Over TCP a session
// is its connection: connection i goes
// to target i % n. Result.Targets gives each target's share, and
// Config.PIDs sums the CPU time of several local server processes. With
// one target, a run is what it was before Targets.
//
// Config.Protocol picks the revision: ProtocolSession (2025-11-25, the
// default: initialize, then a session per connection) or ProtocolStateless
// (2026-07-28: no initialize and no session; every request's params carry
// the revision's _meta, pre-encoded into the step's template so that the
// pipelined driver still allocates nothing per message; over HTTP each POST
// also carries MCP-Protocol-Version, Mcp-Method and, for tools/call,
// prompts/get and resources/read, Mcp-Name, and no Mcp-Session-Id). In
// 2026-07-28 a result must also say "resultType":"complete"; a step whose
// method the revision removed (ping, initialize, logging/setLevel,
// resources/subscribe and unsubscribe) is refused before the run.
//
// # JSON output
//
// Result is written as JSON by mcpload -json; its schema is named by the
// "schema" member, "mcpload/v1". Durations are microseconds (names ending
// in _us), rates are per second, memory is bytes:
//
//	schema            "mcpload/v1"
//	mode              "closed" | "open" | "sessions" | "fanout" | "soak" | "chaos"
//	target, transport the target spec (several: comma-separated); "tcp" | "http" | "stdio"
//	protocol          the revision spoken (load mode): "2025-11-25" | "2026-07-28"
//	started           RFC 3339 time the measured phase began
//	connections, in_flight, rate, mix ["name=weight", ...]
//	warmup_s, duration_s          warm-up asked; measured phase as run
//	requests, ok, errors          requests of the measured phase; verified; failed
//	error_rate                    errors / requests
//	errors_by_kind {kind: n}      kinds: connect, timeout, closed, transport,
//	                              protocol, id_mismatch, rpc_error, unexpected
//	error_samples {kind: msg}     the first message of each kind ("setup": set-up failure)
//	connect_failures              connections that failed before the run
//	throughput_rps                ok / duration_s
//	latency_us {count, min, mean, stdev, p50, p90, p99, p99_9, max}
//	percentiles [{percentile, us}]  the latency curve, 0 to 100
//	steps [{name, method, requests, errors, p50_us, p99_us}]
//	timeline [{t, ok, errors, mean_us}]  one per second of the measured phase
//	targets [{target, connections, sessions, requests, errors}]  with several
//	                  targets: tcp connections opened to each; http sessions
//	                  initialized on each, requests of the measured phase
//	                  sent to each and those that failed (transport,
//	                  protocol or JSON-RPC error; content checks count in
//	                  errors only)
//	server {pid, pids, cpu_s, cpu_per_request_us, rss_bytes}   with -pid or
//	                  -pids (stdio: the child); pids lists several, whose
//	                  CPU times and resident memory are summed
//	load {cpu_s, cpu_per_request_us}   mcpload's own CPU time (load mode)
//	sessions {requested, opened, failed, open_s, opened_per_s,
//	          rss_before_bytes, rss_after_bytes, rss_per_session_bytes, first_error}
//	fanout {subscribers, subscribed, updates, expected, delivered, lost,
//	        delivered_per_s, span_s, update_errors, first_error, delay_us {...}}
//	soak {connections, opened, setup_failed, redials, minutes, every_s,
//	      requests, errors, start, middle, end, after, samples [...],
//	      first_error}   each sample {t_s, open, requests, errors,
//	      rss_bytes, threads, fds, cpu_s, goroutines, error}
//	chaos {target, duration_s, all_as_expected, server_alive, alive_error,
//	       server_before, server_after {rss_bytes, threads, fds, cpu_s},
//	       hostile [{kind, clients, expect, skipped, episodes, as_expected,
//	                 unexpected, undecided, outcomes {name: n},
//	                 answers {name: n}, close_after_us {...}, took_us {...},
//	                 first_unexpected}],
//	       rss {baseline_bytes, baseline_anon_bytes, peak_bytes, peak_at_s,
//	            samples, budget_bytes, within_budget, after_bytes,
//	            after_anon_bytes, settled, settle_s},
//	       phases [{kind, clients, duration_s, requests, errors,
//	                errors_by_kind, latency_us {...}, rss_peak_bytes}]}
//	                 (in chaos mode the top-level figures are the
//	                 well-behaved clients', every phase's together; skipped
//	                 names why a kind did not run: one of a single
//	                 transport, or one that needs a task tool, a token
//	                 requirement or a NATS port named; HTTP flood answers
//	                 are counted by status, "status_429_error_-32000")
//	thresholds {max_p99_us, max_error_rate, passed, violations [...]}
//
// Members that do not apply to a mode are omitted. A new member may appear
// in mcpload/v1; a member that changes meaning or goes away changes the
// schema name.
//
// Everything here is safe for concurrent use unless a type says otherwise;
// a Result is a value that its caller owns.
package loadtest

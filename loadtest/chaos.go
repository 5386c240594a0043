package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/mcpedge/mcpedge/codec"
)

// ChaosKind names a kind of hostile client.
type ChaosKind string

// The hostile clients. Each runs its episode over and over until the run
// ends, and records for each what happened (an outcome) and whether that is
// what a sound server does: as expected, unexpected, or undecided. An
// episode begun before the run's end goes on to its decision, which it
// awaits within its own bounds (AnswerWithin, ReadTimeout and
// WriteTimeout plus Grace, Timeout), so that a slow machine delays a
// decision rather than leaving it to a race with the end of the run.
// Undecided are the episodes that another of the server's defences ended
// before they could show their own (a shared byte budget cut the
// connection, the read or init timeout closed what a slow client machine
// sent too late: see ChaosExpect), those refused at initialize by a
// session limit that another kind fills, and abandon's sessions, which
// outlive the run. Every kind runs on TCP and on Streamable HTTP; the
// episodes and expected outcomes are TCP's unless an HTTP line says
// otherwise. HTTP episodes that need a session open one (initialize, then
// notifications/initialized) and delete it at the end.
const (
	// ChaosGarbage sends a line of random bytes. Expected: a JSON-RPC
	// parse error (-32700) or the connection closed; not silence. HTTP: a
	// 4xx answer.
	ChaosGarbage ChaosKind = "garbage"
	// ChaosBadUTF8 initializes, then sends valid JSON-RPC requests whose
	// strings hold invalid UTF-8 (prompts/get greet, tools/call echo).
	// Expected: each is answered (a result or an error) and a ping after
	// them too: the server stays up and keeps the connection. HTTP: each
	// is a POST on the session, answered 200 with a result or a JSON-RPC
	// error, and the ping after them too (the session keeps working).
	ChaosBadUTF8 ChaosKind = "bad_utf8"
	// ChaosOversized initializes, then sends one message of
	// ChaosExpect.MaxMessage plus 64 KiB. Expected: a -32700 error, then
	// the connection closed (outcome "size_error+closed"); the close alone
	// ("closed", when the error was lost to the reset) is accepted, and so
	// is -32000 {"limit":"max-buffered"} before the close (the budget of
	// partial messages cut it first: "budget_error+closed"). Closed over
	// another limit first (the read timeout, on a slow client machine),
	// it is judged as any kind's connection is (ChaosExpect.ReadTimeout).
	// HTTP: 413, or the connection closed.
	ChaosOversized ChaosKind = "oversized"
	// ChaosHalfSent initializes, sends a prefix of a message (64 KiB or
	// half of MaxMessage, whichever is less; no newline) and falls
	// silent. Expected: the server closes the connection within
	// ChaosExpect.ReadTimeout (plus ChaosExpect.Grace), and not sooner
	// after the message began when it says it closes it for the read
	// timeout. HTTP: on a connection of its own, the headers of a POST on
	// the session with a Content-Length of 32 KiB (or MaxMessage,
	// whichever is less) and half that body; expected: the connection
	// closed within the same bound, after a 408 ("status_408+closed"), a
	// 503 (the budget of bodies being received, -max-buffered, cut it
	// first) or without one ("closed"). Any other answer is unexpected.
	ChaosHalfSent ChaosKind = "half_sent"
	// ChaosNoRead initializes, then sends echo calls with 16 KiB texts
	// and never reads an answer; its connection's receive buffer is a few
	// KiB (SO_RCVBUF), so that what the server sends stays in the
	// server's queues rather than in the kernel's. Expected: the server closes it as a slow
	// consumer (a write fails) before ChaosExpect.SlowConsumerBytes of
	// answers are due; "stalled" (a write blocked for AnswerWithin: the
	// server stopped reading but kept the connection) is unexpected.
	// HTTP: on one keep-alive connection of its own, pipelines POSTs of
	// the demo set's count (n 100, no delay, a progress token, 16 KiB of
	// padding in _meta), each answered by an SSE stream of 100 progress
	// events and the result (about 15 KiB), and reads none of it. The
	// server serves them in turn until a write blocks; it then stops
	// reading, and the client's writes block too. Expected: the server
	// closes the connection (a stream cut off as a slow consumer, past
	// its MaxStreamBuffer, or a write that timed out) before a client
	// write has blocked ChaosExpect.WriteTimeout plus Grace; "stalled"
	// past that is unexpected. A count stream is far below mcpedge's
	// default 1 MiB stream bound, so with the default options it is the
	// write timeout (-write-timeout, 30 s) that ends it, and the episode
	// awaits it past the run's end.
	ChaosNoRead ChaosKind = "no_read"
	// ChaosFlood initializes, pipelines ChaosExpect.FloodCalls calls of
	// FloodTool (default the demo set's count, a slow tool) and reads the
	// answers. Expected: some are refused with -32000 (busy, a limit), or
	// the connection is closed; the well-behaved clients meanwhile see no
	// errors (their own figures tell). HTTP: the FloodCalls calls are
	// concurrent POSTs on one session, each on a connection of its own;
	// expected: at least one refused with 429 or 503 and Retry-After (the
	// body a -32000 error), every other one answered 200 with its
	// JSON-RPC answer; a refusal without Retry-After, a call that failed
	// or another status is unexpected. Answers are counted by status and
	// answer ("status_200_result", "status_429_error_-32000").
	ChaosFlood ChaosKind = "flood"
	// ChaosHog opens ChaosExpect.HogSessions sessions at once, each
	// pipelining ChaosExpect.HogCalls calls of FloodTool (FloodArgs, as
	// flood's), within the session's in-flight and queue bounds
	// (-max-inflight, -queue-per-client), and reads every answer: together
	// they hold more calls than the worker pool has workers (issue 23: ten
	// such sessions got a witness refused 4 calls in 5). Expected: every
	// call served, each session getting its share of the pool, and the
	// well-behaved clients beside them served too, with no error (their
	// own figures tell): a fair scheduler queues what the pool cannot
	// start, it refuses only what passes a queue's bound. A refusal is
	// unexpected. Each session is an episode. HTTP: each session's calls
	// are concurrent POSTs, each on a connection of its own; expected:
	// every one answered 200 with its result.
	ChaosHog ChaosKind = "hog"
	// ChaosAbandon opens sessions and leaves them: TCP connects,
	// initializes and falls silent, holding the connection to the run's
	// end; HTTP posts initialize and goes away. Expected: reaped
	// eventually; the run does not wait for it. A TCP session closed by
	// the server during the run counts as "reaped" (as expected), one
	// still open at the end as undecided.
	ChaosAbandon ChaosKind = "abandon"
	// ChaosChurn connects and closes over and over, initializing every
	// other time. Expected: each connection is accepted (and initialized).
	ChaosChurn ChaosKind = "churn"
	// ChaosDupListen sends a 2026-07-28 subscriptions/listen naming one
	// board URI ChaosExpect.ListenURIs times (200,000: 3.4 MB, issue 20's
	// listen that took minutes of CPU; fewer when that would pass
	// MaxMessage) and a second URI once, then writes both board entries
	// (board_write), the repeated one first. Expected: the acknowledgement
	// lists the two URIs once each, and the repeated URI's write is heard
	// once before the second's. HTTP: the listen is a POST whose answer is
	// the SSE stream, the writes stateless POSTs.
	ChaosDupListen ChaosKind = "dup_listen"
	// ChaosSubFlood initializes and pipelines ChaosExpect.SubFloodCalls
	// resources/subscribe calls with distinct URIs. Expected: no more than
	// ChaosExpect.MaxSubscriptions succeed, every other one is refused
	// with -32000 (the limit "subscriptions"). HTTP: the calls are POSTs on
	// the session, refused with 429 and Retry-After; then one stateless
	// listen naming MaxSubscriptions+1 distinct URIs must be refused 429.
	ChaosSubFlood ChaosKind = "sub_flood"
	// ChaosSessionFlood (HTTP only) initializes sessions and pings each
	// once (so that none looks abandoned), until one initialize is
	// refused, then deletes them. Expected: a 429 or 503 with Retry-After
	// before ChaosExpect.SessionFloodMax sessions (the per-address share,
	// -max-sessions-per-ip). While it holds its share, other clients of
	// its address may be refused at initialize too: their episodes are
	// then counted undecided, not unexpected.
	ChaosSessionFlood ChaosKind = "session_flood"
	// ChaosBodyDeclare (HTTP only) opens ChaosExpect.DeclareConns
	// connections at once, each sending the headers of a POST declaring
	// a Content-Length of ChaosExpect.DeclareBytes and a few bytes of its
	// body, then silence (issue 20: 500 of them took 2 GB). Expected: each
	// connection closed within ChaosExpect.ReadTimeout and Grace, with
	// or without an error status (408, 413, 429, 503, 401); the server's
	// memory is Chaos.RSSBudget's to judge. A 2xx answer is unexpected.
	ChaosBodyDeclare ChaosKind = "body_declare"
	// ChaosNoReadMany runs ChaosExpect.NoReadConns never-reading clients
	// (no_read's episode) at once, so that their answers queue on many
	// connections together. Expected, for each: closed as a slow consumer
	// (-max-outbound, or -max-outbound-total, which cuts the biggest
	// holders first), as for no_read.
	ChaosNoReadMany ChaosKind = "no_read_many"
	// ChaosTaskHoard starts ChaosExpect.TaskCalls tasks of
	// ChaosExpect.TaskTool at once and leaves: in odd episodes 2025-11-25
	// task-augmented calls in a session, in even ones 2026-07-28 tasks
	// (which outlive the connection). Expected: at most
	// ChaosExpect.MaxTasksPerClient created, every other call refused
	// with -32000 (the limits "tasks" or "task-workers"); HTTP: refused
	// with 429 or 503 and Retry-After, never answered 200 with an error.
	// Skipped without a TaskTool.
	ChaosTaskHoard ChaosKind = "task_hoard"
	// ChaosUnauth sends, with no token and then with a wrong one, the
	// 2026-07-28 requests the engine answers itself (server/discover, the
	// lists, subscriptions/listen, tasks/get and tasks/cancel) and some it
	// passes to handlers, then initialize. Expected: every one refused
	// with -31001 (unauthorized); HTTP: 401. Skipped unless
	// ChaosExpect.Auth says the server requires a token.
	ChaosUnauth ChaosKind = "unauth"
	// ChaosNATSLocal connects to a cluster node's embedded NATS client
	// port (ChaosExpect.NATSURL) as a local process would: with no
	// credentials, with the route user and a guessed password, with a
	// token. Expected: each refused (an authorization error, or no port
	// at all); a client that gets in is unexpected, and what it could
	// subscribe to is said. Skipped without a NATSURL.
	ChaosNATSLocal ChaosKind = "nats_local"
)

// ChaosKinds lists every hostile kind, in report order.
func ChaosKinds() []ChaosKind {
	return []ChaosKind{ChaosGarbage, ChaosBadUTF8, ChaosOversized, ChaosHalfSent, ChaosNoRead, ChaosFlood, ChaosHog, ChaosAbandon,
		ChaosChurn, ChaosDupListen, ChaosSubFlood, ChaosSessionFlood, ChaosBodyDeclare, ChaosNoReadMany, ChaosTaskHoard, ChaosUnauth, ChaosNATSLocal}
}

// chaosOnly names the one transport of a kind that has no variant on the
// other, and why.
var chaosOnly = map[ChaosKind]struct{ transport, why string }{
	ChaosSessionFlood: {"http", "HTTP only: a TCP session is its connection (abandon, -max-conns)"},
	ChaosBodyDeclare:  {"http", "HTTP only: its TCP twin is half_sent (-max-buffered)"},
}

// skipReason says why kind k does not run in this run, or "".
func (cr *chaosRun) skipReason(k ChaosKind) string {
	if o, ok := chaosOnly[k]; ok && o.transport != cr.cfg.Target.Transport {
		return o.why
	}
	switch {
	case k == ChaosTaskHoard && cr.e.TaskTool == "":
		return "no tool with task support named (-task-tool)"
	case k == ChaosUnauth && !cr.e.Auth:
		return "the server is not said to require a token (-expect-auth)"
	case k == ChaosNATSLocal && cr.e.NATSURL == "":
		return "no NATS client port named (-nats-url)"
	}
	return ""
}

// ParseChaosClients parses "garbage=2,flood=1" (a kind alone means 1;
// "all=N" gives every kind N).
func ParseChaosClients(s string) (map[ChaosKind]int, error) {
	out := map[ChaosKind]int{}
	known := map[ChaosKind]bool{}
	for _, k := range ChaosKinds() {
		known[k] = true
	}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		name, num, has := strings.Cut(f, "=")
		n := 1
		if has {
			v, err := strconv.Atoi(num)
			if err != nil || v < 0 {
				return nil, fmt.Errorf("%w: chaos clients %q: want kind=N", ErrConfig, f)
			}
			n = v
		}
		if name == "all" {
			for _, k := range ChaosKinds() {
				out[k] = n
			}
			continue
		}
		if !known[ChaosKind(name)] {
			return nil, fmt.Errorf("%w: chaos kind %q (have %v)", ErrConfig, name, ChaosKinds())
		}
		out[ChaosKind(name)] = n
	}
	return out, nil
}

// ChaosExpect is what the hostile clients assume of the server. None of it
// is taken for granted: each is the bound an outcome is judged against.
type ChaosExpect struct {
	// MaxMessage is the server's largest inbound message; the oversized
	// client sends 64 KiB more. Default 4 MiB (mcpedge's default).
	MaxMessage int
	// ReadTimeout is how long the server waits for the rest of a message
	// begun (or for a connection's first message) before it closes the
	// connection: mcpedge's -read-timeout. half_sent expects the close
	// within it and Grace. A connection of another kind that the server
	// closes for it (TCP: after -32000 {"limit":"read-timeout"}; its
	// message arrived late, as it may from a loaded client machine) is
	// undecided, but unexpected when the close came sooner than
	// ReadTimeout after the client dialled. Default 10 s.
	ReadTimeout time.Duration
	// Grace is how much later than a server's timeout (ReadTimeout,
	// WriteTimeout) its close may come before it counts as missing: the
	// server's timer ticks, and a loaded machine is late. Default 1 s.
	Grace time.Duration
	// InitTimeout is the server's -session-init-timeout, where known: how
	// long an HTTP session may wait for its client's first request after
	// initialize before the server reaps it. A hostile client whose new
	// session is gone (404) at that request, at least InitTimeout after
	// it sent the initialize, was reaped (its machine was slow): the
	// spec's answer for a session that ended, and the episode is
	// undecided. Sooner, or with no InitTimeout, that 404 is unexpected.
	InitTimeout time.Duration
	// AnswerWithin bounds the wait for an answer (or a close) that should
	// come at once: garbage, bad UTF-8, oversized, a blocked write. Default
	// 5 s.
	AnswerWithin time.Duration
	// SlowConsumerBytes is how many bytes of answers a never-reading client
	// provokes before it decides the server will not close it. Default
	// 64 MiB.
	SlowConsumerBytes int
	// WriteTimeout is how long the server lets a write to a client that
	// reads nothing block before it closes the connection (mcpedge's
	// -write-timeout): HTTP no_read allows a blocked write of its own this
	// long plus Grace. Default 30 s (mcpedge's default).
	WriteTimeout time.Duration
	// FloodCalls is how many calls a flood client pipelines at once;
	// default 2000. FloodTool and FloodArgs make each call; default the
	// demo set's count, {"n":10,"delayMs":100} (one second each).
	FloodCalls int
	FloodTool  string
	FloodArgs  string
	// HogSessions is how many sessions a hog episode opens at once
	// (default 10), HogCalls how many calls of FloodTool each pipelines
	// (default 32: within mcpedge's default -max-inflight and
	// -queue-per-client, 64).
	HogSessions int
	HogCalls    int
	// MaxAbandoned bounds the sessions one abandon client leaves open at
	// once; default 200. AbandonEvery is the time between them; default
	// 20 ms.
	MaxAbandoned int
	AbandonEvery time.Duration
	// Pause separates one client's episodes; default 10 ms.
	Pause time.Duration

	// MaxSubscriptions is the server's -max-subscriptions, the most
	// subscriptions a sub_flood session may get; default 1024 (mcpedge's
	// default). SubFloodCalls is how many it asks for; default four times
	// as many.
	MaxSubscriptions int
	SubFloodCalls    int
	// ListenURIs is how many times a dup_listen names its URI (fewer when
	// that would not fit in MaxMessage); default 200,000.
	ListenURIs int
	// SessionFloodMax bounds the sessions a session_flood episode opens
	// before it calls the server unlimited; default 70,000 (past mcpedge's
	// default -max-sessions, 65,536).
	SessionFloodMax int
	// DeclareConns is how many connections a body_declare episode opens at
	// once (default 100), DeclareBytes the Content-Length each declares
	// (default MaxMessage).
	DeclareConns int
	DeclareBytes int
	// NoReadConns is how many never-reading clients a no_read_many
	// episode runs at once; default 32.
	NoReadConns int
	// TaskTool names a tool with task support (mcpedge's conformance set
	// has slow_compute) and TaskArgs its arguments, a JSON object (default
	// {}); without a TaskTool, task_hoard is skipped. TaskCalls is how many
	// tasks a hoarder asks for at once; default 64. MaxTasksPerClient is
	// the server's -max-tasks-per-client, the most a hoarder may get;
	// default 16 (mcpedge's default).
	TaskTool          string
	TaskArgs          string
	TaskCalls         int
	MaxTasksPerClient int
	// Auth says the server requires a token on every request: unauth runs
	// only then.
	Auth bool
	// NATSURL is a cluster node's embedded NATS client port,
	// nats://127.0.0.1:PORT: nats_local runs only with it.
	NATSURL string
}

// Chaos describes a chaos run: hostile clients beside well-behaved ones.
type Chaos struct {
	Target Target // tcp or http
	// Targets, when set, replace Target: the well-behaved load is spread
	// over them as Config.Targets says, the hostile clients go to the
	// first, and every one must answer after the run.
	Targets []Target
	// Duration is how long the hostile clients begin episodes (each
	// phase's, with PerKind); default 10 s. An episode begun goes on to
	// its decision within its own bounds (see ChaosKinds), so a run may
	// last that much longer on a slow machine.
	Duration time.Duration
	// Clients is how many clients of each hostile kind run; nil means
	// DefaultChaosClients. A kind that cannot run here (one of a single
	// transport, or one that needs ChaosExpect to name something: a task
	// tool, a token requirement, a NATS port) is listed as skipped.
	Clients map[ChaosKind]int
	// Good is the well-behaved load, run by Run for the chaos run's
	// length (Duration, Warmup and PID are set from the chaos run; Target
	// and Targets too unless Good names its own: the HTTP endpoint, say,
	// with a Bearer token, of a server whose TCP port the hostile clients
	// attack without one). A zero Good means 4 connections at 200
	// requests per second in all of echo=4,add=1, every answer verified.
	// The server is alive after the run when a fresh well-behaved session
	// can ping it.
	Good    Config
	Expect  ChaosExpect
	Timeout time.Duration // per request and set-up; default 10 s
	// PID, if set, is the server process read through /proc before and
	// after the run, and whose resident memory is sampled during it
	// (ChaosResult.RSS). Its baseline is read once well-behaved clients
	// alone have warmed the server up: for RSSWarmup before the run, or
	// with PerKind in its first phase.
	PID int
	// PerKind runs the hostile kinds one at a time, each for Duration
	// beside well-behaved clients of their own, after a phase of Duration
	// with no hostile client: ChaosResult.Phases gives the well-behaved
	// clients' latency beside each kind. Without it every kind runs at
	// once, for Duration.
	PerKind bool
	// RSSBudget, with PID, is the most resident memory the server may
	// reach during the run, in bytes (0: none): ChaosResult.RSS says
	// whether every sample stayed within it.
	RSSBudget int64
	// RSSEvery is the time between samples of the server's memory, and
	// between readings while it settles; default 100 ms.
	RSSEvery time.Duration
	// RSSSettle bounds the wait after the run for the server's memory to
	// come back within RSSTolerance of its baseline; 0 reads it once.
	RSSSettle time.Duration
	// Settle, if set, is called before the baseline reading and each
	// reading after the run: in process, runtime.GC and
	// debug.FreeOSMemory, so that what is read is what is held.
	Settle func()
	// Together, if set, is shared by runs started at once against servers
	// of one machine (NewChaosGroup): each run's hostile clients start
	// once every run's well-behaved clients are connected, and its check
	// that the server is alive waits until every run's hostile clients
	// are done. So no well-behaved client sets up a session while hostile
	// clients load the machine (its server's read or init timeout could
	// close it before its first request). With PerKind, the first phase
	// waits.
	Together *ChaosGroup
	// MinDecided, if set, is how many of its episodes each hostile kind
	// (but abandon) must have decided, as expected or not, before its
	// clients stop: past the run's end, a kind with fewer goes on
	// beginning episodes, for at most as long again as its last ones may
	// take to be decided (see RunChaos). A test that must show each
	// kind's answer sets it, so that a slow machine, or the undecided
	// episodes that other kinds' defences cause, cannot leave a kind
	// without one. A client's next episode is of the next variant
	// (unauth's token, task_hoard's revision, nats_local's credentials)
	// once its last one was decided.
	MinDecided int
}

// ChaosGroup holds runs started at once together (Chaos.Together).
type ChaosGroup struct {
	ready, done sync.WaitGroup
}

// NewChaosGroup returns a group for n runs.
func NewChaosGroup(n int) *ChaosGroup {
	g := &ChaosGroup{}
	g.ready.Add(n)
	g.done.Add(n)
	return g
}

// groupMember is one run of a ChaosGroup (nil g: none).
type groupMember struct {
	g           *ChaosGroup
	ready, done sync.Once
}

// arrive tells the group that the run's well-behaved clients are
// connected and, if done, that its hostile clients are done (or that it
// failed); each once.
func (m *groupMember) arrive(done bool) {
	if m.g == nil {
		return
	}
	m.ready.Do(m.g.ready.Done)
	if done {
		m.done.Do(m.g.done.Done)
	}
}

// wait arrives, then waits for every run of the group to.
func (m *groupMember) wait(done bool) {
	if m.g == nil {
		return
	}
	m.arrive(done)
	if done {
		m.g.done.Wait()
	} else {
		m.g.ready.Wait()
	}
}

// DefaultChaosClients is the hostile mix when Chaos.Clients is nil: two
// clients of each kind.
func DefaultChaosClients() map[ChaosKind]int {
	m := map[ChaosKind]int{}
	for _, k := range ChaosKinds() {
		m[k] = 2
	}
	return m
}

// ChaosKindResult is what one hostile kind's clients met.
type ChaosKindResult struct {
	Kind    ChaosKind `json:"kind"`
	Clients int       `json:"clients"`
	Expect  string    `json:"expect"` // the expected outcome, in words
	// Skipped says why the kind did not run (see Chaos.Clients).
	Skipped string `json:"skipped,omitempty"`
	// Episodes is the number of hostile acts (a connection each, but for
	// flood: a burst of calls).
	Episodes   int64 `json:"episodes"`
	AsExpected int64 `json:"as_expected"`
	Unexpected int64 `json:"unexpected"`
	Undecided  int64 `json:"undecided"` // ended by another defence, or outlived the run (ChaosKinds)
	// Outcomes counts what happened, by name: "parse_error", "closed",
	// "hang", "answered", "busy", "status_413", ...
	Outcomes map[string]int64 `json:"outcomes"`
	// Answers counts the JSON-RPC answers received by kind ("result",
	// "error_-32000", ...): flood and bad_utf8. HTTP flood counts them by
	// status too ("status_200_result", "status_429_error_-32000").
	Answers map[string]int64 `json:"answers,omitempty"`
	// CloseAfter is the time from the hostile act to the server's close,
	// where the server closed.
	CloseAfter *LatencyStats `json:"close_after_us,omitempty"`
	// Took is the time from the hostile act to its answer, where the kind
	// measures it: dup_listen's acknowledgement, sub_flood's and
	// task_hoard's last answer, session_flood's refusal.
	Took *LatencyStats `json:"took_us,omitempty"`
	// FirstUnexpected describes the first unexpected episode.
	FirstUnexpected string `json:"first_unexpected,omitempty"`
}

// ChaosResult is a chaos run's outcome. Good is the well-behaved clients'
// result; Hostile has one entry per kind, in ChaosKinds order.
type ChaosResult struct {
	// Target is the hostile clients' target (the well-behaved clients'
	// is the Result's, which may differ: Chaos.Good).
	Target    string            `json:"target"`
	DurationS float64           `json:"duration_s"`
	Hostile   []ChaosKindResult `json:"hostile"`
	// AllAsExpected is true when no hostile episode was unexpected.
	AllAsExpected bool `json:"all_as_expected"`
	// ServerAlive reports whether a fresh session could initialize and
	// ping after the run; AliveError says why not.
	ServerAlive bool   `json:"server_alive"`
	AliveError  string `json:"alive_error,omitempty"`
	// ServerBefore and ServerAfter are /proc readings of Chaos.PID.
	ServerBefore *ProcStats `json:"server_before,omitempty"`
	ServerAfter  *ProcStats `json:"server_after,omitempty"`
	// RSS is the server's resident memory over the run: baseline, peak
	// against Chaos.RSSBudget, and after (Chaos.PID only).
	RSS *ChaosRSS `json:"rss,omitempty"`
	// Phases, with Chaos.PerKind, are the well-behaved clients' figures
	// in each phase: first with no hostile client, then beside each kind
	// alone.
	Phases []ChaosPhase `json:"phases,omitempty"`
	// Good is the well-behaved clients' result: their errors by kind and
	// latency, apart from the hostile clients' (every phase's together).
	// Result() puts it at the top of mcpload's result.
	Good *Result `json:"-"`
}

// ChaosPhase is what the well-behaved clients met beside one hostile kind
// running alone (Kind empty: beside none).
type ChaosPhase struct {
	Kind         ChaosKind        `json:"kind"`
	Clients      int              `json:"clients"` // hostile clients
	DurationS    float64          `json:"duration_s"`
	Requests     int64            `json:"requests"`
	Errors       int64            `json:"errors"`
	ErrorsByKind map[string]int64 `json:"errors_by_kind,omitempty"`
	Latency      *LatencyStats    `json:"latency_us,omitempty"`
	// RSSPeakBytes is the server's highest resident memory in the phase.
	RSSPeakBytes int64 `json:"rss_peak_bytes,omitempty"`
}

// OK reports whether the run held: every hostile episode as expected, the
// server answering after it, the well-behaved clients without an error,
// and its memory within the budget and back near its baseline (where
// measured).
func (c *ChaosResult) OK() bool {
	ok := c.AllAsExpected && c.ServerAlive && c.Good != nil && c.Good.Errors == 0
	if c.RSS != nil {
		ok = ok && c.RSS.WithinBudget && c.RSS.Settled
	}
	return ok
}

// Kind returns the result of hostile kind k (a zero one if it is absent).
func (c *ChaosResult) Kind(k ChaosKind) ChaosKindResult {
	for _, h := range c.Hostile {
		if h.Kind == k {
			return h
		}
	}
	return ChaosKindResult{Kind: k}
}

// Result returns mcpload's result for the run: the well-behaved clients'
// figures at the top (so -max-p99 and -max-error-rate apply to them), mode
// "chaos", and the hostile clients' under "chaos".
func (c *ChaosResult) Result() *Result {
	res := *c.Good
	res.Mode = "chaos"
	res.Chaos = c
	return &res
}

func (c *ChaosResult) writeText(b *strings.Builder) {
	g := c.Good
	if c.Target != g.Target {
		fmt.Fprintf(b, "hostile    %s\n", c.Target)
	}
	fmt.Fprintf(b, "duration   %.2fs\n", c.DurationS)
	fmt.Fprintf(b, "well-behaved  %d connections: %d requests, %d ok, %d errors (%.3f%%), %.0f req/s\n",
		g.Connections, g.Requests, g.OK, g.Errors, 100*g.ErrorRate, g.Throughput)
	g.writeLatency(b)
	if len(c.Phases) > 0 {
		b.WriteString("well-behaved beside each hostile kind, one kind at a time\n")
		tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  hostile\tclients\trequests\terrors\tp50\tp99\tmax\tserver rss peak")
		for _, p := range c.Phases {
			kind := string(p.Kind)
			if kind == "" {
				kind = "(none)"
			}
			p50, p99, mx := "-", "-", "-"
			if l := p.Latency; l != nil {
				p50, p99, mx = fmtUS(l.P50), fmtUS(l.P99), fmtUS(l.Max)
			}
			rss := "-"
			if p.RSSPeakBytes > 0 {
				rss = mib(p.RSSPeakBytes)
			}
			fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", kind, p.Clients, p.Requests, p.Errors, p50, p99, mx, rss)
		}
		_ = tw.Flush()
	}
	b.WriteString("hostile\n")
	tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  kind\tclients\tepisodes\tas expected\tunexpected\tundecided\toutcomes\tclose after p50/max\ttook p50/max")
	for _, h := range c.Hostile {
		if h.Clients == 0 {
			continue
		}
		if h.Skipped != "" {
			fmt.Fprintf(tw, "  %s\t%d\t-\t-\t-\t-\tskipped: %s\t\t\n", h.Kind, h.Clients, h.Skipped)
			continue
		}
		closeAfter, took := "-", "-"
		if h.CloseAfter != nil {
			closeAfter = fmtUS(h.CloseAfter.P50) + "/" + fmtUS(h.CloseAfter.Max)
		}
		if h.Took != nil {
			took = fmtUS(h.Took.P50) + "/" + fmtUS(h.Took.Max)
		}
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", h.Kind, h.Clients, h.Episodes, h.AsExpected, h.Unexpected, h.Undecided, fmtCounts(h.Outcomes), closeAfter, took)
	}
	_ = tw.Flush()
	for _, h := range c.Hostile {
		if len(h.Answers) > 0 {
			fmt.Fprintf(b, "  %s answers: %s\n", h.Kind, fmtCounts(h.Answers))
		}
	}
	for _, h := range c.Hostile {
		if h.FirstUnexpected != "" {
			fmt.Fprintf(b, "  %s, first unexpected: %s (expected: %s)\n", h.Kind, h.FirstUnexpected, h.Expect)
		}
	}
	if c.AllAsExpected {
		b.WriteString("every hostile episode went as expected\n")
	}
	if c.ServerAlive {
		b.WriteString("server     alive after the run\n")
	} else {
		fmt.Fprintf(b, "server     NOT answering after the run: %s\n", c.AliveError)
	}
	if c.ServerBefore != nil && c.ServerAfter != nil {
		fmt.Fprintf(b, "server     rss %.1f -> %.1f MiB, threads %d -> %d, fds %d -> %d, cpu %.2fs\n",
			float64(c.ServerBefore.RSSBytes)/(1<<20), float64(c.ServerAfter.RSSBytes)/(1<<20),
			c.ServerBefore.Threads, c.ServerAfter.Threads, c.ServerBefore.FDs, c.ServerAfter.FDs,
			c.ServerAfter.CPUS-c.ServerBefore.CPUS)
	}
	if c.RSS != nil {
		c.RSS.writeText(b)
	}
}

func fmtCounts(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + strconv.FormatInt(m[k], 10)
	}
	return strings.Join(parts, " ")
}

// verdict is an episode's judgement.
type verdict uint8

const (
	asExpected verdict = iota
	unexpected
	undecided
)

// kindRec collects one hostile kind's episodes.
type kindRec struct {
	mu    sync.Mutex
	res   ChaosKindResult
	close *hdrhistogram.Histogram
	took  *hdrhistogram.Histogram
	// parent, if set, is the kind's recorder, which this one (a
	// client's, or an episode's: onConn) records into, judging each
	// outcome it would call unexpected with judge first, and counting
	// those decided in decidedHere.
	parent      *kindRec
	judge       func(outcome, detail string) (string, verdict, string)
	decidedHere atomic.Int64
}

func (k *kindRec) record(outcome string, v verdict, closeAfter time.Duration, detail string) {
	if k.parent != nil {
		if v == unexpected && k.judge != nil {
			outcome, v, detail = k.judge(outcome, detail)
		}
		if v != undecided {
			k.decidedHere.Add(1)
		}
		k.parent.record(outcome, v, closeAfter, detail)
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.res.Episodes++
	k.res.Outcomes[outcome]++
	switch v {
	case asExpected:
		k.res.AsExpected++
	case unexpected:
		k.res.Unexpected++
		if k.res.FirstUnexpected == "" {
			k.res.FirstUnexpected = outcome
			if detail != "" {
				k.res.FirstUnexpected += ": " + detail
			}
		}
	case undecided:
		k.res.Undecided++
	}
	if closeAfter > 0 {
		_ = k.close.RecordValue(min(int64(closeAfter), int64(maxLatency)))
	}
}

// judged records an outcome that needs no judge: one that already
// weighed the server's notice.
func (k *kindRec) judged(outcome string, v verdict, closeAfter time.Duration, detail string) {
	if k.parent != nil {
		if v != undecided {
			k.decidedHere.Add(1)
		}
		k.parent.judged(outcome, v, closeAfter, detail)
		return
	}
	k.record(outcome, v, closeAfter, detail)
}

// decided returns how many episodes of the kind were decided.
func (k *kindRec) decided() int64 {
	for k.parent != nil {
		k = k.parent
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.res.AsExpected + k.res.Unexpected
}

// tookTime records how long a hostile act took to be answered (ChaosKindResult.Took).
func (k *kindRec) tookTime(d time.Duration) {
	if k.parent != nil {
		k.parent.tookTime(d)
		return
	}
	k.mu.Lock()
	_ = k.took.RecordValue(min(int64(d), int64(maxLatency)))
	k.mu.Unlock()
}

func (k *kindRec) answer(kind string, n int64) {
	if k.parent != nil {
		k.parent.answer(kind, n)
		return
	}
	k.mu.Lock()
	if k.res.Answers == nil {
		k.res.Answers = map[string]int64{}
	}
	k.res.Answers[kind] += n
	k.mu.Unlock()
}

// chaosExpectText is each kind's expected outcome in words, on TCP;
// chaosExpectHTTP overrides it on HTTP.
var chaosExpectText = map[ChaosKind]string{
	ChaosGarbage:   "a -32700 parse error or the connection closed, never silence",
	ChaosBadUTF8:   "every request answered (result or error) and a ping after them; the connection stays",
	ChaosOversized: "a -32700 size error (or -32000 max-buffered) then the connection closed, or the close alone",
	ChaosHalfSent:  "the connection closed within the read timeout",
	ChaosNoRead:    "closed as a slow consumer before the answer budget is spent",
	ChaosFlood:     "some calls refused with -32000 (busy, a limit), or the connection closed",
	ChaosHog:       "every call of every hog session served (queued for its share of the pool, never refused)",
	ChaosAbandon:   "reaped eventually (not waited for: closed during the run counts as expected)",
	ChaosChurn:     "every connection accepted (and initialized, every other time)",
	ChaosDupListen: "acknowledged with each URI once, and one notification per write",
	ChaosSubFlood:  "at most -max-subscriptions subscriptions, every other one refused with -32000",
	ChaosBodyDeclare: "each connection closed within the read timeout (with or without a 4xx or 5xx), " +
		"the declared bodies never allocated",
	ChaosNoReadMany:   "each closed as a slow consumer (-max-outbound, -max-outbound-total)",
	ChaosTaskHoard:    "at most -max-tasks-per-client tasks, every other call refused with -32000",
	ChaosUnauth:       "every request refused with -31001",
	ChaosNATSLocal:    "refused (an authorization error, or no port)",
	ChaosSessionFlood: "refused with 429 or 503 and Retry-After before the flood's bound",
}

var chaosExpectHTTP = map[ChaosKind]string{
	ChaosGarbage:   "a 4xx answer, never silence",
	ChaosBadUTF8:   "every POST answered 200 (result or JSON-RPC error) and a ping after them; the session keeps working",
	ChaosOversized: "413, or the connection closed",
	ChaosHalfSent:  "the connection closed within the read timeout (with or without a 408, or 503 for -max-buffered)",
	ChaosNoRead:    "the connection closed (stream bound or write timeout) before a client write blocks past the write timeout",
	ChaosFlood:     "some POSTs refused 429 or 503 with Retry-After, every other one answered 200",
	ChaosHog:       "every POST of every hog session answered 200 with its result (queued, never refused)",
	ChaosAbandon:   "reaped eventually (not waited for)",
	ChaosChurn:     "every initialize answered (and the session deleted, every other time)",
	ChaosDupListen: "the stream acknowledges each URI once, and carries one notification per write",
	ChaosSubFlood:  "at most -max-subscriptions subscriptions, every other one refused 429 with Retry-After; a listen over the limit 429",
	ChaosNoReadMany: "each connection closed (stream bound, -max-outbound-total or write timeout) " +
		"before a client write blocks past the write timeout",
	ChaosTaskHoard: "at most -max-tasks-per-client tasks, every other call refused 429 or 503 with Retry-After",
	ChaosUnauth:    "every request answered 401",
}

func (e *ChaosExpect) defaults() {
	if e.MaxMessage <= 0 {
		e.MaxMessage = 4 << 20
	}
	if e.ReadTimeout <= 0 {
		e.ReadTimeout = 10 * time.Second
	}
	if e.Grace <= 0 {
		e.Grace = time.Second
	}
	if e.AnswerWithin <= 0 {
		e.AnswerWithin = 5 * time.Second
	}
	if e.SlowConsumerBytes <= 0 {
		e.SlowConsumerBytes = 64 << 20
	}
	if e.WriteTimeout <= 0 {
		e.WriteTimeout = 30 * time.Second
	}
	if e.FloodCalls <= 0 {
		e.FloodCalls = 2000
	}
	if e.FloodTool == "" {
		e.FloodTool = "count"
		if e.FloodArgs == "" {
			e.FloodArgs = `{"n":10,"delayMs":100}`
		}
	}
	if e.FloodArgs == "" {
		e.FloodArgs = "{}"
	}
	if e.HogSessions <= 0 {
		e.HogSessions = 10
	}
	if e.HogCalls <= 0 {
		e.HogCalls = 32
	}
	if e.MaxAbandoned <= 0 {
		e.MaxAbandoned = 200
	}
	if e.AbandonEvery <= 0 {
		e.AbandonEvery = 20 * time.Millisecond
	}
	if e.Pause <= 0 {
		e.Pause = 10 * time.Millisecond
	}
	if e.MaxSubscriptions <= 0 {
		e.MaxSubscriptions = 1024
	}
	if e.SubFloodCalls <= 0 {
		e.SubFloodCalls = 4 * e.MaxSubscriptions
	}
	if e.ListenURIs <= 0 {
		e.ListenURIs = 200000
	}
	if e.SessionFloodMax <= 0 {
		e.SessionFloodMax = 70000
	}
	if e.DeclareConns <= 0 {
		e.DeclareConns = 100
	}
	if e.DeclareBytes <= 0 {
		e.DeclareBytes = e.MaxMessage
	}
	if e.NoReadConns <= 0 {
		e.NoReadConns = 32
	}
	if e.TaskArgs == "" {
		e.TaskArgs = "{}"
	}
	if e.TaskCalls <= 0 {
		e.TaskCalls = 64
	}
	if e.MaxTasksPerClient <= 0 {
		e.MaxTasksPerClient = 16
	}
}

// chaosRun is the state of one RunChaos.
type chaosRun struct {
	cfg Chaos
	e   ChaosExpect
	// stop is when the current phase's clients stop beginning episodes
	// (late, with Chaos.MinDecided, for a kind that has fewer decided);
	// end, decideWithin later, is the most an episode begun may wait for
	// its decision (deadline caps each wait there).
	stop, late, end time.Time
	timeout         time.Duration
	group           *groupMember // Chaos.Together's
	hc              *http.Client // HTTP hostile clients: no keep-alive
	kc              *http.Client // HTTP hostile clients sending requests in series: keep-alive
	url             *url.URL     // HTTP: the target's URL
	// tag tells this run's board entries from another's on the same
	// server (TestChaosSurvival runs TCP and HTTP at once).
	tag string
}

// RunChaos runs hostile clients beside well-behaved ones for cfg.Duration
// (with PerKind, one phase of Duration per kind and one without) and
// reports both apart. It returns an error only when the run could not
// start (a bad configuration, no well-behaved connection at all). It
// returns within the phases' time, each with the time its last episodes
// take to be decided (at most the longest of the bounds they wait by,
// Timeout, AnswerWithin and the timeouts plus Grace, and a Grace more;
// with MinDecided, as long again for the episodes that a kind begins
// late), and RSSSettle plus set-up, or soon after ctx ends; with
// Together, once every run of the group is done.
func RunChaos(ctx context.Context, cfg Chaos) (*ChaosResult, error) {
	group := &groupMember{g: cfg.Together}
	defer group.arrive(true) // a run that fails releases the others
	ts, err := targetsOf(cfg.Target, cfg.Targets)
	if err != nil {
		return nil, err
	}
	cfg.Targets, cfg.Target = ts, ts[0]
	if cfg.Target.Transport != "tcp" && cfg.Target.Transport != "http" {
		return nil, fmt.Errorf("%w: chaos needs a tcp or http target", ErrConfig)
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 10 * time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.RSSEvery <= 0 {
		cfg.RSSEvery = 100 * time.Millisecond
	}
	if cfg.Clients == nil {
		cfg.Clients = DefaultChaosClients()
	}
	cfg.Expect.defaults()
	good := cfg.Good
	goodTargets := cfg.Targets
	if good.Target.Transport != "" || len(good.Targets) > 0 {
		if goodTargets, err = targetsOf(good.Target, good.Targets); err != nil {
			return nil, err
		}
	}
	good.Target, good.Targets, good.Duration, good.Warmup, good.PID, good.PIDs, good.Requests = goodTargets[0], goodTargets, cfg.Duration, 0, 0, nil, 0
	if good.Connections == 0 && good.Rate == 0 {
		good.Connections, good.Rate = 4, 200
	}
	if good.Timeout <= 0 {
		good.Timeout = cfg.Timeout
	}
	if len(good.Steps) == 0 {
		st, err := ParseMix("echo=4,add=1")
		if err != nil {
			return nil, err
		}
		good.Steps = st
	}
	for _, a := range []string{cfg.Expect.FloodArgs, cfg.Expect.TaskArgs} {
		if _, err := compile(a); err != nil {
			return nil, err
		}
	}

	cr := &chaosRun{cfg: cfg, e: cfg.Expect, timeout: cfg.Timeout, tag: cfg.Target.Transport, group: group}
	if cfg.Target.Transport == "http" {
		u, err := url.Parse(cfg.Target.Addr)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("%w: http target %q", ErrConfig, cfg.Target.Addr)
		}
		cr.url = u
	}
	tr := &http.Transport{DisableKeepAlives: true, DisableCompression: true}
	cr.hc = &http.Client{Transport: cutTransport{tr, cfg.Expect.ReadTimeout}, Timeout: cfg.Timeout}
	defer tr.CloseIdleConnections()
	ktr := &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 64}
	cr.kc = &http.Client{Transport: cutTransport{ktr, cfg.Expect.ReadTimeout}, Timeout: cfg.Timeout}
	defer ktr.CloseIdleConnections()

	out := &ChaosResult{Target: cfg.Target.String()}
	var watch *rssWatch
	// baseline reads the server's memory once well-behaved clients alone
	// have warmed it up (pools filled, code paths run).
	baseline := func() {
		if base, anon, err := readRSS(cfg.PID, cfg.Settle); err == nil {
			out.RSS.BaselineBytes, out.RSS.BaselineAnonBytes = base, anon
		}
	}
	if cfg.PID > 0 {
		if st, err := ReadProc(cfg.PID); err == nil {
			out.ServerBefore = &st
		}
		if _, err := ProcRSS(cfg.PID); err == nil {
			out.RSS = &ChaosRSS{BudgetBytes: cfg.RSSBudget}
			if !cfg.PerKind {
				warm := good
				warm.Duration = RSSWarmup
				if _, err := Run(ctx, warm); err != nil {
					return nil, fmt.Errorf("loadtest: the well-behaved clients: %w", err)
				}
				baseline()
			}
			watch = startRSSWatch(cfg.PID, cfg.RSSEvery)
		}
	}

	recs := map[ChaosKind]*kindRec{}
	var active []ChaosKind
	for _, k := range ChaosKinds() {
		n := cfg.Clients[k]
		expect := chaosExpectText[k]
		if cfg.Target.Transport == "http" && chaosExpectHTTP[k] != "" {
			expect = chaosExpectHTTP[k]
		}
		rec := &kindRec{res: ChaosKindResult{Kind: k, Clients: n, Expect: expect, Outcomes: map[string]int64{}}, close: newHist(2), took: newHist(2)}
		recs[k] = rec
		if n <= 0 {
			continue
		}
		if why := cr.skipReason(k); why != "" {
			rec.res.Skipped = why
			continue
		}
		active = append(active, k)
	}
	phases := [][]ChaosKind{active}
	if cfg.PerKind {
		phases = [][]ChaosKind{nil}
		for _, k := range active {
			phases = append(phases, []ChaosKind{k})
		}
	}

	start := time.Now()
	var goods []*Result
	for i, kinds := range phases {
		if i > 0 && ctx.Err() != nil {
			break
		}
		g, err := cr.phase(ctx, kinds, recs, good)
		if err != nil {
			if watch != nil {
				watch.close(out.RSS)
			}
			return nil, err
		}
		goods = append(goods, g)
		if cfg.PerKind {
			ph := ChaosPhase{DurationS: g.DurationS, Requests: g.Requests, Errors: g.Errors, Latency: g.Latency}
			if len(kinds) == 1 {
				ph.Kind, ph.Clients = kinds[0], cfg.Clients[kinds[0]]
			}
			for k, n := range g.ErrorsByKind {
				if n > 0 {
					if ph.ErrorsByKind == nil {
						ph.ErrorsByKind = map[string]int64{}
					}
					ph.ErrorsByKind[k] = n
				}
			}
			if watch != nil {
				ph.RSSPeakBytes = watch.endPhase()
				if i == 0 {
					baseline()
				}
			}
			out.Phases = append(out.Phases, ph)
		}
	}
	out.DurationS = time.Since(start).Seconds()
	out.Good = mergeResults(goods)
	out.AllAsExpected = true
	for _, k := range ChaosKinds() {
		rec := recs[k]
		rec.mu.Lock()
		r := rec.res
		if rec.close.TotalCount() > 0 {
			tmp := &Result{}
			tmp.setHist(rec.close)
			r.CloseAfter = tmp.Latency
		}
		if rec.took.TotalCount() > 0 {
			tmp := &Result{}
			tmp.setHist(rec.took)
			r.Took = tmp.Latency
		}
		rec.mu.Unlock()
		if r.Unexpected > 0 {
			out.AllAsExpected = false
		}
		out.Hostile = append(out.Hostile, r)
	}

	// Is the server still there? Asked once no run Together loads the
	// machine.
	cr.group.wait(true)
	actx, acancel := context.WithTimeout(ctx, cfg.Timeout)
	defer acancel()
	out.ServerAlive = true
	for _, t := range goodTargets {
		if err := alive(actx, t, cfg.Timeout, good.Bearer); err != nil {
			out.AliveError = err.Error()
			if len(goodTargets) > 1 {
				out.AliveError = t.String() + ": " + out.AliveError
			}
			out.ServerAlive = false
			break
		}
	}
	if cfg.PID > 0 {
		if st, err := ReadProc(cfg.PID); err == nil {
			out.ServerAfter = &st
		}
	}
	if watch != nil {
		watch.close(out.RSS)
		settleRSS(out.RSS, cfg.PID, cfg.Settle, cfg.RSSSettle, cfg.RSSEvery)
	}
	return out, nil
}

// phase runs the hostile clients of kinds beside a well-behaved load of
// its own for the run's Duration: the hostile clients start once the
// well-behaved ones are connected.
func (cr *chaosRun) phase(ctx context.Context, kinds []ChaosKind, recs map[ChaosKind]*kindRec, good Config) (*Result, error) {
	launched := make(chan struct{})
	var once sync.Once
	good.launched = func() { once.Do(func() { close(launched) }) }
	var goodRes *Result
	var goodErr error
	goodDone := make(chan struct{})
	go func() {
		defer close(goodDone)
		goodRes, goodErr = Run(ctx, good)
	}()
	select {
	case <-launched:
	case <-goodDone:
	}
	cr.group.wait(false)
	cr.stop = time.Now().Add(cr.cfg.Duration)
	cr.late = cr.stop
	if cr.cfg.MinDecided > 0 {
		cr.late = cr.stop.Add(cr.decideWithin())
	}
	cr.end = cr.late.Add(cr.decideWithin())
	stopCtx, cancelStop := context.WithDeadline(ctx, cr.stop)
	defer cancelStop()
	epCtx, cancel := context.WithDeadline(ctx, cr.end)
	defer cancel()
	var wg sync.WaitGroup
	if goodErr == nil {
		for _, k := range kinds {
			for i := range cr.cfg.Clients[k] {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cr.client(stopCtx, epCtx, k, i, recs[k])
				}()
			}
		}
	}
	wg.Wait()
	<-goodDone
	if goodErr != nil {
		return nil, fmt.Errorf("loadtest: the well-behaved clients: %w", goodErr)
	}
	return goodRes, nil
}

// decideWithin is how long after the run's end an episode begun before it
// may go on waiting for its decision: the longest of the waits an episode
// bounds itself by, and a Grace more, so that only an episode that
// outlives its own bounds (a hang, which it records as such) meets it.
func (cr *chaosRun) decideWithin() time.Duration {
	e := &cr.e
	return max(cr.timeout, e.AnswerWithin+oversizedSlack, e.ReadTimeout+e.Grace, e.WriteTimeout+e.Grace) + e.Grace
}

// mergeResults adds up the well-behaved clients' results of a run's
// phases: counts, errors and the latency distribution (per-step and
// per-second figures are each phase's own, and left out).
func mergeResults(parts []*Result) *Result {
	if len(parts) == 1 {
		return parts[0]
	}
	res := *parts[0]
	res.Requests, res.OK, res.Errors, res.ConnectFailures, res.DurationS = 0, 0, 0, 0, 0
	res.ErrorsByKind, res.ErrorSamples = map[string]int64{}, map[string]string{}
	res.Steps, res.Timeline, res.Targets, res.Latency, res.Percentiles, res.Load, res.Server = nil, nil, nil, nil, nil, nil, nil
	h := newHist(3)
	for _, p := range parts {
		res.Requests += p.Requests
		res.OK += p.OK
		res.Errors += p.Errors
		res.ConnectFailures += p.ConnectFailures
		res.DurationS += p.DurationS
		for k, n := range p.ErrorsByKind {
			res.ErrorsByKind[k] += n
		}
		for k, v := range p.ErrorSamples {
			if _, ok := res.ErrorSamples[k]; !ok {
				res.ErrorSamples[k] = v
			}
		}
		if p.hist != nil {
			h.Merge(p.hist)
		}
	}
	res.ErrorRate, res.Throughput = 0, 0
	if res.Requests > 0 {
		res.ErrorRate = float64(res.Errors) / float64(res.Requests)
	}
	if res.DurationS > 0 {
		res.Throughput = float64(res.OK) / res.DurationS
	}
	res.setHist(h)
	return &res
}

// alive opens a fresh session and pings it.
func alive(ctx context.Context, t Target, timeout time.Duration, bearer []string) error {
	opts := &sessionOpts{timeout: timeout, maxFrame: 16 << 20, bearer: bearerHeaders(bearer)}
	d, err := newDialer([]Target{t}, 1, 1, opts, io.Discard)
	if err != nil {
		return err
	}
	defer d.close()
	s, err := d.dial(ctx, 1)
	if err != nil {
		return err
	}
	defer s.Close()
	_, err = s.Call(ctx, "ping", nil, nil)
	return err
}

// client runs one hostile client's episodes until stop ends (or, with
// Chaos.MinDecided, later: more), each with ctx, which ends decideWithin
// after the last may begin. Episode n is the client's nth variant: n
// advances once an episode is decided.
func (cr *chaosRun) client(stop, ctx context.Context, k ChaosKind, i int, rec *kindRec) {
	if k == ChaosAbandon {
		cr.abandon(stop, rec)
		return
	}
	episode := chaosEpisodes[k]
	mine := &kindRec{parent: rec} // counts this client's decided episodes
	for n := 1; cr.more(stop, rec); {
		before := mine.decidedHere.Load()
		switch {
		case episode != nil:
			episode(cr, ctx, i, n, mine)
		case cr.cfg.Target.Transport == "http":
			cr.httpEpisode(ctx, k, n, mine)
		default:
			cr.tcpEpisode(ctx, k, i, n, mine)
		}
		if mine.decidedHere.Load() > before {
			n++
		}
		sleepCtx(ctx, cr.e.Pause)
	}
}

// more reports whether a client of the kind rec records begins another
// episode: until the run's end, and after it, with Chaos.MinDecided,
// while the kind has fewer decided and it is not late.
func (cr *chaosRun) more(stop context.Context, rec *kindRec) bool {
	if stop.Err() == nil {
		return true
	}
	return cr.cfg.MinDecided > 0 && rec.decided() < int64(cr.cfg.MinDecided) && time.Now().Before(cr.late)
}

// chaosEpisodes are the episodes of the kinds that pick their transport's
// variant themselves: episode n of client i.
var chaosEpisodes = map[ChaosKind]func(cr *chaosRun, ctx context.Context, i, n int, rec *kindRec){
	ChaosHog:          (*chaosRun).hog,
	ChaosDupListen:    (*chaosRun).dupListen,
	ChaosSubFlood:     (*chaosRun).subFlood,
	ChaosSessionFlood: (*chaosRun).sessionFlood,
	ChaosBodyDeclare:  (*chaosRun).bodyDeclare,
	ChaosNoReadMany:   (*chaosRun).noReadMany,
	ChaosTaskHoard:    (*chaosRun).taskHoard,
	ChaosUnauth:       (*chaosRun).unauth,
	ChaosNATSLocal:    (*chaosRun).natsLocal,
}

// rawConn is a TCP connection a hostile client drives by hand.
type rawConn struct {
	c      net.Conn
	r      *bufio.Reader
	dialed time.Time // when the client began to dial it
	// readTimeout is the server's (ChaosExpect.ReadTimeout): a notice
	// of a close for it sooner after dialed is early.
	readTimeout time.Duration
	// cut is the notice the server sent before it closed the connection
	// over a limit of its own, once readMsg has read it.
	cut atomic.Pointer[serverCut]
}

// serverCut is a server's cut of a hostile client's connection or request
// over a limit of its own, as the server told it: on TCP, the notice it
// sends before the close, a -32000 error with a null id whose data names
// the limit ({"limit":"read-timeout"}, "max-buffered",
// "max-outbound-total", ...), which readMsg returns as an error; on HTTP,
// a request answered 408 (cutTransport).
type serverCut struct {
	limit string
	at    time.Time // when it was read
	// early, when set, says why the server's limit cannot explain the
	// cut: a close for the read timeout sooner than it after the client
	// dialled.
	early string
}

// cutOutcome judges an episode that c interrupted: undecided when c is a
// defence working as designed, which another kind, or a slow client
// machine, set off (a shared byte budget cuts the biggest holders,
// whoever filled it; a message that the client's machine sent too late
// meets the read timeout); unexpected when c came too early for its
// limit, or names one that no episode of this kind can meet.
func cutOutcome(c *serverCut) (string, verdict, string) {
	switch {
	case c.early != "":
		return strings.ReplaceAll(c.limit, "-", "_") + "_early", unexpected, c.early
	case c.limit == "max-buffered" || c.limit == "max-outbound-total" || c.limit == "read-timeout" || c.limit == cutStreamClosed:
		return "cut_" + c.limit, undecided, ""
	}
	return "cut_" + c.limit, unexpected, c.Error()
}

// cutStreamClosed names the cut of an HTTP event stream the server closed
// before the request's answer (httpCallWith): -max-outbound-total cuts
// the biggest holders of unwritten bytes, whoever filled it, and over
// HTTP says so to nobody.
const cutStreamClosed = "stream-closed"

func (c *serverCut) Error() string {
	return "closed by the server: -32000 {\"limit\":\"" + c.limit + "\"}"
}

// cutLimit returns the limit a server's closing notice named, or "".
func cutLimit(err error) string {
	var c *serverCut
	if errors.As(err, &c) {
		return c.limit
	}
	return ""
}

func (cr *chaosRun) dialRaw(ctx context.Context) (*rawConn, error) {
	return cr.dialRawWith(ctx, &net.Dialer{})
}

func (cr *chaosRun) dialRawWith(ctx context.Context, d *net.Dialer) (*rawConn, error) {
	dctx, cancel := context.WithTimeout(ctx, cr.timeout)
	defer cancel()
	dialed := time.Now()
	c, err := d.DialContext(dctx, "tcp", cr.cfg.Target.Addr)
	if err != nil {
		return nil, err
	}
	return &rawConn{c: c, r: bufio.NewReaderSize(c, 64<<10), dialed: dialed, readTimeout: cr.e.ReadTimeout}, nil
}

// deafDialer dials the connections of clients that never read with a
// receive buffer of a few KiB, as such a client would: what the server
// sends them then stays in its own queues (-max-outbound), not in the
// kernel's buffers (up to tens of MiB on loopback, tcp_rmem).
var deafDialer = &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10)
	}); err != nil {
		return err
	}
	return serr
}}

// deadline is now+d, but not past the run's end.
func (cr *chaosRun) deadline(d time.Duration) time.Time {
	t := time.Now().Add(d)
	if t.After(cr.end) {
		return cr.end
	}
	return t
}

// ended reports whether the run's end cut the wait short: the end of the
// time an episode begun before the run's end has to be decided.
func (cr *chaosRun) ended() bool { return !time.Now().Before(cr.end.Add(-50 * time.Millisecond)) }

// stopped reports whether the run's end, after which no episode begins,
// cut the wait short (abandon, which holds its sessions until then).
func (cr *chaosRun) stopped() bool { return !time.Now().Before(cr.stop.Add(-50 * time.Millisecond)) }

// writeFailed records a hostile write that failed: unexpected, but for a
// write whose deadline was the run's end (an episode begun just before
// it), which is undecided.
func (cr *chaosRun) writeFailed(rec *kindRec, err error) {
	if isTimeout(err) && cr.ended() {
		rec.record("run_ended", undecided, 0, "")
		return
	}
	rec.record("write_failed", unexpected, 0, err.Error())
}

// rawWriteFailed is writeFailed on a connection whose bytes no other
// goroutine reads: after a write that failed on the server's close, what
// the server sent before it is read first, for the notice of the limit
// it closed the connection over (cutVerdict).
func (cr *chaosRun) rawWriteFailed(rc *rawConn, rec *kindRec, err error) {
	if isClose(err) {
		rc.findNotice(cr.deadline(cr.e.AnswerWithin))
	}
	cr.writeFailed(rec, err)
}

// findNotice reads what is left to read of rc until the close (or the
// deadline), keeping the server's notice if it sent one.
func (rc *rawConn) findNotice(deadline time.Time) {
	var msg codec.Message
	for rc.cut.Load() == nil {
		if _, err := rc.readMsg(deadline, &msg); err != nil && cutLimit(err) == "" {
			return
		}
	}
}

func (rc *rawConn) write(b []byte, deadline time.Time) error {
	_ = rc.c.SetWriteDeadline(deadline)
	_, err := rc.c.Write(b)
	return err
}

// readMsg reads the next line and decodes it. The notice of a server
// about to close the connection over a limit is returned as a *serverCut
// error (and kept in rc.cut); the close follows it.
func (rc *rawConn) readMsg(deadline time.Time, msg *codec.Message) ([]byte, error) {
	_ = rc.c.SetReadDeadline(deadline)
	line, err := rc.r.ReadBytes('\n')
	if err != nil {
		return line, err
	}
	line = bytes.TrimRight(line, "\r\n")
	if derr := codec.Decode(line, msg); derr != nil {
		return line, &Error{Kind: KindProtocol, Err: derr, Msg: "answer " + clip(line)}
	}
	if msg.Kind == codec.KindError && (len(msg.ID) == 0 || string(msg.ID) == "null") && errorCode(msg) == codec.CodeServerBusy {
		if l := limitName(msg.Error); l != "busy" {
			c := &serverCut{limit: l, at: time.Now()}
			// The server's clock for a message began at its accept, or
			// later: never before the dial.
			if took := c.at.Sub(rc.dialed); l == "read-timeout" && took < rc.readTimeout {
				c.early = fmt.Sprintf("closed for the read timeout %s after the client dialled, before the read timeout of %s",
					took.Round(time.Millisecond), rc.readTimeout)
			}
			rc.cut.CompareAndSwap(nil, c)
			return line, c
		}
	}
	return line, nil
}

// onConn returns rec as the episode on connection rc records into it: an
// outcome that it would call unexpected, on a connection the server cut
// (the notice read), is judged by cutOutcome instead: the episode was
// interrupted. What the server did wrong before the cut (a violation) is
// recorded with judged, which the cut does not excuse.
func (cr *chaosRun) onConn(rec *kindRec, rc *rawConn) *kindRec {
	return &kindRec{parent: rec, judge: func(outcome, detail string) (string, verdict, string) {
		if c := rc.cut.Load(); c != nil {
			return cutOutcome(c)
		}
		return outcome, unexpected, detail
	}}
}

// initialize runs the handshake by hand.
func (rc *rawConn) initialize(deadline time.Time) error {
	req := codec.AppendRequest(nil, []byte("0"), "initialize", []byte(initParams))
	if err := rc.write(append(req, '\n'), deadline); err != nil {
		return err
	}
	var msg codec.Message
	for {
		if _, err := rc.readMsg(deadline, &msg); err != nil {
			return err
		}
		if msg.Kind == codec.KindResponse && string(msg.ID) == "0" {
			break
		}
		if msg.Kind == codec.KindError {
			return rpcError(msg.Error)
		}
	}
	return rc.write(append(codec.AppendNotification(nil, "notifications/initialized", nil), '\n'), deadline)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// isClose reports an error that means the peer closed the connection.
func isClose(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.ErrUnexpectedEOF)
}

// errorCode returns the code of a JSON-RPC error answer.
func errorCode(msg *codec.Message) int {
	if e := rpcError(msg.Error); e.Kind == KindRPCError {
		return e.Code
	}
	return 0
}

// answerName names a JSON-RPC answer: "result" or "error_CODE".
func answerName(msg *codec.Message) string {
	if msg.Kind == codec.KindError {
		return "error_" + strconv.Itoa(errorCode(msg))
	}
	return "result"
}

// garbageLine returns n random bytes that are not JSON, then a newline.
func garbageLine(rng *rand64, n int) []byte {
	b := make([]byte, n+1)
	b[0] = '#'
	for i := 1; i < n; i++ {
		c := byte(rng.next())
		if c == '\n' || c == '\r' {
			c = '?'
		}
		b[i] = c
	}
	b[n] = '\n'
	return b
}

func (cr *chaosRun) tcpEpisode(ctx context.Context, k ChaosKind, client, n int, rec *kindRec) {
	d := &net.Dialer{}
	if k == ChaosNoRead {
		d = deafDialer
	}
	rc, err := cr.dialRawWith(ctx, d)
	if err != nil {
		if ctx.Err() != nil || cr.ended() {
			return
		}
		if k == ChaosChurn {
			rec.record("refused", unexpected, 0, err.Error())
		} else {
			rec.record("connect_failed", unexpected, 0, err.Error())
		}
		return
	}
	defer rc.c.Close()
	rec = cr.onConn(rec, rc)
	needInit := k != ChaosGarbage && (k != ChaosChurn || n%2 == 0)
	if needInit {
		if err := rc.initialize(cr.deadline(cr.timeout)); err != nil {
			if cr.ended() {
				return
			}
			rec.record("initialize_failed", unexpected, 0, err.Error())
			return
		}
	}
	switch k {
	case ChaosGarbage:
		cr.garbage(rc, client, n, rec)
	case ChaosBadUTF8:
		cr.badUTF8(rc, rec)
	case ChaosOversized:
		cr.oversized(rc, rec)
	case ChaosHalfSent:
		cr.halfSent(rc, rec)
	case ChaosNoRead:
		cr.noRead(rc, rec)
	case ChaosFlood:
		cr.flood(rc, rec)
	case ChaosChurn:
		if needInit {
			rec.record("initialized", asExpected, 0, "")
		} else {
			rec.record("connected", asExpected, 0, "")
		}
	}
}

func (cr *chaosRun) garbage(rc *rawConn, client, n int, rec *kindRec) {
	rng := rand64{s: uint64(time.Now().UnixNano()) ^ uint64(client*7919+n)}
	sent := time.Now()
	if err := rc.write(garbageLine(&rng, 64+int(rng.next()%4096)), cr.deadline(cr.e.AnswerWithin)); err != nil {
		if isClose(err) {
			rec.record("closed", asExpected, time.Since(sent), "")
		} else {
			cr.rawWriteFailed(rc, rec, err)
		}
		return
	}
	var msg codec.Message
	_, err := rc.readMsg(cr.deadline(cr.e.AnswerWithin), &msg)
	switch {
	case err == nil && msg.Kind == codec.KindError && errorCode(&msg) == codec.CodeParseError:
		rec.record("parse_error", asExpected, 0, "")
	case err == nil:
		rec.judged("answered_"+answerName(&msg), unexpected, 0, "")
	case isClose(err):
		rec.record("closed", asExpected, time.Since(sent), "")
	case isTimeout(err) && cr.ended():
		rec.record("run_ended", undecided, 0, "")
	case isTimeout(err):
		rec.record("hang", unexpected, 0, "no answer nor close within "+cr.e.AnswerWithin.String())
	default:
		rec.record("bad_answer", unexpected, 0, err.Error())
	}
}

// badUTF8Requests are valid JSON-RPC whose strings hold invalid UTF-8.
var badUTF8Requests = [][]byte{
	[]byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"prompts/get\",\"params\":{\"name\":\"greet\",\"arguments\":{\"name\":\"A\xff\xfeB\"}}}\n"),
	[]byte("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"text\":\"\xc3\x28 \xed\xa0\x80 \xf8\x88\x80\x80\x80\"}}}\n"),
	[]byte("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"\xff\xff\",\"arguments\":{}}}\n"),
	[]byte("{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\"}\n"),
}

func (cr *chaosRun) badUTF8(rc *rawConn, rec *kindRec) {
	var all []byte
	for _, r := range badUTF8Requests {
		all = append(all, r...)
	}
	if err := rc.write(all, cr.deadline(cr.e.AnswerWithin)); err != nil {
		cr.rawWriteFailed(rc, rec, err)
		return
	}
	want := len(badUTF8Requests)
	got := map[string]bool{}
	var msg codec.Message
	for len(got) < want {
		line, err := rc.readMsg(cr.deadline(cr.e.AnswerWithin), &msg)
		switch {
		case err == nil:
			if msg.Kind == codec.KindResponse || msg.Kind == codec.KindError {
				got[string(msg.ID)] = true
				rec.answer(answerName(&msg), 1)
			}
			continue
		case isClose(err):
			rec.record("closed", unexpected, 0, fmt.Sprintf("after %d of %d answers", len(got), want))
		case isTimeout(err) && cr.ended():
			rec.record("run_ended", undecided, 0, "")
		case isTimeout(err):
			rec.record("hang", unexpected, 0, fmt.Sprintf("%d of %d answers within %s", len(got), want, cr.e.AnswerWithin))
		default:
			rec.record("undecodable_answer", unexpected, 0, clip(line))
		}
		return
	}
	rec.record("answered", asExpected, 0, "")
}

func (cr *chaosRun) oversized(rc *rawConn, rec *kindRec) {
	size := cr.e.MaxMessage + 64<<10
	prefix := []byte(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"text":"`)
	msg := make([]byte, 0, size+16)
	msg = append(msg, prefix...)
	for len(msg) < size {
		msg = append(msg, 'x')
	}
	msg = append(msg, "\"}}}\n"...)
	// Read while writing: the server may answer and close mid-way.
	type answer struct {
		sizeErr bool
		// budgetErr: -32000 {"limit":"max-buffered"}, the message cut by
		// the budget of partial messages before it reached the limit.
		budgetErr bool
		// cut: the notice of another limit the server closed it over
		// (cutVerdict judges it).
		cut   string
		other string
		err   error
		at    time.Time
	}
	ans := make(chan answer, 1)
	sent := time.Now()
	go func() {
		var m codec.Message
		var a answer
		for {
			_, err := rc.readMsg(cr.deadline(cr.e.AnswerWithin+oversizedSlack), &m)
			switch l := cutLimit(err); {
			case l == "max-buffered":
				a.budgetErr = true
				continue // the close follows
			case l != "":
				a.cut = l
				continue
			case err != nil:
				a.err, a.at = err, time.Now()
				ans <- a
				return
			}
			switch {
			case m.Kind == codec.KindError && errorCode(&m) == codec.CodeParseError:
				a.sizeErr = true
			case a.other == "":
				a.other = answerName(&m)
			}
		}
	}()
	werr := rc.write(msg, cr.deadline(cr.e.AnswerWithin+oversizedSlack))
	var a answer
	select {
	case a = <-ans:
	case <-time.After(time.Until(cr.deadline(cr.e.AnswerWithin))):
		_ = rc.c.SetReadDeadline(time.Now()) // end the reader
		a = <-ans
		if cr.ended() {
			rec.record("run_ended", undecided, 0, "")
		} else {
			rec.record("hang", unexpected, 0, "no close within "+cr.e.AnswerWithin.String()+" of the message")
		}
		return
	}
	closed := isClose(a.err) || (werr != nil && isClose(werr))
	switch {
	case a.other != "":
		rec.judged("answered_"+a.other, unexpected, 0, "the oversized message was served")
	case a.cut != "" && !a.sizeErr:
		// Closed over another limit before the size limit was reached:
		// cutVerdict (onConn) judges it.
		rec.record("closed_"+a.cut, unexpected, a.at.Sub(sent), "before the size limit")
	case a.sizeErr && closed:
		rec.record("size_error+closed", asExpected, a.at.Sub(sent), "")
	case a.budgetErr && closed:
		rec.record("budget_error+closed", asExpected, a.at.Sub(sent), "")
	case closed:
		rec.record("closed", asExpected, a.at.Sub(sent), "")
	case isTimeout(a.err) && cr.ended():
		rec.record("run_ended", undecided, 0, "")
	case a.sizeErr:
		rec.judged("size_error_kept_open", unexpected, 0, "")
	default:
		rec.record("failed", unexpected, 0, fmt.Sprint(a.err, werr))
	}
}

// oversizedSlack is how much longer than AnswerWithin the oversized
// client lets its message take to send and its close to come.
const oversizedSlack = 5 * time.Second

func (cr *chaosRun) halfSent(rc *rawConn, rec *kindRec) {
	part := []byte(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":"`)
	// Big, but well under the size limit: what is tested is the wait.
	part = append(part, bytes.Repeat([]byte("h"), min(64<<10, cr.e.MaxMessage/2))...)
	began := time.Now()
	if err := rc.write(part, cr.deadline(cr.e.AnswerWithin)); err != nil {
		cr.rawWriteFailed(rc, rec, err)
		return
	}
	sent := time.Now()
	grace := cr.e.ReadTimeout + cr.e.Grace
	var msg codec.Message
	for {
		_, err := rc.readMsg(cr.deadline(grace-time.Since(sent)), &msg)
		if err == nil || cutLimit(err) != "" {
			continue // a notification, say, or the notice before the close
		}
		took := time.Since(sent)
		c := rc.cut.Load()
		switch {
		case isClose(err) && c != nil && c.limit == "read-timeout" && c.at.Sub(began) < cr.e.ReadTimeout:
			// The server's clock began when it read the first of the
			// message, which the client had begun to send.
			rec.judged("closed_early", unexpected, took, fmt.Sprintf("closed for the read timeout %s after the half message began, before the read timeout of %s",
				c.at.Sub(began).Round(time.Millisecond), cr.e.ReadTimeout))
		case isClose(err) && took <= grace:
			rec.record("closed", asExpected, took, "")
		case isClose(err):
			rec.judged("closed_late", unexpected, took, "")
		case isTimeout(err) && cr.ended() && took < grace:
			rec.record("open_at_end", undecided, 0, "")
		case isTimeout(err):
			rec.judged("not_closed", unexpected, 0, "still open "+took.Round(time.Millisecond).String()+" after the half message")
		default:
			rec.record("failed", unexpected, 0, err.Error())
		}
		return
	}
}

func (cr *chaosRun) noRead(rc *rawConn, rec *kindRec) {
	text := bytes.Repeat([]byte("r"), 16<<10)
	var req []byte
	started := time.Now()
	due := 0
	for id := 1; ; id++ {
		req = req[:0]
		req = append(req, `{"jsonrpc":"2.0","id":`...)
		req = strconv.AppendInt(req, int64(id), 10)
		req = append(req, `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"`...)
		req = append(req, text...)
		req = append(req, "\"}}}\n"...)
		err := rc.write(req, cr.deadline(cr.e.AnswerWithin))
		switch {
		case err == nil:
			due += len(text) + 100
			if due > cr.e.SlowConsumerBytes {
				rec.judged("not_closed", unexpected, 0, fmt.Sprintf("%d bytes of answers due, unread, and the connection is open", due))
				return
			}
			continue
		case isClose(err):
			rec.record("closed", asExpected, time.Since(started), "")
		case isTimeout(err) && cr.ended():
			rec.record("run_ended", undecided, 0, "")
		case isTimeout(err):
			rec.judged("stalled", unexpected, 0, "a write blocked "+cr.e.AnswerWithin.String()+": the server stopped reading but kept the connection")
		default:
			rec.record("failed", unexpected, 0, err.Error())
		}
		return
	}
}

// pipelined is what a pipeline of calls got: its answers by name
// (answerName), how many, and the error that ended the reading early.
type pipelined struct {
	answers map[string]int64
	err     error
	n       int
}

// pipeline writes calls calls of FloodTool (FloodArgs, a progress token
// each) on rc at once and reads their answers, each allowed the timeout
// after the last (the tool's time); it returns them and the write's
// error (flood, hog).
func (cr *chaosRun) pipeline(rc *rawConn, calls int) (pipelined, error) {
	args, _ := compile(cr.e.FloodArgs)
	var v vars
	rng := rand64{s: uint64(time.Now().UnixNano())}
	var all, argsBuf []byte
	for id := 1; id <= calls; id++ {
		v.fill(&rng, 0, uint64(id))
		argsBuf = render(argsBuf[:0], args, &v)
		params := fmt.Appendf(nil, `{"name":%q,"arguments":%s,"_meta":{"progressToken":%d}}`, cr.e.FloodTool, argsBuf, id)
		all = codec.AppendRequest(all, strconv.AppendInt(nil, int64(id), 10), "tools/call", params)
		all = append(all, '\n')
	}
	done := make(chan pipelined, 1)
	go func() {
		t := pipelined{answers: map[string]int64{}}
		var msg codec.Message
		for t.n < calls {
			_, err := rc.readMsg(cr.deadline(cr.timeout), &msg)
			if err != nil {
				t.err = err
				break
			}
			if msg.Kind == codec.KindResponse || msg.Kind == codec.KindError {
				t.n++
				t.answers[answerName(&msg)]++
			}
		}
		done <- t
	}()
	werr := rc.write(all, cr.deadline(cr.timeout))
	return <-done, werr
}

func (cr *chaosRun) flood(rc *rawConn, rec *kindRec) {
	sent := time.Now()
	t, werr := cr.pipeline(rc, cr.e.FloodCalls)
	for k, n := range t.answers {
		rec.answer(k, n)
	}
	busy := t.answers["error_"+strconv.Itoa(codec.CodeServerBusy)]
	closed := isClose(t.err) || (werr != nil && isClose(werr))
	switch {
	case busy > 0 && closed:
		rec.record("busy+closed", asExpected, time.Since(sent), "")
	case busy > 0:
		rec.record("busy", asExpected, 0, "")
	case closed:
		rec.record("closed", asExpected, time.Since(sent), "")
	case t.err != nil && isTimeout(t.err) && cr.ended():
		rec.record("run_ended", undecided, 0, "")
	case t.err != nil:
		rec.record("failed", unexpected, 0, t.err.Error())
	default:
		rec.judged("all_served", unexpected, 0, fmt.Sprintf("%d pipelined calls, none refused: %s", t.n, fmtCounts(t.answers)))
	}
}

// abandon opens sessions and leaves them, holding TCP connections to the
// run's end.
func (cr *chaosRun) abandon(ctx context.Context, rec *kindRec) {
	var held sync.WaitGroup
	var open atomic.Int64
	var mu sync.Mutex
	var conns []net.Conn
	defer func() {
		// Let go of the ones still held (their readers count them).
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		held.Wait()
	}()
	tick := time.NewTicker(cr.e.AbandonEvery)
	defer tick.Stop()
	for ctx.Err() == nil {
		if open.Load() < int64(cr.e.MaxAbandoned) {
			if cr.cfg.Target.Transport == "http" {
				cr.httpAbandon(ctx, rec)
			} else {
				rc, err := cr.dialRaw(ctx)
				switch {
				case err != nil && ctx.Err() == nil && !cr.stopped():
					rec.record("connect_failed", unexpected, 0, err.Error())
				case err != nil:
				default:
					if err := rc.initialize(cr.deadline(cr.timeout)); err != nil {
						rc.c.Close()
						if !cr.stopped() {
							cr.onConn(rec, rc).record("initialize_failed", unexpected, 0, err.Error())
						}
						break
					}
					open.Add(1)
					held.Add(1)
					mu.Lock()
					conns = append(conns, rc.c)
					mu.Unlock()
					at := time.Now()
					go func() {
						defer held.Done()
						defer open.Add(-1)
						defer rc.c.Close()
						_ = rc.c.SetReadDeadline(cr.stop)
						_, err := io.Copy(io.Discard, rc.r)
						if err == nil || isClose(err) {
							rec.record("reaped", asExpected, time.Since(at), "")
						} else {
							rec.record("held_to_end", undecided, 0, "")
						}
					}()
				}
			}
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
}

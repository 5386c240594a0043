package loadtest

import (
	"bufio"
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/auth"
	"github.com/mcpedge/mcpedge/cluster"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/internal/testserver"
	"github.com/mcpedge/mcpedge/mcp"
	mcpsession "github.com/mcpedge/mcpedge/session"
	mcphttp "github.com/mcpedge/mcpedge/transport/http"
	"github.com/mcpedge/mcpedge/transport/netlimit"
	"github.com/mcpedge/mcpedge/transport/tcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// processState is what the chaos test watches return to its baseline.
type processState struct {
	goroutines int
	fds        int
	rss        int64
}

// freeMemory collects garbage and gives the free memory back to the
// system, so that RSS reads what the process holds.
func freeMemory() {
	runtime.GC()
	debug.FreeOSMemory()
}

func readState(t *testing.T) processState {
	t.Helper()
	freeMemory()
	fds, err := ProcFDs(os.Getpid())
	require.NoError(t, err)
	rss, err := ProcRSS(os.Getpid())
	require.NoError(t, err)
	return processState{goroutines: heldGoroutines(t), fds: fds, rss: rss}
}

// pooledIdle are the top frames of goroutines that fasthttp keeps idle in
// its pools and ends on its own timer (10 s idle, checked as often): the
// server's idle workers, and an HTTP client's cleaner of idle
// connections. They hold no client's state.
var pooledIdle = []string{"fasthttp.(*workerPool).workerFunc+", "fasthttp.(*HostClient).connsCleaner"}

// heldGoroutines counts the goroutines but those idle in fasthttp's
// pools, from the goroutine profile: the stacks whose top frame (first
// after the runtime's) is one of pooledIdle.
func heldGoroutines(t *testing.T) int {
	t.Helper()
	var b strings.Builder
	require.NoError(t, pprof.Lookup("goroutine").WriteTo(&b, 1))
	total, idle, count, top := 0, 0, 0, true
	for line := range strings.Lines(b.String()) {
		switch {
		case strings.Contains(line, " @ 0x"):
			n, err := strconv.Atoi(line[:strings.IndexByte(line, ' ')])
			require.NoError(t, err, line)
			total += n
			count, top = n, true
		case top && strings.HasPrefix(line, "#\t"):
			if !strings.Contains(line, "\truntime.") && !strings.Contains(line, "\tsync.runtime_") && !strings.Contains(line, "\ttime.Sleep") {
				top = false
				for _, p := range pooledIdle {
					if strings.Contains(line, p) {
						idle += count
					}
				}
			}
		}
	}
	return total - idle
}

// settle reads the process's state until done says it has settled, or
// 15 s have passed, and returns the last reading.
func settle(t *testing.T, done func(processState) bool) processState {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		st := readState(t)
		if done(st) || time.Now().After(deadline) {
			return st
		}
		time.Sleep(200 * time.Millisecond) // polling /proc: nothing to wait on
	}
}

// The chaos test's limits: small, so that the hostile clients meet them
// within seconds.
const (
	survivalMaxMessage = 256 << 10
	// survivalBuffered and survivalOutbound are the byte budgets TCP and
	// HTTP share (mcpedge's -max-buffered and -max-outbound-total); the
	// outbound one is no more than one connection's bound
	// (survivalMaxOutbound, -max-outbound), so that never-reading clients
	// together meet the total before each meets its own.
	survivalBuffered    = 16 << 20
	survivalOutbound    = 1 << 20
	survivalMaxOutbound = 1 << 20
	// survivalRSSBudget is how far above its baseline the test process
	// (the servers and every client: they share it) may grow during the
	// run. What the servers may hold at once here: the byte budgets above
	// (17 MiB); the replay stores of sessions with streams (64 KiB each,
	// survivalEventStore, a few hundred sessions: 20 MiB); connections'
	// buffers and goroutines (about 300 at once, some 40 KiB each:
	// 12 MiB); and what the clients hold (messages of up to 320 KiB being
	// built and read: 10 MiB). About 60 MiB live, and the garbage
	// collector lets the heap grow to twice what is live (GOGC=100).
	survivalRSSBudget  = 128 << 20
	survivalEventStore = 64 << 10
	survivalToken      = "chaos-good-token"
	// survivalPatience is how long a client waits for what must come
	// before it calls it missing: an answer, a connection, a close after
	// a timeout (beyond the timeout).
	survivalPatience = 15 * time.Second
)

// slowTask registers "slow", a tool with task support that takes args.ms
// milliseconds (or until cancelled), for task_hoard.
func slowTask(t *testing.T, srv *engine.Server) {
	t.Helper()
	require.NoError(t, srv.Registry().AddToolWith(&mcp.Tool{Name: "slow", InputSchema: []byte(`{"type":"object"}`)},
		func(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
			in := struct {
				Ms int `json:"ms"`
			}{Ms: 1000}
			if len(req.Params.Arguments) > 0 {
				if err := codec.Unmarshal(req.Params.Arguments, &in); err != nil {
					return mcp.ErrorResult(err.Error()), nil
				}
			}
			timer := time.NewTimer(time.Duration(in.Ms) * time.Millisecond)
			defer timer.Stop()
			select {
			case <-timer.C:
				return mcp.TextResult("slept"), nil
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		}, handlers.ToolOptions{TaskSupport: mcp.TaskOptional}))
}

// listenPorts returns the loopback TCP ports process pid listens on: the
// LISTEN sockets of /proc/PID/net/tcp whose inodes are among its
// descriptors (the table lists every process's sockets).
func listenPorts(t *testing.T, pid int) map[int]bool {
	t.Helper()
	inodes := map[string]bool{}
	dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range ents {
		if l, err := os.Readlink(dir + e.Name()); err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/net/tcp")
	require.NoError(t, err)
	defer f.Close()
	ports := map[int]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) < 10 || fl[3] != "0A" || !inodes[fl[9]] {
			continue
		}
		if _, port, ok := strings.Cut(fl[1], ":"); ok {
			if p, err := strconv.ParseUint(port, 16, 16); err == nil {
				ports[int(p)] = true
			}
		}
	}
	return ports
}

// natsPort starts a cluster node (on defaults but for a loopback route
// port) and returns the URL of its embedded NATS client port, found as
// the one port the node opened beside its route port.
func natsPort(t *testing.T) string {
	t.Helper()
	before := listenPorts(t, os.Getpid())
	n, err := cluster.Start(context.Background(), cluster.Options{Node: "chaos", Embed: "127.0.0.1:0"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close() })
	route := 0
	if a := n.RouteAddr(); a != nil {
		_, p, _ := strings.Cut(a.String(), "127.0.0.1:")
		route, _ = strconv.Atoi(p)
	}
	var found []int
	for p := range listenPorts(t, os.Getpid()) {
		if !before[p] && p != route {
			found = append(found, p)
		}
	}
	if len(found) == 0 {
		return "nats://127.0.0.1:1" // no client port at all: refused, as expected
	}
	require.Len(t, found, 1, "ports the node opened besides its route port %d", route)
	return "nats://127.0.0.1:" + strconv.Itoa(found[0])
}

// closeReasons counts the sessions and connections of the chaos test's
// server that ended, by reason: an engine.Observer and ConnObserver.
type closeReasons struct {
	mu       sync.Mutex
	sessions map[string]int
	conns    map[string]int
}

func (*closeReasons) RequestDone(*mcpsession.Session, string, int, time.Duration) {}
func (*closeReasons) Refused(*mcpsession.Session, string)                         {}
func (*closeReasons) ConnOpened(string)                                           {}
func (*closeReasons) ConnRefused(string, error)                                   {}
func (*closeReasons) Bytes(string, int, int)                                      {}
func (*closeReasons) SlowConsumer(string)                                         {}

func (c *closeReasons) SessionClosed(sess *mcpsession.Session, cause error) {
	c.count(&c.sessions, sess.Transport+" "+codec.ReasonOf(cause).String())
}

func (c *closeReasons) ConnClosed(transport string, reason error) {
	c.count(&c.conns, transport+" "+codec.ReasonOf(reason).String())
}

func (c *closeReasons) count(m *map[string]int, key string) {
	c.mu.Lock()
	if *m == nil {
		*m = map[string]int{}
	}
	(*m)[key]++
	c.mu.Unlock()
}

// get returns the sessions and connections counted under key.
func (c *closeReasons) get(key string) (sessions, conns int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions[key], c.conns[key]
}

// TestChaosSurvival is the edge-survival proof in one run: in-process
// servers on TCP and Streamable HTTP with small limits (one of them
// requiring a token, beside a cluster node's NATS port), every kind of
// hostile client on all of them at once, and well-behaved clients beside
// them. The server must survive, the well-behaved clients see no error,
// every hostile client meets its defined answer; the process's memory
// stays within survivalRSSBudget of its baseline during the run, and its
// goroutines, descriptors and memory (within 10%) come back to their
// baseline once the hostile clients have left.
func TestChaosSurvival(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos run: about 20 s")
	}
	inb, outb := netlimit.NewBudget(survivalBuffered), netlimit.NewBudget(survivalOutbound)
	closes := &closeReasons{}
	srv := testserver.Engine(t, "demo", engine.Options{MaxMessage: survivalMaxMessage, Workers: 128, MaxInflight: 16,
		MaxSubscriptions: 16, MaxTasksPerClient: 4, TaskWorkers: 8, TaskIdle: time.Second, Observer: closes})
	slowTask(t, srv)
	tcpAddr, _ := testserver.TCP(t, srv, tcp.Options{Loops: 2, MaxOutbound: survivalMaxOutbound, ReadTimeout: time.Second, IdleTimeout: 10 * time.Second,
		Buffered: inb, Outbound: outb})
	// HTTP: the read timeout is the TCP one, which half_sent expects
	// (ChaosExpect.ReadTimeout); the write timeout is short so that no_read,
	// whose count streams stay far below the default 1 MiB stream bound, is
	// ended by it within the run (ChaosExpect.WriteTimeout). 2,048 sessions
	// give one address a share of 128: session_flood's bound.
	base, _ := testserver.HTTP(t, srv, mcphttp.Options{InitTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second,
		MaxSessions: 2048, EventStoreBytes: survivalEventStore, Buffered: inb, Outbound: outb})

	// The same behind a token, for unauth and body_declare without one.
	v, err := auth.New(auth.Config{Audience: "http://127.0.0.1/mcp", Tokens: []string{survivalToken}})
	require.NoError(t, err)
	t.Cleanup(v.Close)
	asrv := testserver.Engine(t, "demo", engine.Options{MaxMessage: survivalMaxMessage, Workers: 32, Authorize: v})
	atcpAddr, _ := testserver.TCP(t, asrv, tcp.Options{Loops: 1, ReadTimeout: time.Second, Buffered: inb, Outbound: outb})
	abase, _ := testserver.HTTP(t, asrv, mcphttp.Options{Auth: v, ReadTimeout: time.Second, WriteTimeout: time.Second,
		EventStoreBytes: survivalEventStore, Buffered: inb, Outbound: outb})
	natsURL := natsPort(t)

	target := func(spec string) Target {
		tg, err := ParseTarget(spec)
		require.NoError(t, err)
		return tg
	}
	tcpTarget, httpTarget := target("tcp://"+tcpAddr), target(base+"/mcp")
	atcpTarget, ahttpTarget := target("tcp://"+atcpAddr), target(abase+"/mcp")

	// The server's timeouts are 1 s. What must come (an answer, a close
	// after a timeout, a connection) is waited for survivalPatience before
	// the episode is called a hang, so that a loaded machine (CI runs
	// packages in parallel; this one is shared, and its CPU was seen
	// stalling the whole process for seconds) delays a verdict rather than
	// failing it: none of these waits is for the bound itself, so they
	// cost nothing unless the server hangs. A hostile client that its own
	// slowness got closed for the read timeout, or whose session was
	// reaped before its first request, is undecided when that came no
	// sooner than the timeout allows (ChaosExpect.ReadTimeout,
	// InitTimeout).
	expect := ChaosExpect{
		MaxMessage:   survivalMaxMessage,
		ReadTimeout:  time.Second,
		WriteTimeout: time.Second,
		InitTimeout:  time.Second,
		Grace:        survivalPatience,
		AnswerWithin: survivalPatience,
		Pause:        50 * time.Millisecond,
		FloodCalls:   200,
		FloodArgs:    `{"n":5,"delayMs":50}`,
		// hog: 2 sessions of 8 calls on TCP and on HTTP at once: beside
		// every other kind and this test's tight budgets (-max-buffered,
		// outbound, -queue-per-client), a pool filled by hogs has the
		// others' pipelined calls cut by those budgets rather than show
		// the scheduler. TestChaosHog fills a pool with hogs alone.
		HogSessions:  2,
		HogCalls:     8,
		MaxAbandoned: 50,

		MaxSubscriptions:  16,
		SubFloodCalls:     24,
		DeclareConns:      32,
		NoReadConns:       4,
		TaskTool:          "slow",
		TaskArgs:          `{"ms":1000}`,
		TaskCalls:         16,
		MaxTasksPerClient: 4,
		NATSURL:           natsURL,
	}
	authExpect := expect
	authExpect.Auth, authExpect.NATSURL, authExpect.Pause = true, "", 50*time.Millisecond
	// The well-behaved clients allow survivalPatience an answer too: the
	// machine may be shared and busy (its latency is reported, not
	// judged), and a timeout would count as their error.
	good := Config{Connections: 4, Rate: 200, Timeout: survivalPatience}
	authGood := Config{Target: ahttpTarget, Connections: 2, Rate: 50, Bearer: []string{survivalToken}, Timeout: survivalPatience}
	// Every kind, two clients each, on the open server's TCP and HTTP
	// ports; unauth on the token-requiring one's, and body_declare there
	// too (bodies of clients without a token).
	runs := func(d time.Duration, clients int) []Chaos {
		all := map[ChaosKind]int{}
		for _, k := range ChaosKinds() {
			if k != ChaosUnauth {
				all[k] = clients
			}
		}
		// Each kind goes on past the run's end until two of its episodes
		// are decided (both of unauth's variants, say): see the
		// assertions on each kind's answer below.
		return []Chaos{
			{Target: tcpTarget, Duration: d, Timeout: survivalPatience, Clients: all, Expect: expect, Good: good, MinDecided: 2},
			{Target: httpTarget, Duration: d, Timeout: survivalPatience, Clients: all, Expect: expect, Good: good, MinDecided: 2},
			{Target: atcpTarget, Duration: d, Timeout: survivalPatience, Clients: map[ChaosKind]int{ChaosUnauth: clients}, Expect: authExpect,
				Good: authGood, MinDecided: 2},
			{Target: ahttpTarget, Duration: d, Timeout: survivalPatience, Clients: map[ChaosKind]int{ChaosUnauth: clients, ChaosBodyDeclare: clients},
				Expect: authExpect, Good: authGood, MinDecided: 2},
		}
	}
	// The runs start their hostile clients together, once every run's
	// well-behaved clients are connected, and check that their servers
	// are alive once every run's hostile clients are done
	// (Chaos.Together): well-behaved clients set up their sessions on a
	// machine no hostile client loads, so that the 1 s read timeout (TCP)
	// and init timeout (HTTP) cannot close them before their first
	// request. Once set up, nothing a hostile client does can end theirs
	// (see the assertions below).
	runAll := func(runs []Chaos) []*ChaosResult {
		results := make([]*ChaosResult, len(runs))
		errs := make([]error, len(runs))
		var wg sync.WaitGroup
		together := NewChaosGroup(len(runs))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for i := range runs {
			runs[i].Together = together
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i], errs[i] = RunChaos(ctx, runs[i])
			}()
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		return results
	}

	// Warm up: well-behaved clients alone (the HTTP client's background
	// goroutines start on first use), then a short run of every kind, so
	// that the pools, the clients' code paths and the runtime's structures
	// (goroutine records are reused, not freed) are as the measured run
	// leaves them; the baseline is taken once the warm-up has let go of
	// what it held.
	for _, target := range []Target{tcpTarget, httpTarget} {
		warm, err := Run(context.Background(), Config{Target: target, Connections: 2, Duration: 300 * time.Millisecond})
		require.NoError(t, err)
		require.Zero(t, warm.Errors)
	}
	idle := readState(t)
	warmStart := time.Now()
	runAll(runs(time.Second, 1))
	before := settle(t, func(st processState) bool {
		return st.goroutines <= idle.goroutines+4 && st.fds <= idle.fds+4
	})
	t.Logf("warm-up: %.1fs; idle before it %d goroutines, %d fds, %d KiB RSS", time.Since(warmStart).Seconds(), idle.goroutines, idle.fds, idle.rss>>10)

	watch := startRSSWatch(os.Getpid(), 50*time.Millisecond)
	measured := runs(7*time.Second, 1)
	results := runAll(measured)
	rss := ChaosRSS{BaselineBytes: before.rss, BudgetBytes: before.rss + survivalRSSBudget}
	watch.close(&rss)

	for i, res := range results {
		name := measured[i].Target.String()
		var b strings.Builder
		res.writeText(&b)
		t.Logf("%s:\n%s", name, b.String())

		assert.True(t, res.ServerAlive, "%s: %s", name, res.AliveError)
		require.NotNil(t, res.Good)
		assert.Positive(t, res.Good.OK, name)
		assert.Zero(t, res.Good.Errors, "%s: well-behaved clients' errors: %v %v", name, res.Good.ErrorsByKind, res.Good.ErrorSamples)
		for _, h := range res.Hostile {
			if h.Clients == 0 || h.Skipped != "" {
				continue
			}
			assert.Positive(t, h.Episodes, "%s %s", name, h.Kind)
			assert.Zero(t, h.Unexpected, "%s %s: %s", name, h.Kind, h.FirstUnexpected)
			if h.Kind != ChaosAbandon { // abandoned sessions outlive the run
				assert.Positive(t, h.AsExpected, "%s %s met its defined answer (%v)", name, h.Kind, h.Outcomes)
			}
		}
	}
	// Every kind ran somewhere, and met what it is for.
	ran := map[ChaosKind]bool{}
	for _, res := range results {
		for _, h := range res.Hostile {
			if h.Clients > 0 && h.Skipped == "" {
				ran[h.Kind] = true
			}
		}
	}
	for _, k := range ChaosKinds() {
		assert.True(t, ran[k], "%s ran", k)
	}
	tcpRes, httpRes, atcpRes := results[0], results[1], results[2]
	for _, res := range []*ChaosResult{tcpRes, httpRes} {
		assert.Positive(t, res.Kind(ChaosDupListen).Outcomes["deduplicated"], "one acknowledgement and one notification per write")
		assert.Positive(t, res.Kind(ChaosSubFlood).Outcomes["refused_past_limit"])
		assert.Positive(t, res.Kind(ChaosTaskHoard).Outcomes["refused_past_limit"])
		assert.Positive(t, res.Kind(ChaosNATSLocal).AsExpected)
	}
	assert.Positive(t, tcpRes.Kind(ChaosSubFlood).Answers["refused_subscriptions"], "-32000 {\"limit\":\"subscriptions\"}")
	assert.Positive(t, httpRes.Kind(ChaosSessionFlood).Outcomes["refused_429"], "the per-address share")
	assert.Positive(t, atcpRes.Kind(ChaosUnauth).Outcomes["all_refused_no_token"])
	assert.Positive(t, atcpRes.Kind(ChaosUnauth).Outcomes["all_refused_wrong_token"])
	require.Zero(t, srv.Panics(), "panics recovered")
	require.Zero(t, asrv.Panics(), "panics recovered")
	assert.Positive(t, outb.Cuts(), "the never-reading clients met the total outbound budget")

	// Why no defence of the servers can end a well-behaved client's
	// session, which the hostile clients' episodes may meet (and record
	// as undecided) when they set it off themselves or the machine is
	// slow: the well-behaved clients set up their sessions before any
	// hostile client starts (Together). Then, on TCP, they send whole
	// small messages (no read timeout: none is ever partial), read every
	// answer (the never-reading clients hold far more of the outbound
	// budget and are cut first; none of theirs is partial for the buffer
	// budget), and are never idle (50 requests a second each). On HTTP,
	// their sessions are in use (no init or idle timeout), their bodies
	// (under 8 KiB, read with the headers) and JSON answers (under
	// 64 KiB, not streamed) count in no byte budget, and no session is
	// evicted: every client here has one address, whose share of the
	// table (a sixteenth) keeps the table from filling.
	closes.mu.Lock()
	t.Logf("sessions ended, by reason: %v; connections closed: %v", closes.sessions, closes.conns)
	closes.mu.Unlock()
	evicted, _ := closes.get("http " + codec.ReasonEvicted.String())
	assert.Zero(t, evicted, "HTTP sessions evicted: the clients of one address hold no more than its share, a sixteenth of the table")

	t.Logf("rss: baseline %d KiB, peak %d KiB at %.1fs (%d samples), budget %d KiB", rss.BaselineBytes>>10, rss.PeakBytes>>10, rss.PeakAtS, rss.Samples, rss.BudgetBytes>>10)
	assert.True(t, raceEnabled || rss.WithinBudget, "RSS peaked at %d KiB, over the budget of %d KiB (baseline %d KiB + %d KiB)",
		rss.PeakBytes>>10, rss.BudgetBytes>>10, rss.BaselineBytes>>10, survivalRSSBudget>>10)

	// Everything the hostile clients held is given back: their connections
	// close, HTTP sessions they abandoned are reaped after InitTimeout,
	// their tasks end.
	rssBound := settledBound(before.rss)
	after := settle(t, func(st processState) bool {
		return st.goroutines <= before.goroutines+4 && st.fds <= before.fds+4 && (raceEnabled || st.rss <= rssBound)
	})
	t.Logf("baseline: %d goroutines, %d fds, %d KiB RSS; after: %d goroutines, %d fds, %d KiB RSS",
		before.goroutines, before.fds, before.rss>>10, after.goroutines, after.fds, after.rss>>10)
	if os.Getenv("CHAOS_DUMP") != "" {
		_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
		if f, err := os.Create(os.Getenv("CHAOS_DUMP")); err == nil {
			_ = pprof.Lookup("heap").WriteTo(f, 0)
			f.Close()
		}
	}
	assert.LessOrEqual(t, after.goroutines, before.goroutines+4, "goroutines back to baseline")
	assert.LessOrEqual(t, after.fds, before.fds+4, "descriptors back to baseline")
	if !raceEnabled { // the race detector's shadow memory is not given back
		assert.LessOrEqual(t, after.rss, rssBound, "RSS back within 10%% of its baseline")
	}
}

package loadtest

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/internal/testserver"
	mcphttp "github.com/mcpedge/mcpedge/transport/http"
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

func readState(t *testing.T) processState {
	t.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	fds, err := ProcFDs(os.Getpid())
	require.NoError(t, err)
	rss, err := ProcRSS(os.Getpid())
	require.NoError(t, err)
	return processState{goroutines: runtime.NumGoroutine(), fds: fds, rss: rss}
}

// TestChaosSurvival is the edge-survival proof in one run: an in-process
// server on TCP and Streamable HTTP with small limits, every kind of
// hostile client on both at once, and well-behaved clients beside them.
// The server must survive, the well-behaved clients see no error, every
// hostile client meets its defined answer, and the process's goroutines,
// descriptors and memory come back to their baseline once the hostile
// clients have left.
func TestChaosSurvival(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos run: about 20 s")
	}
	const maxMessage = 64 << 10
	srv := testserver.Engine(t, "demo", engine.Options{MaxMessage: maxMessage, Workers: 64, MaxInflight: 16})
	tcpAddr, _ := testserver.TCP(t, srv, tcp.Options{Loops: 2, MaxOutbound: 256 << 10, ReadTimeout: time.Second, IdleTimeout: 10 * time.Second})
	// HTTP: the read timeout is the TCP one, which half_sent expects
	// (ChaosExpect.ReadTimeout); the write timeout is short so that no_read,
	// whose count streams stay far below the default 1 MiB stream bound, is
	// ended by it within the run (ChaosExpect.WriteTimeout).
	base, _ := testserver.HTTP(t, srv, mcphttp.Options{InitTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
	tcpTarget, err := ParseTarget("tcp://" + tcpAddr)
	require.NoError(t, err)
	httpTarget, err := ParseTarget(base + "/mcp")
	require.NoError(t, err)

	// Warm the pools and the clients' code paths (the HTTP client's
	// background goroutines start on first use), then take the baseline.
	for _, target := range []Target{tcpTarget, httpTarget} {
		warm, err := Run(context.Background(), Config{Target: target, Connections: 2, Duration: 300 * time.Millisecond})
		require.NoError(t, err)
		require.Zero(t, warm.Errors)
	}
	before := readState(t)

	// The server's timeouts are 1 s; the clients allow 3 s (and 4 s for an
	// immediate answer) before they call an episode unexpected, so that a
	// loaded machine (CI runs packages in parallel) does not make a slow
	// close look like none.
	expect := ChaosExpect{
		MaxMessage:   maxMessage,
		ReadTimeout:  3 * time.Second,
		WriteTimeout: 3 * time.Second,
		AnswerWithin: 4 * time.Second,
		FloodCalls:   200,
		FloodArgs:    `{"n":5,"delayMs":50}`,
		MaxAbandoned: 50,
	}
	good := Config{Connections: 4, Rate: 200}
	runs := []Chaos{
		{Target: tcpTarget, Duration: 5 * time.Second, Timeout: 5 * time.Second, Clients: DefaultChaosClients(), Expect: expect, Good: good},
		{Target: httpTarget, Duration: 5 * time.Second, Timeout: 5 * time.Second, Clients: DefaultChaosClients(), Expect: expect, Good: good},
	}
	results := make([]*ChaosResult, len(runs))
	errs := make([]error, len(runs))
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = RunChaos(ctx, runs[i])
		}()
	}
	wg.Wait()
	for i, res := range results {
		require.NoError(t, errs[i])
		var b strings.Builder
		res.writeText(&b)
		t.Logf("%s:\n%s", runs[i].Target.Transport, b.String())

		assert.True(t, res.ServerAlive, res.AliveError)
		require.NotNil(t, res.Good)
		assert.Positive(t, res.Good.OK)
		assert.Zero(t, res.Good.Errors, "well-behaved clients' errors: %v", res.Good.ErrorsByKind)
		for _, h := range res.Hostile {
			if h.Skipped != "" {
				continue
			}
			assert.Positive(t, h.Episodes, "%s", h.Kind)
			assert.Zero(t, h.Unexpected, "%s: %s", h.Kind, h.FirstUnexpected)
			if h.Kind != ChaosAbandon { // abandoned sessions outlive the run
				assert.Positive(t, h.AsExpected, "%s met its defined answer (%v)", h.Kind, h.Outcomes)
			}
		}
	}
	require.Zero(t, srv.Panics(), "panics recovered")

	// Everything the hostile clients held is given back: their connections
	// close, HTTP sessions they abandoned are reaped after InitTimeout.
	var after processState
	deadline := time.Now().Add(15 * time.Second)
	for {
		after = readState(t)
		settled := after.goroutines <= before.goroutines+4 && after.fds <= before.fds+4 && (raceEnabled || after.rss <= before.rss+64<<20)
		if settled || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond) // polling /proc: nothing to wait on
	}
	t.Logf("baseline: %d goroutines, %d fds, %d KiB RSS; after: %d goroutines, %d fds, %d KiB RSS",
		before.goroutines, before.fds, before.rss>>10, after.goroutines, after.fds, after.rss>>10)
	if os.Getenv("CHAOS_DUMP") != "" {
		_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
	}
	assert.LessOrEqual(t, after.goroutines, before.goroutines+4, "goroutines back to baseline")
	assert.LessOrEqual(t, after.fds, before.fds+4, "descriptors back to baseline")
	if !raceEnabled { // the race detector's shadow memory is not given back
		assert.LessOrEqual(t, after.rss, before.rss+64<<20, "RSS back within 64 MiB of baseline")
	}
}

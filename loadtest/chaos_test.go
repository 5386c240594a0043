package loadtest

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/internal/testserver"
	mcphttp "github.com/mcpedge/mcpedge/transport/http"
	"github.com/mcpedge/mcpedge/transport/tcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chaosServer serves the demo set with small limits, so that the hostile
// clients meet them quickly: a read timeout of a second (half_sent); on
// HTTP, a write timeout of a second (no_read) and a 4 KiB stream bound,
// which the count stream of no_read (about 15 KiB of progress events)
// passes once its write blocks: it is cut off as a slow consumer at once
// (TestChaosSurvival keeps the default 1 MiB bound, so there the write
// timeout ends it).
func chaosServer(t *testing.T) (tcpSpec, httpSpec string) {
	t.Helper()
	// Enough workers for the floods to meet their session's in-flight
	// limit (429 over HTTP) before the pool, which every transport shares,
	// is full (503).
	srv := testserver.Engine(t, "demo", engine.Options{MaxMessage: 64 << 10, Workers: 256})
	tcpAddr, _ := testserver.TCP(t, srv, tcp.Options{Loops: 2, MaxOutbound: 256 << 10, ReadTimeout: time.Second})
	base, _ := testserver.HTTP(t, srv, mcphttp.Options{ReadTimeout: time.Second, WriteTimeout: time.Second, MaxStreamBuffer: 4 << 10})
	return "tcp://" + tcpAddr, base + "/mcp"
}

// chaosExpect is what TestChaosTCP and TestChaosHTTP expect of
// chaosServer. Its timeouts are 1 s; what must come (an answer, a
// connection, a close after a timeout) is waited for 10 s before an
// episode is called a hang, so that a loaded machine delays a verdict
// rather than failing it (none of these waits is for the bound itself).
var chaosExpect = ChaosExpect{MaxMessage: 64 << 10, ReadTimeout: time.Second, WriteTimeout: time.Second, Grace: 10 * time.Second,
	AnswerWithin: 10 * time.Second, FloodCalls: 200, FloodArgs: `{"n":5,"delayMs":50}`, MaxAbandoned: 20}

// firstKinds are the kinds TestChaosTCP and TestChaosHTTP run, one client
// each (TestChaosSurvival runs every kind).
var firstKinds = []ChaosKind{ChaosGarbage, ChaosBadUTF8, ChaosOversized, ChaosHalfSent, ChaosNoRead, ChaosFlood, ChaosAbandon, ChaosChurn}

func oneEach(kinds []ChaosKind) map[ChaosKind]int {
	m := map[ChaosKind]int{}
	for _, k := range kinds {
		m[k] = 1
	}
	return m
}

func TestChaosTCP(t *testing.T) {
	tcpSpec, _ := chaosServer(t)
	target, err := ParseTarget(tcpSpec)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := RunChaos(ctx, Chaos{
		Target: target, Duration: 2 * time.Second, Timeout: 10 * time.Second, PID: os.Getpid(),
		Clients: oneEach(firstKinds),
		Expect:  chaosExpect,
		Good:    Config{Connections: 2, Rate: 100},
		// Each kind's answer is asserted: it goes on past the run's end
		// until one of its episodes is decided.
		MinDecided: 1,
	})
	require.NoError(t, err)
	var b strings.Builder
	res.writeText(&b)
	t.Log("\n" + b.String())
	assert.True(t, res.ServerAlive, res.AliveError)
	require.NotNil(t, res.Good)
	assert.Positive(t, res.Good.OK)
	for _, k := range firstKinds {
		h := res.Kind(k)
		assert.Positive(t, h.Episodes, k)
		assert.Zero(t, h.Unexpected, "%s: %s", k, h.FirstUnexpected)
	}
	assert.Positive(t, res.Kind(ChaosGarbage).AsExpected)
	assert.Positive(t, res.Kind(ChaosOversized).AsExpected)
	assert.Positive(t, res.Kind(ChaosNoRead).AsExpected)
	assert.Positive(t, res.Kind(ChaosFlood).Answers["error_-32000"])
	require.NotNil(t, res.ServerBefore)
	require.NotNil(t, res.ServerAfter)
	full := res.Result()
	assert.Equal(t, "chaos", full.Mode)
	assert.Equal(t, res.Good.OK, full.OK)
}

func TestChaosHTTP(t *testing.T) {
	_, httpSpec := chaosServer(t)
	target, err := ParseTarget(httpSpec)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := RunChaos(ctx, Chaos{
		Target: target, Duration: 3 * time.Second, Timeout: 10 * time.Second, PID: os.Getpid(),
		Clients: oneEach(firstKinds),
		Expect:  chaosExpect,
		Good:    Config{Connections: 2, Rate: 100},
		// Each kind's answer is asserted: it goes on past the run's end
		// until one of its episodes is decided.
		MinDecided: 1,
	})
	require.NoError(t, err)
	var b strings.Builder
	res.writeText(&b)
	t.Log("\n" + b.String())
	assert.True(t, res.ServerAlive, res.AliveError)
	assert.Positive(t, res.Good.OK)
	assert.NotContains(t, b.String(), "skipped", "every kind has an HTTP variant")
	for _, k := range firstKinds {
		h := res.Kind(k)
		assert.Empty(t, h.Skipped, k)
		assert.Positive(t, h.Episodes, k)
		assert.Zero(t, h.Unexpected, "%s: %s", k, h.FirstUnexpected)
		if k != ChaosAbandon { // abandoned sessions outlive the run
			assert.Positive(t, h.AsExpected, "%s met its defined answer (%v)", k, h.Outcomes)
		}
	}
	assert.Positive(t, res.Kind(ChaosOversized).Outcomes["status_413"]+res.Kind(ChaosOversized).Outcomes["closed"])

	// bad_utf8: every request answered, the ping after them a result.
	utf := res.Kind(ChaosBadUTF8)
	assert.Positive(t, utf.Outcomes["answered"])
	assert.Positive(t, utf.Answers["result"])
	// half_sent: closed by the read timeout, with or without a 408.
	half := res.Kind(ChaosHalfSent)
	assert.Positive(t, half.Outcomes["closed"]+half.Outcomes["status_408+closed"], half.Outcomes)
	require.NotNil(t, half.CloseAfter)
	assert.LessOrEqual(t, half.CloseAfter.Max, float64((chaosExpect.ReadTimeout+chaosExpect.Grace)/time.Microsecond), "within the read timeout and the grace, in µs")
	// no_read: the connection closed, the stream cut off.
	assert.Positive(t, res.Kind(ChaosNoRead).Outcomes["closed"])
	// flood: refusals with 429 (the session's in-flight limit), the rest
	// answered 200.
	flood := res.Kind(ChaosFlood)
	assert.Positive(t, flood.Outcomes["busy"])
	assert.Positive(t, flood.Answers["status_429_error_-32000"], flood.Answers)
	assert.Positive(t, flood.Answers["status_200_result"], flood.Answers)
	require.NotNil(t, res.ServerBefore)
	require.NotNil(t, res.ServerAfter)
}

func TestParseChaosClients(t *testing.T) {
	m, err := ParseChaosClients("garbage=3, flood ,all=0,churn=2")
	require.NoError(t, err)
	assert.Equal(t, 0, m[ChaosGarbage], "all=0 comes later and wins")
	assert.Equal(t, 2, m[ChaosChurn])
	m, err = ParseChaosClients("flood,no_read=4")
	require.NoError(t, err)
	assert.Equal(t, map[ChaosKind]int{ChaosFlood: 1, ChaosNoRead: 4}, m)
	for _, bad := range []string{"nope", "flood=x", "flood=-1"} {
		_, err := ParseChaosClients(bad)
		assert.ErrorIs(t, err, ErrConfig, bad)
	}
	_, err = RunChaos(context.Background(), Chaos{Target: Target{Transport: "stdio", Command: []string{"x"}}})
	assert.ErrorIs(t, err, ErrConfig)
}

// poolCall is a well-behaved step that needs a worker of the pool: count
// to 1 (echo and add run on the event loop, beside the pool).
const poolCall = `[{"name":"count","method":"tools/call","params":{"name":"count","arguments":{"n":1}},"expect":"counted to 1","match":"contains"}]`

// TestChaosHog: ten sessions each pipelining slow calls hold twenty times
// as many calls as the pool has workers (8); on TCP and HTTP, every hog
// call is served (queued for its share of the pool, never refused), and
// the well-behaved clients beside them, whose calls need a worker too,
// meet no error: issue 23's starvation, where such sessions got a witness
// refused 4 calls in 5.
func TestChaosHog(t *testing.T) {
	steps, err := ParseScenario([]byte(poolCall))
	require.NoError(t, err)
	srv := testserver.Engine(t, "demo", engine.Options{Workers: 8})
	tcpAddr, _ := testserver.TCP(t, srv, tcp.Options{Loops: 2})
	base, _ := testserver.HTTP(t, srv, mcphttp.Options{})
	for _, spec := range []string{"tcp://" + tcpAddr, base + "/mcp"} {
		target, err := ParseTarget(spec)
		require.NoError(t, err)
		t.Run(target.Transport, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			// 10 sessions of 16 calls of 100 ms: 2 s of the whole pool.
			expect := ChaosExpect{HogSessions: 10, HogCalls: 16, FloodArgs: `{"n":5,"delayMs":20}`}
			res, err := RunChaos(ctx, Chaos{
				Target: target, Duration: time.Second, Timeout: 20 * time.Second,
				Clients: map[ChaosKind]int{ChaosHog: 1}, Expect: expect,
				Good:       Config{Connections: 2, Rate: 50, Timeout: 20 * time.Second, Steps: steps},
				MinDecided: 10, // one episode's sessions
			})
			require.NoError(t, err)
			var b strings.Builder
			res.writeText(&b)
			t.Log("\n" + b.String())
			assert.True(t, res.ServerAlive, res.AliveError)
			require.NotNil(t, res.Good)
			assert.Positive(t, res.Good.OK)
			assert.Zero(t, res.Good.Errors, "well-behaved clients' errors beside the hogs: %v %v", res.Good.ErrorsByKind, res.Good.ErrorSamples)
			hog := res.Kind(ChaosHog)
			assert.Zero(t, hog.Unexpected, hog.FirstUnexpected)
			assert.GreaterOrEqual(t, hog.Outcomes["all_served"], int64(expect.HogSessions), hog.Outcomes)
			result := "result"
			if target.Transport == "http" {
				result = "status_200_result"
			}
			assert.GreaterOrEqual(t, hog.Answers[result], int64(expect.HogSessions*expect.HogCalls), hog.Answers)
		})
	}
}

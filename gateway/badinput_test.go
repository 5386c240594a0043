package gateway_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/client"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/gateway"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeFront is a gateway fronting the scripted fake upstream
// (fake_test.go), with a short timeout.
func fakeFront(t *testing.T) *front {
	u := selfUpstream("x", "fake")
	u.Timeout = time.Second
	return startFront(t, gateway.Options{Upstreams: []gateway.Upstream{u}, NotifyRate: 500, MaxMessage: 1 << 20})
}

func requireCode(t *testing.T, err error, code int, contains string) {
	t.Helper()
	var ce *codec.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, code, ce.Code, ce.Message)
	assert.Contains(t, ce.Message, contains)
}

func cancelledCount(t *testing.T, c *client.Client) int {
	t.Helper()
	r, err := c.CallTool(testCtx(t), "cancelled", map[string]any{})
	require.NoError(t, err)
	n, err := strconv.Atoi(text(t, r))
	require.NoError(t, err)
	return n
}

// TestBadUpstream: each way an upstream can misbehave gets its defined
// error, fails only the call it concerns, and leaves the gateway serving.
func TestBadUpstream(t *testing.T) {
	f := fakeFront(t)
	var elicited atomic.Int64
	var logs atomic.Int64
	c := f.dial(t, client.Options{
		OnElicitation: func(context.Context, *client.ServerRequest, *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			elicited.Add(1)
			return &mcp.ElicitResult{Action: "accept", Content: codec.RawJSON(`{"name":"ada"}`)}, nil
		},
		OnLog: func(*mcp.LoggingMessageParams) { logs.Add(1) },
	})
	ctx := testCtx(t)
	require.NoError(t, c.SetLogLevel(ctx, "debug"))
	echo := func(t *testing.T) {
		t.Helper()
		r, err := c.CallTool(ctx, "echo", map[string]any{"a": 1})
		require.NoError(t, err)
		assert.Equal(t, `{"a":1}`, text(t, r))
	}
	status := func() gateway.Status { return f.gw.Status()[0] }

	t.Run("never answers", func(t *testing.T) {
		before := cancelledCount(t, c)
		_, err := c.CallTool(ctx, "hang", map[string]any{})
		requireCode(t, err, codec.CodeRequestTimeout, `upstream "x" did not answer within 1s`)
		assert.Equal(t, before+1, cancelledCount(t, c), "the upstream was told to stop")
		assert.NotZero(t, status().Timeouts)
		echo(t)
	})
	t.Run("garbage", func(t *testing.T) {
		_, err := c.CallTool(ctx, "garbage", map[string]any{})
		requireCode(t, err, codec.CodeInternalError, `upstream "x" answered an invalid message`)
		assert.GreaterOrEqual(t, status().Garbage, uint64(2), "the line that is not JSON and the invalid answer")
		echo(t)
	})
	t.Run("an id never sent", func(t *testing.T) {
		r, err := c.CallTool(ctx, "wrongid", map[string]any{})
		require.NoError(t, err)
		assert.Equal(t, "right", text(t, r))
		assert.NotZero(t, status().UnknownIDs)
	})
	t.Run("progress", func(t *testing.T) {
		var got []string
		r, err := c.CallTool(ctx, "progress", map[string]any{}, client.WithProgress(func(p, total float64, msg string) {
			got = append(got, strconv.FormatFloat(p, 'f', -1, 64)+"/"+strconv.FormatFloat(total, 'f', -1, 64)+" "+msg)
		}))
		require.NoError(t, err)
		assert.Equal(t, []string{"1/2 half"}, got)
		_, err = strconv.Atoi(text(t, r)[len("token "):])
		assert.NoError(t, err, "the upstream sees a token of the gateway's: %s", text(t, r))
	})
	t.Run("linked log", func(t *testing.T) {
		before := logs.Load()
		_, err := c.CallTool(ctx, "log", map[string]any{})
		require.NoError(t, err)
		assert.Eventually(t, func() bool { return logs.Load() == before+1 }, 5*time.Second, time.Millisecond)
	})
	t.Run("elicitation", func(t *testing.T) {
		r, err := c.CallTool(ctx, "elicit", map[string]any{})
		require.NoError(t, err)
		assert.JSONEq(t, `{"action":"accept","content":{"name":"ada"}}`, text(t, r))
		assert.Equal(t, int64(1), elicited.Load())
	})
	t.Run("elicitation for a request not in flight", func(t *testing.T) {
		r, err := c.CallTool(ctx, "elicit-gone", map[string]any{})
		require.NoError(t, err)
		assert.Contains(t, text(t, r), "has ended, or its session is gone", "refused to the upstream, not misrouted")
		assert.Equal(t, int64(1), elicited.Load(), "no client was asked")
	})
	t.Run("notification flood", func(t *testing.T) {
		r, err := c.CallTool(ctx, "flood", map[string]any{})
		require.NoError(t, err)
		assert.Equal(t, "flooded", text(t, r))
		assert.NotZero(t, status().Dropped, "over -upstream-notify-rate")
		assert.NotZero(t, logs.Load(), "those under it were relayed")
		echo(t)
	})
	t.Run("oversized message", func(t *testing.T) {
		_, err := c.CallTool(ctx, "big", map[string]any{})
		requireCode(t, err, codec.CodeServerBusy, `upstream "x" unavailable`)
		echo(t) // a new child
		assert.NotZero(t, status().Restarts)
	})
	t.Run("crash mid-call", func(t *testing.T) {
		restarts := status().Restarts
		_, err := c.CallTool(ctx, "crash", map[string]any{})
		requireCode(t, err, codec.CodeServerBusy, `upstream "x" unavailable`)
		echo(t)
		assert.Greater(t, status().Restarts, restarts)
		assert.Equal(t, 1, status().Children, "the dead child replaced, not added to")
	})
}

// TestDownstreamGone: a downstream client that disconnects while its
// call runs has the upstream call cancelled.
func TestDownstreamGone(t *testing.T) {
	f := fakeFront(t)
	probe := f.dial(t, client.Options{})
	before := cancelledCount(t, probe)
	c, err := client.Dial(testCtx(t), &client.TCPTransport{Addr: f.addr}, client.Options{Era: client.EraLegacy})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := c.CallTool(context.Background(), "hang", map[string]any{})
		done <- err
	}()
	require.Eventually(t, func() bool { return f.gw.Status()[0].InFlight >= 1 }, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, c.Close())
	<-done
	require.Eventually(t, func() bool { return cancelledCount(t, probe) == before+1 }, 5*time.Second, 20*time.Millisecond,
		"the upstream was told to stop")
	assert.Zero(t, f.gw.Status()[0].InFlight)
}

// TestUpstreamStats: each call is timed in the upstream's latency
// histogram, and each failure counted by its class.
func TestUpstreamStats(t *testing.T) {
	u := selfUpstream("x", "fake")
	u.Timeout = time.Second
	buckets := []float64{0.001, 0.01, 0.1, 1, 10}
	f := startFront(t, gateway.Options{Upstreams: []gateway.Upstream{u}, LatencyBuckets: buckets})
	c := f.dial(t, client.Options{})
	ctx := testCtx(t)
	_, err := c.CallTool(ctx, "echo", map[string]any{})
	require.NoError(t, err)
	_, err = c.CallTool(ctx, "rpcerror", map[string]any{})
	requireCode(t, err, codec.CodeServerBusy, "the fake refuses")
	_, err = c.CallTool(ctx, "garbage", map[string]any{})
	requireCode(t, err, codec.CodeInternalError, "an invalid message")
	_, err = c.CallTool(ctx, "hang", map[string]any{})
	requireCode(t, err, codec.CodeRequestTimeout, "did not answer")

	st := f.gw.Status()[0]
	assert.Equal(t, uint64(4), st.Calls)
	assert.Equal(t, uint64(3), st.Errors)
	assert.Equal(t, map[string]uint64{"upstream": 1, "invalid": 1, "timeout": 1}, st.ErrorsByClass)
	require.Len(t, st.Latency, len(buckets)+1)
	var n uint64
	for _, k := range st.Latency {
		n += k
	}
	assert.Equal(t, st.Calls, n, "every call timed")
	assert.NotZero(t, st.Latency[4], "the call that timed out took 1 to 10 s")
	assert.GreaterOrEqual(t, st.LatencySum, 1.0)
}

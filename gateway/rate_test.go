package gateway_test

import (
	"testing"

	"github.com/mcpedge/mcpedge/client"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/gateway"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUpstreamRate: [upstream.NAME] rate bounds the calls to the
// upstream, every downstream session's together; over it a call is
// refused with {"limit":"upstream-rate"} and retryAfterMs, and never
// reaches the upstream. The rate is 0.001 per second: the bucket never
// refills within the test, so what it admits is its burst.
func TestUpstreamRate(t *testing.T) {
	u := selfUpstream("x", "conformance")
	u.Rate, u.Burst = 0.001, 2
	f := startFront(t, gateway.Options{Upstreams: []gateway.Upstream{u}})
	ctx := testCtx(t)
	call := func(c *client.Client) error {
		_, err := c.CallTool(ctx, "test_simple_text", map[string]any{})
		return err
	}
	a, b := f.dial(t, client.Options{}), f.dial(t, client.Options{})
	require.NoError(t, call(a))
	require.NoError(t, call(b))
	calls := f.gw.Status()[0].Calls
	var ce *codec.Error
	require.ErrorAs(t, call(a), &ce)
	assert.Equal(t, codec.CodeServerBusy, ce.Code)
	assert.Contains(t, string(ce.Data), `"limit":"upstream-rate"`)
	assert.Contains(t, string(ce.Data), `"retryAfterMs":`)
	require.ErrorAs(t, call(b), &ce, "the bucket is the upstream's, not the session's")
	assert.Equal(t, calls+2, f.gw.Status()[0].Calls, "refused calls are counted")
}

// TestUpstreamRateRefused: a negative or non-finite rate, or a negative
// burst, is a configuration error naming the upstream.
func TestUpstreamRateRefused(t *testing.T) {
	for _, set := range []func(*gateway.Upstream){
		func(u *gateway.Upstream) { u.Rate = -1 },
		func(u *gateway.Upstream) { u.Burst = -1 },
	} {
		u := selfUpstream("x", "conformance")
		set(&u)
		_, err := gateway.New(gateway.Options{Upstreams: []gateway.Upstream{u}})
		require.Error(t, err)
		assert.Contains(t, err.Error(), `upstream "x"`)
	}
}

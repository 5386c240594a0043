package engine_test

import (
	"net/netip"
	"strconv"
	"testing"

	"github.com/mcpedge/mcpedge/engine"
	"github.com/stretchr/testify/require"
)

// SetLimits changes max-inflight and the rates of a running server: live
// sessions see them at their next request.
func TestSetLimits(t *testing.T) {
	f := newFixture(t, engine.Options{Workers: 8, MaxInflight: 1})
	c := f.ready(t, `{}`)
	require.Empty(t, c.handle(slowCall("0", "g")))
	f.startedTag(t)
	requireLimit(t, parse(t, c.handle(slowCall("1", "g"))), "1", engine.LimitInflight)

	f.srv.SetLimits(engine.Limits{MaxInflight: 2})
	require.Equal(t, 2, f.srv.Options().MaxInflight)
	require.Empty(t, c.handle(slowCall("2", "g")), "the raised limit admits a second call")
	f.startedTag(t)
	requireLimit(t, parse(t, c.handle(slowCall("3", "g"))), "3", engine.LimitInflight)
	close(f.release)
	for range 2 {
		require.Equal(t, "released g", c.sink.next(t).text(t))
	}
	f.idle(t)

	// A session rate, on for the live session and new ones.
	f.srv.SetLimits(engine.Limits{MaxInflight: -1, Rate: 0.001, RateBurst: 2})
	require.Equal(t, engine.Limits{MaxInflight: -1, MaxSubscriptions: engine.DefaultMaxSubscriptions, Rate: 0.001, RateBurst: 2,
		RateSubjectBurst: 1, QueuePerClient: engine.DefaultQueuePerClient, QueueTotal: engine.DefaultQueueTotal}, f.srv.Limits())
	c.echo(10, "a")
	c.echo(11, "b")
	requireLimit(t, c.call(`{"jsonrpc":"2.0","id":12,"method":"ping"}`), "12", engine.LimitRate)
	// Off again.
	f.srv.SetLimits(engine.Limits{MaxInflight: -1})
	for i := range 5 {
		c.echo(20+i, "unlimited")
	}

	// A per-address rate.
	f.srv.SetLimits(engine.Limits{RateIP: 0.001, RateBurst: 1})
	c.sess.SetRemote(netip.MustParseAddr("127.0.0.2"))
	require.Nil(t, c.call(`{"jsonrpc":"2.0","id":30,"method":"ping"}`).Error)
	requireLimit(t, c.call(`{"jsonrpc":"2.0","id":31,"method":"ping"}`), "31", engine.LimitRateIP)
	f.srv.SetLimits(engine.Limits{})
	require.Equal(t, 64, f.srv.Limits().MaxInflight)
	for i := range 3 {
		require.Nil(t, c.call(`{"jsonrpc":"2.0","id":`+strconv.Itoa(40+i)+`,"method":"ping"}`).Error)
	}
}

package engine_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/internal/fairtest"
	"github.com/stretchr/testify/require"
)

// Limits by identity and by tool (issue 23). Every rate here is 0.001
// per second: a bucket never refills within a test, so what each admits
// is its burst, whatever the machine's speed.

const slowRate = 0.001

func pingFrame(id int) string { return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, id) }

func echoFrame(id int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`, id)
}

// addrClient returns a client whose connection comes from addr.
func addrClient(t *testing.T, f *fixture, addr string) *client {
	c := f.client(t)
	c.sess.SetRemote(netip.MustParseAddr(addr))
	return c
}

// TestRateSurvivesInitialize: -rate is per session, but a client's new
// session starts with the tokens its latest one has: a flood of
// initialize (HarperFast/harper#1610) refills nothing. Another address
// has its own.
func TestRateSurvivesInitialize(t *testing.T) {
	f := newFixture(t, engine.Options{Rate: slowRate, RateBurst: 3})
	a := addrClient(t, f, "10.0.0.1")
	a.init(`{}`) // one token
	require.Nil(t, a.call(pingFrame(1)).Error)
	require.Nil(t, a.call(pingFrame(2)).Error)
	requireLimit(t, a.call(pingFrame(3)), "3", engine.LimitRate)

	again := addrClient(t, f, "10.0.0.1")
	requireLimit(t, again.call(fmt.Sprintf(initFrame, `{}`)), "0", engine.LimitRate)

	other := addrClient(t, f, "10.0.0.2")
	other.init(`{}`)
	require.Nil(t, other.call(pingFrame(1)).Error)
}

// TestRateSubject: -rate-subject counts a subject's requests over all its
// sessions, whatever their address; another subject, and a client
// without one (by its address), have their own; in a cluster each node
// admits its share.
func TestRateSubject(t *testing.T) {
	t.Run("by subject", func(t *testing.T) {
		f := newFixture(t, engine.Options{Authorize: &fakeAuthz{}, RateSubject: slowRate, RateSubjectBurst: 3})
		s1, s2 := addrClient(t, f, "10.0.0.1"), addrClient(t, f, "10.0.0.2")
		s1.sess.SetAuth(subject("alice"))
		s2.sess.SetAuth(subject("alice"))
		require.Nil(t, s1.call(pingFrame(1)).Error)
		require.Nil(t, s2.call(pingFrame(1)).Error)
		require.Nil(t, s1.call(pingFrame(2)).Error)
		d := requireLimit(t, s2.call(pingFrame(2)), "2", engine.LimitRateSubject)
		require.Positive(t, d.RetryAfterMs)

		bob := addrClient(t, f, "10.0.0.1")
		bob.sess.SetAuth(subject("bob"))
		require.Nil(t, bob.call(pingFrame(1)).Error, "another subject, the same address")
	})
	t.Run("by address without a subject", func(t *testing.T) {
		f := newFixture(t, engine.Options{RateSubject: slowRate, RateSubjectBurst: 2})
		a, b := addrClient(t, f, "10.0.0.1"), addrClient(t, f, "10.0.0.1")
		require.Nil(t, a.call(pingFrame(1)).Error)
		require.Nil(t, b.call(pingFrame(1)).Error)
		requireLimit(t, a.call(pingFrame(2)), "2", engine.LimitRateSubject)
		require.Nil(t, addrClient(t, f, "10.0.0.2").call(pingFrame(1)).Error)
	})
	t.Run("stateless", func(t *testing.T) {
		f := newFixture(t, engine.Options{RateSubject: slowRate, RateSubjectBurst: 2})
		post := func(id int) msg {
			c := f.srv.OpenStateless(newChanSink())
			c.Session().SetRemote(netip.MustParseAddr("10.0.0.9"))
			return parse(t, c.HandleFrame([]byte(req26(id, "tools/list", "", `{}`)), nil))
		}
		require.Nil(t, post(1).Error)
		require.Nil(t, post(2).Error)
		requireLimit(t, post(3), "3", engine.LimitRateSubject)
	})
	t.Run("a node's share", func(t *testing.T) {
		nodes := 3
		f := newFixture(t, engine.Options{RateSubject: slowRate, RateSubjectBurst: 6, Nodes: func() int { return nodes }})
		a := addrClient(t, f, "10.0.0.1")
		require.Nil(t, a.call(pingFrame(1)).Error)
		require.Nil(t, a.call(pingFrame(2)).Error)
		requireLimit(t, a.call(pingFrame(3)), "3", engine.LimitRateSubject)
		b := addrClient(t, f, "10.0.0.2")
		nodes = 1 // the others gone: this node admits the whole burst
		for i := range 6 {
			require.Nil(t, b.call(pingFrame(i)).Error, "call %d", i)
		}
		requireLimit(t, b.call(pingFrame(6)), "6", engine.LimitRateSubject)
	})
}

// TestStatelessRateByAddress: -rate applies to stateless 2026-07-28
// requests, which have no session, by client address.
func TestStatelessRateByAddress(t *testing.T) {
	f := newFixture(t, engine.Options{Rate: slowRate, RateBurst: 2})
	post := func(addr string, id int) msg {
		c := f.srv.OpenStateless(newChanSink())
		c.Session().SetRemote(netip.MustParseAddr(addr))
		return parse(t, c.HandleFrame([]byte(req26(id, "tools/list", "", `{}`)), nil))
	}
	require.Nil(t, post("10.0.0.1", 1).Error)
	require.Nil(t, post("10.0.0.1", 2).Error)
	requireLimit(t, post("10.0.0.1", 3), "3", engine.LimitRate)
	require.Nil(t, post("10.0.0.2", 4).Error)
}

// TestToolLimits: [tool.NAME] rate bounds a tool's calls by every caller
// together, and max-inflight its calls being served at once; other tools
// are not limited, and SetToolLimits changes them while the server runs.
func TestToolLimits(t *testing.T) {
	f, g := fairFixture(t, engine.Options{ToolLimits: map[string]engine.ToolLimits{
		"echo": {Rate: slowRate, Burst: 2},
		"hog":  {MaxInflight: 1},
	}})
	a, b := f.ready(t, `{}`), f.ready(t, `{}`)
	a.echo(1, "x")
	b.echo(1, "x")
	d := requireLimit(t, a.call(echoFrame(2)), "2", engine.LimitToolRate)
	require.Positive(t, d.RetryAfterMs)
	require.Nil(t, a.call(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"witness","arguments":{}}}`).Error, "another tool")
	<-g.Started()

	require.Empty(t, a.handle(fairtest.HogCall(0, 0)))
	require.Equal(t, "h0-0", <-g.Started())
	requireLimit(t, b.call(fairtest.HogCall(1, 0)), `"h1-0"`, engine.LimitToolInflight)
	g.Release(t)
	require.Equal(t, "done h0-0", a.sink.next(t).text(t))
	f.idle(t)
	require.Empty(t, b.handle(fairtest.HogCall(1, 1)), "its place is back once the call ends")
	require.Equal(t, "h1-1", <-g.Started())
	g.Release(t)
	require.Equal(t, "done h1-1", b.sink.next(t).text(t))

	f.srv.SetToolLimits(map[string]engine.ToolLimits{"echo": {Rate: slowRate, Burst: 2}})
	requireLimit(t, a.call(echoFrame(4)), "4", engine.LimitToolRate) // unchanged: keeps its state
	f.srv.SetToolLimits(nil)
	a.echo(5, "x")
	require.Nil(t, f.srv.ToolLimits())
	f.idle(t)
}

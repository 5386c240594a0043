package engine_test

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/internal/fairtest"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/require"
)

// Fair scheduling (issue 23): hogs that fill the worker pool and queue
// more make a well-behaved client wait a bounded number of job ends, and
// never refuse it.

// fairFixture is a server with the proof's tools (fairtest.Register).
func fairFixture(t *testing.T, opts engine.Options) (*fixture, *fairtest.Gate) {
	f := newFixture(t, opts)
	g, err := fairtest.Register(f.srv.Registry())
	require.NoError(t, err)
	return f, g
}

// answerOf waits on c's sink for the answer to id, and reports it: nil
// for a result.
func answerOf(c *client, id string) <-chan error {
	done := make(chan error, 1)
	go func() {
		for {
			select {
			case b := <-c.sink.ch:
				var m msg
				if err := codec.Unmarshal(b, &m); err != nil {
					done <- err
					return
				}
				if string(m.ID) != `"`+id+`"` {
					continue
				}
				if m.Error != nil {
					done <- fmt.Errorf("error answer: %+v", m.Error)
				} else {
					done <- nil
				}
				return
			case <-time.After(wait):
				done <- errors.New("no answer")
				return
			}
		}
	}()
	return done
}

// hogAnswers counts c's answers, after Run: results and refusals by
// limit.
func hogAnswers(t *testing.T, c *client, n int) (results int, refused map[string]int) {
	t.Helper()
	refused = map[string]int{}
	for range n {
		m := c.sink.next(t)
		if m.Error != nil {
			refused[limitOf(t, m)]++
			continue
		}
		require.True(t, strings.HasPrefix(m.text(t), "done h"), "%s", m.Result)
		results++
	}
	return results, refused
}

// TestFairSchedulingTenHogs: ten sessions each pipelining eight calls that
// run until released fill a pool of four workers and queue the rest; the
// witness's calls all succeed, each starting after at most one job end
// per hog (the round robin), and the hogs are served in turn.
func TestFairSchedulingTenHogs(t *testing.T) {
	const hogs, per, workers = 10, 8, 4
	f, g := fairFixture(t, engine.Options{Workers: workers})
	clients := make([]*client, hogs)
	for h := range clients {
		clients[h] = f.ready(t, `{}`)
	}
	witness := f.ready(t, `{}`)
	r := fairtest.Run(t, g, fairtest.Setup{
		Hogs: hogs, PerHog: per, Admitted: hogs * per,
		Stats: f.srv.PoolStats,
		Hog: func(h, i int) {
			require.Empty(t, clients[h].handle(fairtest.HogCall(h, i)), "a hog's call is run or queued, not refused")
		},
		Witness: func(i int) <-chan error {
			require.Empty(t, witness.handle(fairtest.WitnessCall(i)))
			return answerOf(witness, fmt.Sprintf("w%d", i))
		},
		WitnessCalls: 3,
	})
	fairtest.Shares(t, r, hogs)
	for h, c := range clients {
		results, refused := hogAnswers(t, c, per)
		require.Equal(t, per, results, "hog %d: every call served: %v", h, refused)
	}
	f.idle(t)
	require.Zero(t, f.srv.SchedulerKeys(), "no key holds state once nothing waits")
}

// TestFairSchedulingOneHog: with -workers 64, one session pipelining 200
// calls takes every worker (within its -max-inflight, 64: the rest are
// refused as its own ceiling); another session's calls wait for the next
// job to end, and succeed.
func TestFairSchedulingOneHog(t *testing.T) {
	const per, workers = 200, 64
	f, g := fairFixture(t, engine.Options{Workers: workers})
	hog, witness := f.ready(t, `{}`), f.ready(t, `{}`)
	refused := 0
	r := fairtest.Run(t, g, fairtest.Setup{
		Hogs: 1, PerHog: per, Admitted: workers,
		Stats: f.srv.PoolStats,
		Hog: func(h, i int) {
			if out := hog.handle(fairtest.HogCall(h, i)); len(out) > 0 {
				requireLimit(t, parse(t, out), fmt.Sprintf(`"h0-%d"`, i), engine.LimitInflight)
				refused++
			}
		},
		Witness: func(i int) <-chan error {
			require.Empty(t, witness.handle(fairtest.WitnessCall(i)))
			return answerOf(witness, fmt.Sprintf("w%d", i))
		},
		WitnessCalls: 3,
	})
	require.Equal(t, per-workers, refused)
	require.Equal(t, []int{1, 0, 0}, r.Ends, "the witness's first call takes the next worker free, the others the worker its last left")
	results, _ := hogAnswers(t, hog, workers)
	require.Equal(t, workers, results)
}

// TestQueueBounds: a client's queue holds QueuePerClient requests, all
// queues QueueTotal; only a request over them is refused, at once, and
// the refused request is not left in flight.
func TestQueueBounds(t *testing.T) {
	f, g := fairFixture(t, engine.Options{Workers: 1, QueuePerClient: 2, QueueTotal: 3})
	a, b, c := f.ready(t, `{}`), f.ready(t, `{}`), f.ready(t, `{}`)
	require.Empty(t, a.handle(fairtest.HogCall(0, 0)))
	require.Empty(t, a.handle(fairtest.HogCall(0, 1)))
	require.Empty(t, a.handle(fairtest.HogCall(0, 2)))
	requireLimit(t, parse(t, a.handle(fairtest.HogCall(0, 3))), `"h0-3"`, engine.LimitQueue)
	require.Equal(t, 3, a.sess.InFlight())
	require.Empty(t, b.handle(fairtest.HogCall(1, 0)))
	requireLimit(t, parse(t, c.handle(fairtest.HogCall(2, 0))), `"h2-0"`, engine.LimitWorkers)
	require.Zero(t, c.sess.InFlight())
	running, queued := f.srv.PoolStats()
	require.Equal(t, [2]int{1, 3}, [2]int{running, queued})
	// In turn: a's first, then b's, then a's.
	want := []string{"h0-0", "h0-1", "h1-0", "h0-2"}
	got := []string{<-g.Started()}
	for range 3 {
		g.Release(t)
		got = append(got, <-g.Started())
	}
	g.Release(t)
	require.Equal(t, want, got)
}

// TestQueuedCancelled: a request cancelled while it waits for a worker
// (notifications/cancelled, its session closing) never reaches its
// handler, and is answered nothing.
func TestQueuedCancelled(t *testing.T) {
	f, g := fairFixture(t, engine.Options{Workers: 1})
	a, b, gone := f.ready(t, `{}`), f.ready(t, `{}`), f.ready(t, `{}`)
	require.Empty(t, a.handle(fairtest.HogCall(0, 0)))
	require.Equal(t, "h0-0", <-g.Started())
	require.Empty(t, b.handle(fairtest.HogCall(1, 0)))
	require.Empty(t, gone.handle(fairtest.HogCall(2, 0)))
	require.Empty(t, a.handle(fairtest.WitnessCall(0)))
	b.notify(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"h1-0"}}`)
	f.srv.Conn(gone.sess).Close(errors.New("client gone"))
	g.Release(t)
	require.Equal(t, fairtest.WitnessTag, <-g.Started(), "the cancelled calls are skipped")
	require.Equal(t, "done h0-0", a.sink.next(t).text(t))
	require.Equal(t, "witnessed", a.sink.next(t).text(t))
	b.sink.none(t, 0)
	f.idle(t)
	require.Zero(t, b.sess.InFlight())
	running, queued := f.srv.PoolStats()
	require.Equal(t, [2]int{0, 0}, [2]int{running, queued})
}

// TestFairBySubject: the sessions of one authenticated subject share one
// key: five sessions of "hog" queue behind one turn, and another
// subject's call starts after at most two job ends.
func TestFairBySubject(t *testing.T) {
	f, g := fairFixture(t, engine.Options{Workers: 2, Authorize: &fakeAuthz{}})
	var hogs []*client
	for range 5 {
		c := f.client(t)
		c.sess.SetAuth(subject("hog"))
		c.init(`{}`)
		hogs = append(hogs, c)
	}
	w := f.client(t)
	w.sess.SetAuth(subject("witness"))
	w.init(`{}`)
	for h, c := range hogs {
		for i := range 2 {
			require.Empty(t, c.handle(fairtest.HogCall(h, i)))
		}
	}
	<-g.Started()
	<-g.Started()
	require.Equal(t, 1, f.srv.SchedulerKeys(), "one key for the five sessions of the subject")
	require.Empty(t, w.handle(fairtest.WitnessCall(0)))
	ends, started := 0, 2
	for {
		g.Release(t)
		ends++
		if <-g.Started() == fairtest.WitnessTag {
			break
		}
		started++
		require.Less(t, ends, 2, "the witness's subject waits one turn of the hog's")
	}
	<-g.Started() // its worker takes the next hog call
	started++
	for ; started < 10; started++ {
		g.Release(t)
		<-g.Started()
	}
	for range 2 {
		g.Release(t)
	}
	f.idle(t)
}

// TestStatelessInflightByAddress: stateless 2026-07-28 requests have no
// session; -max-inflight and the queues count them by client address.
func TestStatelessInflightByAddress(t *testing.T) {
	f, g := fairFixture(t, engine.Options{Workers: 8, MaxInflight: 2})
	post := func(addr string, id int) []byte {
		c := f.srv.OpenStateless(newChanSink())
		c.Session().SetRemote(netip.MustParseAddr(addr))
		return c.HandleFrame([]byte(req26(id, "tools/call", `"name":"hog","arguments":{"tag":"s-`+fmt.Sprint(id)+`"}`, `{}`)), nil)
	}
	require.Empty(t, post("10.0.0.1", 1))
	require.Empty(t, post("10.0.0.1", 2))
	requireLimit(t, parse(t, post("10.0.0.1", 3)), "3", engine.LimitInflight)
	require.Empty(t, post("10.0.0.2", 4), "another address has its own share")
	for range 3 {
		<-g.Started()
	}
	for range 3 {
		g.Release(t)
	}
	f.idle(t)
	require.Eventually(t, func() bool { return f.srv.SchedulerKeys() == 0 }, wait, time.Millisecond)
	require.Empty(t, post("10.0.0.1", 5), "its places are back once its calls end")
	<-g.Started()
	g.Release(t)
	f.idle(t)
}

// TestBigListenQueues: a subscriptions/listen whose filter is read on a
// worker (params over 1 KiB) waits its turn while the pool is full, as a
// call does, and is acknowledged once a worker is free, not refused.
func TestBigListenQueues(t *testing.T) {
	f, g := fairFixture(t, engine.Options{Workers: 1})
	hog, listener := f.ready(t, `{}`), f.client(t)
	require.Empty(t, hog.handle(fairtest.HogCall(0, 0)))
	<-g.Started() // the one worker is taken
	uris := make([]string, 64)
	for i := range uris {
		uris[i] = fmt.Sprintf(`"mem://watched/%032d"`, i)
	}
	filter := `{"toolsListChanged":true,"resourceSubscriptions":[` + strings.Join(uris, ",") + `]}`
	require.Greater(t, len(filter), 1<<10, "read on a worker, not inline")
	require.Empty(t, listener.handle(req26(9, "subscriptions/listen", `"notifications":`+filter, `{}`)), "queued, not refused")
	running, queued := f.srv.PoolStats()
	require.Equal(t, 1, running)
	require.Equal(t, 1, queued, "the listen waits in its client's queue")
	g.Release(t)
	ack := listener.sink.next(t)
	require.Equal(t, mcp.NotificationSubscriptionsAcked, ack.Method, "%s", ack.Params)
	results, refused := hogAnswers(t, hog, 1)
	require.Equal(t, 1, results, "%v", refused)
}

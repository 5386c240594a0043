package engine_test

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingBus counts the subscriptions made on a LocalBus.
type countingBus struct {
	*session.LocalBus
	subs atomic.Int64
}

func (b *countingBus) Subscribe(topic string, fn func(string, []byte)) func() {
	if strings.HasPrefix(topic, session.TopicResourceUpdated) {
		b.subs.Add(1)
	}
	return b.LocalBus.Subscribe(topic, fn)
}

// listenFrame is a subscriptions/listen for uris.
func listenFrame(id int, uris []string) string {
	var sb strings.Builder
	sb.WriteString(`"notifications":{"resourceSubscriptions":[`)
	for i, u := range uris {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.Quote(u))
	}
	sb.WriteString(`]}`)
	return req26(id, mcp.MethodSubscriptionsListen, sb.String(), `{}`)
}

func repeat(uri string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = uri
	}
	return out
}

func distinct(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + strconv.Itoa(i)
	}
	return out
}

// TestListenDuplicateURIs (issue 20, defect 2): a listen naming one URI
// 10,000 times made 10,000 bus subscriptions, each copying the topic's
// list, and heard 10,000 notifications per update. Its URIs are
// deduplicated: one subscription, one notification per update, whatever
// the path (on the loop for a small listen, on a worker for a big one).
func TestListenDuplicateURIs(t *testing.T) {
	for _, n := range []int{20, 10000} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			bus := &countingBus{LocalBus: session.NewLocalBus()}
			f := newFixture(t, engine.Options{Bus: bus})
			c := f.client(t)
			require.Empty(t, c.handle(listenFrame(1, repeat("mem://dup", n))))
			ack := c.sink.next(t)
			require.Equal(t, mcp.NotificationSubscriptionsAcked, ack.Method, "%s", ack.Params)
			var p struct {
				Notifications mcp.SubscriptionFilter `json:"notifications"`
			}
			require.NoError(t, codec.Unmarshal(ack.Params, &p))
			uris := p.Notifications.ResourceSubscriptions
			if assert.Equal(t, 1, len(uris), "URIs acknowledged") {
				assert.Equal(t, "mem://dup", uris[0])
			}
			assert.EqualValues(t, 1, bus.subs.Load(), "bus subscriptions made")
			assert.Equal(t, 1, bus.Subscribers(session.TopicResourceUpdated+"mem://dup"))
			assert.Equal(t, 1, c.sess.Subscriptions())

			f.srv.ResourceUpdated("mem://dup") // delivered before it returns
			assert.Len(t, c.sink.ch, 1, "notifications per update")
			assert.Equal(t, mcp.NotificationResourceUpdated, c.sink.next(t).Method)

			c.notify(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
			require.Eventually(t, func() bool {
				return bus.Subscribers(session.TopicResourceUpdated+"mem://dup") == 0 && c.sess.Subscriptions() == 0
			}, wait, time.Millisecond, "the stream's subscriptions end with it")
		})
	}
}

// gateBus blocks every resource subscription until gate is closed,
// telling entered when one is waiting.
type gateBus struct {
	*session.LocalBus
	entered chan struct{}
	gate    chan struct{}
}

func (b *gateBus) Subscribe(topic string, fn func(string, []byte)) func() {
	if strings.HasPrefix(topic, session.TopicResourceUpdated) {
		select {
		case b.entered <- struct{}{}:
		default:
		}
		<-b.gate
	}
	return b.LocalBus.Subscribe(topic, fn)
}

// TestBigListenOffTheLoop (issue 20, defect 2): a listen under 64 KiB was
// served on the event loop, and 64 of them stalled the loop's other
// sessions for seconds. A listen bigger than a few URIs is served on the
// worker pool: while its subscriptions are held up, HandleFrame has
// returned and the same connection and another one are answered.
func TestBigListenOffTheLoop(t *testing.T) {
	bus := &gateBus{LocalBus: session.NewLocalBus(), entered: make(chan struct{}, 1), gate: make(chan struct{})}
	f := newFixture(t, engine.Options{Bus: bus})
	defer close(bus.gate)
	c, other := f.client(t), f.client(t)
	frame := listenFrame(1, distinct("mem://big/", 100))
	require.Less(t, len(frame), 64<<10, "a frame the loop decodes itself")
	returned := make(chan []byte, 1)
	go func() { returned <- c.handle(frame) }()
	select {
	case out := <-returned:
		require.Empty(t, out)
	case <-time.After(wait): // on the loop, it waits for the gate
		t.Fatal("HandleFrame waits for the listen's subscriptions: they are made on the event loop")
	}
	select {
	case <-bus.entered: // a worker holds the listen now
	case <-time.After(wait):
		t.Fatal("the listen never subscribed")
	}
	for i, cl := range []*client{c, other} {
		out := cl.handle(`{"jsonrpc":"2.0","id":"p` + strconv.Itoa(i) + `","method":"ping"}`)
		require.Nil(t, parse(t, out).Error, "ping answered at once")
	}
	assert.Empty(t, c.sink.ch, "not acknowledged before it is subscribed")
}

// TestBigListenAcknowledged: a listen served on a worker is acknowledged
// like a small one, and a bad one gets its error on the stream.
func TestBigListenAcknowledged(t *testing.T) {
	f := newFixture(t, engine.Options{})
	c := f.client(t)
	uris := distinct("mem://big/", 100)
	require.Empty(t, c.handle(listenFrame(1, uris)))
	ack := c.sink.next(t)
	require.Equal(t, mcp.NotificationSubscriptionsAcked, ack.Method)
	assert.Equal(t, len(uris), c.sess.Subscriptions())
	f.srv.ResourceUpdated("mem://big/42")
	m := c.sink.next(t)
	require.Equal(t, mcp.NotificationResourceUpdated, m.Method)
	assert.Contains(t, string(m.Params), `"mem://big/42"`)

	long := req26(2, mcp.MethodSubscriptionsListen, `"notifications":{"resourceSubscriptions":["mem://`+strings.Repeat("x", 9000)+`"]}`, `{}`)
	require.Empty(t, c.handle(long))
	requireError(t, c.sink.next(t), "2", codec.CodeInvalidParams)
	bad := req26(3, mcp.MethodSubscriptionsListen, `"notifications":{"resourceSubscriptions":"`+strings.Repeat("x", 2000)+`"}`, `{}`)
	require.Empty(t, c.handle(bad))
	requireError(t, c.sink.next(t), "3", codec.CodeInvalidParams)
	// The id of a refused listen is free again.
	require.Empty(t, c.handle(listenFrame(3, []string{"mem://x"})))
	assert.Equal(t, mcp.NotificationSubscriptionsAcked, c.sink.next(t).Method)
}

// TestSubscriptionFlood (issue 20, defect 6): one connection made 2
// million resources/subscribe calls, 1 GB in 13 s. A session holds at
// most MaxSubscriptions, resource subscriptions and listen URIs together;
// past it a subscribe or listen gets -32000 {"limit":"subscriptions"}.
func TestSubscriptionFlood(t *testing.T) {
	subscribe := func(c *client, id int, uri string) msg {
		return c.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/subscribe","params":{"uri":%q}}`, id, uri))
	}
	t.Run("default", func(t *testing.T) {
		f := newFixture(t, engine.Options{})
		c := f.ready(t, `{}`)
		for i := range engine.DefaultMaxSubscriptions {
			require.Nil(t, subscribe(c, i, "mem://flood/"+strconv.Itoa(i)).Error, "subscription %d", i)
		}
		requireLimit(t, subscribe(c, -1, "mem://flood/over"), "-1", engine.LimitSubscriptions)
		require.Equal(t, engine.DefaultMaxSubscriptions, c.sess.Subscriptions())
		require.Nil(t, subscribe(c, -2, "mem://flood/7").Error, "a subscription held already")
		c.echo(1, "the session is served")
	})
	t.Run("subscribe", func(t *testing.T) {
		f := newFixture(t, engine.Options{MaxSubscriptions: 3})
		c := f.ready(t, `{}`)
		requireError(t, subscribe(c, -1, "mem://"+strings.Repeat("x", 9000)), "-1", codec.CodeInvalidParams)
		for i := range 3 {
			require.Nil(t, subscribe(c, i, "mem://"+strconv.Itoa(i)).Error)
		}
		requireLimit(t, subscribe(c, 3, "mem://3"), "3", engine.LimitSubscriptions)
		require.Nil(t, c.call(`{"jsonrpc":"2.0","id":4,"method":"resources/unsubscribe","params":{"uri":"mem://1"}}`).Error)
		require.Nil(t, subscribe(c, 5, "mem://3").Error, "room again")

		r := &refuser{chanSink: newChanSink()}
		serveFrame(t.Context(), f.srv.Conn(c.sess), []byte(`{"jsonrpc":"2.0","id":7,"method":"resources/subscribe","params":{"uri":"mem://4"}}`), r)
		require.NotNil(t, r.err, "a Refuser answers the limit itself")
		assert.Equal(t, engine.LimitSubscriptions, r.err.Limit)
		assert.Equal(t, "7", string(r.id))
		r.none(t, 0)
	})
	// Concurrent subscribes on one session (HTTP POSTs): whichever finds
	// the last place taken, before or after the check that precedes
	// dispatch, is refused through the Refuser (HTTP 429), never answered
	// with the limit's error in a result a transport sends as 200.
	t.Run("concurrent", func(t *testing.T) {
		f := newFixture(t, engine.Options{MaxSubscriptions: 1})
		c := f.ready(t, `{}`)
		const n = 32
		for round := range 20 {
			rs := make([]*refuser, n)
			var wg sync.WaitGroup
			for i := range n {
				rs[i] = &refuser{chanSink: newChanSink()}
				wg.Add(1)
				go func() {
					defer wg.Done()
					frame := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/subscribe","params":{"uri":"mem://race/%d/%d"}}`, i, round, i)
					serveFrame(t.Context(), f.srv.Conn(c.sess), []byte(frame), rs[i])
				}()
			}
			wg.Wait()
			granted := 0
			for i, r := range rs {
				if r.err != nil {
					assert.Equal(t, engine.LimitSubscriptions, r.err.Limit)
					r.none(t, 0)
					continue
				}
				m := parse(t, <-r.ch)
				require.Nil(t, m.Error, "subscribe %d answered with an error instead of a refusal", i)
				granted++
			}
			require.LessOrEqual(t, granted, 1, "round %d", round)
			for i := range n {
				require.Nil(t, c.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":-1,"method":"resources/unsubscribe","params":{"uri":"mem://race/%d/%d"}}`, round, i)).Error)
			}
			require.Zero(t, c.sess.Subscriptions())
		}
	})
	t.Run("listen", func(t *testing.T) {
		f := newFixture(t, engine.Options{MaxSubscriptions: 100})
		c := f.client(t)
		requireLimit(t, c.call(listenFrame(1, distinct("mem://l/", 101))), "1", engine.LimitSubscriptions)
		require.Empty(t, c.handle(listenFrame(2, distinct("mem://l/", 100))))
		require.Equal(t, mcp.NotificationSubscriptionsAcked, c.sink.next(t).Method)
		requireLimit(t, c.call(listenFrame(3, []string{"mem://other"})), "3", engine.LimitSubscriptions)
		require.Empty(t, c.handle(listenFrame(4, nil)), "a listen with no URI costs nothing")
		require.Equal(t, mcp.NotificationSubscriptionsAcked, c.sink.next(t).Method)
		c.notify(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`)
		require.Eventually(t, func() bool { return c.sess.Subscriptions() == 0 }, wait, time.Millisecond)
		require.Empty(t, c.handle(listenFrame(5, []string{"mem://other"})))
		require.Equal(t, mcp.NotificationSubscriptionsAcked, c.sink.next(t).Method)
	})
	t.Run("reload", func(t *testing.T) {
		f := newFixture(t, engine.Options{MaxSubscriptions: 1})
		c := f.ready(t, `{}`)
		require.Nil(t, subscribe(c, 1, "mem://a").Error)
		requireLimit(t, subscribe(c, 2, "mem://b"), "2", engine.LimitSubscriptions)
		l := f.srv.Limits()
		l.MaxSubscriptions = -1
		f.srv.SetLimits(l)
		require.Equal(t, -1, f.srv.Options().MaxSubscriptions)
		for i := range 10 {
			require.Nil(t, subscribe(c, 3+i, "mem://n/"+strconv.Itoa(i)).Error)
		}
	})
}

// TestListenCancelledWhileOpening: a big listen cancelled while a worker
// opens it ends once open, and gives back every subscription.
func TestListenCancelledWhileOpening(t *testing.T) {
	bus := &gateBus{LocalBus: session.NewLocalBus(), entered: make(chan struct{}, 1), gate: make(chan struct{})}
	f := newFixture(t, engine.Options{Bus: bus})
	c := f.client(t)
	require.Empty(t, c.handle(listenFrame(1, distinct("mem://q/", 100))))
	select {
	case <-bus.entered:
	case <-time.After(wait):
		t.Fatal("the listen never subscribed")
	}
	c.notify(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	var once sync.Once
	release := func() { once.Do(func() { close(bus.gate) }) }
	defer release()
	release()
	require.Eventually(t, func() bool {
		return bus.Topics() == 3 && c.sess.Subscriptions() == 0 && c.sess.Streams() == 0 // the engine's 3 list topics left
	}, wait, time.Millisecond)
}

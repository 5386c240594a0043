package session

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var _ Bus = (*LocalBus)(nil)

func TestLocalBus(t *testing.T) {
	bus := NewLocalBus()
	bus.Publish("nobody", []byte("x")) // no subscriber: nothing happens

	type got struct{ topic, payload string }
	var a, b []got
	cancelA := bus.Subscribe("t1", func(topic string, p []byte) { a = append(a, got{topic, string(p)}) })
	cancelB := bus.Subscribe("t1", func(topic string, p []byte) { b = append(b, got{topic, string(p)}) })
	var other int
	cancelC := bus.Subscribe("t2", func(string, []byte) { other++ })
	assert.Equal(t, 2, bus.Subscribers("t1"))
	assert.Equal(t, 1, bus.Subscribers("t2"))
	assert.Equal(t, 0, bus.Subscribers("t3"))

	bus.Publish("t1", []byte("one"))
	assert.Equal(t, []got{{"t1", "one"}}, a)
	assert.Equal(t, []got{{"t1", "one"}}, b)
	assert.Zero(t, other, "topics are isolated")

	cancelA()
	cancelA() // idempotent
	assert.Equal(t, 1, bus.Subscribers("t1"))
	bus.Publish("t1", []byte("two"))
	assert.Len(t, a, 1, "an unsubscribed fn receives nothing")
	assert.Equal(t, []got{{"t1", "one"}, {"t1", "two"}}, b)

	cancelB()
	cancelC()
	assert.Equal(t, 0, bus.Subscribers("t1"))
	assert.Equal(t, 0, bus.Subscribers("t2"))
	bus.Publish("t1", []byte("three"))
	assert.Len(t, b, 2)

	// A topic emptied and subscribed again works.
	var again int
	cancelD := bus.Subscribe("t1", func(string, []byte) { again++ })
	bus.Publish("t1", nil)
	assert.Equal(t, 1, again)
	cancelD()
}

func TestLocalBusSameFnTwice(t *testing.T) {
	bus := NewLocalBus()
	var n int
	fn := func(string, []byte) { n++ }
	c1 := bus.Subscribe("t", fn)
	c2 := bus.Subscribe("t", fn)
	bus.Publish("t", nil)
	assert.Equal(t, 2, n, "each subscription is delivered")
	c1()
	bus.Publish("t", nil)
	assert.Equal(t, 3, n, "cancelling one subscription keeps the other")
	c2()
	assert.Equal(t, 0, bus.Subscribers("t"))
}

func TestLocalBusUnsubscribeFromCallback(t *testing.T) {
	bus := NewLocalBus()
	var n int
	var cancel func()
	cancel = bus.Subscribe("t", func(string, []byte) { n++; cancel() })
	bus.Publish("t", nil)
	bus.Publish("t", nil)
	assert.Equal(t, 1, n)
	assert.Equal(t, 0, bus.Subscribers("t"))
}

func TestLocalBusConcurrent(t *testing.T) {
	bus := NewLocalBus()
	const topics, subsPer, publishers, msgs = 4, 16, 4, 200
	var stable atomic.Int64
	// Subscribers that stay for the whole test receive every message.
	for i := range topics {
		bus.Subscribe("topic"+strconv.Itoa(i), func(string, []byte) { stable.Add(1) })
	}
	var wg sync.WaitGroup
	for i := range topics {
		for range subsPer {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 20 {
					cancel := bus.Subscribe("topic"+strconv.Itoa(i), func(_ string, p []byte) {
						if len(p) != 3 {
							t.Errorf("payload %q", p)
						}
					})
					cancel()
				}
			}()
		}
	}
	for p := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := range msgs {
				bus.Publish("topic"+strconv.Itoa((p+m)%topics), []byte("abc"))
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(publishers*msgs), stable.Load())
	for i := range topics {
		require.Equal(t, 1, bus.Subscribers("topic"+strconv.Itoa(i)), "subscriber count back to the stable one")
	}
}

func BenchmarkLocalBusPublish(b *testing.B) {
	for _, n := range []int{1, 16} {
		b.Run(strconv.Itoa(n)+"subs", func(b *testing.B) {
			bus := NewLocalBus()
			var got atomic.Int64
			for range n {
				bus.Subscribe(TopicResourceUpdated+"mem://x", func(string, []byte) { got.Add(1) })
			}
			payload := []byte(`"mem://x"`)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					bus.Publish(TopicResourceUpdated+"mem://x", payload)
				}
			})
			if got.Load() != int64(b.N*n) {
				b.Fatalf("delivered %d, want %d", got.Load(), b.N*n)
			}
		})
	}
}

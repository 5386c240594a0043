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

// TestLocalBusOrder: subscribers hear a message in the order they
// subscribed, whoever left in between; the topic is forgotten once empty.
func TestLocalBusOrder(t *testing.T) {
	bus := NewLocalBus()
	var got []int
	cancels := make([]func(), 6)
	for i := range cancels {
		cancels[i] = bus.Subscribe("t", func(string, []byte) { got = append(got, i) })
	}
	bus.Publish("t", nil)
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5}, got)
	cancels[0]() // the head
	cancels[3]() // one in the middle
	cancels[5]() // the tail
	got = nil
	bus.Publish("t", nil)
	assert.Equal(t, []int{1, 2, 4}, got)
	cancels[5] = bus.Subscribe("t", func(string, []byte) { got = append(got, 6) })
	got = nil
	bus.Publish("t", nil)
	assert.Equal(t, []int{1, 2, 4, 6}, got, "a new subscriber goes last")
	for _, i := range []int{1, 2, 4, 5} {
		cancels[i]()
	}
	assert.Zero(t, bus.Topics(), "an emptied topic is forgotten")
}

// TestLocalBusCancelDuringPublish: a subscriber that cancels others while
// a message is being delivered keeps them from hearing it, and the walk
// goes on to the end.
func TestLocalBusCancelDuringPublish(t *testing.T) {
	bus := NewLocalBus()
	var got []int
	cancels := make([]func(), 8)
	for i := range cancels {
		cancels[i] = bus.Subscribe("t", func(string, []byte) {
			got = append(got, i)
			if i == 2 {
				cancels[2]()
				cancels[3]()
				cancels[4]()
				cancels[7]()
			}
		})
	}
	bus.Publish("t", nil)
	assert.Equal(t, []int{0, 1, 2, 5, 6}, got)
	got = nil
	bus.Publish("t", nil)
	assert.Equal(t, []int{0, 1, 5, 6}, got)
	assert.Equal(t, 4, bus.Subscribers("t"))
}

// TestLocalBusChurnDuringPublish: while many subscribers come and go on
// one topic, a publish reaches every subscriber that stays, once.
func TestLocalBusChurnDuringPublish(t *testing.T) {
	bus := NewLocalBus()
	const stable, churners, rounds, msgs = 200, 8, 500, 200
	var heard [stable]atomic.Int32
	for i := range stable {
		bus.Subscribe("t", func(string, []byte) { heard[i].Add(1) })
	}
	var wg sync.WaitGroup
	for range churners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var held []func()
			for r := range rounds {
				held = append(held, bus.Subscribe("t", func(string, []byte) {}))
				if r%3 != 0 {
					k := r % len(held)
					held[k]()
					held = append(held[:k], held[k+1:]...)
				}
			}
			for _, c := range held {
				c()
			}
		}()
	}
	for range msgs {
		bus.Publish("t", nil)
	}
	wg.Wait()
	for i := range heard {
		require.Equal(t, int32(msgs), heard[i].Load(), "subscriber %d", i)
	}
	assert.Equal(t, stable, bus.Subscribers("t"))
}

// BenchmarkLocalBusSubscribe subscribes to and leaves a topic that has n
// subscribers already: constant work, whatever n.
func BenchmarkLocalBusSubscribe(b *testing.B) {
	for _, n := range []int{1, 64000} {
		b.Run(strconv.Itoa(n)+"subs", func(b *testing.B) {
			bus := NewLocalBus()
			fn := func(string, []byte) {}
			for range n {
				bus.Subscribe("t", fn)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				bus.Subscribe("t", fn)()
			}
		})
	}
}

func BenchmarkLocalBusPublish(b *testing.B) {
	for _, n := range []int{1, 16, 64000} {
		b.Run(strconv.Itoa(n)+"subs", func(b *testing.B) {
			bus := NewLocalBus()
			var got atomic.Int64
			for range n {
				bus.Subscribe(TopicResourceUpdated+"mem://x", func(string, []byte) { got.Add(1) })
			}
			payload := []byte(`"mem://x"`)
			b.ReportAllocs()
			b.ResetTimer()
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

package engine

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/mcpedge/mcpedge/session"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// schedKeys are the keys of the scheduler's tests and benchmarks: as
// many sessions, subjects and stateless clients' addresses.
func schedKeys(n int) []flowKey {
	keys := make([]flowKey, 0, 3*n)
	for i := range n {
		keys = append(keys,
			flowKey{sess: session.New(context.Background(), nil)},
			flowKey{sub: fmt.Sprintf("subject-%d", i)},
			flowKey{addr: netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})})
	}
	return keys
}

// saturated returns a scheduler of one worker, that worker taken.
func saturated(t testing.TB) *scheduler {
	q := newScheduler(1, DefaultQueuePerClient, DefaultQueueTotal, func(any) error { return nil })
	require.True(t, q.tryAcquire())
	return q
}

// TestSchedulerRoundRobin: with every worker busy, requests queue by key
// and the worker that ends a job takes them one key at a time, in the
// order the keys started waiting, whatever each key has queued.
func TestSchedulerRoundRobin(t *testing.T) {
	q := saturated(t)
	keys := schedKeys(1)
	reqs := map[*request]string{}
	submit := func(k int, name string) {
		r := new(request)
		reqs[r] = name
		require.Nil(t, q.submit(r, keys[k], false, 0))
	}
	submit(0, "a1")
	submit(0, "a2")
	submit(0, "a3")
	submit(1, "b1")
	submit(2, "c1")
	submit(2, "c2")
	var got []string
	for r := q.next(); r != nil; r = q.next() {
		got = append(got, reqs[r])
	}
	assert.Equal(t, []string{"a1", "b1", "c1", "a2", "c2", "a3"}, got)
	running, queued := q.stats()
	assert.Equal(t, [2]int{0, 0}, [2]int{running, queued}, "the worker is free once nothing waits")
	assert.Zero(t, q.keys())
}

// TestSchedulerZeroAlloc holds the scheduler at zero allocations per
// request once warm: a request started at once on a free worker, and one
// queued behind a busy pool and handed to the worker that ends its job,
// for sessions, subjects and stateless clients (each counted while
// admitted) coming and going.
func TestSchedulerZeroAlloc(t *testing.T) {
	keys := schedKeys(16)
	t.Run("worker free", func(t *testing.T) {
		q := newScheduler(1, DefaultQueuePerClient, DefaultQueueTotal, func(any) error { return nil })
		r := new(request)
		i := 0
		run := func() {
			k := keys[i%len(keys)]
			i++
			stateless := k.addr.IsValid()
			if le := q.submit(r, k, stateless, 64); le != nil {
				t.Fatal(le)
			}
			if q.next() != nil { // the worker ends its job; nothing waits
				t.Fatal("a request waited on a free pool")
			}
			q.release(r)
		}
		run()
		assert.Zero(t, testing.AllocsPerRun(1000, run))
		assert.Zero(t, q.keys())
	})
	t.Run("queued", func(t *testing.T) {
		q := saturated(t)
		reqs := make([]request, len(keys))
		run := func() {
			// Every key queues one request, then the worker serves them
			// in turn.
			for j, k := range keys {
				if le := q.submit(&reqs[j], k, k.addr.IsValid(), 64); le != nil {
					t.Fatal(le)
				}
			}
			for range keys {
				r := q.next()
				if r == nil {
					t.Fatal("a queued request was lost")
				}
				q.release(r)
				r.waited, r.qnext = false, nil
			}
		}
		run()
		assert.Zero(t, testing.AllocsPerRun(100, run))
		assert.Zero(t, q.keys())
	})
}

// BenchmarkSchedulerFree is the scheduler's cost to a request that finds
// a worker free: submit, and the worker's look for a next request.
func BenchmarkSchedulerFree(b *testing.B) {
	q := newScheduler(1, DefaultQueuePerClient, DefaultQueueTotal, func(any) error { return nil })
	k := flowKey{sess: session.New(context.Background(), nil)}
	r := new(request)
	b.ReportAllocs()
	for b.Loop() {
		_ = q.submit(r, k, false, 0)
		_ = q.next()
	}
}

// BenchmarkSchedulerSaturated is the scheduler's cost to a request at
// saturation: queued under one of 48 keys (sessions, subjects, stateless
// addresses) behind a busy pool, then handed to the worker that ends its
// job, round robin. One op is one request.
func BenchmarkSchedulerSaturated(b *testing.B) {
	q := saturated(b)
	keys := schedKeys(16)
	reqs := make([]request, len(keys))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		j := i % len(keys)
		k := keys[j]
		_ = q.submit(&reqs[j], k, k.addr.IsValid(), 0)
		if j == len(keys)-1 {
			for r := q.next(); r != nil; r = q.next() {
				q.release(r)
				r.waited, r.qnext = false, nil
			}
			q.tryAcquire()
		}
		i++
	}
}

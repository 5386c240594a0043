package session

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTable(t *testing.T) {
	tb := NewTable()
	a := New(context.Background(), nopSink{})
	b := New(context.Background(), nopSink{})
	tb.Add(a)
	tb.Add(b)
	assert.Equal(t, 2, tb.Len())

	got, ok := tb.Get(a.ID())
	require.True(t, ok)
	assert.Same(t, a, got)
	got, ok = tb.GetBytes([]byte(b.ID()))
	require.True(t, ok)
	assert.Same(t, b, got)

	_, ok = tb.Get("nope")
	assert.False(t, ok)
	_, ok = tb.GetBytes(nil)
	assert.False(t, ok)

	seen := map[*Session]bool{}
	tb.Range(func(s *Session) bool { seen[s] = true; return true })
	assert.Len(t, seen, 2)
	n := 0
	tb.Range(func(*Session) bool { n++; return false })
	assert.Equal(t, 1, n, "Range stops when fn returns false")

	a.Close(nil)
	_, ok = tb.Get(a.ID())
	assert.False(t, ok, "a closed session leaves the table")
	assert.Equal(t, 1, tb.Len())

	cause := errors.New("shutdown")
	tb.CloseAll(cause)
	assert.Equal(t, 0, tb.Len())
	assert.Equal(t, StateClosed, b.State())
	assert.ErrorIs(t, context.Cause(b.Context()), cause)
}

func TestTableConcurrent(t *testing.T) {
	tb := NewTable()
	const workers, per = 8, 200
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				s := New(context.Background(), nopSink{})
				tb.Add(s)
				got, ok := tb.GetBytes([]byte(s.ID()))
				if !assert.True(t, ok) || !assert.Same(t, s, got) {
					return
				}
				s.Close(nil)
				_, ok = tb.Get(s.ID())
				assert.False(t, ok)
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 0, tb.Len())
}

// lookupFixture fills a table with n sessions and returns their ids.
func lookupFixture(n int) (*Table, []string, [][]byte) {
	tb := NewTable()
	ids := make([]string, n)
	raw := make([][]byte, n)
	for i := range ids {
		s := New(context.Background(), nopSink{})
		tb.Add(s)
		ids[i] = s.ID()
		raw[i] = []byte(s.ID())
	}
	return tb, ids, raw
}

func BenchmarkSessionLookup(b *testing.B) {
	tb, ids, raw := lookupFixture(10000)
	b.Run("Get", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, ok := tb.Get(ids[i%len(ids)]); !ok {
				b.Fatal("missing session")
			}
		}
	})
	b.Run("GetBytes", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, ok := tb.GetBytes(raw[i%len(raw)]); !ok {
				b.Fatal("missing session")
			}
		}
	})
}

// BenchmarkSessionLookupParallel measures lookups across cores; the goal is
// 20M lookups/s in total (ns/op is per lookup over all goroutines, so
// 50 ns/op or less).
func BenchmarkSessionLookupParallel(b *testing.B) {
	tb, _, raw := lookupFixture(10000)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, ok := tb.GetBytes(raw[i%len(raw)]); !ok {
				b.Fatal("missing session")
			}
			i += 7
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mlookups/s")
}

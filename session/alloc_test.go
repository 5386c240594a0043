//go:build !race

// The race detector makes sync.Pool and maps allocate; allocation counts are
// measured without it.

package session

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTableLookupZeroAlloc(t *testing.T) {
	tb, ids, raw := lookupFixture(1000)
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		if _, ok := tb.Get(ids[i%len(ids)]); !ok {
			t.Fatal("missing session")
		}
		i++
	})
	assert.Zero(t, allocs, "Get allocates")
	allocs = testing.AllocsPerRun(1000, func() {
		if _, ok := tb.GetBytes(raw[i%len(raw)]); !ok {
			t.Fatal("missing session")
		}
		i++
	})
	assert.Zero(t, allocs, "GetBytes allocates")
	miss := []byte("00000000000000000000000000000000")
	allocs = testing.AllocsPerRun(1000, func() {
		if _, ok := tb.GetBytes(miss); ok {
			t.Fatal("unexpected session")
		}
	})
	assert.Zero(t, allocs, "a missed GetBytes allocates")
}

func TestLocalBusPublishZeroAlloc(t *testing.T) {
	bus := NewLocalBus()
	n := 0
	cancel := bus.Subscribe("t", func(string, []byte) { n++ })
	defer cancel()
	payload := []byte(`"mem://x"`)
	allocs := testing.AllocsPerRun(1000, func() { bus.Publish("t", payload) })
	assert.Zero(t, allocs)
	assert.Positive(t, n)
	allocs = testing.AllocsPerRun(1000, func() { bus.Publish("nobody", payload) })
	assert.Zero(t, allocs)
}

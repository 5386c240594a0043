package http

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fillStore sends n notifications with payloads of the given sizes, in
// turn, to h's standalone stream (no GET open: they are only stored).
func fillStore(t testing.TB, h *hsession, n int, sizes ...int) {
	for i := 0; i < n; i++ {
		b := codec.GetBuffer()
		b.B = codec.AppendNotification(b.B, "notifications/message",
			[]byte(`{"level":"info","data":"`+strings.Repeat("z", sizes[i%len(sizes)])+`"}`))
		require.NoError(t, h.Send(b))
	}
}

// retained sums what h's store really holds: the capacity of each event's
// buffer, its header, and the store's slice of events.
func retained(h *hsession) (bytes, events int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := &h.store
	for i := 0; i < st.n; i++ {
		b := st.at(i).buf
		bytes += cap(b.B) + int(unsafe.Sizeof(*b))
		events++
	}
	return bytes + cap(st.ev)*int(unsafe.Sizeof(event{})), events
}

// TestEventStoreCountsRetainedBytes: the store's byte cap bounds the
// memory its events pin, not the length of their messages. Small messages
// each pin a pooled buffer of 512 bytes or more: counted by length, a
// store held seven times its cap.
func TestEventStoreCountsRetainedBytes(t *testing.T) {
	const limit = 64 << 10
	e := newEnv(t, envOpts{opts: Options{EventStoreBytes: limit}})
	for _, tc := range []struct {
		name  string
		sizes []int
	}{
		{"small", []int{10}},
		{"mixed", []int{10, 200, 700, 40, 1500, 3000, 90}},
		{"large", []int{9000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := e.srv.lookup([]byte(e.initialize()))
			// Several times what the store holds, so that it evicts.
			fillStore(t, h, 8*limit/(tc.sizes[0]+60), tc.sizes...)
			got, n := retained(h)
			t.Logf("%d events retain %d bytes (cap %d)", n, got, limit)
			assert.LessOrEqual(t, got, limit*110/100, "retained bytes within 10% of the cap")
			assert.GreaterOrEqual(t, got, limit*75/100, "the store uses its cap")
			h.mu.Lock()
			assert.LessOrEqual(t, h.store.bytes, limit)
			h.mu.Unlock()
		})
	}
}

// TestEventStoreHeapWithinCap measures it: the heap that the stores of
// many sessions hold stays within 10% of their caps.
func TestEventStoreHeapWithinCap(t *testing.T) {
	if testing.Short() {
		t.Skip("fills 64 stores")
	}
	if raceEnabled {
		t.Skip("the race detector changes allocation")
	}
	const (
		limit    = 256 << 10
		sessions = 64
	)
	e := newEnv(t, envOpts{opts: Options{EventStoreBytes: limit}})
	hs := make([]*hsession, sessions)
	for i := range hs {
		hs[i] = e.srv.lookup([]byte(e.initialize()))
	}
	heap := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.GC() // the second empties sync.Pool's victim cache
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	before := heap()
	for _, h := range hs {
		fillStore(t, h, 3*limit/100, 60, 100, 140)
	}
	after := heap()
	runtime.KeepAlive(hs)
	per := float64(int64(after)-int64(before)) / sessions
	t.Logf("heap in use: %d → %d bytes, %.0f per session, cap %d (%.1f%%)", before, after, per, limit, 100*per/limit)
	assert.Less(t, per, 1.10*limit, "each store holds at most its cap, within 10%")
	assert.Greater(t, per, 0.5*limit, "the measure measures the stores")
	_, n := retained(hs[0])
	assert.Less(t, n, limit/512, fmt.Sprintf("%d events in a %d-byte store", n, limit))
}

//go:build !race

// The race detector makes sync.Pool drop items at random, so allocation
// counts are measured without it.

package cluster

import "testing"

// TestCheckAllocs: the checks add no allocation to a forwarded answer.
func TestCheckAllocs(t *testing.T) {
	body := []byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hi"}]}}`)
	if n := testing.AllocsPerRun(100, func() { _ = checkBody(ctJSON, body) }); n != 0 {
		t.Errorf("checkBody: %v allocations", n)
	}
	ev := []byte("id: a-2\ndata: " + string(body) + "\n\n")
	f := new(forward)
	f.checkEvents(ev)
	if n := testing.AllocsPerRun(100, func() { _, _ = f.checkEvents(ev) }); n != 0 {
		t.Errorf("checkEvents: %v allocations", n)
	}
}

package mcpedge

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestSpread: lame-duck mode closes total connections evenly across d.
func TestSpread(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const total, d = 20, time.Second
		start := time.Now()
		var at []time.Duration
		spread(context.Background(), d, total, func(max int) int {
			for range max {
				at = append(at, time.Since(start))
			}
			return max
		})
		if len(at) != total {
			t.Fatalf("closed %d, want %d", len(at), total)
		}
		if got := time.Since(start); got != d {
			t.Fatalf("took %v, want %v", got, d)
		}
		// By half of d, half of them; each within one step of its share.
		step := d / total
		for i, a := range at {
			if want := time.Duration(i+1) * step; a < want-step || a > want+step {
				t.Errorf("close %d at %v, want about %v", i, a, want)
			}
		}
	})
}

// TestSpreadEndsWithContext: the drain's deadline cuts lame-duck mode short.
func TestSpreadEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		n := 0
		spread(ctx, time.Second, 1000, func(max int) int { n += max; return max })
		if got := time.Since(start); got != 100*time.Millisecond {
			t.Fatalf("returned after %v, want the context's 100ms", got)
		}
		if n == 0 || n >= 1000 {
			t.Fatalf("closed %d of 1000 in a tenth of the time", n)
		}
	})
}

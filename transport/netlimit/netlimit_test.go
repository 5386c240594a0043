package netlimit

import (
	"errors"
	"net/netip"
	"sync"
	"syscall"
	"testing"
)

func TestLimiter(t *testing.T) {
	a, b := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	tests := []struct {
		name       string
		max, perIP int
		acquire    []netip.Addr
		want       []error
	}{
		{"no limits", 0, 0, []netip.Addr{a, a, b}, []error{nil, nil, nil}},
		{"total", 2, 0, []netip.Addr{a, b, a}, []error{nil, nil, ErrTooManyConns}},
		{"per address", 0, 1, []netip.Addr{a, b, a}, []error{nil, nil, ErrTooManyConnsPerIP}},
		{"mapped address counts as its IPv4 twin", 0, 1, []netip.Addr{a, netip.AddrFrom16(a.As16())}, []error{nil, ErrTooManyConnsPerIP}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := New(tt.max, tt.perIP)
			var held []netip.Addr
			for i, ip := range tt.acquire {
				err := l.Acquire(ip)
				if !errors.Is(err, tt.want[i]) || (err == nil) != (tt.want[i] == nil) {
					t.Fatalf("Acquire #%d (%s) = %v, want %v", i, ip, err, tt.want[i])
				}
				if err == nil {
					held = append(held, ip)
				}
			}
			if got := l.Open(); got != int64(len(held)) {
				t.Fatalf("Open = %d, want %d", got, len(held))
			}
			for _, ip := range held {
				l.Release(ip)
			}
			if l.Open() != 0 || len(l.byIP) != 0 {
				t.Fatalf("after release: open %d, addresses %d", l.Open(), len(l.byIP))
			}
		})
	}
}

func TestLimiterNil(t *testing.T) {
	var l *Limiter
	if err := l.Acquire(netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	l.Release(netip.Addr{})
}

func TestLimiterConcurrent(t *testing.T) {
	l := New(50, 10)
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := 0
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ip := netip.AddrFrom4([4]byte{127, 0, 0, byte(1 + i%8)})
			if l.Acquire(ip) == nil {
				mu.Lock()
				admitted++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if admitted > 50 || int64(admitted) != l.Open() {
		t.Fatalf("admitted %d, open %d", admitted, l.Open())
	}
}

func TestDefaultMaxConns(t *testing.T) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<30 {
		t.Skip("no finite RLIMIT_NOFILE")
	}
	n := int(rl.Cur)
	want := n - max(n/10, 64)
	if want < 1 {
		want = 1
	}
	if got := DefaultMaxConns(); got != want {
		t.Fatalf("DefaultMaxConns = %d with RLIMIT_NOFILE %d, want %d", got, n, want)
	}
}

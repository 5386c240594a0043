package lograte

import (
	"bytes"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestFloodIsRateLimitedPerAddress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, nil))
		l := New(3, time.Second, 0)
		bad, good := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
		for range 1000 {
			l.Warn(log, bad, "bad input", "remote", bad)
		}
		l.Warn(log, good, "bad input", "remote", good)
		if got := strings.Count(buf.String(), "remote=192.0.2.1"); got != 3 {
			t.Fatalf("flooding address: %d lines, want 3 (the burst)\n%s", got, buf.String())
		}
		if !strings.Contains(buf.String(), "remote=192.0.2.2") {
			t.Fatal("another address was silenced by the flood")
		}
		time.Sleep(time.Second)
		buf.Reset()
		l.Warn(log, bad, "bad input", "remote", bad)
		if !strings.Contains(buf.String(), "suppressed=997") {
			t.Fatalf("want the summary of the lines dropped, got %q", buf.String())
		}
	})
}

func TestBoundedSources(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(1, time.Second, 16)
		for i := range 1000 {
			l.Allow(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}))
			time.Sleep(time.Millisecond)
		}
		if n := l.Len(); n > 16 {
			t.Fatalf("tracks %d addresses, want at most 16", n)
		}
	})
}

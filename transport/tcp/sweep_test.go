package tcp

import (
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// TestAwaitedMessageStampedExactly: the start of an awaited message (a
// connection's first, or one left partial) is stamped with the clock
// itself. The sweeper's coarse clock is as old as its last tick, and a
// sweeper late to tick (busy enforcing a budget, or not scheduled on a
// loaded machine) once made the stamp that much older than the message:
// the read timeout then closed messages before they had had it (a chaos
// client's initialize, closed for the read timeout as soon as it arrived).
func TestAwaitedMessageStampedExactly(t *testing.T) {
	s, fc := trafficServer(t, Options{ReadTimeout: time.Second})
	// The sweeper last ticked an hour ago.
	s.epoch = s.epoch.Add(-time.Hour)
	s.clock.Store(1)
	fresh := func(what string, stamp int64) {
		t.Helper()
		if age := time.Duration(s.exactNow() - stamp); stamp == 0 || age > time.Minute {
			t.Errorf("%s stamped %s old, by a stale clock; the sweeper would close it at once", what, age)
		}
	}

	k := fc.ctx.(*conn)
	fc.in = []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"`) // partial
	if s.onTraffic(fc) != gnet.None {
		t.Fatal("closed")
	}
	fresh("a partial message", k.since.Load())

	nc := &fakeConn{}
	if _, a := s.onOpen(nc); a != gnet.None {
		t.Fatal("OnOpen refused the connection")
	}
	fresh("a new connection's first message", nc.ctx.(*conn).since.Load())
}

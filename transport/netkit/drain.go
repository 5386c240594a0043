package netkit

import (
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// DrainTick is how often a drain closes the connections that have become
// idle since it last looked.
const DrainTick = 10 * time.Millisecond

// Drainer is a transport's drain: once begun, it closes the transport's
// connections as they become idle, every DrainTick, until the transport
// stops. The zero value is ready. Its methods are safe for concurrent
// use.
type Drainer struct {
	on atomic.Bool
	wg sync.WaitGroup
}

// Draining reports whether Start was called.
func (d *Drainer) Draining() bool { return d.on.Load() }

// Start begins the drain, once: it calls closeIdle(-1) every DrainTick on
// a goroutine of its own until stop is closed. A nil stop (the transport
// is not serving) only marks the drain begun. Start does not block, nor
// close anything itself: the transport closes its idle connections at
// once with CloseIdle(-1) after it.
func (d *Drainer) Start(stop <-chan struct{}, closeIdle func(max int) int) {
	if !d.on.CompareAndSwap(false, true) || stop == nil {
		return
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		t := time.NewTicker(DrainTick)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				closeIdle(-1)
			}
		}
	}()
}

// Wait waits until the goroutine Start began has returned (once stop is
// closed).
func (d *Drainer) Wait() { d.wg.Wait() }

// Unread reports whether the socket fd holds bytes not read yet: a peek
// (MSG_PEEK), which consumes nothing and does not block. A drain closes a
// connection only when it holds none, so that a request the client sent
// before the close is read and answered, never dropped.
func Unread(fd int) bool { return peek(fd) }

// UnreadConn is Unread of c's socket; false when c has none
// (syscall.Conn).
func UnreadConn(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	waiting := false
	_ = rc.Control(func(fd uintptr) { waiting = peek(int(fd)) })
	return waiting
}

//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package http

import (
	"net"
	"sync/atomic"
	"syscall"
	"time"
)

// watcher notices a client that closes its connection while its request
// is served: fasthttp reads nothing between a request and its response, so
// nothing else would. It waits for the socket to become readable and peeks
// (MSG_PEEK consumes nothing, so a pipelined request stays for fasthttp).
// End of stream or a reset means the client is gone; readable data means
// it is alive, and the watch ends there.
type watcher struct {
	conn    net.Conn
	stopped atomic.Bool
	done    chan struct{}
}

// watchConn calls gone, on its own goroutine, if the peer of conn closes
// the connection before stop. It returns nil for connections it cannot
// watch (not a socket: TLS, in-memory pipes).
func watchConn(conn net.Conn, gone func()) *watcher {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	// fasthttp's read deadline for the request may still be set.
	if conn.SetReadDeadline(time.Time{}) != nil {
		return nil
	}
	w := &watcher{conn: conn, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		var b [1]byte
		closed := false
		_ = rc.Read(func(fd uintptr) bool {
			n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK)
			if err == syscall.EAGAIN || err == syscall.EINTR {
				return false // wait until readable
			}
			closed = n == 0 || err != nil
			return true
		})
		if closed && !w.stopped.Load() {
			gone()
		}
	}()
	return w
}

// stop ends the watch and waits for its goroutine, leaving the connection
// without read deadline for fasthttp to set its own. Safe on nil.
func (w *watcher) stop() {
	if w == nil {
		return
	}
	w.stopped.Store(true)
	_ = w.conn.SetReadDeadline(aLongTimeAgo)
	<-w.done
	_ = w.conn.SetReadDeadline(time.Time{})
}

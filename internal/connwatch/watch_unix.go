//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package connwatch

import (
	"net"
	"syscall"
	"time"
)

// watchSocket waits for the socket to become readable and peeks (MSG_PEEK
// consumes nothing, so a pipelined request stays for the server). End of
// stream or a reset means the client is gone; readable data means it is
// alive, and the watch ends there.
func watchSocket(conn net.Conn, gone func()) *Watcher {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	// The server's read deadline for the request may still be set.
	if conn.SetReadDeadline(time.Time{}) != nil {
		return nil
	}
	w := &Watcher{conn: conn, done: make(chan struct{})}
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

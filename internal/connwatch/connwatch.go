// Package connwatch notices a client that closes its connection while the
// server is not reading from it: fasthttp reads nothing between a request
// and its response, so nothing else would. Streamable HTTP watches a
// request that takes a while, and each SSE stream; a cluster node watches
// the client of a request it forwarded.
package connwatch

import (
	"net"
	"sync/atomic"
	"time"
)

// PeerGoner is a connection that knows itself when its peer went away (a
// request tunnelled through a cluster): Watch waits on PeerGone instead of
// the socket.
type PeerGoner interface {
	PeerGone() <-chan struct{}
}

// aLongTimeAgo is a deadline in the past, to abort a blocked read.
var aLongTimeAgo = time.Unix(1, 0)

// Watcher is one watch; Stop ends it. Safe on nil.
type Watcher struct {
	conn    net.Conn
	stopped atomic.Bool
	stopc   chan struct{} // PeerGoner watches
	done    chan struct{}
}

// Watch calls gone, on its own goroutine, if the peer of conn closes the
// connection before Stop. It returns nil for connections it cannot watch
// (not a socket nor a PeerGoner: TLS, in-memory pipes), whose client is
// noticed when a write to it fails.
func Watch(conn net.Conn, gone func()) *Watcher {
	if g, ok := conn.(PeerGoner); ok {
		w := &Watcher{stopc: make(chan struct{}), done: make(chan struct{})}
		go func() {
			defer close(w.done)
			select {
			case <-g.PeerGone():
				if !w.stopped.Load() {
					gone()
				}
			case <-w.stopc:
			}
		}()
		return w
	}
	return watchSocket(conn, gone)
}

// Stop ends the watch and waits for its goroutine, leaving a socket
// without read deadline for its server to set its own.
func (w *Watcher) Stop() {
	if w == nil {
		return
	}
	w.stopped.Store(true)
	if w.stopc != nil {
		close(w.stopc)
		<-w.done
		return
	}
	_ = w.conn.SetReadDeadline(aLongTimeAgo)
	<-w.done
	_ = w.conn.SetReadDeadline(time.Time{})
}

//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package http

import "net"

// watcher is not available on this platform: a client that disconnects
// is noticed when a write to it fails.
type watcher struct{}

func watchConn(net.Conn, func()) *watcher { return nil }

func (w *watcher) stop() {}

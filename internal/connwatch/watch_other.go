//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package connwatch

import "net"

// watchSocket is not available on this platform: a client that
// disconnects is noticed when a write to it fails.
func watchSocket(net.Conn, func()) *Watcher { return nil }

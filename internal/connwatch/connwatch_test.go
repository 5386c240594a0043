package connwatch

import (
	"net"
	"testing"
	"time"
)

type tunnel struct {
	net.Conn
	gone chan struct{}
}

func (t tunnel) PeerGone() <-chan struct{} { return t.gone }

func TestWatch(t *testing.T) {
	t.Run("socket closed by the peer", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		cc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		sc, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		gone := make(chan struct{})
		w := Watch(sc, func() { close(gone) })
		if w == nil {
			t.Fatal("a TCP socket is watchable")
		}
		cc.Close()
		select {
		case <-gone:
		case <-time.After(5 * time.Second):
			t.Fatal("the close went unnoticed")
		}
		w.Stop()
	})
	t.Run("peer gone reported by the connection", func(t *testing.T) {
		tun := tunnel{gone: make(chan struct{})}
		called := make(chan struct{})
		w := Watch(tun, func() { close(called) })
		close(tun.gone)
		select {
		case <-called:
		case <-time.After(5 * time.Second):
			t.Fatal("PeerGone went unnoticed")
		}
		w.Stop()
	})
	t.Run("stopped before", func(t *testing.T) {
		tun := tunnel{gone: make(chan struct{})}
		w := Watch(tun, func() { t.Error("gone after Stop") })
		w.Stop()
		close(tun.gone)
		var nilw *Watcher
		nilw.Stop()
		if Watch(tunnelLess{}, func() {}) != nil {
			t.Error("a pipe is not watchable")
		}
	})
}

type tunnelLess struct{ net.Conn }

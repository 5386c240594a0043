package cluster

import (
	"bufio"
	"context"
	"crypto/rand"
	"io"
	"net"
	"testing"
	"time"
)

// TestLinkRefusesStrangers: a process that reaches a node's direct link
// gets nothing from it and can send it nothing: garbage, a handshake
// signed with another key, and one that stops half way are refused and
// counted; a peer with the key is let in.
func TestLinkRefusesStrangers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node")
	}
	key := []byte("0123456789abcdef0123456789abcdef")
	n, err := Start(context.Background(), Options{Node: "a", Embed: "127.0.0.1:0", Keys: [][]byte{key}, Link: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	addr := n.LinkAddr().String()
	closed := func(c net.Conn) bool {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err := io.ReadAll(c)
		return err == nil // EOF: the node closed it
	}
	t.Run("garbage", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		junk := make([]byte, 4096)
		_, _ = rand.Read(junk)
		_, _ = c.Write(junk)
		if !closed(c) {
			t.Fatal("not closed")
		}
	})
	for _, tc := range []struct {
		name string
		key  []byte
		ok   bool
	}{{"another key", []byte("not the key of this cluster, no"), false}, {"the key", key, true}} {
		t.Run(tc.name, func(t *testing.T) {
			before := n.Stats().LinksRefused
			peer := &Node{name: "x", inc: "1", sig: newSigner([][]byte{tc.key}), maxFrame: 1 << 20}
			lc, err := peer.dialLink("a", n.inc, addr)
			if !tc.ok {
				// The node proves itself first: a stranger learns it is
				// not the node's peer, and sends nothing it would take.
				if err == nil {
					lc.shut()
					t.Fatal("a stranger's link was let in")
				}
				deadline := time.Now().Add(5 * time.Second)
				for n.Stats().LinksRefused == before && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
				}
				if n.Stats().LinksRefused == before {
					t.Fatal("not counted")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			lc.shut()
			if n.Stats().LinksRefused != before {
				t.Fatal("a peer with the key was refused")
			}
		})
	}
	t.Run("a stranger that answers the node's proof", func(t *testing.T) {
		before := n.Stats().LinksRefused
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		w, r := bufio.NewWriter(c), bufio.NewReader(c)
		nonce := make([]byte, nonceSize)
		_, _ = w.WriteString(linkMagic)
		writeField(w, []byte("x"))
		writeField(w, []byte("1"))
		writeField(w, nonce)
		_ = w.Flush()
		for range 4 {
			if _, err := readField(r); err != nil {
				t.Fatal(err)
			}
		}
		writeField(w, make([]byte, 32)) // a proof it cannot make
		frame := []byte{0, 0, 0, 9, lkRequest, 0, 0, 0, 0, 0, 0, 0, 1}
		_, _ = w.Write(frame)
		_ = w.Flush()
		if !closed(c) {
			t.Fatal("not closed")
		}
		deadline := time.Now().Add(5 * time.Second)
		for n.Stats().LinksRefused == before && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if n.Stats().LinksRefused == before || n.Stats().Served != 0 {
			t.Fatalf("refused %d, served %d", n.Stats().LinksRefused-before, n.Stats().Served)
		}
	})
}

//go:build !race

// The race detector makes sync.Pool drop items at random, so allocation
// counts are measured without it.

package cluster

import (
	"bufio"
	"io"
	"net"
	"testing"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/session"
	"github.com/valyala/fasthttp"
)

// linkPair returns a node and the two ends of a link on loopback: the
// dialled one (its writer's requests go to the other) and the accepted
// one. Their readers are the test's.
func linkPair(t *testing.T) (n *Node, dialled, accepting *linkConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sc := <-accepted
	if sc == nil {
		t.Fatal("no connection accepted")
	}
	n = &Node{maxFrame: 1 << 20, pending: map[uint64]*forward{}, tunnels: map[tunKey]*tunnelConn{}}
	dialled, accepting = n.newLinkConn(c, "b", true), n.newLinkConn(sc, "a", false)
	t.Cleanup(dialled.shut)
	t.Cleanup(accepting.shut)
	return n, dialled, accepting
}

// TestLinkHopAllocs holds the direct link's own part of a forwarded
// request at its allocations: a frame written on the link (its writer
// goroutine's system call included) and read at the other end, an answer
// carved from the reader's block (one allocation per block of many
// frames, so none per run on average), at none; the owner's tunnel,
// made, given the client's address and the request's headers, and ended,
// at one: the tunnel itself, whose memory is recycled.
func TestLinkHopAllocs(t *testing.T) {
	n, w, rc := linkPair(t)
	r := bufio.NewReaderSize(rc.c, linkBuffer)

	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod("POST")
	ctx.Request.SetRequestURI("/mcp")
	ctx.Request.Header.Set("Mcp-Session-Id", "a.1")
	ctx.Request.SetBodyString(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"a.2"}}`)
	req := appendRequest(nil, &ctx, nil)
	var got []byte
	hop := func() {
		if err := w.write(lkAnswer, 7, req); err != nil {
			t.Fatal(err)
		}
		kind, id, size, err := rc.readHead(r)
		if err != nil || kind != lkAnswer || id != 7 || size != len(req) {
			t.Fatalf("frame %c %d %d: %v", kind, id, size, err)
		}
		got = rc.payload(size)
		if _, err := io.ReadFull(r, got); err != nil {
			t.Fatal(err)
		}
	}
	hop()
	if string(got) != string(req) {
		t.Fatalf("the frame read is not the frame written")
	}
	if allocs := testing.AllocsPerRun(200, hop); allocs != 0 {
		t.Errorf("a frame across the link: %v allocations", allocs)
	}

	tunnel := func() {
		tn := n.getTunnel()
		tn.key = tunKey{link: rc, id: 7}
		dr, ok := decodeRequest(got, tn.mem.hdrs[:0])
		tn.mem.hdrs = dr.headers
		tn.setRemote(dr.remote)
		if !ok || len(tn.addr.IP) != 4 {
			t.Fatal("the request does not decode")
		}
		n.putTunnel(tn)
	}
	if allocs := testing.AllocsPerRun(200, tunnel); allocs != 1 {
		t.Errorf("a tunnel: %v allocations, want 1 (the tunnel; its memory is recycled)", allocs)
	}
}

// TestDirectHopAllocs holds a direct message's own part of the hop at no
// allocation: the message encoded where it waits on the link (with its
// decoded form), written and read at the other end, parsed there, its
// answer queued (DirectAnswer), written, read and parsed back. What the
// owner's transport does with it is held by transport/http's
// TestServeDirectAllocs.
func TestDirectHopAllocs(t *testing.T) {
	_, fwd, own := linkPair(t)
	ownR, fwdR := bufio.NewReaderSize(own.c, linkBuffer), bufio.NewReaderSize(fwd.c, linkBuffer)
	msg := []byte(`{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"a.x1.2"}}`)
	var m codec.Message
	if err := codec.Decode(msg, &m); err != nil {
		t.Fatal(err)
	}
	req := &session.DirectRequest{Session: []byte("a.x1.0123456789abcdef"), Subject: "static:1", Message: msg}
	answer := []byte(`{"jsonrpc":"2.0","id":3,"result":{"taskId":"a.x1.2","status":"working"}}`)
	var hdrs [][2][]byte
	hop := func() {
		wake, err := fwd.startFrame(lkDirect, 7, len(msg)+64)
		if err != nil {
			t.Fatal(err)
		}
		fwd.out = appendDirect(fwd.out, req, &m, nil)
		fwd.endFrame(wake)
		kind, id, size, err := own.readHead(ownR)
		if err != nil || kind != lkDirect || id != 7 {
			t.Fatalf("frame %c %d: %v", kind, id, err)
		}
		p, err := ownR.Peek(size)
		if err != nil || !parseDirect(p, &own.dreq, &own.dmsg) || own.dreq.Decoded == nil {
			t.Fatalf("the direct message does not parse: %v", err)
		}
		_, _ = ownR.Discard(size)
		own.DirectAnswer(id, 200, 0, answer)
		kind, id, size, err = fwd.readHead(fwdR)
		if err != nil || kind != lkAnswer || id != 7 {
			t.Fatalf("answer %c %d: %v", kind, id, err)
		}
		got := fwd.payload(size)
		if _, err := io.ReadFull(fwdR, got); err != nil {
			t.Fatal(err)
		}
		fr, ok := parseFrame(got, hdrs)
		if !ok || fr.kind != frDirect || fr.status != 200 || string(fr.body) != string(answer) {
			t.Fatalf("the answer does not parse: %q", got)
		}
	}
	hop()
	if allocs := testing.AllocsPerRun(200, hop); allocs != 0 {
		t.Errorf("a direct message and its answer across the link: %v allocations", allocs)
	}
}

// TestEventAllocs holds a kept event (events.go) at its allocations: the
// issuer's message encoded and signed without any, and the receiving
// node's check and keeping with one, the copy it keeps.
func TestEventAllocs(t *testing.T) {
	n := &Node{sig: newSigner([][]byte{[]byte("0123456789abcdef0123456789abcdef")}), inst: "a.x1", maxFrame: 1 << 20}
	n.events.init("p")
	data := []byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"7","progress":3}}`)
	buf := make([]byte, 0, 1024)
	if allocs := testing.AllocsPerRun(100, func() {
		buf = n.appendEvent(buf[:0], "a.s1", 1, 9, []byte("7"), false, data)
	}); allocs != 0 {
		t.Errorf("appendEvent: %v allocations", allocs)
	}
	keep := func() {
		body, ok := n.sig.open(buf)
		if !ok {
			t.Fatal("the signature does not check")
		}
		ev, ok := parseEvent(body)
		if !ok {
			t.Fatal("the event does not parse")
		}
		n.events.add(ev.sid, ev.inst, ev.stream, ev.seq, ev.reqID, ev.final, ev.data, 1<<20, 1<<30)
	}
	keep() // the session and its stream are new: they are copied once
	if allocs := testing.AllocsPerRun(100, keep); allocs > 1 {
		t.Errorf("an event checked and kept: %v allocations, want the copy alone", allocs)
	}
}

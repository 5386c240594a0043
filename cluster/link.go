package cluster

import (
	"bufio"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/session"
)

// The direct link: forwarded requests and their answers go over TCP
// straight to the node that serves them, rather than through two
// nats-servers each way (docs/cluster.md, "A cheaper hop": the floor of
// a bare request and answer is about a quarter of NATS's). Each node
// listens on Options.Link and advertises the address in its heartbeats;
// a node that forwards to another dials it once and keeps the
// connection, on which requests are pipelined: each is a frame with a
// number, its answer frames carry the number back. Membership, records,
// events and the bus stay on NATS; a node without a link, or whose link
// cannot be dialled, is forwarded to through NATS as before.
//
// A connection is authenticated both ways before anything else: each
// side proves it holds the cluster's key (Options.Keys) with an HMAC of
// both sides' random nonces and names, so a process that reaches the
// port, or replays a handshake, gets nothing and can send nothing. What
// comes on a link is then checked as what comes from NATS (check.go).
// Bounded: a frame at most the cluster's message size, handshakes at
// most linkHandshakes at once within linkHandshakeTimeout, connections
// at most linkMaxConns.

// Link frame kinds.
const (
	lkRequest = 'Q' // a forwarded request (appendRequest)
	lkAnswer  = 'A' // an answer frame (the reply frames of wire.go)
	lkCancel  = 'C' // the client of request id went away
)

// Link bounds.
const (
	linkMagic            = "MCPL1"
	linkHandshakeTimeout = 5 * time.Second
	linkHandshakes       = 64   // at once
	linkMaxConns         = 1024 // accepted, alive
	linkRetry            = time.Second
	linkWriteTimeout     = 10 * time.Second
	linkBuffer           = 64 << 10
	nonceSize            = 32
)

var errLinkAuth = errors.New("cluster: link handshake failed")

// linkConn is one authenticated connection between two nodes: the
// dialling node sends requests and cancels, the other answers.
type linkConn struct {
	n     *Node
	c     net.Conn
	peer  string        // the other node's name
	addr  string        // dialled: the address it was dialled at
	dial  bool          // this node dialled it (its requests go on it)
	r     *bufio.Reader // accepted: the reader the handshake started
	dead  atomic.Bool
	close sync.Once

	slab []byte // dialled: the block answer frames are read into (payload)

	dreq session.DirectRequest // accepted: the direct message being served (serveDirect)
	dmsg codec.Message         // and its message, decoded by the peer

	// Writes are combined: a writer appends its frame to out and wakes
	// the link's writer goroutine (writeLoop) unless it is awake already;
	// the writer yields once, then writes all that waits, again and again
	// while others append meanwhile. So frames sent together share a
	// wake-up and a system call (writing each frame at once, as the link
	// first did, cost a system call per frame: a third of a forwarded
	// call's CPU), and no caller waits on a write.
	wmu      sync.Mutex
	out      []byte
	spare    []byte
	flushing bool          // the writer is woken or writing: no need to wake it
	holding  bool          // accepted: the reader serves what it read, and wakes the writer once it has read all (serve)
	frame    int           // where the frame being queued starts in out (startFrame)
	kick     chan struct{} // wakes the writer
	done     chan struct{} // closed by shut: the writer exits
}

// linkDialer is this node's hold on its link to one peer. cur is read
// without the lock on every forward; mu is held while dialling, and a
// forward that finds it held goes through NATS rather than wait.
type linkDialer struct {
	cur    atomic.Pointer[linkConn]
	mu     sync.Mutex
	failed time.Time // the last dial that failed: wait linkRetry
}

// startLink listens on Options.Link, when set.
func (n *Node) startLink() error {
	if n.opts.Link == "" {
		return nil
	}
	ln, err := net.Listen("tcp", n.opts.Link)
	if err != nil {
		return fmt.Errorf("cluster: link %s: %w", n.opts.Link, err)
	}
	n.linkLn = ln
	n.linkAddrS = ln.Addr().String()
	n.linkSem = make(chan struct{}, linkHandshakes)
	go n.acceptLinks(ln)
	return nil
}

// LinkAddr returns the address of the node's direct link, nil without.
func (n *Node) LinkAddr() net.Addr {
	if n.linkLn == nil {
		return nil
	}
	return n.linkLn.Addr()
}

// acceptLinks takes the links other nodes dial, until the node closes.
func (n *Node) acceptLinks(ln net.Listener) {
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if n.closed.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			time.Sleep(delay)
			continue
		}
		delay = 0
		select {
		case n.linkSem <- struct{}{}:
		default:
			_ = c.Close() // too many handshakes at once
			continue
		}
		if n.linkConns.Add(1) > linkMaxConns {
			n.linkConns.Add(-1)
			<-n.linkSem
			_ = c.Close()
			continue
		}
		go func() {
			lc, err := n.acceptLink(c)
			<-n.linkSem
			if err != nil {
				n.linkConns.Add(-1)
				n.stats.linkRefused.Add(1)
				n.badMessage("link handshake from "+c.RemoteAddr().String(), []byte(err.Error()))
				_ = c.Close()
				return
			}
			n.trackLink(lc, true)
			lc.serve()
			n.trackLink(lc, false)
			n.linkConns.Add(-1)
		}()
	}
}

// trackLink adds a live link to, or removes it from, the set Close ends.
func (n *Node) trackLink(lc *linkConn, add bool) {
	n.linkMu.Lock()
	defer n.linkMu.Unlock()
	if add {
		if n.links == nil {
			n.links = make(map[*linkConn]struct{})
		}
		n.links[lc] = struct{}{}
		if n.closed.Load() {
			lc.shut()
		}
		return
	}
	delete(n.links, lc)
}

// handshake MACs: each side signs both nonces and both names, with its
// role, so that neither a reflected nor a replayed proof passes.
func (n *Node) linkMAC(role string, nonceA, nonceB []byte, nameA, incA, nameB, incB string) []byte {
	m := hmac.New(sha256.New, n.sig.keys[0])
	for _, b := range [][]byte{[]byte(role), nonceA, nonceB, []byte(nameA), []byte(incA), []byte(nameB), []byte(incB)} {
		var l [4]byte
		binary.BigEndian.PutUint32(l[:], uint32(len(b)))
		m.Write(l[:])
		m.Write(b)
	}
	return m.Sum(nil)
}

// linkMACOK checks a handshake MAC against every key.
func (n *Node) linkMACOK(mac []byte, role string, nonceA, nonceB []byte, nameA, incA, nameB, incB string) bool {
	for _, k := range n.sig.keys {
		m := hmac.New(sha256.New, k)
		for _, b := range [][]byte{[]byte(role), nonceA, nonceB, []byte(nameA), []byte(incA), []byte(nameB), []byte(incB)} {
			var l [4]byte
			binary.BigEndian.PutUint32(l[:], uint32(len(b)))
			m.Write(l[:])
			m.Write(b)
		}
		if hmac.Equal(m.Sum(nil), mac) {
			return true
		}
	}
	return false
}

// writeField and readField frame the handshake's fields: a byte of
// length, the bytes.
func writeField(w *bufio.Writer, b []byte) { _ = w.WriteByte(byte(len(b))); _, _ = w.Write(b) }

func readField(r *bufio.Reader) ([]byte, error) {
	l, err := r.ReadByte()
	if err != nil {
		return nil, err
	}
	b := make([]byte, l)
	_, err = io.ReadFull(r, b)
	return b, err
}

// dialLink connects to peer's link at addr and authenticates: this node
// proves itself second, once the peer proved it is peer.
func (n *Node) dialLink(peer, inc, addr string) (*linkConn, error) {
	c, err := net.DialTimeout("tcp", addr, linkHandshakeTimeout)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(linkHandshakeTimeout))
	r, w := bufio.NewReaderSize(c, linkBuffer), bufio.NewWriterSize(c, 512)
	nonceA := make([]byte, nonceSize)
	_, _ = rand.Read(nonceA)
	_, _ = w.WriteString(linkMagic)
	writeField(w, []byte(n.name))
	writeField(w, []byte(n.inc))
	writeField(w, nonceA)
	if err := w.Flush(); err != nil {
		c.Close()
		return nil, err
	}
	var fields [4][]byte
	for i := range fields {
		if fields[i], err = readField(r); err != nil {
			c.Close()
			return nil, err
		}
	}
	nameB, incB, nonceB, macB := string(fields[0]), string(fields[1]), fields[2], fields[3]
	if nameB != peer || incB != inc || len(nonceB) != nonceSize ||
		!n.linkMACOK(macB, "server", nonceA, nonceB, n.name, n.inc, nameB, incB) {
		c.Close()
		return nil, errLinkAuth
	}
	writeField(w, n.linkMAC("client", nonceA, nonceB, n.name, n.inc, nameB, incB))
	if err := w.Flush(); err != nil {
		c.Close()
		return nil, err
	}
	_ = c.SetDeadline(time.Time{})
	lc := n.newLinkConn(c, peer, true)
	go lc.readAnswers(r)
	return lc, nil
}

// acceptLink authenticates a connection a peer dialled: the peer proves
// itself last, so a process that does not hold the key learns only this
// node's name and a MAC it cannot reuse.
func (n *Node) acceptLink(c net.Conn) (*linkConn, error) {
	_ = c.SetDeadline(time.Now().Add(linkHandshakeTimeout))
	r, w := bufio.NewReaderSize(c, linkBuffer), bufio.NewWriterSize(c, 512)
	magic := make([]byte, len(linkMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != linkMagic {
		return nil, errLinkAuth
	}
	var fields [3][]byte
	var err error
	for i := range fields {
		if fields[i], err = readField(r); err != nil {
			return nil, err
		}
	}
	nameA, incA, nonceA := string(fields[0]), string(fields[1]), fields[2]
	if !validName([]byte(nameA)) || !validInc([]byte(incA)) || len(nonceA) != nonceSize {
		return nil, errLinkAuth
	}
	nonceB := make([]byte, nonceSize)
	_, _ = rand.Read(nonceB)
	writeField(w, []byte(n.name))
	writeField(w, []byte(n.inc))
	writeField(w, nonceB)
	writeField(w, n.linkMAC("server", nonceA, nonceB, nameA, incA, n.name, n.inc))
	if err := w.Flush(); err != nil {
		return nil, err
	}
	macA, err := readField(r)
	if err != nil {
		return nil, err
	}
	if !n.linkMACOK(macA, "client", nonceA, nonceB, nameA, incA, n.name, n.inc) {
		return nil, errLinkAuth
	}
	_ = c.SetDeadline(time.Time{})
	lc := n.newLinkConn(c, nameA, false)
	lc.r = r
	return lc, nil
}

func (n *Node) newLinkConn(c net.Conn, peer string, dial bool) *linkConn {
	lc := &linkConn{n: n, c: c, peer: peer, dial: dial, kick: make(chan struct{}, 1), done: make(chan struct{})}
	go lc.writeLoop()
	return lc
}

// write sends a frame: it is appended to what waits, and the link's
// writer is woken if it sleeps (see linkConn). It fails only when the
// link is down already; a write that fails later ends the link, and with
// it the requests it carried (linkLost, abortLinkTunnels).
func (lc *linkConn) write(kind byte, id uint64, payload []byte) error {
	return lc.write2(kind, id, payload, nil)
}

// write2 is write of a frame whose payload is head, then body.
func (lc *linkConn) write2(kind byte, id uint64, head, body []byte) error {
	wake, err := lc.startFrame(kind, id, len(head)+len(body))
	if err != nil {
		return err
	}
	lc.out = append(lc.out, head...)
	lc.out = append(lc.out, body...)
	lc.endFrame(wake)
	return nil
}

// startFrame locks the link's queue and appends the head of a frame of
// kind for request id, whose payload the caller appends next, about size
// bytes (the bound on what waits is checked against it); endFrame ends
// it. The frame's length is set by endFrame.
func (lc *linkConn) startFrame(kind byte, id uint64, size int) (wake bool, err error) {
	if lc.dead.Load() {
		return false, errLinkDown
	}
	lc.wmu.Lock()
	if len(lc.out)+13+size > linkMaxQueued {
		lc.wmu.Unlock()
		go lc.shut() // the peer does not read: the link is no good (not here: the caller may hold tunMu)
		return false, errLinkDown
	}
	wake = len(lc.out) == 0 && !lc.flushing && !lc.holding
	lc.frame = len(lc.out)
	lc.out = append(lc.out, 0, 0, 0, 0, kind)
	lc.out = binary.BigEndian.AppendUint64(lc.out, id)
	return wake, nil
}

// endFrame ends the frame startFrame started, unlocks the queue, and
// wakes the writer when wake.
func (lc *linkConn) endFrame(wake bool) {
	binary.BigEndian.PutUint32(lc.out[lc.frame:], uint32(len(lc.out)-lc.frame-4))
	lc.n.stats.linkFrames.Add(1)
	if wake {
		lc.flushing = true
	}
	lc.wmu.Unlock()
	if wake {
		lc.wakeWriter()
	}
}

// wakeWriter wakes the link's writer, which the caller found asleep and
// marked flushing.
func (lc *linkConn) wakeWriter() {
	select {
	case lc.kick <- struct{}{}:
	default:
	}
}

// hold stops the writer being woken for each frame queued: the reader
// serves what it read (serve).
func (lc *linkConn) hold() {
	lc.wmu.Lock()
	lc.holding = true
	lc.wmu.Unlock()
}

// release ends hold: the writer is woken for what queued meanwhile.
func (lc *linkConn) release() {
	lc.wmu.Lock()
	lc.holding = false
	wake := len(lc.out) > 0 && !lc.flushing
	if wake {
		lc.flushing = true
	}
	lc.wmu.Unlock()
	if wake {
		lc.wakeWriter()
	}
}

// writeLoop is the link's writer: woken by write, it writes what waits,
// again and again while more comes meanwhile, until the link ends.
func (lc *linkConn) writeLoop() {
	for {
		select {
		case <-lc.kick:
		case <-lc.done:
			return
		}
		// Yield once before writing, so that the goroutines ready to run
		// here add their frames first: under load a write carries many
		// frames (about 15 with 32 requests in flight, against 1.2 when
		// each wrote its own at once), and a wake-up and a system call
		// are shared by all of them.
		lc.gather()
		lc.wmu.Lock()
		for len(lc.out) > 0 {
			b := lc.out
			lc.out = lc.spare[:0]
			lc.wmu.Unlock()
			_ = lc.c.SetWriteDeadline(time.Now().Add(linkWriteTimeout))
			_, err := lc.c.Write(b)
			lc.n.stats.linkWrites.Add(1)
			if err != nil {
				lc.shut()
				return
			}
			lc.wmu.Lock()
			if cap(b) <= linkBuffer {
				lc.spare = b[:0]
			} else {
				lc.spare = nil
			}
		}
		lc.flushing = false
		lc.wmu.Unlock()
	}
}

// gather yields while the goroutines that run meanwhile add frames to
// what waits, at most gatherYields times: the writer writes once they
// are done rather than in the middle of them.
func (lc *linkConn) gather() {
	lc.wmu.Lock()
	k := len(lc.out)
	lc.wmu.Unlock()
	for range gatherYields {
		runtime.Gosched()
		lc.wmu.Lock()
		more := len(lc.out) > k
		k = len(lc.out)
		lc.wmu.Unlock()
		if !more {
			return
		}
	}
}

// gatherYields bounds the writer's yields before a write (gather).
const gatherYields = 4

// linkMaxQueued bounds the bytes waiting to be written on a link: a peer
// that reads nothing fills it, and the link is given up.
const linkMaxQueued = 64 << 20

var errLinkDown = errors.New("cluster: the link is down")

// shut ends the link: its connection closes, its readers and flusher
// stop, the requests it carried fail.
func (lc *linkConn) shut() {
	lc.close.Do(func() {
		lc.dead.Store(true)
		close(lc.done)
		_ = lc.c.Close()
		if lc.dial {
			lc.n.linkLost(lc)
		} else {
			lc.n.abortLinkTunnels(lc)
		}
	})
}

// readHead reads a frame's head: its kind, its id, and the size of the
// payload that follows.
func (lc *linkConn) readHead(r *bufio.Reader) (byte, uint64, int, error) {
	hdr, err := r.Peek(13)
	if err != nil {
		return 0, 0, 0, err
	}
	l := binary.BigEndian.Uint32(hdr[:4])
	kind, id := hdr[4], binary.BigEndian.Uint64(hdr[5:])
	_, _ = r.Discard(13)
	if l < 9 || int(l) > lc.n.maxFrame+256 {
		return 0, 0, 0, errLinkFrame
	}
	return kind, id, int(l) - 9, nil
}

var errLinkFrame = errors.New("cluster: link frame out of bounds")

// linkSlab is the size of the blocks a link's answer frames are read
// into, one after the other: a frame costs an allocation only when a
// block is full (about one in fifty for small JSON answers). A frame is
// held only until its forward has written it to its client, so a block
// is soon garbage; frames over a quarter of a block get their own.
const linkSlab = 16 << 10

// payload returns a slice of size for a frame's payload, carved from the
// link's current block.
func (lc *linkConn) payload(size int) []byte {
	if size > linkSlab/4 {
		return make([]byte, size)
	}
	if len(lc.slab)+size > cap(lc.slab) {
		lc.slab = make([]byte, 0, linkSlab)
	}
	k := len(lc.slab)
	lc.slab = lc.slab[:k+size]
	return lc.slab[k : k+size : k+size]
}

// readAnswers files the answer frames of the requests this node sent on
// the link with their forwards, until the link ends.
func (lc *linkConn) readAnswers(r *bufio.Reader) {
	defer lc.shut()
	for {
		kind, id, size, err := lc.readHead(r)
		if err != nil {
			return
		}
		payload := lc.payload(size)
		if _, err := io.ReadFull(r, payload); err != nil {
			return
		}
		if kind != lkAnswer || len(payload) == 0 {
			lc.n.badMessage("link frame", payload)
			return
		}
		lc.n.fileReply(id, payload)
	}
}

// serve reads the requests and cancels the peer sends on a link it
// dialled, and serves them, until the link ends. A request is read into a
// pooled buffer, which its tunnel holds until it is answered; a direct
// message is served where it lies in the reader's buffer, by this
// goroutine, its answer queued. While what was read is being served, the
// answers queue without waking the writer (holding); once all is served,
// the writer is woken for all of them: as the floor's owner does
// (BenchmarkFloorDirect), one write carries the answers of one read.
func (lc *linkConn) serve() {
	defer lc.shut()
	held := false
	for {
		if held && lc.r.Buffered() < 13 { // the next head may wait for the peer
			lc.release()
			held = false
		}
		kind, id, size, err := lc.readHead(lc.r)
		if err != nil {
			return
		}
		if held && lc.r.Buffered() < size { // and so may the rest of this frame
			lc.release()
			held = false
		}
		if !held && lc.r.Buffered() >= size {
			lc.hold()
			held = true
		}
		switch kind {
		case lkDirect:
			if size <= lc.r.Size() {
				p, err := lc.r.Peek(size)
				if err != nil {
					return
				}
				lc.n.serveDirect(lc, id, p)
				_, _ = lc.r.Discard(size)
				continue
			}
			b := codec.GetBuffer()
			b.B = slices.Grow(b.B[:0], size)[:size]
			if _, err := io.ReadFull(lc.r, b.B); err != nil {
				codec.PutBuffer(b)
				return
			}
			lc.n.serveDirect(lc, id, b.B)
			codec.PutBuffer(b)
		case lkRequest:
			b := codec.GetBuffer()
			b.B = slices.Grow(b.B[:0], size)[:size]
			if _, err := io.ReadFull(lc.r, b.B); err != nil {
				codec.PutBuffer(b)
				return
			}
			t := lc.n.getTunnel()
			t.key, t.mem.req = tunKey{link: lc, id: id}, b
			lc.n.serveRequest(t, b.B)
		case lkCancel:
			if _, err := lc.r.Discard(size); err != nil {
				return
			}
			lc.n.cancelLinkTunnel(lc, id)
		default:
			lc.n.badMessage("link frame", []byte{kind})
			return
		}
	}
}

// linkTo returns the link to peer, dialling it when there is none (at
// most once every linkRetry after a failure); nil when the peer has no
// link, or it cannot be had now: the request then goes through NATS.
func (n *Node) linkTo(peer string) *linkConn {
	if n.linkLn == nil {
		return nil
	}
	// The link up already, found without a lock: a peer that restarts
	// (elsewhere, or as another incarnation) ends its links as it goes,
	// and a link that ends is dead.
	if ds := n.linkDialers.Load(); ds != nil {
		if d := (*ds)[peer]; d != nil {
			if lc := d.cur.Load(); lc != nil && !lc.dead.Load() {
				return lc
			}
		}
	}
	n.members.mu.Lock()
	p := n.members.peers[peer]
	var addr, inc string
	if p != nil && !p.dead {
		addr, inc = p.link, p.inc
	}
	n.members.mu.Unlock()
	if addr == "" {
		return nil
	}
	n.linkMu.Lock()
	var d *linkDialer
	ds := n.linkDialers.Load()
	if ds != nil {
		d = (*ds)[peer]
	}
	if d == nil {
		// A peer's first link: a new map, which readers load whole.
		m := make(map[string]*linkDialer, 1)
		if ds != nil {
			maps.Copy(m, *ds)
		}
		d = &linkDialer{}
		m[peer] = d
		n.linkDialers.Store(&m)
	}
	n.linkMu.Unlock()
	if lc := d.cur.Load(); lc != nil && !lc.dead.Load() && lc.addr == addr {
		return lc
	}
	if !d.mu.TryLock() {
		return nil // another forward is dialling it: NATS meanwhile
	}
	defer d.mu.Unlock()
	if lc := d.cur.Load(); lc != nil {
		if !lc.dead.Load() && lc.addr == addr {
			return lc
		}
		lc.shut() // its peer restarted elsewhere
		d.cur.Store(nil)
	}
	if time.Since(d.failed) < linkRetry || n.closed.Load() {
		return nil
	}
	lc, err := n.dialLink(peer, inc, addr)
	if err != nil {
		d.failed = time.Now()
		n.natsWarns.Warn(n.log, netip.Addr{}, "cluster: cannot link to a node; its forwards go through NATS", "peer", peer, "addr", addr, "err", err)
		return nil
	}
	lc.addr = addr
	n.trackLink(lc, true)
	d.cur.Store(lc)
	return lc
}

// dropLink ends the link this node dialled to peer, if any: the peer is
// lost, and its link, which the network may not have cut yet, is not
// used any more (linkTo dials anew once the peer is back).
func (n *Node) dropLink(peer string) {
	if ds := n.linkDialers.Load(); ds != nil {
		if d := (*ds)[peer]; d != nil {
			if lc := d.cur.Load(); lc != nil {
				lc.shut()
			}
		}
	}
}

// linkLost fails the forwards in flight on a link this node dialled: their
// answers are lost (a JSON answer awaited is answered 502, a relayed
// stream is cut, the client resumes it).
func (n *Node) linkLost(lc *linkConn) {
	n.trackLink(lc, false)
	n.pendMu.Lock()
	defer n.pendMu.Unlock()
	for _, f := range n.pending {
		if f.link != lc {
			continue
		}
		f.lost.Store(true)
		select {
		case f.ch <- linkLostFrame:
		default:
		}
	}
}

// linkLostFrame wakes a forward whose link went down: it finds its answer
// lost (forward.frame).
var linkLostFrame = []byte{}

// cancelLinkTunnel ends the request id a link carries: its client went
// away.
func (n *Node) cancelLinkTunnel(lc *linkConn, id uint64) {
	n.tunMu.Lock()
	if t := n.tunnels[tunKey{link: lc, id: id}]; t != nil {
		n.stats.cancelled.Add(1)
		t.abort()
	}
	n.tunMu.Unlock()
}

// abortLinkTunnels ends the requests a link that went down carried.
func (n *Node) abortLinkTunnels(lc *linkConn) {
	n.tunMu.Lock()
	for k, t := range n.tunnels {
		if k.link == lc {
			t.abort()
		}
	}
	n.tunMu.Unlock()
}

// closeLinks ends the listener and every link, at Close.
func (n *Node) closeLinks() {
	if n.linkLn != nil {
		_ = n.linkLn.Close()
	}
	n.linkMu.Lock()
	links := make([]*linkConn, 0, len(n.links))
	for lc := range n.links {
		links = append(links, lc)
	}
	n.linkMu.Unlock()
	for _, lc := range links {
		lc.shut()
	}
}

package cluster_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/cluster"
	"github.com/nats-io/nats.go"
)

// The floors a forwarded call is measured against (docs/cluster.md, "A
// cheaper hop"): the same bytes sent to another node and answered,
// through the embedded nats-servers, and over a direct TCP connection
// between two processes' worth of goroutines. Each reports, besides the
// wall time, the process's CPU time per call (cpu-µs/op), which is what
// make bench-cluster compares: on a busy machine wall time says little.

// floorRequest and floorAnswer are the sizes of a forwarded tools/call of
// echo and of its answer, headers included.
const (
	floorRequest = 420
	floorAnswer  = 260
)

// cpuClock reports the process's user and system CPU time.
func cpuClock() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU runs fn (a benchmark's loop) and reports its CPU per op.
func reportCPU(b *testing.B, fn func()) {
	b.Helper()
	start := cpuClock()
	fn()
	b.ReportMetric(float64(cpuClock()-start)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
}

// BenchmarkFloorNATS: a bare NATS request-reply between two embedded
// servers routed to each other, each side connected in process as a node
// is: the path a forwarded request and its answer take, with nothing of
// mcpedge's on it.
func BenchmarkFloorNATS(b *testing.B) {
	start := func(name string, routes []string) *cluster.Node {
		n, err := cluster.Start(context.Background(), cluster.Options{Node: name, Embed: "127.0.0.1:0", Routes: routes, RouteSecret: routeSecret})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = n.Close() })
		return n
	}
	a := start("fa", nil)
	c := start("fb", []string{"nats-route://" + a.RouteAddr().String()})
	for a.Routes() == 0 || c.Routes() == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	ncA, err := nats.Connect("", nats.InProcessServer(a))
	if err != nil {
		b.Fatal(err)
	}
	defer ncA.Close()
	ncB, err := nats.Connect("", nats.InProcessServer(c))
	if err != nil {
		b.Fatal(err)
	}
	defer ncB.Close()
	answer := make([]byte, floorAnswer)
	if _, err := ncA.Subscribe("floor.a", func(m *nats.Msg) { _ = m.Respond(answer) }); err != nil {
		b.Fatal(err)
	}
	_ = ncA.Flush()
	req := make([]byte, floorRequest)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := ncB.Request("floor.a", req, time.Second); err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("no route to the responder")
		}
	}
	b.ReportAllocs()
	b.SetParallelism(32)
	b.ResetTimer()
	reportCPU(b, func() {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := ncB.Request("floor.a", req, 5*time.Second); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkFloorDirect: the same request and answer over one TCP
// connection on loopback, framed by a length and a request number,
// pipelined: callers queue their frames for one writer, one reader hands
// each answer to its caller; the other end reads, answers and writes the
// same way. What a direct node-to-node link costs at the least.
func BenchmarkFloorDirect(b *testing.B) {
	l := startFloorDirect(b)
	req := make([]byte, floorRequest)
	b.ReportAllocs()
	b.SetParallelism(32)
	b.ResetTimer()
	reportCPU(b, func() {
		b.RunParallel(func(pb *testing.PB) {
			ch := make(chan []byte, 1)
			for pb.Next() {
				if err := l.call(req, ch); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// startFloorDirect starts BenchmarkFloorDirect's two ends and returns the
// caller's.
func startFloorDirect(b *testing.B) *floorLink {
	writes := new(atomic.Uint64)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReaderSize(c, 64<<10)
		w := bufio.NewWriterSize(c, 64<<10)
		var mu sync.Mutex
		answer := make([]byte, floorAnswer)
		hdr := make([]byte, 12)
		for {
			if _, err := io.ReadFull(r, hdr); err != nil {
				return
			}
			n := binary.BigEndian.Uint32(hdr[8:])
			if _, err := r.Discard(int(n)); err != nil {
				return
			}
			mu.Lock()
			binary.BigEndian.PutUint32(hdr[8:], uint32(len(answer)))
			_, _ = w.Write(hdr)
			_, _ = w.Write(answer)
			if r.Buffered() == 0 {
				_ = w.Flush()
				writes.Add(1)
			}
			mu.Unlock()
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	l := newFloorLink(c)
	l.writes = writes
	go l.read()
	return l
}

// floorLink is the caller's end of BenchmarkFloorDirect.
type floorLink struct {
	c    net.Conn
	mu   sync.Mutex
	w    *bufio.Writer
	next uint64
	wait map[uint64]chan []byte
	kick chan struct{}

	writes *atomic.Uint64 // system calls that wrote frames, both ends
}

func newFloorLink(c net.Conn) *floorLink {
	l := &floorLink{c: c, w: bufio.NewWriterSize(c, 64<<10), wait: map[uint64]chan []byte{}, kick: make(chan struct{}, 1)}
	go l.flusher()
	return l
}

// call sends req and waits for its answer.
func (l *floorLink) call(req []byte, ch chan []byte) error {
	var hdr [12]byte
	l.mu.Lock()
	l.next++
	id := l.next
	l.wait[id] = ch
	binary.BigEndian.PutUint64(hdr[:8], id)
	binary.BigEndian.PutUint32(hdr[8:], uint32(len(req)))
	_, _ = l.w.Write(hdr[:])
	_, err := l.w.Write(req)
	l.mu.Unlock()
	if err != nil {
		return err
	}
	select {
	case l.kick <- struct{}{}:
	default:
	}
	<-ch
	return nil
}

// flusher writes what callers queued, one write per wake-up. Before it
// writes, it yields while the callers that run meanwhile add frames, at
// most four times, as the link's writer does (linkConn.gather): without
// it, a wake-up and a system call went to about every frame, and the
// floor was the cost of that design (about 9 µs of CPU per call, against
// about 2), not of the bytes crossing one connection.
func (l *floorLink) flusher() {
	for range l.kick {
		l.mu.Lock()
		k := l.w.Buffered()
		l.mu.Unlock()
		for range 4 {
			runtime.Gosched()
			l.mu.Lock()
			more := l.w.Buffered() > k
			k = l.w.Buffered()
			l.mu.Unlock()
			if !more {
				break
			}
		}
		l.mu.Lock()
		err := l.w.Flush()
		l.mu.Unlock()
		l.writes.Add(1)
		if err != nil {
			return
		}
	}
}

func (l *floorLink) read() {
	r := bufio.NewReaderSize(l.c, 64<<10)
	var hdr [12]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		id := binary.BigEndian.Uint64(hdr[:8])
		buf := make([]byte, binary.BigEndian.Uint32(hdr[8:]))
		if _, err := io.ReadFull(r, buf); err != nil {
			return
		}
		l.mu.Lock()
		ch := l.wait[id]
		delete(l.wait, id)
		l.mu.Unlock()
		if ch != nil {
			ch <- buf
		}
	}
}

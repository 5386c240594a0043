package tcp

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/panjf2000/gnet/v2"
)

// TLS on raw TCP (Options.TLS, -tls-cert with -tcp-tls).
//
// gnet has no TLS, and crypto/tls cannot be fed the event loop's buffers
// without blocking it: a tls.Conn reads its records itself. So a TLS
// connection is served the way net/http serves one: a goroutine reads it
// (the handshake, then the records), and everything after the bytes are
// decrypted is the event loop's code, unchanged: consume (framing,
// Conn.HandleFrame, the assembly of big messages), the connection's
// atomics and table entry, so that the sweeper enforces ReadTimeout
// (the handshake included), IdleTimeout and the byte budgets on TLS
// connections as on the others, and Send, its slow-consumer bound and
// its callbacks. The reader plays the event loop: it is where exec runs
// the sweeper's and the drain's checks, between reads. Writes go through
// a queue that one writer goroutine flushes, started when there is
// something to write, coalescing the answers of a pipelined client into
// few records (the reader writes its own immediate answers itself when
// no writer runs).
//
// The cost: one goroutine per open TLS connection and a second while it
// writes, a 4 KiB read buffer, and crypto/tls's own record buffers;
// no event loop is shared, so one slow TLS client never delays another.
// docs/tls.md has the figures against plain TCP.

// Errors of TLS connections.
var (
	// ErrNotTLS is the cause of a connection that sent plain text to a
	// TLS port: it is answered with a JSON-RPC error, in plain text, and
	// closed.
	ErrNotTLS = codec.ReasonTLS.Err("tcp: plain text on a TLS port")
	// ErrTLSHandshake wraps the error of a handshake that failed: a
	// client certificate refused (mutual TLS), no protocol in common.
	ErrTLSHandshake = codec.ReasonTLS.Err("tcp: TLS handshake failed")

	errServerClosed = codec.ReasonServerClosed.Err("tcp: server closed")
	errNotReady     = errors.New("tcp: TLS handshake not complete")
)

// Sizes and bounds of TLS connections.
const (
	tlsReadBuf = 4 << 10 // a TLS connection's read buffer while it is idle, and the least room a read gets
	// tlsMinRead is the buffer past which an emptied one is replaced by
	// a small one.
	tlsMinRead = 16 << 10
	// tlsFlushTimeout bounds writing what is queued when the connection
	// is closed (the -32000 naming a limit).
	tlsFlushTimeout = 100 * time.Millisecond
	// tlsCoalesce is the most the writer gathers into one write.
	tlsCoalesce = 64 << 10
)

// plainTextAnswer is what a client speaking plain text to a TLS port reads.
var plainTextAnswer = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"this port serves MCP over TLS: connect with TLS (tcps://)"}}` + "\n")

// longAgo is a deadline in the past: a read given it returns at once.
var longAgo = time.Unix(1, 0)

// tlsWire is a TLS connection as its conn sees it (a wire): writes queued
// for the writer, exec run by the reader, Close after what is queued.
type tlsWire struct {
	k   *conn
	raw net.Conn   // the accepted socket
	rec *recordSep // raw as tls reads it, at record boundaries or not
	tc  *tls.Conn

	mu          sync.Mutex
	queue       []pending // waiting for the writer
	spare       []pending
	queued      int // bytes of Write copies queued (OutboundBuffered)
	writing     bool
	ready       bool // handshake done: writes may go
	closing     bool // Close called: nothing more is queued
	rawClosed   bool
	tasks       []func() // exec: run by the reader
	interrupted bool     // the reader's read was cut short for tasks
	readerDone  bool
}

// pending is one queued write.
type pending struct {
	b  []byte
	bs [][]byte
	cb gnet.AsyncCallback
}

var _ wire = (*tlsWire)(nil)

// serveTLS serves k, whose socket is nc, over TLS, on a goroutine of its
// own (see the top of this file).
func (s *Server) serveTLS(k *conn, nc net.Conn) {
	w := &tlsWire{k: k, raw: nc, rec: &recordSep{Conn: nc}}
	k.c = w
	s.open(k)
	s.tlsWG.Add(1)
	go w.read()
}

// closeTLS closes the TLS connections left and waits for their readers,
// at the end of Shutdown.
func (s *Server) closeTLS() {
	if s.tlsConf == nil {
		return
	}
	s.table.each(func(k *conn) {
		if _, ok := k.c.(*tlsWire); ok {
			k.closeWith(errServerClosed) // it only asks: the reader ends it
		}
	})
	s.tlsWG.Wait()
}

// read is the connection's reader: the PROXY header if one is expected,
// the handshake, then the records, until the connection ends.
func (w *tlsWire) read() {
	k := w.k
	s := k.s
	defer s.tlsWG.Done()
	var cause error
	defer func() {
		if p := recover(); p != nil {
			s.eng.ReportPanic(p, "tcp: TLS reader", k.sess)
			k.markClosing(ErrPanic)
			cause = ErrPanic
		}
		w.end(cause)
	}()
	var pre []byte
	if k.pp != ppNone {
		if pre, cause = w.readProxy(); cause != nil {
			return
		}
	}
	w.rec.pre = pre
	w.tc = tls.Server(w.rec, s.tlsConf)
	if cause = w.handshake(); cause != nil {
		return
	}
	cause = w.serve()
}

// readProxy reads the connection's PROXY header, before TLS starts, and
// returns what followed it.
func (w *tlsWire) readProxy() ([]byte, error) {
	k := w.k
	var buf [1024]byte
	n := 0
	for {
		m, err := w.raw.Read(buf[n:])
		n += m
		if m > 0 {
			k.track(n, false)
		}
		hdr, done, action := k.proxyHeader(buf[:n])
		switch {
		case action != gnet.None:
			return nil, ErrProxyHeader
		case done:
			k.track(0, false)
			return append([]byte(nil), buf[hdr:n]...), nil
		case err != nil:
			return nil, err
		case n == len(buf):
			return nil, k.refuseProxyErr()
		}
	}
}

func (k *conn) refuseProxyErr() error {
	k.refuseProxy(fmt.Errorf("%w: too long", ErrProxyHeader))
	return ErrProxyHeader
}

// handshake runs the TLS handshake: bounded by ReadTimeout through the
// sweeper (the connection awaits its first message from its opening), a
// failure logged at a bounded rate per address.
func (w *tlsWire) handshake() error {
	k := w.k
	err := w.tc.Handshake()
	if err == nil {
		w.mu.Lock()
		w.ready = !w.closing
		w.mu.Unlock()
		return nil
	}
	if r := k.reason.Load(); r != nil {
		return *r // the server closed it (a read timeout, a drain)
	}
	var rh tls.RecordHeaderError
	if errors.As(err, &rh) && rh.Conn != nil {
		// Plain text: say so in plain text, once, and close.
		if k.markClosing(ErrNotTLS) {
			k.s.warns.Warn(k.s.log, k.addr(), "closing connection", "remote", k.who(), "cause", ErrNotTLS)
		}
		_ = rh.Conn.SetWriteDeadline(time.Now().Add(tlsFlushTimeout))
		_, _ = rh.Conn.Write(k.s.framer.AppendFrame(nil, plainTextAnswer[:len(plainTextAnswer)-1]))
		return ErrNotTLS
	}
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET) {
		return err // the client went away
	}
	cause := fmt.Errorf("%w: %w", ErrTLSHandshake, err)
	if k.markClosing(ErrTLSHandshake) {
		k.s.warns.Warn(k.s.log, k.addr(), "closing connection", "remote", k.who(), "cause", cause)
	}
	return cause
}

// serve reads records and serves what they carry until the connection
// ends, running the tasks exec hands it between reads.
func (w *tlsWire) serve() error {
	k := w.k
	buf := make([]byte, 0, tlsReadBuf)
	for {
		switch {
		case len(buf) == 0 && cap(buf) > tlsMinRead:
			buf = make([]byte, 0, tlsReadBuf) // keep no burst's buffer while idle
		case cap(buf)-len(buf) < tlsReadBuf:
			buf = append(make([]byte, 0, 2*cap(buf)), buf...)
		}
		room := buf[len(buf):cap(buf)]
		n, err := w.tc.Read(room)
		if n > 0 {
			buf = buf[:len(buf)+n]
			consumed, action := w.traffic(buf)
			buf = buf[:copy(buf, buf[consumed:])]
			if action != gnet.None {
				if r := k.reason.Load(); r != nil {
					return *r
				}
				return ErrFraming
			}
		}
		if err != nil {
			if isTimeout(err) && w.runTasks() {
				if k.closed.Load() {
					return nil
				}
				continue
			}
			return err
		}
	}
}

// traffic serves what was read, as onTraffic does: the immediate answers
// are queued, after what Send queued before.
func (w *tlsWire) traffic(buf []byte) (int, gnet.Action) {
	k := w.k
	scratch, out := codec.GetBuffer(), codec.GetBuffer()
	defer codec.PutBuffer(scratch)
	consumed, action := k.s.consume(k, buf, scratch, out)
	if len(out.B) > 0 && action == gnet.None {
		_ = k.queue(out, true) // takes out; the reader writes it (push); over MaxOutbound it closes k
		return consumed, action
	}
	codec.PutBuffer(out)
	return consumed, action
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// runTasks runs the tasks exec queued, and reports whether the read was
// cut short for them (else the timeout was a real one).
func (w *tlsWire) runTasks() bool {
	was := false
	for {
		w.mu.Lock()
		fs := w.tasks
		w.tasks = nil
		if len(fs) == 0 {
			if w.interrupted {
				w.interrupted, was = false, true
				_ = w.raw.SetReadDeadline(time.Time{})
			}
			w.mu.Unlock()
			return was
		}
		w.mu.Unlock()
		for _, f := range fs {
			f()
		}
	}
}

// exec runs f on the reader, between reads: the read under way is cut
// short (a deadline in the past; crypto/tls keeps what it read of a
// record), f runs, and reading goes on. Before the handshake ends, no
// message has been read and f runs at once.
func (w *tlsWire) exec(f func()) error {
	w.mu.Lock()
	switch {
	case w.readerDone:
		w.mu.Unlock()
		return net.ErrClosed
	case !w.ready:
		w.mu.Unlock()
		f()
		return nil
	}
	w.tasks = append(w.tasks, f)
	if !w.interrupted {
		w.interrupted = true
		_ = w.raw.SetReadDeadline(longAgo)
	}
	w.mu.Unlock()
	return nil
}

// end closes the connection once its reader is done, and ends its
// session when what was queued has been written or dropped.
func (w *tlsWire) end(cause error) {
	w.mu.Lock()
	w.readerDone = true
	tasks := w.tasks
	w.tasks = nil
	w.mu.Unlock()
	_ = w.Close()
	w.mu.Lock()
	if !w.rawClosed && !w.writing { // the writer closes it otherwise
		w.rawClosed = true
		_ = w.raw.Close()
	}
	w.mu.Unlock()
	for _, f := range tasks {
		f() // each sees the connection closed
	}
	if errors.Is(cause, io.EOF) {
		cause = nil
	}
	w.k.s.closed(w.k, cause)
}

// AsyncWrite queues b; cb is called once it is written, or with the
// error that dropped it.
func (w *tlsWire) AsyncWrite(b []byte, cb gnet.AsyncCallback) error {
	return w.push(pending{b: b, cb: cb}, false)
}

// AsyncWritev queues bs as one write.
func (w *tlsWire) AsyncWritev(bs [][]byte, cb gnet.AsyncCallback) error {
	return w.push(pending{bs: bs, cb: cb}, false)
}

// Write queues a copy of b (the reader's answer to bytes it cannot frame,
// before it closes the connection).
func (w *tlsWire) Write(b []byte) (int, error) {
	c := codec.GetBuffer()
	c.B = append(c.B[:0], b...)
	n := len(b)
	err := w.push(pending{b: c.B, cb: func(gnet.Conn, error) error {
		w.mu.Lock()
		w.queued -= n
		w.mu.Unlock()
		codec.PutBuffer(c)
		return nil
	}}, false)
	if err != nil {
		codec.PutBuffer(c)
		return 0, err
	}
	w.mu.Lock()
	w.queued += n
	w.mu.Unlock()
	return n, nil
}

// push queues p for the writer, which it starts when none runs: a
// goroutine, or, inline, the caller itself (the reader).
func (w *tlsWire) push(p pending, inline bool) error {
	w.mu.Lock()
	if w.closing || !w.ready {
		w.mu.Unlock()
		if w.closing {
			return net.ErrClosed
		}
		return errNotReady
	}
	w.queue = append(w.queue, p)
	if w.writing {
		w.mu.Unlock()
		return nil
	}
	w.writing = true
	w.mu.Unlock()
	if inline {
		// The reader's own answers (and whatever Send queued before
		// them): written here, without a goroutine to start and grow a
		// stack for each; the next read waits for the client to take
		// them, as a goroutine-per-connection server's does.
		w.flush()
		return nil
	}
	go w.flush()
	return nil
}

// flush writes what is queued, in order, coalescing small writes, until
// the queue is empty; it closes the socket after the last write once
// Close was called. It runs on a writer goroutine, or on the reader
// (inline), one at a time (writing).
func (w *tlsWire) flush() {
	var wbuf []byte
	var failed error
	for {
		w.mu.Lock()
		q := w.queue
		w.queue, w.spare = w.spare[:0], nil
		if len(q) == 0 {
			w.writing = false
			if w.closing && !w.rawClosed {
				w.rawClosed = true
				_ = w.raw.Close()
			}
			w.spare = q
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		start := 0
		for i := range q {
			p := &q[i]
			if failed == nil {
				wbuf = appendPending(wbuf, p)
				if len(wbuf) >= tlsCoalesce || i == len(q)-1 {
					failed = w.write(wbuf)
					wbuf = wbuf[:0]
					for j := start; j <= i; j++ {
						if q[j].cb != nil {
							_ = q[j].cb(nil, failed)
						}
					}
					start = i + 1
				}
				continue
			}
			if p.cb != nil {
				_ = p.cb(nil, failed)
			}
		}
		clear(q)
		w.mu.Lock()
		w.spare = q[:0]
		if failed != nil && !w.rawClosed {
			w.closing = true
			w.rawClosed = true
			_ = w.raw.Close()
		}
		w.mu.Unlock()
		if cap(wbuf) > 4*tlsCoalesce {
			wbuf = nil
		}
	}
}

func appendPending(dst []byte, p *pending) []byte {
	if p.bs == nil {
		return append(dst, p.b...)
	}
	for _, b := range p.bs {
		dst = append(dst, b...)
	}
	return dst
}

// write writes b, bounded by IdleTimeout: a client that reads nothing
// for that long is a slow consumer.
func (w *tlsWire) write(b []byte) error {
	if d := w.k.s.opts.IdleTimeout; d > 0 {
		_ = w.raw.SetWriteDeadline(time.Now().Add(d))
	}
	_, err := w.tc.Write(b)
	if err != nil && isTimeout(err) {
		w.k.markClosing(ErrSlowConsumer)
	}
	return err
}

// Close closes the connection after what is queued, which gets
// tlsFlushTimeout to be written. Safe from any goroutine.
func (w *tlsWire) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closing {
		return nil
	}
	w.closing = true
	switch {
	case w.writing:
		_ = w.raw.SetWriteDeadline(time.Now().Add(tlsFlushTimeout))
	case !w.rawClosed:
		w.rawClosed = true
		_ = w.raw.Close()
	}
	if !w.readerDone {
		_ = w.raw.SetReadDeadline(longAgo) // and the reader stops
		w.interrupted = false
	}
	return nil
}

// OutboundBuffered returns the bytes of the reader's own writes waiting;
// Send's are counted by the connection (pending, held).
func (w *tlsWire) OutboundBuffered() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.queued
}

// InboundBuffered reports 1 when crypto/tls holds part of a record: bytes
// of a message on their way that no other count sees.
func (w *tlsWire) InboundBuffered() int {
	w.mu.Lock()
	ready := w.ready
	w.mu.Unlock()
	if ready && w.rec.partial() { // ready: called on the reader (exec)
		return 1
	}
	return 0
}

// Fd returns the socket's descriptor.
func (w *tlsWire) Fd() int {
	fd := -1
	if sc, ok := w.raw.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			_ = rc.Control(func(f uintptr) { fd = int(f) })
		}
	}
	return fd
}

// recordSep is the socket as crypto/tls reads it: it serves the bytes
// read past a PROXY header first, and follows the TLS record framing of
// what it hands over, so that the reader can tell whether crypto/tls
// holds part of a record (a request arriving) when its read is cut short.
// On the reader only.
type recordSep struct {
	net.Conn
	pre  []byte
	hdr  [5]byte
	nhdr int // bytes of the record header seen
	left int // bytes of the record's body still to come
}

func (r *recordSep) Read(p []byte) (int, error) {
	var n int
	var err error
	if len(r.pre) > 0 {
		n = copy(p, r.pre)
		r.pre = r.pre[n:]
	} else {
		n, err = r.Conn.Read(p)
	}
	r.follow(p[:n])
	return n, err
}

// follow advances the record framing over b.
func (r *recordSep) follow(b []byte) {
	for len(b) > 0 {
		if r.left > 0 {
			k := min(r.left, len(b))
			r.left -= k
			b = b[k:]
			continue
		}
		k := copy(r.hdr[r.nhdr:], b)
		r.nhdr += k
		b = b[k:]
		if r.nhdr == len(r.hdr) {
			r.left = int(r.hdr[3])<<8 | int(r.hdr[4])
			r.nhdr = 0
		}
	}
}

// partial reports whether the bytes handed over end inside a record.
func (r *recordSep) partial() bool { return r.nhdr > 0 || r.left > 0 || len(r.pre) > 0 }

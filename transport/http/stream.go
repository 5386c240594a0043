package http

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/internal/bytesconv"
	"github.com/mcpedge/mcpedge/internal/connwatch"
)

// keepAliveLine is the SSE comment written on idle streams. Never modified.
var keepAliveLine = []byte(": keep-alive\n\n")

var errStreamClosed = errors.New("mcphttp: stream closed")

// aLongTimeAgo is a deadline in the past, to abort a blocked read or write.
var aLongTimeAgo = time.Unix(1, 0)

// stream is one SSE response: the stream of a POSTed request that
// streams, a standalone GET stream, a resumed stream or a legacy stream.
// Producers push formatted events under its lock from any goroutine; the
// connection's goroutine drains them in WriteTo, which fasthttp calls after
// the handler has returned, sending each Write as one flushed chunk.
//
// Outbound bytes are bounded: when Options.MaxStreamBuffer bytes pile up
// while a write to the client is in progress, the client is cut off as a
// slow consumer at the next event. A single event of any size passes. From
// attach to Close, what its buffers retain (their capacities) counts in
// the outbound budget (Options.MaxOutboundTotal), which may cut it too. A stream
// ends normally (end: what is pending is written, then the response
// completes and the connection is kept alive) or fails (fail: the client
// is gone; fasthttp closes the connection).
type stream struct {
	s      *Server
	h      *hsession               // the session whose record holds it (stateful streams)
	rec    *streamRec              // its record in h
	cancel context.CancelCauseFunc // stateless POST stream: its request
	onEnd  func(cause error)       // called when the response is over (legacy: ends the session)

	mu     sync.Mutex
	pend   []byte // formatted events not yet taken by the writer
	busy   bool   // the writer holds a batch it has not finished writing
	ending bool   // write pend, then complete the response
	failed error  // stop at once
	conn   net.Conn
	enc    encoding
	wake   chan struct{}
	counts bool // attached: its buffers count in the outbound budget

	count     atomic.Int64 // what counts in the budget: cap(pend)+cap(spare), updated under mu
	cutBudget atomic.Bool  // the budget cut it (streamHolder)

	// Writer side, used only on the connection's goroutine.
	spare     []byte
	rbuf      []byte // Read: the batch being copied out
	eof       bool   // the end was delivered
	lastTaken bool   // Read: the last batch was taken
	started   bool
	watch     *connwatch.Watcher
	timer     *time.Timer
	zw        streamCompressor
	cbuf      bytes.Buffer
}

func (s *Server) newStream() *stream {
	return &stream{s: s, wake: make(chan struct{}, 1)}
}

// attach binds the stream to the connection it will be written on and to
// its content coding, before fasthttp writes it.
func (st *stream) attach(conn net.Conn, enc encoding) {
	st.s.streams.add((*streamHolder)(st))
	st.mu.Lock()
	st.conn, st.enc, st.counts = conn, enc, true
	st.accountLocked()
	st.mu.Unlock()
}

// accountLocked brings what the stream counts in the outbound budget up
// to what its buffers retain: the events queued, and the batch being
// written. st.mu is held.
func (st *stream) accountLocked() {
	if !st.counts {
		return
	}
	n := int64(cap(st.pend) + cap(st.spare))
	if old := st.count.Load(); n != old {
		st.count.Store(n)
		st.s.outb.Add(n - old) // over the budget, it wakes the enforcer
	}
}

func (st *stream) signal() {
	select {
	case st.wake <- struct{}{}:
	default:
	}
}

// appendEventID appends the id of event seq of stream sid: "<sid>-<seq>".
func appendEventID(dst []byte, sid, seq uint64) []byte {
	dst = strconv.AppendUint(dst, sid, 10)
	dst = append(dst, '-')
	return strconv.AppendUint(dst, seq, 10)
}

// parseEventID parses an id written by appendEventID.
func parseEventID(b []byte) (sid, seq uint64, ok bool) {
	a, c, found := bytes.Cut(b, []byte("-"))
	if !found || !digits(a) || !digits(c) {
		return 0, 0, false
	}
	sid, err1 := strconv.ParseUint(bytesconv.B2S(a), 10, 64)
	seq, err2 := strconv.ParseUint(bytesconv.B2S(c), 10, 64)
	return sid, seq, err1 == nil && err2 == nil
}

func digits(b []byte) bool {
	if len(b) == 0 || len(b) > 20 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// prime queues the priming event: the id the client resumes from if the
// stream breaks before anything else arrives, the retry hint, empty data.
func (st *stream) prime(sid, seq uint64) {
	st.mu.Lock()
	st.pend = append(st.pend, "id: "...)
	st.pend = appendEventID(st.pend, sid, seq)
	st.pend = append(st.pend, "\nretry: "...)
	st.pend = strconv.AppendInt(st.pend, st.s.opts.Retry.Milliseconds(), 10)
	st.pend = append(st.pend, "\ndata: \n\n"...)
	st.accountLocked()
	st.mu.Unlock()
}

// pushEvent queues data as an event with id "<sid>-<seq>"; pushData queues
// it without id; pushRaw queues preformatted bytes. bounded applies the
// slow-consumer limit (replays, bounded by the event store, skip it). They
// report whether the stream took the event.
func (st *stream) pushEvent(sid, seq uint64, data []byte, bounded bool) bool {
	return st.push(true, sid, seq, data, bounded)
}

func (st *stream) pushData(data []byte) bool { return st.push(false, 0, 0, data, true) }

func (st *stream) push(withID bool, sid, seq uint64, data []byte, bounded bool) bool {
	st.mu.Lock()
	if st.failed != nil || st.ending {
		st.mu.Unlock()
		return false
	}
	if bounded && st.busy && len(st.pend) >= st.s.opts.MaxStreamBuffer {
		conn := st.failLocked(ErrSlowConsumer)
		st.mu.Unlock()
		// The connection closes with the reason, which counts the slow
		// consumer (ConnClosed); a tunnel of a cluster is no connection of
		// this server's.
		if !st.s.setConnReason(conn, ErrSlowConsumer) && st.s.cobs != nil {
			st.s.cobs.SlowConsumer("http")
		}
		st.s.log.Warn("closing slow SSE consumer", "cause", ErrSlowConsumer, "limit", st.s.opts.MaxStreamBuffer)
		abortWrite(conn)
		st.signal()
		return false
	}
	if withID {
		st.pend = append(st.pend, "id: "...)
		st.pend = appendEventID(st.pend, sid, seq)
		st.pend = append(st.pend, '\n')
	}
	st.pend = codec.AppendSSEEvent(st.pend, "", "", data)
	st.accountLocked()
	st.mu.Unlock()
	st.signal()
	return true
}

func (st *stream) pushRaw(b []byte) {
	st.mu.Lock()
	st.pend = append(st.pend, b...)
	st.accountLocked()
	st.mu.Unlock()
	st.signal()
}

// end completes the stream once what is queued is written; with retry, a
// retry hint goes last (SSE polling: the client reconnects after it).
func (st *stream) end(retry bool) {
	st.mu.Lock()
	if st.failed == nil && !st.ending {
		if retry {
			st.pend = codec.AppendSSERetry(st.pend, int(st.s.opts.Retry.Milliseconds()))
		}
		st.ending = true
		st.accountLocked()
	}
	st.mu.Unlock()
	st.signal()
}

// fail stops the stream at once with cause err, aborting a blocked write.
// A cut for a limit (ErrSlowConsumer, ErrOutboundBudget) is the reason
// its connection closes.
func (st *stream) fail(err error) {
	st.mu.Lock()
	conn := st.failLocked(err)
	st.mu.Unlock()
	if cutFor(err) {
		st.s.setConnReason(conn, err)
	}
	abortWrite(conn)
	st.signal()
}

func (st *stream) failLocked(err error) net.Conn {
	if st.failed != nil {
		return nil
	}
	st.failed = err
	st.pend = nil
	st.accountLocked()
	return st.conn
}

// cutFor reports whether err is the cut of a stream for a limit.
func cutFor(err error) bool { return err == ErrSlowConsumer || err == ErrOutboundBudget }

// goneCause is why the client of a stream that did not deliver its end is
// gone: the limit that cut it, or ErrClientGone.
func goneCause(failed error) error {
	if cutFor(failed) {
		return failed
	}
	return ErrClientGone
}

func abortWrite(conn net.Conn) {
	if conn != nil {
		_ = conn.SetWriteDeadline(aLongTimeAgo)
	}
}

// next waits for the next batch of formatted events, or a keep-alive line
// when the stream stays idle. last reports that the stream ends after b.
func (st *stream) next() (b []byte, last bool, err error) {
	for {
		st.mu.Lock()
		st.busy = false
		switch {
		case st.failed != nil:
			err = st.failed
		case len(st.pend) > 0:
			if cap(st.spare) > 1<<20 {
				st.spare = nil
			}
			b, st.pend, st.spare = st.pend, st.spare[:0], st.pend
			last, st.busy = st.ending, true
			st.accountLocked()
		case st.ending:
			last = true
		default:
			st.mu.Unlock()
			if !st.sleep() {
				st.mu.Lock()
				st.busy = true
				st.mu.Unlock()
				return keepAliveLine, false, nil
			}
			continue
		}
		st.mu.Unlock()
		return b, last, err
	}
}

// sleep waits for a signal; false means the keep-alive interval passed.
func (st *stream) sleep() bool {
	ka := st.s.opts.KeepAlive
	if ka < 0 {
		<-st.wake
		return true
	}
	if st.timer == nil {
		st.timer = time.NewTimer(ka)
	} else {
		st.timer.Reset(ka)
	}
	select {
	case <-st.wake:
		st.timer.Stop()
		return true
	case <-st.timer.C:
		return false
	}
}

// wire is next, compressed when the response has a content coding.
func (st *stream) wire() ([]byte, bool, error) {
	b, last, err := st.next()
	if err != nil || st.enc == encIdentity {
		return b, last, err
	}
	if st.zw == nil {
		st.zw = st.s.streamCompressor(st.enc, &st.cbuf)
	}
	st.cbuf.Reset()
	if len(b) > 0 {
		if _, err := st.zw.Write(b); err != nil {
			return nil, false, err
		}
	}
	if last {
		err = st.zw.Close()
	} else {
		err = st.zw.Flush()
	}
	return st.cbuf.Bytes(), last, err
}

// begin starts watching the connection for the client going away.
func (st *stream) begin() {
	if st.started {
		return
	}
	st.started = true
	if st.conn != nil {
		st.watch = connwatch.Watch(st.conn, func() { st.fail(ErrClientGone) })
	}
}

func (st *stream) deadline() {
	if st.conn != nil && st.s.opts.WriteTimeout > 0 {
		_ = st.conn.SetWriteDeadline(time.Now().Add(st.s.opts.WriteTimeout))
	}
}

// SupportsBodyWriteTo tells fasthttp to write the stream with WriteTo.
func (st *stream) SupportsBodyWriteTo() bool { return true }

// WriteTo writes the stream to w, one Write per batch of events, until it
// ends or fails. fasthttp frames each Write as a chunk and flushes it.
func (st *stream) WriteTo(w io.Writer) (int64, error) {
	st.begin()
	var n int64
	for {
		b, last, err := st.wire()
		if err != nil {
			return n, err
		}
		if len(b) > 0 {
			st.deadline()
			k, err := w.Write(b)
			n += int64(k)
			if err != nil {
				st.fail(err)
				return n, err
			}
		}
		if last {
			st.eof = true
			return n, nil
		}
	}
}

// Read is WriteTo for readers that pull: it returns the stream batch by
// batch and io.EOF once it has ended.
func (st *stream) Read(p []byte) (int, error) {
	for len(st.rbuf) == 0 {
		if st.lastTaken {
			st.eof = true
			return 0, io.EOF
		}
		st.begin()
		b, last, err := st.wire()
		if err != nil {
			return 0, err
		}
		st.rbuf, st.lastTaken = b, last
		st.deadline()
	}
	n := copy(p, st.rbuf)
	st.rbuf = st.rbuf[n:]
	return n, nil
}

// Close releases the stream when fasthttp is done with it. A stream that
// did not deliver its end failed: its owner learns that the client is
// gone.
func (st *stream) Close() error {
	st.watch.Stop()
	st.mu.Lock()
	abnormal := !st.eof
	gone := goneCause(st.failed)
	if st.failed == nil {
		st.failed = errStreamClosed
	}
	st.pend, st.spare, st.rbuf, st.conn = nil, nil, nil, nil
	st.accountLocked()
	st.counts = false
	st.mu.Unlock()
	st.s.streams.remove((*streamHolder)(st))
	if st.timer != nil {
		st.timer.Stop()
	}
	if st.zw != nil {
		st.s.putStreamCompressor(st.zw)
		st.zw = nil
	}
	switch {
	case st.h != nil:
		st.h.detach(st, abnormal, gone)
	case st.cancel != nil && abnormal:
		st.cancel(gone)
	}
	if st.onEnd != nil {
		st.onEnd(gone)
	}
	return nil
}

// cutCause returns the limit that cut the stream (ErrSlowConsumer,
// ErrOutboundBudget), or nil.
func (st *stream) cutCause() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if cutFor(st.failed) {
		return st.failed
	}
	return nil
}

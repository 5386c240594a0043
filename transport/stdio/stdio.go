// Package stdio serves MCP on a pair of streams (stdin and stdout of a
// subprocess): newline-delimited JSON-RPC, one session. Nothing but MCP
// messages is written to the output; logs belong on stderr.
//
// One goroutine reads and frames; cheap answers and handler answers alike go
// through one queue to one writer goroutine, so messages are never
// interleaved, and queued messages are written in one call. Queuing never
// blocks: a reader that stops draining the output is dropped as a slow
// consumer once MaxOutbound bytes wait to be written.
//
// With a ReadTimeout, a message begun but not completed within it (the
// peer died or hung mid-write) ends the session with ErrReadTimeout, after
// a -32000 error whose data is {"limit":"read-timeout"}. Unlike TCP there
// is no first-message deadline and no idle timeout: the parent process
// owns the session's lifetime and may stay silent as long as it likes.
package stdio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/session"
)

// Options configure Serve. The zero value uses newline framing and an 8 MiB
// outbound bound.
type Options struct {
	// Framer frames messages; nil means newline-delimited JSON.
	Framer codec.Framer
	// MaxOutbound bounds the bytes waiting to be written; <= 0 means 8 MiB.
	MaxOutbound int
	// DrainTimeout bounds the wait for in-flight requests after the input
	// ends, and then the wait for the output to be written; <= 0 means 30 s.
	DrainTimeout time.Duration
	// ReadTimeout bounds how long a message may stay partly received; <= 0
	// means none (the zero value). It is checked a few times per timeout by
	// Serve's own goroutine; the reading goroutine only records when a
	// partial message began.
	ReadTimeout time.Duration
}

// Sentinel errors: the causes of a session's end, each carrying its
// codec.CloseReason.
var (
	// ErrTooLarge is codec.ErrTooLarge, the one error of a message over
	// the size limit.
	ErrTooLarge = codec.ErrTooLarge
	ErrFraming  = codec.ReasonFraming.Err("stdio: malformed frame header")
	// ErrFlushTimeout reports output still queued when DrainTimeout ran
	// out after the input ended.
	ErrFlushTimeout = codec.ReasonFlushTimeout.Err("stdio: output not drained in time")
	// ErrReadTimeout reports a message left incomplete for ReadTimeout.
	ErrReadTimeout = codec.ReasonReadTimeout.Err("stdio: read timeout: message incomplete")
)

// Serve serves eng on in and out until in reaches EOF, ctx ends, or the
// stream cannot be framed. When the input ends, requests in flight are
// allowed to finish (up to DrainTimeout) and their answers, with everything
// queued, are written (up to DrainTimeout again). It returns nil on EOF.
//
// A message over the size limit, or a malformed frame header, is answered
// with a parse error and ends Serve with ErrTooLarge or ErrFraming. A final
// newline-framed message without its newline is served at EOF.
//
// When the output stops draining (a slow consumer, or a flush that outlasts
// DrainTimeout) or fails, Serve closes out if it is an io.Closer, so that a
// write blocked on it returns. Serve cannot interrupt a Read of in: when it
// returns before in ends (ctx, an output failure), the reading goroutine
// ends when that Read returns, without serving what it read.
func Serve(ctx context.Context, eng *engine.Server, in io.Reader, out io.Writer, opts Options) error {
	if opts.MaxOutbound <= 0 {
		opts.MaxOutbound = 8 << 20
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = 30 * time.Second
	}
	f := opts.Framer
	if f == nil {
		f = codec.NewlineFramer{MaxSize: eng.Options().MaxMessage}
	}
	w := &writer{
		out:    out,
		framer: f,
		max:    int64(opts.MaxOutbound),
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
		failed: make(chan struct{}),
	}
	go w.loop()
	conn := eng.Open(w)
	conn.Session().Transport = "stdio"

	readErr := make(chan error, 1)
	var since atomic.Int64 // UnixNano when the partial message began; 0: none
	go func() { readErr <- readLoop(conn, in, f, w, &since) }()

	var tick <-chan time.Time
	if opts.ReadTimeout > 0 {
		t := time.NewTicker(max(opts.ReadTimeout/4, time.Millisecond))
		defer t.Stop()
		tick = t.C
	}
	var err error
wait:
	for {
		select {
		case err = <-readErr:
		case <-ctx.Done():
			err = ctx.Err()
		case <-w.failed:
			err = w.err()
		case now := <-tick:
			if s := since.Load(); s == 0 || now.UnixNano()-s < int64(opts.ReadTimeout) {
				continue
			}
			b := codec.GetBuffer()
			b.B = codec.AppendError(b.B, nil, codec.CodeServerBusy, "read timeout: message incomplete", []byte(`{"limit":"read-timeout"}`))
			_ = w.Send(b)
			err = ErrReadTimeout
		}
		break wait
	}
	// Let in-flight handlers finish and send their answers.
	deadline := time.Now().Add(opts.DrainTimeout)
	for conn.Session().InFlight() > 0 && time.Now().Before(deadline) && w.err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	cause := err
	switch {
	case cause == nil:
		cause = io.EOF
	case ctx.Err() != nil && errors.Is(cause, ctx.Err()):
		cause = fmt.Errorf("%w: %w", engine.ErrShuttingDown, cause) // stopped by its server
	}
	conn.Close(fmt.Errorf("stdio: %w", cause))
	w.close()
	// Flush what is queued, unless the output already failed.
	if w.err() == nil {
		t := time.NewTimer(opts.DrainTimeout)
		select {
		case <-w.done:
		case <-t.C:
			select {
			case <-w.done:
			default:
				w.fail(ErrFlushTimeout)
			}
		}
		t.Stop()
	}
	if w.err() != nil {
		if c, ok := out.(io.Closer); ok {
			_ = c.Close() // unblock a write stuck on a reader that stopped
			<-w.done
		}
		if err == nil || errors.Is(err, io.EOF) {
			err = w.err()
		}
	}
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// readLoop reads and serves until in ends. It stores in since when the
// partial message now buffered began (0 when none is).
func readLoop(conn engine.Conn, in io.Reader, f codec.Framer, w *writer, since *atomic.Int64) error {
	var flush func() error
	buf := make([]byte, 0, 64<<10)
	var scratch []byte
	// The answers given at once to the frames of one read are framed into
	// out and queued together (flush), as TCP answers a read's frames with
	// one write: one hand-off to the writer per read, not per message.
	var out *codec.Buffer
	serve := func(frame []byte) error {
		scratch = conn.HandleFrame(frame, scratch[:0])
		if len(scratch) == 0 {
			return nil
		}
		if out == nil {
			out = codec.GetBuffer()
		}
		out.B = f.AppendFrame(out.B, scratch)
		if cap(scratch) > 64<<10 {
			scratch = nil
		}
		if len(out.B) >= 64<<10 {
			return flush()
		}
		return nil
	}
	flush = func() error {
		if out == nil {
			return nil
		}
		b := out
		out = nil
		return w.sendFramed(b)
	}
	for {
		if len(buf) == cap(buf) {
			nb := make([]byte, len(buf), 2*cap(buf))
			copy(nb, buf)
			buf = nb
		}
		n, rerr := in.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		consumed := 0
		for consumed < len(buf) {
			frame, k, err := f.Next(buf[consumed:])
			if err != nil {
				cause, msg := ErrFraming, "parse error: malformed frame"
				if errors.Is(err, codec.ErrTooLarge) {
					cause, msg = ErrTooLarge, "parse error: message exceeds the size limit"
				}
				_ = flush()
				b := codec.GetBuffer()
				b.B = codec.AppendError(b.B, nil, codec.CodeParseError, msg, nil)
				_ = w.Send(b)
				return cause
			}
			if k == 0 {
				break
			}
			consumed += k
			if len(frame) == 0 {
				continue
			}
			if err := serve(frame); err != nil {
				return err
			}
		}
		if err := flush(); err != nil {
			return err
		}
		buf = buf[:copy(buf, buf[consumed:])]
		switch {
		case len(buf) > 0 && (consumed > 0 || since.Load() == 0):
			since.Store(time.Now().UnixNano())
		case len(buf) == 0 && since.Load() != 0:
			since.Store(0)
		}
		if rerr != nil {
			if !errors.Is(rerr, io.EOF) {
				return fmt.Errorf("stdio: read: %w", rerr)
			}
			if _, nl := f.(codec.NewlineFramer); nl && len(bytes.TrimSpace(buf)) > 0 {
				if err := serve(bytes.TrimSpace(buf)); err != nil {
					return err
				}
				if err := flush(); err != nil {
					return err
				}
			}
			return io.EOF
		}
	}
}

// writer is the session's Sink: a queue drained by one goroutine, bounded
// in bytes. It is safe for concurrent use.
type writer struct {
	out    io.Writer
	framer codec.Framer
	max    int64

	mu     sync.Mutex
	queue  []queued
	bytes  int64 // queued or being written
	closed bool
	wake   chan struct{} // capacity 1: the loop has work, or must stop
	done   chan struct{} // closed when the loop ends

	failed   chan struct{}
	failOnce sync.Once
	cause    atomic.Pointer[error]
}

// queued is a message waiting for the writer: one message, or messages
// already framed (the reader's batch of answers).
type queued struct {
	b      *codec.Buffer
	framed bool
}

// Send implements session.Sink. It takes ownership of b and never blocks.
func (w *writer) Send(b *codec.Buffer) error { return w.push(b, false) }

// sendFramed queues b, messages already framed, as Send queues one.
func (w *writer) sendFramed(b *codec.Buffer) error { return w.push(b, true) }

func (w *writer) push(b *codec.Buffer, framed bool) error {
	n := int64(len(b.B))
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		codec.PutBuffer(b)
		return session.ErrClosed
	}
	if err := w.err(); err != nil {
		w.mu.Unlock()
		codec.PutBuffer(b)
		return err
	}
	if w.bytes+n > w.max {
		w.mu.Unlock()
		codec.PutBuffer(b)
		w.fail(session.ErrSlowConsumer)
		return session.ErrSlowConsumer
	}
	w.queue = append(w.queue, queued{b, framed})
	w.bytes += n
	w.mu.Unlock()
	w.signal()
	return nil
}

func (w *writer) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// loop writes what is queued, all of it in one Write, until the writer is
// closed and empty. After a failure it drops what it takes.
func (w *writer) loop() {
	defer close(w.done)
	var batch []queued
	var frame []byte
	for {
		w.mu.Lock()
		batch, w.queue = w.queue, batch[:0]
		closed := w.closed
		w.mu.Unlock()
		if len(batch) == 0 {
			if closed {
				return
			}
			<-w.wake
			continue
		}
		frame = frame[:0]
		var n int64
		for i, q := range batch {
			if q.framed {
				frame = append(frame, q.b.B...)
			} else {
				frame = w.framer.AppendFrame(frame, q.b.B)
			}
			n += int64(len(q.b.B))
			codec.PutBuffer(q.b)
			batch[i] = queued{}
		}
		if w.err() == nil {
			if _, err := w.out.Write(frame); err != nil {
				w.fail(fmt.Errorf("stdio: write: %w", err))
			}
		}
		w.mu.Lock()
		w.bytes -= n
		w.mu.Unlock()
		if cap(frame) > 64<<10 {
			frame = nil
		}
	}
}

func (w *writer) fail(err error) {
	w.failOnce.Do(func() {
		w.cause.Store(&err)
		close(w.failed)
	})
}

func (w *writer) err() error {
	if p := w.cause.Load(); p != nil {
		return *p
	}
	return nil
}

// close stops the loop once the queue is written.
func (w *writer) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.signal()
}

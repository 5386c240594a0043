// Package stdio serves MCP on a pair of streams (stdin and stdout of a
// subprocess): newline-delimited JSON-RPC, one session. Nothing but MCP
// messages is written to the output; logs belong on stderr.
//
// One goroutine reads and frames; cheap answers and handler answers alike go
// through a bounded queue to one writer goroutine, so messages are never
// interleaved. A reader that stops draining the output is dropped as a slow
// consumer once the queue holds MaxOutbound bytes.
package stdio

import (
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
	// ends; <= 0 means 30 s.
	DrainTimeout time.Duration
}

// Sentinel errors.
var (
	ErrTooLarge = errors.New("stdio: inbound message over the size limit")
	ErrFraming  = errors.New("stdio: malformed frame header")
)

// Serve serves eng on in and out until in reaches EOF, ctx ends, or the
// stream cannot be framed. When the input ends, requests in flight are
// allowed to finish (up to DrainTimeout) and their answers are written.
// It returns nil on EOF.
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
		queue:  make(chan *codec.Buffer, 1024),
		done:   make(chan struct{}),
		failed: make(chan struct{}),
	}
	go w.loop()
	sess := eng.NewSession(w)

	readErr := make(chan error, 1)
	go func() { readErr <- readLoop(eng, sess, in, f, w) }()

	var err error
	select {
	case err = <-readErr:
	case <-ctx.Done():
		err = ctx.Err()
	case <-w.failed:
		err = w.err()
	}
	// Let in-flight handlers finish and send their answers.
	deadline := time.Now().Add(opts.DrainTimeout)
	for sess.InFlight() > 0 && time.Now().Before(deadline) && w.err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	cause := err
	if cause == nil {
		cause = io.EOF
	}
	eng.CloseSession(sess, fmt.Errorf("stdio: %w", cause))
	w.close()
	<-w.done
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

func readLoop(eng *engine.Server, sess *session.Session, in io.Reader, f codec.Framer, w *writer) error {
	buf := make([]byte, 0, 64<<10)
	var scratch []byte
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
			scratch = eng.HandleFrame(sess, frame, scratch[:0])
			if len(scratch) > 0 {
				b := codec.GetBuffer()
				b.B = append(b.B, scratch...)
				if err := w.Send(b); err != nil {
					return err
				}
			}
		}
		buf = buf[:copy(buf, buf[consumed:])]
		if rerr != nil {
			if errors.Is(rerr, io.EOF) {
				return io.EOF
			}
			return fmt.Errorf("stdio: read: %w", rerr)
		}
	}
}

// writer is the session's Sink: a bounded queue drained by one goroutine.
type writer struct {
	out     io.Writer
	framer  codec.Framer
	max     int64
	pending atomic.Int64
	queue   chan *codec.Buffer
	done    chan struct{}

	mu       sync.Mutex
	closed   bool
	failed   chan struct{}
	failOnce sync.Once
	cause    atomic.Pointer[error]
}

// Send implements session.Sink. It takes ownership of b.
func (w *writer) Send(b *codec.Buffer) error {
	n := int64(len(b.B))
	if w.pending.Add(n) > w.max {
		w.pending.Add(-n)
		codec.PutBuffer(b)
		w.fail(session.ErrSlowConsumer)
		return session.ErrSlowConsumer
	}
	// The writer goroutine always drains the queue (it drops after a write
	// failure), so blocking here under the lock ends; holding it keeps close
	// from racing with the send.
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		w.pending.Add(-n)
		codec.PutBuffer(b)
		return session.ErrClosed
	}
	w.queue <- b
	return nil
}

func (w *writer) loop() {
	defer close(w.done)
	var frame []byte
	for b := range w.queue {
		frame = w.framer.AppendFrame(frame[:0], b.B)
		w.pending.Add(-int64(len(b.B)))
		codec.PutBuffer(b)
		if w.err() != nil {
			continue // drain and drop after a write failure
		}
		if _, err := w.out.Write(frame); err != nil {
			w.fail(fmt.Errorf("stdio: write: %w", err))
		}
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

func (w *writer) close() {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.queue)
	}
	w.mu.Unlock()
}

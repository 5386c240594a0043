package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/mcpedge/mcpedge/codec"
)

// defaultMaxOutbound bounds the bytes a stream connection queues for
// writing.
const defaultMaxOutbound = 8 << 20

// streamConn carries framed JSON-RPC over a byte stream (TCP, a
// subprocess's stdio, pipes). One goroutine reads and frames; one writes.
// Send appends the framed message to a pending buffer that the writer
// swaps out and writes in one call, so concurrent senders coalesce into
// few writes and nothing is allocated per message once the buffers have
// grown.
type streamConn struct {
	r      io.Reader
	w      io.Writer
	closer func() error // unblocks the reader and the writer
	framer codec.Framer
	in     Inbound
	maxOut int

	mu     sync.Mutex
	out    []byte // framed messages waiting for the writer
	closed bool
	cause  error
	kick   chan struct{} // cap 1: the writer has work
	stop   chan struct{} // closed by shutdown
	rdone  chan struct{}
	wdone  chan struct{}
	once   sync.Once
}

// newStreamConn starts the read and write goroutines over r and w.
// closer is called once on shutdown and must make pending reads and writes
// return.
func newStreamConn(r io.Reader, w io.Writer, closer func() error, f codec.Framer, in Inbound, maxOut int) *streamConn {
	if maxOut <= 0 {
		maxOut = defaultMaxOutbound
	}
	c := &streamConn{
		r: r, w: w, closer: closer, framer: f, in: in, maxOut: maxOut,
		kick:  make(chan struct{}, 1),
		stop:  make(chan struct{}),
		rdone: make(chan struct{}),
		wdone: make(chan struct{}),
	}
	go c.readLoop()
	go c.writeLoop()
	return c
}

// Send implements Conn: it queues msg, framed, for the writer.
func (c *streamConn) Send(_ context.Context, msg []byte) error {
	c.mu.Lock()
	if c.closed {
		err := c.cause
		c.mu.Unlock()
		return err
	}
	if len(c.out) > 0 && len(c.out)+len(msg) > c.maxOut {
		c.mu.Unlock()
		return ErrBackpressure
	}
	c.out = c.framer.AppendFrame(c.out, msg)
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
	return nil
}

func (c *streamConn) writeLoop() {
	defer close(c.wdone)
	var buf []byte
	for {
		select {
		case <-c.kick:
		case <-c.stop:
			return
		}
		runtime.Gosched()
		c.mu.Lock()
		buf, c.out = c.out, buf[:0]
		c.mu.Unlock()
		if len(buf) == 0 {
			continue
		}
		if _, err := c.w.Write(buf); err != nil {
			c.shutdown(fmt.Errorf("%w: write: %w", ErrConnectionLost, err))
			return
		}
		if cap(buf) > 1<<20 {
			buf = nil // do not pin a burst's memory
		}
	}
}

func (c *streamConn) readLoop() {
	defer close(c.rdone)
	buf := make([]byte, 0, 32<<10)
	var cause error
	for cause == nil {
		if len(buf) == cap(buf) {
			nb := make([]byte, len(buf), 2*cap(buf))
			copy(nb, buf)
			buf = nb
		}
		n, rerr := c.r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		consumed := 0
		for consumed < len(buf) {
			frame, k, err := c.framer.Next(buf[consumed:])
			if err != nil {
				if errors.Is(err, codec.ErrTooLarge) {
					cause = fmt.Errorf("client: inbound message over the size limit: %w", err)
				} else {
					cause = fmt.Errorf("%w: bad frame: %w", ErrProtocol, err)
				}
				break
			}
			if k == 0 {
				break
			}
			consumed += k
			if len(frame) > 0 {
				c.in.Message(frame)
			}
		}
		buf = buf[:copy(buf, buf[consumed:])]
		if cause == nil && rerr != nil {
			switch {
			case errors.Is(rerr, io.EOF) && len(buf) > 0:
				cause = fmt.Errorf("%w: stream ended inside a message: %w", ErrConnectionLost, io.ErrUnexpectedEOF)
			case errors.Is(rerr, io.EOF):
				cause = fmt.Errorf("%w: %w", ErrConnectionLost, io.EOF)
			default:
				cause = fmt.Errorf("%w: read: %w", ErrConnectionLost, rerr)
			}
		}
		if cap(buf) > 4<<20 && len(buf) < 32<<10 {
			buf = append(make([]byte, 0, 32<<10), buf...)
		}
	}
	c.shutdown(cause)
	<-c.wdone
	c.in.Closed(c.err())
}

// Abort ends the connection with cause without waiting (a protocol
// violation, a dead keep-alive).
func (c *streamConn) Abort(cause error) { c.shutdown(cause) }

// shutdown records the first cause, stops the writer and unblocks the
// reader. It does not wait.
func (c *streamConn) shutdown(cause error) {
	c.once.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.cause = cause
		c.mu.Unlock()
		close(c.stop)
		_ = c.closer()
	})
}

func (c *streamConn) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cause
}

// Close implements Conn.
func (c *streamConn) Close() error {
	c.shutdown(ErrClosed)
	<-c.rdone
	return nil
}

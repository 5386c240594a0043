package http

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/transport/netlimit"
	"github.com/valyala/fasthttp"
)

// What a client can make the server hold, and how it is bounded:
//
//   - A request body being received. fasthttp would allocate a body of its
//     declared Content-Length before reading a byte of it; the server reads
//     bodies itself instead (fasthttp's StreamRequestBody): a declared
//     length over the message limit is refused with 413 before anything is
//     read, and a body is read only once its request passed every check
//     its headers allow (path, Host and Origin, credentials, method,
//     content type, Accept, protocol version), into a buffer that grows
//     with the bytes received. Those buffers count against the budget of
//     partial inbound bytes (Options.MaxBuffered, shared with TCP's partial
//     messages); past it, the requests holding the most are cut (503,
//     {"limit":"max-buffered"}, the connection closed) until the total
//     fits.
//   - What waits to be written to a client: the events queued on an SSE
//     stream, and an answer larger than answerHold being written. They
//     count against the budget of queued outbound bytes
//     (Options.MaxOutboundTotal, shared with TCP); past it, the streams and
//     answers holding the most are cut (the stream fails, or the write is
//     aborted) until the total fits.
//
// Both count capacities, what is retained, and large buffers are not
// pooled: a body buffer over bodyChunk is left to the collector, and
// fasthttp is told not to pool request or response bodies over
// poolBodyMax.

// Sentinel errors: the reasons of connections cut to keep the budgets.
// They wrap netlimit.ErrBufferBudget and netlimit.ErrOutboundBudget.
var (
	ErrBufferBudget   = fmt.Errorf("mcphttp: request bodies being read over the budget: %w", netlimit.ErrBufferBudget)
	ErrOutboundBudget = fmt.Errorf("mcphttp: queued outbound bytes over the budget: %w", netlimit.ErrOutboundBudget)
)

const (
	// bodyPrefetch is what fasthttp reads of a streamed body with its
	// headers (the smallest of the Content-Length, the body limit and
	// 8 KiB): a body of that size or less is in memory when the handler
	// runs, and is taken as it is. Of a larger one fasthttp reads one byte
	// (headerReceived).
	bodyPrefetch = 8 << 10
	// bodyChunk is the first buffer of a larger body; it doubles as the
	// bytes arrive, up to the declared length. Buffers of this size are
	// pooled; larger ones are not.
	bodyChunk = 64 << 10
	// answerHold is the size from which an answer being written counts in
	// the outbound budget until it is.
	answerHold = 64 << 10
	// poolBodyMax is the largest request or response body fasthttp keeps
	// in its pools (fasthttp.SetBodySizePoolLimit).
	poolBodyMax = 64 << 10
	// budgetTick is how often the budgets are checked besides when they
	// go over (a missed wake-up, a lowered limit).
	budgetTick = time.Second
)

var poolLimitOnce sync.Once

// limitBodyPools keeps fasthttp from pooling request and response bodies
// over poolBodyMax: a few large requests would otherwise leave their
// buffers in the pools of every idle connection context. It is a
// process-wide setting of fasthttp.
func limitBodyPools() {
	poolLimitOnce.Do(func() { fasthttp.SetBodySizePoolLimit(poolBodyMax, poolBodyMax) })
}

// userKey keys the values a request holds until fasthttp resets it.
type userKey int

const (
	bodyKey   userKey = iota // *bodyRead: the buffer of a body read under the budget
	answerKey                // *answer: an answer counted in the outbound budget
)

// holder is what a holders set holds: a pointer that a budget can cut
// and that tells what it holds and whether it was cut.
type holder interface {
	comparable
	netlimit.Holder
	held() (n int64, cut bool)
}

// holders is a set of one kind of a budget's holders: a netlimit.Source.
type holders[T holder] struct {
	mu  sync.Mutex
	set map[T]struct{}
}

func (h *holders[T]) add(x T) {
	h.mu.Lock()
	if h.set == nil {
		h.set = make(map[T]struct{})
	}
	h.set[x] = struct{}{}
	h.mu.Unlock()
}

func (h *holders[T]) remove(x T) {
	h.mu.Lock()
	delete(h.set, x)
	h.mu.Unlock()
}

// AppendHeld implements netlimit.Source.
func (h *holders[T]) AppendHeld(dst []netlimit.Held) ([]netlimit.Held, int64) {
	var cutting int64
	h.mu.Lock()
	for x := range h.set {
		switch n, cut := x.held(); {
		case n <= 0:
		case cut:
			cutting += n
		default:
			dst = append(dst, netlimit.Held{N: n, Holder: x})
		}
	}
	h.mu.Unlock()
	return dst, cutting
}

// bodyRead is a request body read under the budget of partial inbound bytes.
type bodyRead struct {
	s     *Server
	conn  net.Conn
	buf   []byte
	count atomic.Int64 // cap(buf) while it counts in the budget
	cut   atomic.Bool
	done  bool // released: Close was called
}

var bodyBufs = sync.Pool{New: func() any { return new([bodyChunk]byte) }}

func (b *bodyRead) held() (int64, bool) { return b.count.Load(), b.cut.Load() }

// Cut implements netlimit.Holder: the read in progress fails at once.
func (b *bodyRead) Cut() {
	if b.cut.CompareAndSwap(false, true) {
		b.s.setConnReason(b.conn, ErrBufferBudget)
		_ = b.conn.SetReadDeadline(aLongTimeAgo)
	}
}

// settle takes the body out of the budget: it is complete, or failed.
func (b *bodyRead) settle() {
	b.s.bodies.remove(b)
	b.s.inb.Add(-b.count.Swap(0))
}

// Close releases the body when fasthttp resets the request (a user
// value that is an io.Closer).
func (b *bodyRead) Close() error {
	if b.done {
		return nil
	}
	b.done = true
	b.settle()
	if cap(b.buf) == bodyChunk {
		bodyBufs.Put((*[bodyChunk]byte)(b.buf[:bodyChunk]))
	}
	b.buf = nil
	return nil
}

// Errors of reading a body, answered by bodyError.
var (
	errBodyCut     = errors.New("mcphttp: body read cut: buffered bytes over the budget")
	errBodyTooBig  = errors.New("mcphttp: body over the message limit")
	errBodyShort   = errors.New("mcphttp: body shorter than its Content-Length")
	errBodyStalled = errors.New("mcphttp: body read timed out")
)

// grow makes room for more of the body, at most limit bytes in all: the
// buffer doubles, counted in the budget before it is allocated. Over the
// budget, the biggest holders are cut first, this one maybe.
func (b *bodyRead) grow(limit int) error {
	n := min(max(2*cap(b.buf), bodyChunk), limit)
	d := int64(n - cap(b.buf))
	b.count.Add(d)
	if b.s.inb.Add(d) {
		b.s.inb.Enforce() // on the request's goroutine: no lock held
	}
	if b.cut.Load() {
		return errBodyCut
	}
	var nb []byte
	if n == bodyChunk {
		nb = bodyBufs.Get().(*[bodyChunk]byte)[:0]
	} else {
		nb = make([]byte, 0, n)
	}
	nb = append(nb, b.buf...)
	if cap(b.buf) == bodyChunk {
		bodyBufs.Put((*[bodyChunk]byte)(b.buf[:bodyChunk]))
	}
	b.buf = nb
	return nil
}

// read reads the body from r: declared bytes, or (declared < 0, chunked)
// up to the end, at most max.
func (b *bodyRead) read(r io.Reader, declared, max int) error {
	limit := declared
	if declared < 0 {
		limit = max + 1
	}
	for {
		if len(b.buf) == cap(b.buf) {
			if len(b.buf) >= limit {
				if declared < 0 {
					return errBodyTooBig
				}
				return nil
			}
			if err := b.grow(limit); err != nil {
				return err
			}
		}
		n, err := r.Read(b.buf[len(b.buf):cap(b.buf)])
		b.buf = b.buf[:len(b.buf)+n]
		switch {
		case b.cut.Load():
			return errBodyCut
		case declared >= 0 && len(b.buf) == declared:
			return nil
		case declared < 0 && len(b.buf) > max:
			return errBodyTooBig
		case err == io.EOF && declared < 0:
			return nil
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			return errBodyShort
		case err != nil:
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return errBodyStalled
			}
			return err
		}
	}
}

// readBody reads the body of a request whose checks passed, when fasthttp
// left it to the handler (a stream): a small one that came with the
// headers as it is, a larger one under the budget. Afterwards
// ctx.Request.Body() is the body, valid until the request is reset. It
// answers the request and reports false when the body cannot be had.
func (s *Server) readBody(ctx *fasthttp.RequestCtx) bool {
	if !ctx.Request.IsBodyStream() {
		return true // in memory already: a forwarded request, a handler mounted without streaming
	}
	declared := ctx.Request.Header.ContentLength()
	if declared >= 0 && declared <= bodyPrefetch {
		_ = ctx.Request.Body() // read with the headers: copied in place, no wait
		return true
	}
	b := &bodyRead{s: s, conn: ctx.Conn()}
	s.bodies.add(b)
	ctx.SetUserValue(bodyKey, b)
	err := b.read(ctx.Request.BodyStream(), declared, s.max)
	b.settle()
	if err != nil {
		s.bodyError(ctx, err)
		return false
	}
	ctx.Request.SetBodyRaw(b.buf)
	return true
}

// bodyError answers a request whose body could not be read, and closes
// its connection: what is left of the body is unread.
func (s *Server) bodyError(ctx *fasthttp.RequestCtx, err error) {
	ctx.SetConnectionClose()
	switch {
	case errors.Is(err, errBodyCut):
		ip := s.clientIP(ctx)
		s.warns.Warn(s.log, ip, "request body cut", "remote", ip.String(), "cause", ErrBufferBudget)
		ctx.Response.Header.SetBytesK(hdrRetryAfter, "1")
		s.failData(ctx, fasthttp.StatusServiceUnavailable, codec.CodeServerBusy, "Service Unavailable: server buffer budget exceeded", []byte(`{"limit":"max-buffered"}`))
	case errors.Is(err, errBodyTooBig):
		s.tooLarge(ctx)
	case errors.Is(err, errBodyStalled):
		s.fail(ctx, fasthttp.StatusRequestTimeout, codeTransport, "Request Timeout")
	default:
		s.fail(ctx, fasthttp.StatusBadRequest, codeTransport, "Bad Request: malformed request body")
	}
}

// headerReceived is fasthttp's HeaderReceived, called once a request's
// headers are read, before fasthttp reads the first bytes of a streamed
// body (up to 8 KiB, bodyPrefetch) and calls the handler:
//
//   - A body declared over the message limit gets a read deadline of now,
//     so that nothing of it is waited for: the read fails at once, and
//     httpError answers 413 on the declared length (the handler does when
//     the first bytes had come with the headers). fasthttp resets the
//     request before it reports the failed read, so the request is
//     remembered by its header (that of its pooled RequestCtx) in
//     s.oversized, which httpError, the handler and expect each clear.
//   - A larger body than bodyPrefetch, or a chunked one, gets a body
//     limit of one byte for fasthttp, which then reads one byte of it and
//     leaves the rest to the handler: a request refused on its headers (no
//     credentials, say) is refused as soon as its first byte arrives, and
//     the rest is read, under the budget, only when it passed.
//
// A small body is read by fasthttp with the headers, as it is needed
// whole anyway; at most bodyPrefetch bytes a connection.
func (s *Server) headerReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	switch n := h.ContentLength(); {
	case n > s.max:
		s.oversized.Store(h, struct{}{})
		return fasthttp.RequestConfig{ReadTimeout: time.Nanosecond}
	case n > bodyPrefetch || n == -1:
		return fasthttp.RequestConfig{MaxRequestBodySize: 1}
	}
	return fasthttp.RequestConfig{}
}

// refusedOversized reports whether headerReceived refused ctx's request
// on its declared length, and forgets it.
func (s *Server) refusedOversized(ctx *fasthttp.RequestCtx) bool {
	_, ok := s.oversized.LoadAndDelete(&ctx.Request.Header)
	return ok
}

// tooLarge answers 413: a body over the message limit.
func (s *Server) tooLarge(ctx *fasthttp.RequestCtx) {
	s.fail(ctx, fasthttp.StatusRequestEntityTooLarge, codeTransport, "Request Entity Too Large: the body exceeds "+strconv.Itoa(s.max)+" bytes")
}

// dropBody deals with a body left unread by the handler (a request
// refused on its headers): one that came with the headers is discarded,
// and the connection of any other is closed after the answer, since its
// next request would start inside it.
func (s *Server) dropBody(ctx *fasthttp.RequestCtx) {
	if n := ctx.Request.Header.ContentLength(); n >= 0 && n <= bodyPrefetch {
		_ = ctx.Request.Body()
		return
	}
	ctx.SetConnectionClose()
}

// answer is an answer of answerHold bytes or more being written: it
// counts in the outbound budget until fasthttp has written it (and resets
// the request, which closes it).
type answer struct {
	s    *Server
	conn net.Conn
	n    int64
	cut  atomic.Bool
	done bool
}

func (a *answer) held() (int64, bool) { return a.n, a.cut.Load() }

// Cut implements netlimit.Holder: the write in progress fails at once.
func (a *answer) Cut() {
	if a.cut.CompareAndSwap(false, true) {
		a.s.setConnReason(a.conn, ErrOutboundBudget)
		_ = a.conn.SetWriteDeadline(aLongTimeAgo)
	}
}

// Close implements io.Closer: the answer is written (or failed).
func (a *answer) Close() error {
	if !a.done {
		a.done = true
		a.s.answers.remove(a)
		a.s.outb.Add(-a.n)
	}
	return nil
}

// holdAnswer counts a large answer in the outbound budget while it is
// written. A client that does not read it holds it until the write
// timeout, or until the budget cuts it.
func (s *Server) holdAnswer(ctx *fasthttp.RequestCtx) {
	if ctx.Response.IsBodyStream() || ctx.Conn() == nil {
		return
	}
	n := cap(ctx.Response.Body())
	if n < answerHold {
		return
	}
	a := &answer{s: s, conn: ctx.Conn(), n: int64(n)}
	s.answers.add(a)
	ctx.SetUserValue(answerKey, a)
	s.outb.Add(a.n) // over the budget, it wakes the enforcer
}

// streamHolder is an SSE stream as a holder of the outbound budget.
type streamHolder stream

func (h *streamHolder) held() (int64, bool) {
	st := (*stream)(h)
	return st.count.Load(), st.cutBudget.Load()
}

// Cut implements netlimit.Holder: the stream fails at once.
func (h *streamHolder) Cut() {
	st := (*stream)(h)
	if st.cutBudget.CompareAndSwap(false, true) {
		st.fail(ErrOutboundBudget)
	}
}

// enforce keeps the byte budgets until Shutdown: it cuts the biggest
// holders when a budget goes over (a wake-up from Add), and checks both
// every budgetTick. The TCP transport's sweeper does the same for budgets
// it shares.
func (s *Server) enforce() {
	defer s.reaperWG.Done()
	t := time.NewTicker(budgetTick)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-s.inb.Wake():
			s.inb.Enforce()
		case <-s.outb.Wake():
			s.outb.Enforce()
		case <-t.C:
			s.inb.Enforce()
			s.outb.Enforce()
		}
	}
}

// Buffered returns the bytes of request bodies being read, with those of
// every transport sharing Options.Buffered.
func (s *Server) Buffered() int64 { return s.inb.Total() }

// Outbound returns the bytes queued for clients (SSE streams, large
// answers being written), with those of every transport sharing
// Options.Outbound.
func (s *Server) Outbound() int64 { return s.outb.Total() }

// Budgets returns the budgets of partial inbound bytes and of queued
// outbound bytes the server counts in (Options.Buffered and Outbound, or
// its own).
func (s *Server) Budgets() (buffered, outbound *netlimit.Budget) { return s.inb, s.outb }

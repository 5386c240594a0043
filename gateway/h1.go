package gateway

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/valyala/fasthttp"
)

// The calls to an HTTP upstream (its requests, but initialize and the
// long-lived subscriptions/listen) go over h1Client: HTTP/1.1 keep-alive
// connections of its own, written and read without the per-request
// allocations and hand-offs of a general client.
//
//   - The caller writes: a request is appended to its connection's
//     output buffer, and whichever caller finds no write in progress
//     writes the buffer and what others appended meanwhile, in one system
//     call each round (requests pipelined on one connection coalesce).
//   - One goroutine per connection reads the answers, in order, and feeds
//     each to the muxConn of the pipe that sent the request: a JSON body
//     straight from the read buffer (no copy when it fits), an event
//     stream (the request's progress, logs and server-to-client requests
//     before its result) event by event as it arrives. Nothing is parsed
//     as SSE unless the answer is an event stream.
//   - A connection carries Pipeline requests at once (default 1: no
//     pipelining); a call takes the least busy connection with room, a
//     new one while there are fewer than MaxConns, else waits for one.
//     A connection whose current answer is an event stream takes no new
//     request until the stream ends: a long stream holds up only the
//     requests already pipelined behind it.
//   - A sweeper closes connections idle for h1Idle, and those whose
//     oldest request has waited past twice the call timeout (the call
//     itself timed out long before), which fails the requests behind it.
type h1Client struct {
	sh       *httpShared
	addr     string
	tls      *tls.Config
	head     []byte // "POST /path HTTP/1.1\r\nHost: ...\r\n" and the fixed headers
	maxConns int
	depth    int32
	timeout  time.Duration

	mu      sync.Mutex
	conns   []*h1Conn
	dialing int
	freed   chan struct{} // closed and replaced when a connection has room again, while some caller waits
	waiters atomic.Int32
	closed  bool
	stop    chan struct{}
	swept   sync.Once
}

// h1Idle is how long a connection may stay idle before it is closed:
// shorter than the usual server idle timeouts, so that a request is not
// written on a connection the server is closing.
const h1Idle = 30 * time.Second

// h1ReadBuffer is each connection's read buffer: answers that fit are
// fed to the muxConn from it without a copy.
const h1ReadBuffer = 16 << 10

func newH1Client(sh *httpShared, rawURL string, maxConns, depth int, timeout time.Duration) (*h1Client, error) {
	pu, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	addr := pu.Host
	if pu.Port() == "" {
		if pu.Scheme == "https" {
			addr += ":443"
		} else {
			addr += ":80"
		}
	}
	path := pu.RequestURI()
	if path == "" {
		path = "/"
	}
	h := &h1Client{sh: sh, addr: addr, maxConns: max(1, maxConns), depth: int32(max(1, depth)), timeout: timeout, stop: make(chan struct{})}
	if pu.Scheme == "https" {
		h.tls = &tls.Config{ServerName: pu.Hostname(), MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	}
	head := append([]byte("POST "), path...)
	head = append(head, " HTTP/1.1\r\nHost: "...)
	head = append(head, pu.Host...)
	head = append(head, "\r\nUser-Agent: mcpedge-gateway\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"...)
	for _, kv := range sh.headers {
		head = appendHeader(head, kv[0], kv[1])
	}
	h.head = head
	return h, nil
}

// appendHeader appends one header line. Keys and values come from the
// configuration (checked for CR, LF and NUL: Upstream.Normalize) or are
// made safe by their producers.
func appendHeader(dst []byte, k, v string) []byte {
	dst = append(dst, k...)
	dst = append(dst, ": "...)
	dst = append(dst, v...)
	return append(dst, "\r\n"...)
}

// errNoConn is the error of a call that found no connection in time.
var errNoConn = errors.New("no connection to the upstream came free in time")

// acquire returns a connection with room for one more request, and
// takes that room: the least busy one, a new one, or the first to come
// free (within the call timeout).
func (h *h1Client) acquire(ctx context.Context) (*h1Conn, error) {
	var deadline <-chan time.Time
	for {
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return nil, errStopped
		}
		best := h.pick()
		if best != nil {
			best.load.Add(1)
			h.mu.Unlock()
			return best, nil
		}
		// Pipelining: while a connection is being opened, wait for it
		// rather than open more.
		if len(h.conns)+h.dialing < h.maxConns && (h.depth == 1 || h.dialing == 0) {
			h.dialing++
			h.mu.Unlock()
			c, err := h.dial(ctx)
			h.mu.Lock()
			h.dialing--
			if err == nil && h.closed {
				err = errStopped
				_ = c.nc.Close()
			}
			if err != nil {
				h.mu.Unlock()
				return nil, err
			}
			c.load.Store(1)
			h.conns = append(h.conns, c)
			h.mu.Unlock()
			h.released()
			go c.readLoop()
			h.swept.Do(func() { go h.sweep() })
			return c, nil
		}
		if h.freed == nil {
			h.freed = make(chan struct{})
		}
		freed := h.freed
		h.waiters.Add(1)
		h.mu.Unlock()
		if deadline == nil {
			t := time.NewTimer(h.timeout)
			defer t.Stop()
			deadline = t.C
		}
		var werr error
		select {
		case <-freed:
		case <-deadline:
			werr = errNoConn
		case <-ctx.Done():
			werr = context.Cause(ctx)
		}
		h.waiters.Add(-1)
		if werr != nil {
			return nil, werr
		}
	}
}

// pick returns the connection a request goes on, nil when none has room
// (h.mu held). Without pipelining, an idle one. With, the busiest one
// with room: requests gather on few connections, so that they are
// written and answered together. A connection reading an event stream
// takes none.
func (h *h1Client) pick() *h1Conn {
	var best *h1Conn
	bestLoad := int32(-1)
	for _, c := range h.conns {
		l := c.load.Load()
		if l >= h.depth || (l > 0 && c.streaming.Load()) || c.closing.Load() {
			continue
		}
		if h.depth == 1 {
			return c
		}
		if l > bestLoad {
			best, bestLoad = c, l
		}
	}
	return best
}

// released tells the waiting callers that a connection has room.
func (h *h1Client) released() {
	h.mu.Lock()
	if h.freed != nil {
		close(h.freed)
		h.freed = nil
	}
	h.mu.Unlock()
}

// errDial marks a failure to reach the upstream at all: the pipe ends
// and reconnects, as for a stream upstream.
var errDial = errors.New("dial")

func (h *h1Client) dial(ctx context.Context) (*h1Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", h.addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errDial, err)
	}
	if h.tls != nil {
		tc := tls.Client(nc, h.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = nc.Close()
			return nil, fmt.Errorf("%w: TLS: %w", errDial, err)
		}
		nc = tc
	}
	c := &h1Conn{h: h, nc: nc, br: bufio.NewReaderSize(nc, h1ReadBuffer)}
	c.last.Store(nanotime())
	c.body.br = c.br
	return c, nil
}

// remove drops c from the pool (it is closed).
func (h *h1Client) remove(c *h1Conn) {
	h.mu.Lock()
	for i, o := range h.conns {
		if o == c {
			h.conns[i] = h.conns[len(h.conns)-1]
			h.conns[len(h.conns)-1] = nil
			h.conns = h.conns[:len(h.conns)-1]
			break
		}
	}
	h.mu.Unlock()
	h.released()
}

// close closes every connection; their requests fail.
func (h *h1Client) close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	conns := append([]*h1Conn(nil), h.conns...)
	close(h.stop)
	h.mu.Unlock()
	for _, c := range conns {
		c.fail(errStopped)
	}
	h.released()
}

// sweep closes the idle connections and those stuck on an answer.
func (h *h1Client) sweep() {
	tick := min(max(h.timeout/4, 10*time.Millisecond), time.Second)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		now := nanotime()
		// Idle ones leave the pool first (under h.mu, as acquire takes
		// room), then close.
		var idle []*h1Conn
		h.mu.Lock()
		keep := h.conns[:0]
		for _, c := range h.conns {
			if c.load.Load() == 0 && now-c.last.Load() > int64(h1Idle) {
				idle = append(idle, c)
			} else {
				keep = append(keep, c)
			}
		}
		clear(h.conns[len(keep):])
		h.conns = keep
		conns := append([]*h1Conn(nil), h.conns...)
		h.mu.Unlock()
		for _, c := range idle {
			c.fail(errIdle)
		}
		for _, c := range conns {
			c.mu.Lock()
			var oldest int64
			if c.npend > 0 {
				oldest = c.pend[c.head].sent
			}
			c.mu.Unlock()
			if oldest > 0 && now-oldest > int64(2*h.timeout) {
				c.fail(fmt.Errorf("no answer within %s", 2*h.timeout))
			}
		}
	}
}

var errIdle = errors.New("idle")

// h1Conn is one keep-alive connection.
type h1Conn struct {
	h  *h1Client
	nc net.Conn
	br *bufio.Reader

	load      atomic.Int32 // requests taken (acquire) and not answered
	streaming atomic.Bool  // the answer being read is an event stream
	closing   atomic.Bool  // the answer being read is its last: it takes no more requests
	last      atomic.Int64 // nanotime of the last answer

	mu      sync.Mutex
	out     []byte // requests to write
	spare   []byte
	writing bool
	pend    []h1Pending // ring, in the order written
	head    int
	npend   int
	dead    error

	hdr   fasthttp.ResponseHeader // the reader's
	body  h1Body                  // the reader's
	fails []h1Fail                // the reader's: the answer's failures, told once the connection's fate is known
}

// h1Fail is a call's failure the reader tells after it has decided
// whether the connection goes on: a caller woken by it must not find the
// connection still taking requests when it is about to end.
type h1Fail struct {
	p   *httpPipe
	id  [24]byte // a copy: the answer's id must not escape (h1Pending's)
	idn uint8
	err error
}

// failCall fails the call id of p once the answer being read is dealt
// with (readOne).
func (c *h1Conn) failCall(p *httpPipe, id []byte, err error) {
	f := h1Fail{p: p, err: err}
	f.idn = uint8(copy(f.id[:], id))
	c.fails = append(c.fails, f)
}

// h1Pending is a request written (or about to be) whose answer is due.
type h1Pending struct {
	p    *httpPipe
	id   [24]byte
	idn  uint8
	sent int64         // nanotime
	msg  *codec.Buffer // a copy of the request, to send again after an OAuth challenge; nil without OAuth
}

func (q *h1Pending) idBytes() []byte { return q.id[:q.idn] }

// send writes req (a whole HTTP request) on c, its answer to go to p.
// c's room was taken by acquire. It reports the write error of the
// caller that wrote; the requests of a connection that failed are failed
// by its reader.
func (c *h1Conn) send(p *httpPipe, id []byte, req []byte, retry *codec.Buffer) error {
	c.mu.Lock()
	if c.dead != nil {
		err := c.dead
		c.mu.Unlock()
		c.done()
		if retry != nil {
			codec.PutBuffer(retry)
		}
		return err
	}
	if c.npend == len(c.pend) {
		c.grow()
	}
	q := &c.pend[(c.head+c.npend)%len(c.pend)]
	q.p, q.sent, q.msg = p, nanotime(), retry
	q.idn = uint8(copy(q.id[:], id))
	c.npend++
	c.out = append(c.out, req...)
	if c.writing {
		c.mu.Unlock()
		return nil
	}
	c.writing = true
	if c.h.depth > 1 {
		// Let the callers about to send append theirs: one write for
		// them all.
		c.mu.Unlock()
		runtime.Gosched()
		c.mu.Lock()
	}
	var err error
	for len(c.out) > 0 && c.dead == nil {
		buf := c.out
		c.out = c.spare[:0]
		c.mu.Unlock()
		_, err = c.nc.Write(buf)
		if cap(buf) > 1<<20 {
			buf = nil // do not pin a burst's memory
		}
		c.mu.Lock()
		c.spare = buf[:0]
		if err != nil {
			break
		}
	}
	c.writing = false
	c.mu.Unlock()
	if err != nil {
		c.fail(fmt.Errorf("write: %w", err))
		return nil // the reader fails the requests, this one included
	}
	return nil
}

// grow doubles the ring of pending requests (c.mu held).
func (c *h1Conn) grow() {
	n := max(4, 2*len(c.pend))
	p := make([]h1Pending, n)
	for i := range c.npend {
		p[i] = c.pend[(c.head+i)%len(c.pend)]
	}
	c.pend, c.head = p, 0
}

// pop takes the oldest pending request; ok is false when none is.
func (c *h1Conn) pop() (q h1Pending, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.npend == 0 {
		return q, false
	}
	q = c.pend[c.head]
	c.pend[c.head] = h1Pending{}
	c.head = (c.head + 1) % len(c.pend)
	c.npend--
	return q, true
}

// done gives back the room a request took.
func (c *h1Conn) done() {
	if c.load.Add(-1) < c.h.depth {
		if c.h.waiters.Load() > 0 {
			c.h.released()
		}
	}
}

// fail closes c: its reader fails the requests still pending.
func (c *h1Conn) fail(cause error) {
	c.mu.Lock()
	if c.dead == nil {
		c.dead = cause
	}
	c.mu.Unlock()
	_ = c.nc.Close()
}

// readLoop reads the answers, in order, until the connection fails.
func (c *h1Conn) readLoop() {
	var err error
	for err == nil {
		err = c.readOne()
	}
	c.fail(err)
	c.h.remove(c)
	c.mu.Lock()
	cause := c.dead
	c.mu.Unlock()
	for {
		q, ok := c.pop()
		if !ok {
			break
		}
		if !errors.Is(cause, errStopped) {
			q.p.failID(q.idBytes(), fmt.Errorf("POST: %w", cause))
		}
		c.finish(&q)
	}
}

// finish releases what q held.
func (c *h1Conn) finish(q *h1Pending) {
	if q.msg != nil {
		codec.PutBuffer(q.msg)
		q.msg = nil
	}
	c.done()
}

var errUnsolicited = errors.New("an answer to no request")

// readOne reads one answer and delivers it.
func (c *h1Conn) readOne() error {
	for {
		if err := c.hdr.Read(c.br); err != nil {
			return err
		}
		if st := c.hdr.StatusCode(); st < 100 || st >= 200 || st == fasthttp.StatusSwitchingProtocols {
			break
		}
		// 1xx: informational, another header follows.
	}
	q, ok := c.pop()
	if !ok {
		return errUnsolicited
	}
	c.last.Store(nanotime())
	c.body.reset(c.hdr.ContentLength())
	if c.hdr.ConnectionClose() || c.body.mode == bodyUntilClose {
		c.closing.Store(true) // before its caller can send another
	}
	err := c.answer(&q)
	if err == nil && !c.body.done {
		// An answer whose body was not read to its end (an error's body
		// past its bound): the connection cannot carry another.
		err = errors.New("answer not read to its end")
	}
	if err == nil && c.closing.Load() {
		err = io.EOF
	}
	if err != nil {
		c.closing.Store(true)
	}
	for i := range c.fails {
		f := &c.fails[i]
		f.p.failID(f.id[:f.idn], f.err)
		*f = h1Fail{}
	}
	c.fails = c.fails[:0]
	c.finish(&q)
	return err
}

// answer delivers the answer whose header was read to q's pipe. An error
// ends the connection (the answer was q's: q has been dealt with).
func (c *h1Conn) answer(q *h1Pending) error {
	p, id := q.p, q.idBytes()
	status := c.hdr.StatusCode()
	ct := c.hdr.ContentType()
	switch {
	case status == fasthttp.StatusNotFound && p.sid.Load() != nil:
		c.failCall(p, id, errSessionGone)
		p.end(errSessionGone)
		return c.body.discard(64 << 10)
	case (status == fasthttp.StatusUnauthorized || status == fasthttp.StatusForbidden) && q.msg != nil:
		// OAuth: the slow path answers the challenge and sends the
		// request again.
		challenge := string(c.hdr.Peek("WWW-Authenticate"))
		msg := q.msg
		q.msg = nil
		go p.retryAuth(status, challenge, msg)
		return c.body.discard(64 << 10)
	case status >= 300 || status == fasthttp.StatusAccepted:
		return c.refused(p, id, status, ct)
	case hasPrefix(ct, hJSON):
		return c.json(p, id)
	case hasPrefix(ct, hSSE):
		c.streaming.Store(true)
		defer c.streaming.Store(false)
		sp := codec.SSEParser{MaxSize: c.h.sh.maxMsg}
		answered, retry, err := p.events(&c.body, &sp, id, true)
		if !answered {
			if sp.LastEventID() != "" && p.ctx.Err() == nil && (err == nil || !errors.Is(err, codec.ErrTooLarge)) {
				resumed := sp
				go p.resumeAnswer(&resumed, bytesCopy(id), retry, err)
			} else {
				if err == nil {
					err = errors.New("the event stream ended before the answer")
				}
				c.failCall(p, id, err)
			}
		}
		return err
	default:
		c.failCall(p, id, fmt.Errorf("content type %q", ct))
		return c.body.discard(64 << 10)
	}
}

// json delivers a JSON answer: from the read buffer when it fits, else
// read into a buffer of its own (at most the message bound).
func (c *h1Conn) json(p *httpPipe, id []byte) error {
	b := &c.body
	if b.mode == bodyLength && b.left <= int64(c.br.Size()) {
		n := int(b.left)
		msg, err := c.br.Peek(n)
		if err != nil {
			c.failCall(p, id, err)
			return err
		}
		if len(trimSpace(msg)) > 0 {
			p.deliver(msg)
		}
		_, _ = c.br.Discard(n)
		b.left, b.done = 0, true
		return nil
	}
	buf := codec.GetBuffer()
	defer codec.PutBuffer(buf)
	var err error
	if buf.B, err = readAll(b, buf.B[:0], c.h.sh.maxMsg); err != nil {
		c.failCall(p, id, err)
		return err
	}
	if len(trimSpace(buf.B)) > 0 {
		p.deliver(buf.B)
	}
	return nil
}

// refused answers a request the upstream refused with an HTTP status
// (or answered with 202, which a request must not be): its JSON-RPC error
// when the body is one with the request's id (2026-07-28 answers some
// errors with a status of their own), else an error naming the status.
func (c *h1Conn) refused(p *httpPipe, id []byte, status int, ct []byte) error {
	if hasPrefix(ct, hJSON) {
		buf := codec.GetBuffer()
		defer codec.PutBuffer(buf)
		var err error
		if buf.B, err = readAll(&c.body, buf.B[:0], 64<<10); err == nil {
			var e codec.Message
			if codec.Decode(buf.B, &e) == nil && e.Kind == codec.KindError && string(e.ID) == string(id) {
				p.deliver(buf.B)
				return nil
			}
		} else if !errors.Is(err, codec.ErrTooLarge) {
			c.failCall(p, id, err)
			return err
		}
	}
	c.failCall(p, id, errors.New("HTTP status "+strconv.Itoa(status)))
	return c.body.discard(64 << 10)
}

func hasPrefix(b, prefix []byte) bool {
	return len(b) >= len(prefix) && string(b[:len(prefix)]) == string(prefix)
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r' || b[0] == '\n') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r' || b[len(b)-1] == '\n') {
		b = b[:len(b)-1]
	}
	return b
}

func bytesCopy(b []byte) []byte { return append([]byte(nil), b...) }

// Body framings of an answer.
const (
	bodyLength     = iota // Content-Length bytes
	bodyChunked           // Transfer-Encoding: chunked
	bodyUntilClose        // until the connection closes
)

// h1Body reads one answer's body from its connection's reader: a
// Content-Length, chunks (RFC 9112 §7.1; extensions ignored, trailers
// read and dropped), or everything until the connection closes.
type h1Body struct {
	br   *bufio.Reader
	mode uint8
	left int64 // bytes left: of the body (bodyLength), of the current chunk (bodyChunked)
	crlf bool  // a chunk's data ended: its CRLF is next
	done bool  // the body was read to its end
}

// maxChunkLine bounds a chunk's size line, extensions included.
const maxChunkLine = 4096

var errChunk = errors.New("malformed chunked encoding")

// reset prepares b for a body of the given Content-Length (fasthttp's
// ResponseHeader.ContentLength: -1 chunked, -2 until the connection
// closes).
func (b *h1Body) reset(contentLength int) {
	b.crlf, b.done = false, false
	switch {
	case contentLength >= 0:
		b.mode, b.left = bodyLength, int64(contentLength)
		b.done = contentLength == 0
	case contentLength == -1:
		b.mode, b.left = bodyChunked, 0
	default:
		b.mode, b.left = bodyUntilClose, 0
	}
}

// Read implements io.Reader over the body.
func (b *h1Body) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	switch b.mode {
	case bodyLength:
		if int64(len(p)) > b.left {
			p = p[:b.left]
		}
		n, err := b.br.Read(p)
		b.left -= int64(n)
		if b.left == 0 {
			b.done = true
			return n, nil
		}
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return n, err
	case bodyChunked:
		if b.left == 0 {
			if err := b.nextChunk(); err != nil {
				return 0, err
			}
			if b.done {
				return 0, io.EOF
			}
		}
		if int64(len(p)) > b.left {
			p = p[:b.left]
		}
		n, err := b.br.Read(p)
		b.left -= int64(n)
		if b.left == 0 {
			b.crlf = true
		}
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return n, err
	default:
		n, err := b.br.Read(p)
		if errors.Is(err, io.EOF) {
			b.done = true
		}
		return n, err
	}
}

// nextChunk reads the CRLF that ends the previous chunk's data and the
// next chunk's size line; at the last chunk, the trailers.
func (b *h1Body) nextChunk() error {
	if b.crlf {
		if err := b.expectCRLF(); err != nil {
			return err
		}
		b.crlf = false
	}
	line, err := b.line()
	if err != nil {
		return err
	}
	var size int64
	digits := 0
	for _, ch := range line {
		var d byte
		switch {
		case ch >= '0' && ch <= '9':
			d = ch - '0'
		case ch >= 'a' && ch <= 'f':
			d = ch - 'a' + 10
		case ch >= 'A' && ch <= 'F':
			d = ch - 'A' + 10
		case ch == ';' || ch == ' ' || ch == '\t':
			goto parsed
		default:
			return errChunk
		}
		if digits++; digits > 15 {
			return errChunk
		}
		size = size<<4 | int64(d)
	}
parsed:
	if digits == 0 {
		return errChunk
	}
	if size > 0 {
		b.left = size
		return nil
	}
	// The last chunk: trailers until an empty line.
	for range 64 {
		line, err := b.line()
		if err != nil {
			return err
		}
		if len(line) == 0 {
			b.done = true
			return nil
		}
	}
	return errChunk
}

// line reads one CRLF-terminated line (a bare LF is taken too), without
// its terminator.
func (b *h1Body) line() ([]byte, error) {
	line, err := b.br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) || len(line) > maxChunkLine {
			return nil, errChunk
		}
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if len(line) > maxChunkLine {
		return nil, errChunk
	}
	line = line[:len(line)-1]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	return line, nil
}

func (b *h1Body) expectCRLF() error {
	line, err := b.line()
	if err != nil {
		return err
	}
	if len(line) != 0 {
		return errChunk
	}
	return nil
}

// discard reads and drops the rest of the body, at most max bytes; a
// longer body is an error (the connection is not reused).
func (b *h1Body) discard(max int64) error {
	var scratch [512]byte
	var n int64
	for !b.done {
		k, err := b.Read(scratch[:])
		n += int64(k)
		if n > max {
			return codec.ErrTooLarge
		}
		if err != nil {
			if errors.Is(err, io.EOF) && b.done {
				return nil
			}
			return err
		}
	}
	return nil
}

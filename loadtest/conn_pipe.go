package loadtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/internal/bytesconv"
)

// The pipelined driver: closed-loop load over a newline-delimited stream
// (a TCP connection, a stdio child), the path of Run for those targets
// unless Config.Rate or Config.Client says otherwise.
//
// Each connection has two goroutines and no goroutine per request. The
// reader (the connection's driver) reads answers in large chunks, matches
// each to its slot by id, verifies it, records it with the rest of its
// chunk under one lock, and hands the freed slots to the writer in one
// step. The writer renders a request for every free slot and sends them
// all in one write. A request's timeout is enforced by a sweep of the slots
// every tick (a read deadline wakes the reader when nothing comes), not by
// a timer per request.

// pipeStream is a byte stream with deadlines: a net.Conn, or a stdio
// child's pipes.
type pipeStream interface {
	io.ReadWriteCloser
	SetReadDeadline(time.Time) error
	SetWriteDeadline(time.Time) error
}

// pipeRun is what a pipelined run's connections share.
type pipeRun struct {
	cfg   *Config
	m     *mix
	r     *recorder
	heads [][]byte // per step: `,"method":"...","params":` (or without params)

	meas, end time.Time
	tickets   atomic.Int64
	lastDone  atomic.Int64 // unix nanos of the last measured answer
	childPID  atomic.Int64 // stdio: the latest child's pid
	tick      time.Duration
	dials     []atomic.Int64 // several targets: connections opened to each
}

func newPipeRun(cfg *Config, m *mix, r *recorder) *pipeRun {
	p := &pipeRun{cfg: cfg, m: m, r: r}
	if len(cfg.Targets) > 1 {
		p.dials = make([]atomic.Int64, len(cfg.Targets))
	}
	for i := range m.steps {
		st := &m.steps[i]
		h := append([]byte(`,"method":`), codec.AppendString(nil, st.Method)...)
		if len(st.params) > 0 {
			h = append(h, `,"params":`...)
		}
		p.heads = append(p.heads, h)
	}
	// The sweep's period: a request times out between Timeout and
	// Timeout+tick after it was sent.
	p.tick = min(max(cfg.Timeout/4, 5*time.Millisecond), 100*time.Millisecond)
	return p
}

// done notes when the last measured answer came, which ends a run of
// Config.Requests (a run of a duration ends on its clock: no need to share
// the cache line then).
func (p *pipeRun) done(now time.Time) {
	if p.cfg.Requests > 0 {
		p.lastDone.Store(now.UnixNano())
	}
}

// finished reports whether no more requests are to be sent.
func (p *pipeRun) finished(ctx context.Context, now time.Time) bool {
	return ctx.Err() != nil || (!p.end.IsZero() && !now.Before(p.end)) ||
		(p.cfg.Requests > 0 && p.tickets.Load() >= p.cfg.Requests)
}

// grant takes up to n tickets of the measured phase and returns how many
// it got.
func (p *pipeRun) grant(n int) int {
	if p.cfg.Requests <= 0 || n == 0 {
		return n
	}
	v := p.tickets.Add(int64(n))
	if over := v - p.cfg.Requests; over > 0 {
		return max(0, n-int(over))
	}
	return n
}

// open connects connection conn to its target: a TCP connection (with
// several targets, to target conn % len(Targets)), or a child process.
func (p *pipeRun) open(ctx context.Context, conn int) (pipeStream, error) {
	t := p.cfg.Target
	if t.Transport == "stdio" {
		return p.spawn()
	}
	if n := len(p.dials); n > 1 {
		t = p.cfg.Targets[conn%n]
		p.dials[conn%n].Add(1)
	}
	dctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	c, err := dialTCP(dctx, t.Addr, t.TLS)
	if err != nil {
		return nil, &Error{Kind: KindConnect, Err: err}
	}
	return c.(pipeStream), nil
}

// stdioStream is a child's stdin and stdout as one stream.
type stdioStream struct {
	r, w *os.File
	cmd  *exec.Cmd
	once sync.Once
}

func (s *stdioStream) Read(b []byte) (int, error)  { return s.r.Read(b) }
func (s *stdioStream) Write(b []byte) (int, error) { return s.w.Write(b) }
func (s *stdioStream) SetReadDeadline(t time.Time) error {
	return s.r.SetReadDeadline(t)
}
func (s *stdioStream) SetWriteDeadline(t time.Time) error {
	return s.w.SetWriteDeadline(t)
}

// Close closes the child's stdin, waits for it to exit (killing it after
// a grace period), then closes its stdout.
func (s *stdioStream) Close() error {
	s.once.Do(func() {
		(&stdioCloser{stdin: s.w, cmd: s.cmd}).Close()
		_ = s.r.Close()
	})
	return nil
}

func (p *pipeRun) spawn() (pipeStream, error) {
	argv := p.cfg.Target.Command
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, &Error{Kind: KindConnect, Err: err}
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, &Error{Kind: KindConnect, Err: err}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, p.cfg.Stderr
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, &Error{Kind: KindConnect, Err: err}
	}
	p.childPID.Store(int64(cmd.Process.Pid))
	return &stdioStream{r: outR, w: inW, cmd: cmd}, nil
}

// pipeSlot is one request in flight. The writer fills it and then stores
// id; the reader owns it while id is not 0, and frees it by storing 0 and
// handing it back.
type pipeSlot struct {
	id       atomic.Uint64
	step     int32
	measured bool
	sent     time.Time
	vars     vars
}

// okRec is one verified answer, recorded with the rest of its chunk.
type okRec struct {
	step int32
	lat  time.Duration
}

// pipeConn is one connection of a pipelined run, across its sessions.
type pipeConn struct {
	p     *pipeRun
	idx   int
	k     uint64
	slots []pipeSlot
	shard *shard

	// The reader's.
	buf      []byte
	n        int // bytes held in buf
	vf       verifier
	msg      codec.Message
	want     []byte
	recs     []okRec
	freed    []int32
	lastFail time.Time
	kept     *pipeSession // the last session, left open by finish

	// The writer's, kept across sessions.
	w pipeWriter
}

// pipeWriter is the state of whoever writes, under the session's wmu.
type pipeWriter struct {
	rng    rand64
	seq    uint64
	gen    []uint64
	out    []byte
	maxReq int // the longest request rendered
}

// pipeSession is one connection's current session.
type pipeSession struct {
	st pipeStream

	mu    sync.Mutex
	free  []int32     // slots to send, handed from the reader to the writer
	extra []byte      // answers to the server's requests, sent with them
	werr  error       // why the writer stopped, when a write failed
	wfail atomic.Bool // werr is set

	wmu      sync.Mutex  // held to write: by the writer, or the reader writing itself
	wdl      time.Time   // the write deadline set, under wmu
	hasExtra atomic.Bool // extra holds bytes

	wake    chan struct{} // the writer has work
	wdone   chan struct{} // the writer has returned
	stopped atomic.Bool   // the writer sends no more
	dead    atomic.Bool   // the reader ended the session
	maxID   atomic.Uint64 // highest id sent
}

func newPipeConn(p *pipeRun, idx, inflight int, seed uint64) *pipeConn {
	c := &pipeConn{
		p: p, idx: idx, k: uint64(inflight),
		slots: make([]pipeSlot, inflight),
		shard: p.r.shard(idx),
		buf:   make([]byte, 64<<10),
		w:     pipeWriter{rng: rand64{s: seed}, gen: make([]uint64, inflight)},
	}
	return c
}

// initRequest is initialize with id 1: the slots' ids start above the
// number of slots.
var initRequest = []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":` + initParams + "}\n")

var initializedNote = []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")

// dial opens a session: the stream and the initialize handshake (none in
// protocol 2026-07-28, whose requests carry what initialize said).
func (c *pipeConn) dial(ctx context.Context) (*pipeSession, error) {
	st, err := c.p.open(ctx, c.idx)
	if err != nil {
		return nil, err
	}
	s := &pipeSession{st: st, wake: make(chan struct{}, 1), wdone: make(chan struct{})}
	c.n = 0
	if c.p.cfg.stateless() {
		// 2026-07-28: no handshake; every request carries its _meta.
		return s, nil
	}
	stop := context.AfterFunc(ctx, func() { _ = st.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	deadline := time.Now().Add(c.p.cfg.Timeout)
	_ = st.SetReadDeadline(deadline)
	_ = st.SetWriteDeadline(deadline)
	fail := func(err error, msg string) (*pipeSession, error) {
		_ = st.Close()
		return nil, &Error{Kind: KindConnect, Err: err, Msg: msg}
	}
	if _, err := st.Write(initRequest); err != nil {
		return fail(err, "initialize")
	}
	for done := false; !done; {
		line, err := c.readLine(st)
		if err != nil {
			return fail(err, "initialize")
		}
		if len(line) == 0 {
			continue
		}
		if err := codec.Decode(line, &c.msg); err != nil {
			return fail(err, "initialize answer "+clip(line))
		}
		switch c.msg.Kind {
		case codec.KindNotification:
			continue
		case codec.KindRequest:
			if _, err := st.Write(answerServer(nil, &c.msg)); err != nil {
				return fail(err, "initialize")
			}
			continue
		}
		if string(c.msg.ID) != "1" {
			return fail(nil, "answer with id "+string(c.msg.ID)+" during initialize")
		}
		if c.msg.Kind == codec.KindError {
			return fail(rpcError(c.msg.Error), "initialize")
		}
		var r struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		if err := codec.Unmarshal(c.msg.Result, &r); err != nil || r.ProtocolVersion == "" {
			return fail(err, "initialize result without protocolVersion: "+clip(c.msg.Result))
		}
		done = true
	}
	if _, err := st.Write(initializedNote); err != nil {
		return fail(err, "notifications/initialized")
	}
	_ = st.SetWriteDeadline(time.Time{})
	_ = st.SetReadDeadline(time.Time{})
	if ctx.Err() != nil {
		return fail(ctx.Err(), "initialize")
	}
	return s, nil
}

// readLine returns the next complete line of st (without its end), reading
// more as needed; it is for the handshake, one line at a time.
func (c *pipeConn) readLine(st pipeStream) ([]byte, error) {
	for {
		if i := bytes.IndexByte(c.buf[:c.n], '\n'); i >= 0 {
			line := append([]byte(nil), trimLine(c.buf[:i])...)
			c.n = copy(c.buf, c.buf[i+1:c.n])
			return line, nil
		}
		if err := c.grow(); err != nil {
			return nil, err
		}
		m, err := st.Read(c.buf[c.n:])
		c.n += m
		if err != nil {
			return nil, err
		}
	}
}

// grow makes room in buf for more of a line, up to the largest message.
func (c *pipeConn) grow() *Error {
	if c.n < len(c.buf) {
		return nil
	}
	if len(c.buf) >= c.p.cfg.MaxMessage+1 {
		return &Error{Kind: KindProtocol, Err: codec.ErrTooLarge, Msg: "answer over " + strconv.Itoa(c.p.cfg.MaxMessage) + " bytes"}
	}
	nb := make([]byte, min(2*len(c.buf), c.p.cfg.MaxMessage+1))
	copy(nb, c.buf[:c.n])
	c.buf = nb
	return nil
}

func trimLine(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\r' || b[len(b)-1] == '\n') {
		b = b[:len(b)-1]
	}
	return b
}

// answerServer appends mcpload's answer to a request from the server.
func answerServer(dst []byte, msg *codec.Message) []byte {
	if msg.Method == "ping" {
		dst = codec.AppendResult(dst, msg.ID, nil)
	} else {
		dst = codec.AppendError(dst, msg.ID, codec.CodeMethodNotFound, "mcpload answers no "+msg.Method, nil)
	}
	return append(dst, '\n')
}

// drive runs the connection until the run has nothing more for it,
// re-dialling (at most every 100 ms) when a session breaks. s is the
// session dialled before the run began, or nil.
func (c *pipeConn) drive(ctx context.Context, s *pipeSession) {
	for {
		if s == nil {
			now := time.Now()
			if c.p.finished(ctx, now) {
				return
			}
			if wait := c.lastFail.Add(100 * time.Millisecond).Sub(now); wait > 0 {
				sleepCtx(ctx, wait)
				continue
			}
			var err error
			s, err = c.dial(ctx)
			if err != nil {
				c.lastFail = time.Now()
				if ctx.Err() == nil {
					c.failUnsent(err, c.lastFail)
				}
				continue
			}
		}
		if c.serve(ctx, s) {
			return
		}
		s = nil
		c.lastFail = time.Now()
	}
}

// failUnsent records a failure for each request the connection would have
// sent but could not, for want of a session.
func (c *pipeConn) failUnsent(err error, now time.Time) {
	if now.Before(c.p.meas) || (!c.p.end.IsZero() && !now.Before(c.p.end)) {
		return
	}
	// No writer runs: its random source is free to pick the steps.
	for i := c.p.grant(len(c.slots)); i > 0; i-- {
		c.shard.record(c.p.m.pick(&c.w.rng), 0, err, now)
	}
	c.p.done(now)
}

// serve runs one session: it starts its writer and reads answers until the
// session breaks (false: re-dial) or the run has nothing more for the
// connection (true).
func (c *pipeConn) serve(ctx context.Context, s *pipeSession) (finished bool) {
	s.free = s.free[:0]
	for i := range c.slots {
		s.free = append(s.free, int32(i))
	}
	s.wake <- struct{}{}
	go c.write(ctx, s)
	stop := context.AfterFunc(ctx, func() { _ = s.st.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()

	tick := c.p.tick
	var deadline, nextSweep time.Time
	now := time.Now()
	for {
		if ctx.Err() != nil {
			// The run ended with these calls outstanding: not the
			// server's failure, so not recorded.
			c.finish(s)
			return true
		}
		if s.wfail.Load() {
			s.mu.Lock()
			werr := s.werr
			s.mu.Unlock()
			kind := KindClosed
			if errors.Is(werr, os.ErrDeadlineExceeded) {
				kind = KindTimeout
			}
			c.end(s, &Error{Kind: kind, Err: werr, Msg: "write"})
			return false
		}
		if !now.Before(nextSweep) {
			c.sweep(ctx, s, now)
			nextSweep = now.Add(tick)
		}
		if s.stopped.Load() && c.idle() {
			c.finish(s)
			return true
		}
		if deadline.Sub(now) < tick/2 {
			// Re-armed lazily, then everything above is checked again: a
			// wake-up (a deadline in the past) set meanwhile is not lost.
			deadline = now.Add(tick)
			_ = s.st.SetReadDeadline(deadline)
			continue
		}

		if e := c.grow(); e != nil {
			c.end(s, e)
			return false
		}
		m, err := s.st.Read(c.buf[c.n:])
		now = time.Now()
		if m > 0 {
			c.n += m
			if e := c.chunk(ctx, s, now); e != nil {
				c.end(s, e)
				return false
			}
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				deadline = time.Time{} // a wake-up: look around, re-arm
				continue
			}
			if ctx.Err() != nil {
				continue
			}
			msg := err.Error()
			if c.n > 0 && err == io.EOF {
				msg = "connection closed in the middle of a message"
			}
			c.end(s, &Error{Kind: KindClosed, Err: ErrClosed, Msg: msg})
			return false
		}
	}
}

// chunk handles every complete line in buf, then records the verified
// answers and hands their slots to the writer at once.
func (c *pipeConn) chunk(ctx context.Context, s *pipeSession, now time.Time) *Error {
	used := 0
	var fatal *Error
	for {
		i := bytes.IndexByte(c.buf[used:c.n], '\n')
		if i < 0 {
			break
		}
		line := trimLine(c.buf[used : used+i])
		used += i + 1
		if len(line) == 0 {
			continue
		}
		if fatal = c.answer(ctx, s, line, now); fatal != nil {
			break
		}
	}
	c.n = copy(c.buf, c.buf[used:c.n])
	if len(c.recs) > 0 {
		c.shard.recordOK(c.recs, now)
		c.recs = c.recs[:0]
		c.p.done(now)
	}
	if fatal == nil {
		c.flush(ctx, s, now)
	}
	return fatal
}

// release hands the freed slots to the writer.
func (c *pipeConn) release(s *pipeSession) {
	if len(c.freed) == 0 {
		return
	}
	s.mu.Lock()
	s.free = append(s.free, c.freed...)
	s.mu.Unlock()
	c.freed = c.freed[:0]
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// envelopeHead is how every answer of mcpedge and the floors begins.
const envelopeHead = `{"jsonrpc":"2.0","id":`

// fastEnvelope splits `{"jsonrpc":"2.0","id":N,"result":R}` into N and R
// without decoding; ok is false for any other line.
func fastEnvelope(line []byte) (id uint64, result []byte, ok bool) {
	const res = `,"result":`
	if len(line) < len(envelopeHead)+1+len(res)+2 || string(line[:len(envelopeHead)]) != envelopeHead || line[len(line)-1] != '}' {
		return 0, nil, false
	}
	i := len(envelopeHead)
	start := i
	for i < len(line) && line[i] >= '0' && line[i] <= '9' {
		id = id*10 + uint64(line[i]-'0')
		i++
	}
	if i == start || i-start > 19 || line[start] == '0' || len(line)-i < len(res)+2 || string(line[i:i+len(res)]) != res {
		return 0, nil, false
	}
	return id, line[i+len(res) : len(line)-1], true
}

// answer handles one inbound line; an error ends the session.
func (c *pipeConn) answer(ctx context.Context, s *pipeSession, line []byte, now time.Time) *Error {
	id, result, fast := fastEnvelope(line)
	decoded := false
	if !fast {
		if err := codec.Decode(line, &c.msg); err != nil {
			return &Error{Kind: KindProtocol, Err: err, Msg: "answer " + clip(line)}
		}
		decoded = true
		switch c.msg.Kind {
		case codec.KindNotification:
			return nil
		case codec.KindRequest:
			s.mu.Lock()
			s.extra = answerServer(s.extra, &c.msg)
			s.mu.Unlock()
			s.hasExtra.Store(true) // sent with the next requests
			return nil
		}
		var err error
		id, err = strconv.ParseUint(bytesconv.B2S(c.msg.ID), 10, 64)
		if err != nil || id == 0 {
			return &Error{Kind: KindIDMismatch, Msg: "answer with id " + string(c.msg.ID) + ", which mcpload never sent"}
		}
		result = c.msg.Result
	}
	i := (id - 1) % c.k
	sl := &c.slots[i]
	if id == 0 || sl.id.Load() != id {
		if id <= s.maxID.Load() {
			return nil // a late answer to a call that timed out
		}
		return &Error{Kind: KindIDMismatch, Msg: "answer with id " + strconv.FormatUint(id, 10) + ", which mcpload never sent"}
	}
	step := int(sl.step)
	st := &c.p.m.steps[step]
	var e *Error
	if decoded && c.msg.Kind == codec.KindError {
		e = rpcError(c.msg.Error)
	} else {
		c.want = render(c.want[:0], st.expect, &sl.vars)
		if !c.vf.quick(step, st, result, c.want) {
			if fast {
				// Not the shape learned: decode it all, as if the fast
				// path were not there.
				if err := codec.Decode(line, &c.msg); err != nil {
					return &Error{Kind: KindProtocol, Err: err, Msg: "answer " + clip(line)}
				}
				result = c.msg.Result
			}
			if c.msg.Kind == codec.KindError {
				e = rpcError(c.msg.Error)
			} else {
				e = c.vf.checkLearn(step, st, result, c.want)
			}
		}
	}
	sl.id.Store(0)
	c.freed = append(c.freed, int32(i))
	if !sl.measured || (e != nil && ctx.Err() != nil) {
		return nil
	}
	lat := now.Sub(sl.sent)
	if e == nil {
		c.recs = append(c.recs, okRec{step: int32(step), lat: lat})
	} else {
		c.shard.record(step, lat, e, now)
		c.p.done(now)
	}
	return nil
}

// sweep fails the requests outstanding longer than the timeout.
func (c *pipeConn) sweep(ctx context.Context, s *pipeSession, now time.Time) {
	limit := c.p.cfg.Timeout
	for i := range c.slots {
		sl := &c.slots[i]
		if sl.id.Load() == 0 || now.Sub(sl.sent) <= limit {
			continue
		}
		sl.id.Store(0)
		c.freed = append(c.freed, int32(i))
		if sl.measured {
			st := &c.p.m.steps[sl.step]
			c.shard.record(int(sl.step), now.Sub(sl.sent), &Error{Kind: KindTimeout, Err: ErrTimeout, Msg: "no answer to " + st.Method + " within " + limit.String()}, now)
			c.p.done(now)
		}
	}
	c.flush(ctx, s, now)
}

// idle reports whether no request is outstanding.
func (c *pipeConn) idle() bool {
	for i := range c.slots {
		if c.slots[i].id.Load() != 0 {
			return false
		}
	}
	return true
}

// end closes the session, stops its writer and fails every request still
// outstanding with cause (nil: drops them unrecorded).
func (c *pipeConn) end(s *pipeSession, cause *Error) {
	s.dead.Store(true)
	_ = s.st.Close()
	c.settle(s, cause)
}

// finish stops the session's writer at the end of the run and drops the
// calls still outstanding, but leaves the stream open until the run's
// figures are taken: a stdio child lives until then, for its CPU time and
// memory to be read.
func (c *pipeConn) finish(s *pipeSession) {
	s.dead.Store(true)
	_ = s.st.SetWriteDeadline(time.Unix(1, 0)) // a write blocked on the server returns
	c.settle(s, nil)
	c.kept = s
}

// settle waits for the writer of the ended session s and fails every
// request still outstanding with cause (nil: drops them unrecorded).
func (c *pipeConn) settle(s *pipeSession, cause *Error) {
	select {
	case s.wake <- struct{}{}:
	default:
	}
	<-s.wdone
	now := time.Now()
	for i := range c.slots {
		sl := &c.slots[i]
		if sl.id.Load() == 0 {
			continue
		}
		sl.id.Store(0)
		if cause != nil && sl.measured {
			c.shard.record(int(sl.step), now.Sub(sl.sent), cause, now)
			c.p.done(now)
		}
	}
	if len(c.recs) > 0 {
		c.shard.recordOK(c.recs, now)
		c.recs = c.recs[:0]
	}
	c.freed = c.freed[:0]
	c.n = 0
}

// inlineWindow bounds the bytes of requests in flight on a connection
// for its reader to write them itself: a window that small fits the
// kernel's buffers (a pipe's 64 KiB, a socket's), so the write does not
// wait on a server that is itself waiting for mcpload to read. Larger
// windows are written by the session's writer goroutine.
const inlineWindow = 32 << 10

// write is the session's writer goroutine: it sends the first requests,
// and the next ones whenever the reader hands it slots instead of writing
// them itself, until the run has no more for it.
func (c *pipeConn) write(ctx context.Context, s *pipeSession) {
	defer close(s.wdone)
	var local []int32
	for {
		select {
		case <-s.wake:
		case <-ctx.Done():
			s.stopped.Store(true)
			return
		}
		if s.dead.Load() {
			return
		}
		s.wmu.Lock()
		s.mu.Lock()
		local, s.free = s.free, local[:0]
		s.mu.Unlock()
		stop, err := c.send(ctx, s, time.Now(), local)
		s.wmu.Unlock()
		if err != nil || stop {
			// The reader is woken to see why the writer is done.
			_ = s.st.SetReadDeadline(time.Unix(1, 0))
			return
		}
	}
}

// flush sends the requests of the slots the reader freed: itself when the
// window is small and the writer is not writing, else through the writer.
func (c *pipeConn) flush(ctx context.Context, s *pipeSession, now time.Time) {
	if len(c.freed) == 0 && !s.hasExtra.Load() {
		return
	}
	if s.wmu.TryLock() {
		if c.w.maxReq*int(c.k) <= inlineWindow {
			_, _ = c.send(ctx, s, now, c.freed) // the reader's loop sees what it set
			s.wmu.Unlock()
			c.freed = c.freed[:0]
			return
		}
		s.wmu.Unlock()
	}
	c.release(s)
}

// send writes a request for each of slots, after the answers to the
// server's requests, all at once, and reports whether the run has no more
// requests for the connection. A write error is also kept in the session,
// for the reader. The caller holds s.wmu.
func (c *pipeConn) send(ctx context.Context, s *pipeSession, now time.Time, slots []int32) (stop bool, err error) {
	if s.stopped.Load() {
		return true, nil
	}
	w := &c.w
	p := c.p
	w.out = w.out[:0]
	if s.hasExtra.Load() {
		s.mu.Lock()
		w.out = append(w.out, s.extra...)
		s.extra = s.extra[:0]
		s.hasExtra.Store(false)
		s.mu.Unlock()
	}
	n := len(slots)
	stop = p.finished(ctx, now)
	measured := !now.Before(p.meas)
	if stop {
		n = 0
	} else if measured {
		if g := p.grant(n); g < n {
			n, stop = g, true
		}
	}
	var maxID uint64
	for _, i := range slots[:n] {
		sl := &c.slots[i]
		w.seq++
		step := p.m.pick(&w.rng)
		st := &p.m.steps[step]
		sl.vars.fill(&w.rng, c.idx, w.seq)
		sl.step, sl.sent, sl.measured = int32(step), now, measured
		w.gen[i]++
		id := w.gen[i]*c.k + uint64(i) + 1
		maxID = max(maxID, id)
		start := len(w.out)
		w.out = append(w.out, envelopeHead...)
		w.out = strconv.AppendUint(w.out, id, 10)
		w.out = append(w.out, p.heads[step]...)
		w.out = render(w.out, st.params, &sl.vars)
		w.out = append(w.out, '}', '\n')
		w.maxReq = max(w.maxReq, len(w.out)-start)
	}
	if maxID > s.maxID.Load() {
		s.maxID.Store(maxID)
	}
	for _, i := range slots[:n] {
		c.slots[i].id.Store(w.gen[i]*c.k + uint64(i) + 1)
	}
	if len(w.out) > 0 {
		if s.wdl.Sub(now) < p.cfg.Timeout/2 {
			s.wdl = now.Add(p.cfg.Timeout)
			_ = s.st.SetWriteDeadline(s.wdl)
		}
		if _, err = s.st.Write(w.out); err != nil {
			s.mu.Lock()
			s.werr = err
			s.mu.Unlock()
			s.wfail.Store(true)
		}
	}
	if cap(w.out) > 1<<20 {
		w.out = nil
	}
	if stop {
		s.stopped.Store(true)
	}
	return stop, err
}

// pipeLoad is the pipelined driver as Run's load.
type pipeLoad struct {
	p        *pipeRun
	conns    []*pipeConn
	first    []*pipeSession // dialled before the run, handed to drive
	launched bool
}

func newPipeLoad(ctx context.Context, cfg *Config, m *mix) (*pipeLoad, error) {
	p := newPipeRun(cfg, m, newRecorder(m, cfg.Connections))
	pl := &pipeLoad{p: p, conns: make([]*pipeConn, cfg.Connections), first: make([]*pipeSession, cfg.Connections)}
	seed := uint64(time.Now().UnixNano())
	var wg sync.WaitGroup
	errs := make([]error, cfg.Connections)
	for i := range pl.conns {
		c := newPipeConn(p, i, cfg.InFlight, seed^uint64(i+1)*0x9e3779b97f4a7c15)
		pl.conns[i] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			pl.first[i], errs[i] = c.dial(ctx)
			if errs[i] != nil {
				c.lastFail = time.Now()
			}
		}()
	}
	wg.Wait()
	alive := 0
	var connErr error
	for i, s := range pl.first {
		if s != nil {
			alive++
		} else {
			connErr = errs[i]
		}
	}
	if alive == 0 {
		return nil, fmt.Errorf("loadtest: no connection to %s: %w", cfg.targetsString(), connErr)
	}
	p.r.setupFailures = int64(len(pl.conns) - alive)
	if connErr != nil {
		p.r.setupSample = connErr.Error()
	}
	return pl, nil
}

func (pl *pipeLoad) recorder() *recorder { return pl.p.r }
func (pl *pipeLoad) pid() int            { return int(pl.p.childPID.Load()) }
func (pl *pipeLoad) lastDone() int64     { return pl.p.lastDone.Load() }

// targetCounts is the connections opened to each of several targets (nil
// with one).
func (pl *pipeLoad) targetCounts() []TargetResult {
	if len(pl.p.dials) == 0 {
		return nil
	}
	out := make([]TargetResult, len(pl.p.dials))
	for i := range pl.p.dials {
		out[i] = TargetResult{Target: pl.p.cfg.Targets[i].String(), Connections: pl.p.dials[i].Load()}
	}
	return out
}

func (pl *pipeLoad) launch(ctx context.Context, _, measStart, end time.Time, wg *sync.WaitGroup) {
	pl.p.meas, pl.p.end = measStart, end
	pl.launched = true
	for i, c := range pl.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.drive(ctx, pl.first[i])
		}()
	}
}

// close closes the sessions left open: those the connections finished
// the run on, or all those dialled for a run that never launched.
func (pl *pipeLoad) close() {
	var wg sync.WaitGroup
	closeAll := func(s *pipeSession) {
		if s != nil {
			wg.Add(1)
			go func() { // a stdio child may take a while to exit
				defer wg.Done()
				_ = s.st.Close()
			}()
		}
	}
	for i, c := range pl.conns {
		if pl.launched {
			closeAll(c.kept)
		} else {
			closeAll(pl.first[i])
		}
	}
	wg.Wait()
}

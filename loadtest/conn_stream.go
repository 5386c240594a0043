package loadtest

import (
	"bufio"
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/internal/bytesconv"
)

// streamSession is one MCP session over a newline-delimited byte stream
// (a TCP connection, a child's stdio). Up to len(slots) calls are in flight
// at once; answers are matched to calls by id, in any order.
type streamSession struct {
	w      io.Writer
	closer io.Closer
	r      *bufio.Reader
	opts   *sessionOpts

	wmu sync.Mutex

	slots []slot
	free  chan int
	maxID atomic.Uint64 // highest id sent

	done    chan struct{}
	errMu   sync.Mutex
	err     *Error // why the session ended
	readEnd chan struct{}
}

// sessionOpts are what every session of a run shares.
type sessionOpts struct {
	timeout  time.Duration
	maxFrame int
	onNote   func(method string, params []byte)
	// stateless: protocol 2026-07-28, no handshake and no session.
	stateless bool
	// sticky: of several HTTP targets, each session's requests go to
	// the target it was initialized on (Config.Sticky).
	sticky bool
	// bearer are the Authorization header values ("Bearer TOKEN"),
	// encoded once, that HTTP requests carry in turn; none when empty.
	bearer     [][]byte
	bearerNext atomic.Uint64
}

// slot is one in-flight call. id is the call's id while it waits for its
// answer; whoever swaps it to 0 (the reader with the answer, the caller on
// timeout) owns res and err.
type slot struct {
	id    atomic.Uint64
	gen   uint64
	ch    chan struct{}
	res   []byte
	err   *Error
	out   []byte
	timer *time.Timer
}

func newStreamSession(w io.Writer, r io.Reader, closer io.Closer, inflight int, opts *sessionOpts) *streamSession {
	if inflight < 1 {
		inflight = 1
	}
	s := &streamSession{
		w: w, closer: closer, opts: opts,
		r:       bufio.NewReaderSize(r, 64<<10),
		slots:   make([]slot, inflight),
		free:    make(chan int, inflight),
		done:    make(chan struct{}),
		readEnd: make(chan struct{}),
	}
	for i := range s.slots {
		s.slots[i].ch = make(chan struct{}, 1)
		s.slots[i].timer = time.NewTimer(time.Hour)
		s.slots[i].timer.Stop()
		s.free <- i
	}
	go s.readLoop()
	return s
}

// fail ends the session with e, failing every outstanding call with it.
func (s *streamSession) fail(e *Error) {
	s.errMu.Lock()
	if s.err != nil {
		s.errMu.Unlock()
		return
	}
	s.err = e
	close(s.done)
	s.errMu.Unlock()
	_ = s.closer.Close()
	for i := range s.slots {
		sl := &s.slots[i]
		if id := sl.id.Load(); id != 0 && sl.id.CompareAndSwap(id, 0) {
			sl.err = e
			sl.ch <- struct{}{}
		}
	}
}

// broken reports why the session ended, or nil while it is usable.
func (s *streamSession) broken() *Error {
	select {
	case <-s.done:
		s.errMu.Lock()
		defer s.errMu.Unlock()
		return s.err
	default:
		return nil
	}
}

// Close ends the session and waits for its reader.
func (s *streamSession) Close() error {
	s.fail(&Error{Kind: KindClosed, Err: ErrClosed, Msg: "closed by mcpload"})
	<-s.readEnd
	return nil
}

// Call sends one request and waits for its answer, the run's end or the
// request timeout, whichever comes first. Up to len(s.slots) calls run at
// once; more wait for a slot.
func (s *streamSession) Call(ctx context.Context, method string, params, dst []byte) ([]byte, error) {
	var i int
	select {
	case i = <-s.free:
	case <-s.done:
		return dst, s.broken()
	case <-ctx.Done():
		return dst, ctx.Err()
	}
	defer func() { s.free <- i }()
	sl := &s.slots[i]
	sl.gen++
	id := sl.gen*uint64(len(s.slots)) + uint64(i) + 1
	sl.res, sl.err = dst, nil
	for {
		m := s.maxID.Load()
		if id <= m || s.maxID.CompareAndSwap(m, id) {
			break
		}
	}
	sl.id.Store(id)
	var idb [20]byte
	sl.out = codec.AppendRequest(sl.out[:0], strconv.AppendUint(idb[:0], id, 10), method, params)
	sl.out = append(sl.out, '\n')
	s.wmu.Lock()
	_, werr := s.w.Write(sl.out)
	s.wmu.Unlock()
	if werr != nil {
		s.fail(&Error{Kind: KindClosed, Err: werr, Msg: "write"})
	}
	sl.timer.Reset(s.opts.timeout)
	var cause *Error
	select {
	case <-sl.ch:
		sl.timer.Stop()
		return sl.res, errOrNil(sl.err)
	case <-sl.timer.C:
		cause = &Error{Kind: KindTimeout, Err: ErrTimeout, Msg: "no answer to " + method + " within " + s.opts.timeout.String()}
	case <-ctx.Done():
		sl.timer.Stop()
		cause = &Error{Kind: KindTimeout, Err: ctx.Err(), Msg: "run ended with the call outstanding"}
	}
	if sl.id.CompareAndSwap(id, 0) {
		return dst, cause
	}
	// The reader (or fail) claimed the slot first: its signal is on the way.
	<-sl.ch
	return sl.res, errOrNil(sl.err)
}

// errOrNil keeps a nil *Error from becoming a non-nil error.
func errOrNil(e *Error) error {
	if e == nil {
		return nil
	}
	return e
}

// notify sends a notification.
func (s *streamSession) notify(method string, params []byte) error {
	b := codec.GetBuffer()
	defer codec.PutBuffer(b)
	b.B = append(codec.AppendNotification(b.B, method, params), '\n')
	s.wmu.Lock()
	_, err := s.w.Write(b.B)
	s.wmu.Unlock()
	return err
}

func (s *streamSession) readLoop() {
	defer close(s.readEnd)
	var big []byte // a line longer than the reader's buffer
	var msg codec.Message
	for {
		line, err := s.r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			big = append(big, line...)
			if len(big) > s.opts.maxFrame {
				s.fail(&Error{Kind: KindProtocol, Err: codec.ErrTooLarge, Msg: "answer over " + strconv.Itoa(s.opts.maxFrame) + " bytes"})
				return
			}
			continue
		}
		if big != nil {
			big = append(big, line...)
			line, big = big, nil
		}
		if err != nil {
			if len(line) > 0 && err == io.EOF {
				s.fail(&Error{Kind: KindClosed, Err: ErrClosed, Msg: "connection closed in the middle of a message"})
			} else {
				s.fail(&Error{Kind: KindClosed, Err: ErrClosed, Msg: err.Error()})
			}
			return
		}
		for len(line) > 0 && (line[len(line)-1] == '\n' || line[len(line)-1] == '\r') {
			line = line[:len(line)-1]
		}
		if len(line) == 0 {
			continue
		}
		if e := s.dispatch(line, &msg); e != nil {
			s.fail(e)
			return
		}
	}
}

// dispatch handles one inbound message; an error ends the session.
func (s *streamSession) dispatch(line []byte, msg *codec.Message) *Error {
	if err := codec.Decode(line, msg); err != nil {
		return &Error{Kind: KindProtocol, Err: err, Msg: "answer " + clip(line)}
	}
	switch msg.Kind {
	case codec.KindNotification:
		if s.opts.onNote != nil {
			s.opts.onNote(msg.Method, msg.Params)
		}
		return nil
	case codec.KindRequest:
		b := codec.GetBuffer()
		if msg.Method == "ping" {
			b.B = codec.AppendResult(b.B, msg.ID, nil)
		} else {
			b.B = codec.AppendError(b.B, msg.ID, codec.CodeMethodNotFound, "mcpload answers no "+msg.Method, nil)
		}
		b.B = append(b.B, '\n')
		s.wmu.Lock()
		_, _ = s.w.Write(b.B)
		s.wmu.Unlock()
		codec.PutBuffer(b)
		return nil
	}
	id, err := strconv.ParseUint(bytesconv.B2S(msg.ID), 10, 64)
	if err != nil || id == 0 {
		return &Error{Kind: KindIDMismatch, Msg: "answer with id " + string(msg.ID) + ", which mcpload never sent"}
	}
	sl := &s.slots[(id-1)%uint64(len(s.slots))]
	if !sl.id.CompareAndSwap(id, 0) {
		if id <= s.maxID.Load() {
			return nil // a late answer to a call that timed out
		}
		return &Error{Kind: KindIDMismatch, Msg: "answer with id " + string(msg.ID) + ", which mcpload never sent"}
	}
	if msg.Kind == codec.KindError {
		sl.err = rpcError(msg.Error)
	} else {
		sl.res = append(sl.res, msg.Result...)
	}
	sl.ch <- struct{}{}
	return nil
}

// rpcError turns a JSON-RPC error object into a KindRPCError.
func rpcError(raw []byte) *Error {
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if err := codec.Unmarshal(raw, &e); err != nil {
		return &Error{Kind: KindProtocol, Err: err, Msg: "error object " + clip(raw)}
	}
	return &Error{Kind: KindRPCError, Code: e.Code, Msg: e.Message}
}

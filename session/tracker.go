package session

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/codec"
)

// Tracker matches answers to outbound requests: each request gets a fresh
// integer id and a Call to wait on. It is used by the server (requests to
// the client) and by the client library (requests to the server). Its map
// is made on first use, so an idle session pays only for the struct. It is
// safe for concurrent use.
type Tracker struct {
	next    atomic.Int64
	prefix  string // SetPrefix
	mu      sync.Mutex
	pending map[int64]*Call
	closed  error // set by FailAll
}

// Reply is the answer to a tracked request. Result and Err.Data are copies
// owned by the receiver.
type Reply struct {
	Result []byte
	Err    *codec.Error
}

// Call is one pending request.
type Call struct {
	ID     int64
	prefix string // the tracker's
	done   chan Reply
}

// Tracker errors.
var (
	ErrTimeout       = errors.New("session: request timed out")
	ErrUnknownID     = errors.New("session: response to an unknown request id")
	ErrTrackerClosed = errors.New("session: tracker closed")
)

// NewTracker returns an empty tracker.
func NewTracker() *Tracker { return &Tracker{} }

// SetPrefix makes the ids of the tracker's requests strings that start
// with prefix and a '.' ("a.k3.17" for prefix "a.k3"), so that an answer
// carries the name of the server that waits for it: a server of a cluster
// that receives it knows where to send it (package cluster). Answers are
// matched by the whole id. Call it before the first Start.
func (t *Tracker) SetPrefix(prefix string) { t.prefix = prefix }

// IDPrefix returns the prefix of a request id minted by a tracker with
// SetPrefix: the raw JSON id's string up to its last '.', or nil for any
// other id. It allocates nothing.
func IDPrefix(rawID []byte) []byte {
	if len(rawID) < 4 || rawID[0] != '"' || rawID[len(rawID)-1] != '"' {
		return nil
	}
	s := rawID[1 : len(rawID)-1]
	for i := len(s) - 1; i > 0; i-- {
		if s[i] == '.' {
			return s[:i]
		}
	}
	return nil
}

// Start allocates an id and a Call for a new request. It fails once the
// tracker has been failed by FailAll.
func (t *Tracker) Start() (*Call, error) {
	c := &Call{ID: t.next.Add(1), prefix: t.prefix, done: make(chan Reply, 1)}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed != nil {
		return nil, t.closed
	}
	if t.pending == nil {
		t.pending = make(map[int64]*Call)
	}
	t.pending[c.ID] = c
	return c, nil
}

// take removes and returns the pending call id.
func (t *Tracker) take(id int64) (*Call, bool) {
	t.mu.Lock()
	c, ok := t.pending[id]
	if ok {
		delete(t.pending, id)
	}
	t.mu.Unlock()
	return c, ok
}

// AppendID appends the call's id as JSON: a number, or with a prefix
// (SetPrefix) a string.
func (c *Call) AppendID(dst []byte) []byte {
	if c.prefix == "" {
		return strconv.AppendInt(dst, c.ID, 10)
	}
	dst = append(append(append(dst, '"'), c.prefix...), '.')
	return append(strconv.AppendInt(dst, c.ID, 10), '"')
}

// Lookup returns the pending call with raw JSON id, if any.
func (t *Tracker) Lookup(rawID []byte) (*Call, bool) {
	id, ok := t.parseID(rawID)
	if !ok {
		return nil, false
	}
	t.mu.Lock()
	c, ok := t.pending[id]
	t.mu.Unlock()
	return c, ok
}

// Resolve delivers the answer to the request with raw JSON id: result for a
// success, errObj (a raw JSON error object) for a failure. Both are copied.
// It returns ErrUnknownID when no such request is pending (a late, duplicate
// or unsolicited answer).
func (t *Tracker) Resolve(rawID, result, errObj []byte) error {
	id, ok := t.parseID(rawID)
	if !ok {
		return ErrUnknownID
	}
	c, ok := t.take(id)
	if !ok {
		return ErrUnknownID
	}
	var r Reply
	if errObj != nil {
		e := &codec.Error{}
		if err := codec.Unmarshal(errObj, e); err != nil {
			e = &codec.Error{Code: codec.CodeInternalError, Message: "malformed error object in response"}
		}
		r.Err = e
	} else {
		r.Result = append([]byte(nil), result...)
	}
	c.done <- r
	return nil
}

// Forget abandons a pending call (its answer, if one comes, is unknown).
func (t *Tracker) Forget(c *Call) { t.take(c.ID) }

// Wait blocks until the call is answered, ctx ends, or timeout (if > 0)
// passes; on ctx or timeout the call is forgotten.
func (t *Tracker) Wait(ctx context.Context, c *Call, timeout time.Duration) (Reply, error) {
	var tc <-chan time.Time
	if timeout > 0 {
		tm := time.NewTimer(timeout)
		defer tm.Stop()
		tc = tm.C
	}
	select {
	case r, ok := <-c.done:
		if !ok {
			t.mu.Lock()
			err := t.closed
			t.mu.Unlock()
			if err == nil {
				err = ErrTrackerClosed
			}
			return Reply{}, err
		}
		return r, nil
	case <-ctx.Done():
		t.Forget(c)
		return Reply{}, context.Cause(ctx)
	case <-tc:
		t.Forget(c)
		return Reply{}, ErrTimeout
	}
}

// Pending returns the number of calls awaiting an answer.
func (t *Tracker) Pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.pending)
}

// FailAll fails every pending call with cause and every later Start. It is
// idempotent; the first cause wins.
func (t *Tracker) FailAll(cause error) {
	if cause == nil {
		cause = ErrTrackerClosed
	}
	t.mu.Lock()
	if t.closed == nil {
		t.closed = cause
	}
	pending := t.pending
	t.pending = nil
	t.mu.Unlock()
	for _, c := range pending {
		close(c.done)
	}
}

// parseID parses an id this tracker minted: with a prefix, only the
// string of the prefix, a '.' and the number.
func (t *Tracker) parseID(raw []byte) (int64, bool) {
	if t.prefix == "" {
		return parseID(raw)
	}
	p := t.prefix
	if len(raw) < len(p)+4 || raw[0] != '"' || raw[len(raw)-1] != '"' || string(raw[1:1+len(p)]) != p || raw[1+len(p)] != '.' {
		return 0, false
	}
	return parseID(raw[2+len(p) : len(raw)-1])
}

func parseID(raw []byte) (int64, bool) {
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' {
		raw = raw[1 : len(raw)-1] // ids we mint are numbers, but accept them quoted
	}
	if len(raw) == 0 || len(raw) > 19 {
		return 0, false
	}
	var n int64
	for _, c := range raw {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

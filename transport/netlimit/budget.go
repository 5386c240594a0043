package netlimit

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/mcpedge/mcpedge/codec"
)

// Typed reasons of connections cut to keep a Budget: the transports close
// (or refuse) a connection over MaxBuffered with an error that wraps
// ErrBufferBudget, and one over MaxOutboundTotal with one that wraps
// ErrOutboundBudget, so that logs and metrics name the budget
// (codec.ReasonBufferBudget, codec.ReasonOutboundBudget).
var (
	ErrBufferBudget   = codec.ReasonBufferBudget.Err("netlimit: buffered inbound bytes over the budget")
	ErrOutboundBudget = codec.ReasonOutboundBudget.Err("netlimit: queued outbound bytes over the budget")
)

// Budget bounds the bytes that clients make a server hold, across every
// connection of every transport that shares it: the partial inbound
// messages and request bodies being read (-max-buffered), or the answers
// queued for clients that do not read them (-max-outbound-total).
//
// Each transport counts what its connections really retain (buffer
// capacities, not message lengths) with Add, and lists its holders with a
// Source it attaches. When the total passes the limit, Enforce cuts the
// holders of the most bytes first, across all sources, until what is left
// fits; a cut holder releases its bytes (Add with a negative count) as it
// closes. Add never blocks and never cuts: it wakes whoever waits on Wake
// (a transport's sweeper) when the total is over the limit, so that
// holders are never cut on a path that holds locks of its own.
//
// A nil *Budget counts nothing and cuts nothing. Its methods are safe for
// concurrent use.
type Budget struct {
	limit atomic.Int64 // <= 0: none
	total atomic.Int64
	cuts  atomic.Int64
	wake  chan struct{}

	mu      sync.Mutex // one enforcement at a time; sources, held
	sources []source
	nextID  uint64
	held    []Held
}

type source struct {
	id uint64
	s  Source
}

// Holder is one holder of a budget's bytes, as a Source lists it.
type Holder interface {
	// Cut ends the holder (a connection, a stream, a request body) with
	// the budget's typed reason, so that it releases its bytes soon. It
	// must not block, nor call the Budget back.
	Cut()
}

// Held is a holder and the bytes it holds.
type Held struct {
	N      int64
	Holder Holder
}

// Source lists the holders of a budget's bytes: the connections of one
// transport.
type Source interface {
	// AppendHeld appends to dst every holder with bytes held and not cut
	// yet, and returns the bytes of those already cut and not released
	// yet, which count in the total but will leave it without another cut.
	// It may wait briefly (to read what an event loop holds).
	AppendHeld(dst []Held) (out []Held, cutting int64)
}

// NewBudget returns a Budget of limit bytes; limit <= 0 means no limit
// (the bytes are counted all the same).
func NewBudget(limit int64) *Budget {
	b := &Budget{wake: make(chan struct{}, 1)}
	b.limit.Store(limit)
	return b
}

// Limit returns the limit in bytes (<= 0: none).
func (b *Budget) Limit() int64 {
	if b == nil {
		return 0
	}
	return b.limit.Load()
}

// SetLimit changes the limit (a configuration reload); <= 0 means none.
// Holders over a lower limit are cut at the next enforcement.
func (b *Budget) SetLimit(limit int64) {
	if b == nil {
		return
	}
	b.limit.Store(limit)
	b.kick()
}

// Total returns the bytes counted now.
func (b *Budget) Total() int64 {
	if b == nil {
		return 0
	}
	return b.total.Load()
}

// Cuts returns how many holders Enforce has cut.
func (b *Budget) Cuts() int64 {
	if b == nil {
		return 0
	}
	return b.cuts.Load()
}

// Add counts n more bytes (n < 0: released) and reports whether the total
// is now over the limit; when it is, it wakes an enforcer (Wake).
func (b *Budget) Add(n int64) (over bool) {
	if b == nil || n == 0 {
		return false
	}
	t := b.total.Add(n)
	if l := b.limit.Load(); n > 0 && l > 0 && t > l {
		b.kick()
		return true
	}
	return false
}

// Over reports whether the total is over the limit.
func (b *Budget) Over() bool {
	if b == nil {
		return false
	}
	l := b.limit.Load()
	return l > 0 && b.total.Load() > l
}

func (b *Budget) kick() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// Wake returns a channel that receives when the total has gone over the
// limit: a transport's background goroutine waits on it and calls
// Enforce. A nil Budget's channel never receives.
func (b *Budget) Wake() <-chan struct{} {
	if b == nil {
		return nil
	}
	return b.wake
}

// Attach adds a source of holders; detach removes it.
func (b *Budget) Attach(s Source) (detach func()) {
	if b == nil {
		return func() {}
	}
	b.mu.Lock()
	b.nextID++
	id := b.nextID
	b.sources = append(b.sources, source{id, s})
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		b.sources = slices.DeleteFunc(b.sources, func(x source) bool { return x.id == id })
		b.mu.Unlock()
	}
}

// Enforce cuts the holders of the most bytes, from every source, until
// the total (less what holders already cut still hold) is within the
// limit, and returns how many it cut. It does nothing while the total is
// within the limit: one atomic load. It may block briefly while a source
// lists its holders; call it where no lock is held.
func (b *Budget) Enforce() int {
	if !b.Over() {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.Over() { // made room while this one waited
		return 0
	}
	held, cutting := b.held[:0], int64(0)
	for _, s := range b.sources {
		var c int64
		held, c = s.s.AppendHeld(held)
		cutting += c
	}
	// The total after the sources listed their holders: a source may
	// have brought stale counts up to date meanwhile.
	limit, total := b.limit.Load(), b.total.Load()-cutting
	slices.SortFunc(held, func(x, y Held) int { return cmp.Compare(y.N, x.N) })
	n := 0
	for _, h := range held {
		if total <= limit {
			break
		}
		total -= h.N
		h.Holder.Cut()
		n++
	}
	clear(held)
	b.held = held[:0]
	b.cuts.Add(int64(n))
	return n
}

// DefaultMaxBuffered is the default of -max-buffered: an eighth of the
// machine's memory, between 64 MiB and 1 GiB (1 GiB where the memory size
// is unknown).
func DefaultMaxBuffered() int64 { return memoryShare() }

// DefaultMaxOutboundTotal is the default of -max-outbound-total: an
// eighth of the machine's memory, between 64 MiB and 1 GiB (1 GiB where
// the memory size is unknown). With DefaultMaxBuffered, what clients can
// make a server hold stays within a quarter of the memory.
func DefaultMaxOutboundTotal() int64 { return memoryShare() }

func memoryShare() int64 {
	const lo, hi = 64 << 20, 1 << 30
	mem := totalMemory()
	if mem <= 0 {
		return hi
	}
	return min(max(mem/8, lo), hi)
}

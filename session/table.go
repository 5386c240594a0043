package session

import (
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/puzpuzpuz/xsync/v4"
)

// Table indexes live sessions by id. xsync's map is sharded internally
// with lock-free reads, so lookups scale across cores and allocate nothing.
// Each session also gets an integer handle, for logs and for transports
// that keep their own index. A Table is safe for concurrent use.
type Table struct {
	byID *xsync.Map[string, *Session]
	next atomic.Uint64
}

// NewTable returns an empty table.
func NewTable() *Table {
	return &Table{byID: xsync.NewMap[string, *Session]()}
}

// Add inserts s, assigning its handle, and removes it again when it closes.
func (t *Table) Add(s *Session) {
	s.handle = t.next.Add(1)
	t.byID.Store(s.id, s)
	s.OnClose(func() { t.byID.Delete(s.id) })
}

// Get returns the session with id.
func (t *Table) Get(id string) (*Session, bool) { return t.byID.Load(id) }

// GetBytes returns the session whose id is b, without allocating; b is not
// retained.
func (t *Table) GetBytes(b []byte) (*Session, bool) { return t.byID.Load(codec.B2S(b)) }

// Len returns the number of live sessions.
func (t *Table) Len() int { return t.byID.Size() }

// Range calls fn for each session until fn returns false.
func (t *Table) Range(fn func(*Session) bool) {
	t.byID.Range(func(_ string, s *Session) bool { return fn(s) })
}

// Reap closes sessions idle for longer than idle, with cause, and returns
// how many it closed. Sessions serving a request are not idle.
func (t *Table) Reap(idle time.Duration, cause error) int {
	cutoff := time.Now().Add(-idle).UnixNano()
	n := 0
	t.byID.Range(func(_ string, s *Session) bool {
		if s.lastActive.Load() < cutoff && s.InFlight() == 0 {
			if s.Close(cause) {
				n++
			}
		}
		return true
	})
	return n
}

// CloseAll closes every session with cause.
func (t *Table) CloseAll(cause error) {
	t.byID.Range(func(_ string, s *Session) bool {
		s.Close(cause)
		return true
	})
}

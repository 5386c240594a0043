package session

import (
	"github.com/mcpedge/mcpedge/internal/bytesconv"
	"github.com/puzpuzpuz/xsync/v4"
)

// Table indexes live sessions by id. xsync's map is sharded internally
// with lock-free reads, so lookups scale across cores and allocate nothing.
// A Table is safe for concurrent use.
type Table struct {
	byID *xsync.Map[string, *Session]
}

// NewTable returns an empty table.
func NewTable() *Table {
	return &Table{byID: xsync.NewMap[string, *Session]()}
}

// Add inserts s, and removes it again when it closes.
func (t *Table) Add(s *Session) {
	t.byID.Store(s.id, s)
	s.OnClose(func() { t.remove(s) })
}

// AddNew inserts s unless a session with its id is in the table already:
// it returns that one and false then, and s is not added. s is removed
// again when it closes.
func (t *Table) AddNew(s *Session) (*Session, bool) {
	if old, loaded := t.byID.LoadOrStore(s.id, s); loaded {
		return old, false
	}
	s.OnClose(func() { t.remove(s) })
	return s, true
}

// remove deletes s's entry, if it is still s's (a session of the same id
// may have taken its place).
func (t *Table) remove(s *Session) {
	t.byID.Compute(s.id, func(old *Session, loaded bool) (*Session, xsync.ComputeOp) {
		if loaded && old == s {
			return nil, xsync.DeleteOp
		}
		return old, xsync.CancelOp
	})
}

// Get returns the session with id.
func (t *Table) Get(id string) (*Session, bool) { return t.byID.Load(id) }

// GetBytes returns the session whose id is b, without allocating; b is not
// retained.
func (t *Table) GetBytes(b []byte) (*Session, bool) { return t.byID.Load(bytesconv.B2S(b)) }

// Len returns the number of live sessions.
func (t *Table) Len() int { return t.byID.Size() }

// Range calls fn for each session until fn returns false.
func (t *Table) Range(fn func(*Session) bool) {
	t.byID.Range(func(_ string, s *Session) bool { return fn(s) })
}

// CloseAll closes every session with cause.
func (t *Table) CloseAll(cause error) {
	t.byID.Range(func(_ string, s *Session) bool {
		s.Close(cause)
		return true
	})
}

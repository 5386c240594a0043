package handlers

import (
	"encoding/base64"
	"encoding/binary"
	"maps"
	"sync/atomic"

	"github.com/mcpedge/mcpedge/codec"
)

// ListName names one of the paginated lists a Registry serves.
type ListName uint8

// The lists served by ListPage.
const (
	ListNameTools     ListName = iota // tools/list
	ListNameResources                 // resources/list
	ListNameTemplates                 // resources/templates/list
	ListNamePrompts                   // prompts/list
)

// String returns the result field that holds the list's items.
func (l ListName) String() string {
	switch l {
	case ListNameTools:
		return "tools"
	case ListNameResources:
		return "resources"
	case ListNameTemplates:
		return "resourceTemplates"
	case ListNamePrompts:
		return "prompts"
	}
	return "unknown"
}

// entry is one registered item: its key (name, URI or URI template), its
// sequence number (its position in registration order, kept on
// replacement), its JSON description as listed, and its value. Entries are
// immutable once published.
type entry[T any] struct {
	key string
	seq uint64
	enc []byte
	v   T
}

// set is an immutable ordered collection of entries with its lazily encoded
// list pages. A change builds a new set (copy on write); readers of an old
// set are unaffected.
type set[T any] struct {
	list     ListName
	pageSize int
	items    []*entry[T] // ascending seq: registration order
	index    map[string]*entry[T]
	lastSeq  uint64 // highest seq ever assigned in this list; never decreases
	empty    []byte // the result of an empty page: {"tools":[]}
	// pages[i] holds page i once encoded. Encoding races are benign: every
	// racer computes the same bytes and the first stored wins.
	pages []atomic.Pointer[[]byte]
	// views are the sets of the items each class of callers may see
	// (view.go), made on first use.
	views atomic.Pointer[viewCache[T]]
}

func newSet[T any](list ListName, pageSize int) *set[T] {
	empty := append([]byte(`{"`), list.String()...)
	empty = append(empty, `":[]}`...)
	return &set[T]{
		list:     list,
		pageSize: pageSize,
		index:    map[string]*entry[T]{},
		empty:    empty,
	}
}

// derive returns a set sharing s's configuration with the given items.
func (s *set[T]) derive(items []*entry[T], index map[string]*entry[T], lastSeq uint64) *set[T] {
	return &set[T]{
		list:     s.list,
		pageSize: s.pageSize,
		items:    items,
		index:    index,
		lastSeq:  lastSeq,
		empty:    s.empty,
		pages:    make([]atomic.Pointer[[]byte], (len(items)+s.pageSize-1)/s.pageSize),
	}
}

// with returns a set holding v under key: in place of an entry with the same
// key (keeping its position), else appended.
func (s *set[T]) with(key string, enc []byte, v T) *set[T] {
	index := maps.Clone(s.index)
	if old, ok := s.index[key]; ok {
		e := &entry[T]{key: key, seq: old.seq, enc: enc, v: v}
		items := make([]*entry[T], len(s.items))
		for i, it := range s.items {
			if it == old {
				it = e
			}
			items[i] = it
		}
		index[key] = e
		return s.derive(items, index, s.lastSeq)
	}
	seq := s.lastSeq + 1
	e := &entry[T]{key: key, seq: seq, enc: enc, v: v}
	items := make([]*entry[T], len(s.items), len(s.items)+1)
	copy(items, s.items)
	items = append(items, e)
	index[key] = e
	return s.derive(items, index, seq)
}

// without returns a set lacking the given keys and how many it removed; it
// returns s itself when none was present.
func (s *set[T]) without(keys []string) (*set[T], int) {
	n := 0
	for _, k := range keys {
		if _, ok := s.index[k]; ok {
			n++
		}
	}
	if n == 0 {
		return s, 0
	}
	index := maps.Clone(s.index)
	for _, k := range keys {
		delete(index, k)
	}
	items := make([]*entry[T], 0, len(index))
	for _, it := range s.items {
		if _, ok := index[it.key]; ok {
			items = append(items, it)
		}
	}
	return s.derive(items, index, s.lastSeq), len(s.items) - len(items)
}

// get returns the entry under key.
func (s *set[T]) get(key string) (*entry[T], bool) {
	e, ok := s.index[key]
	return e, ok
}

// page returns the page for cursor: the first page for "", else the page
// starting after the item the cursor names. It does not allocate when the
// page is aligned on the snapshot's page boundaries and already encoded.
func (s *set[T]) page(cursor string) ([]byte, error) {
	if cursor == "" {
		if len(s.items) == 0 {
			return s.empty, nil
		}
		return s.cached(0), nil
	}
	seq, ok := decodeCursor(s.list, cursor)
	if !ok || seq == 0 || seq > s.lastSeq {
		return nil, &codec.Error{Code: codec.CodeInvalidParams, Message: "invalid cursor"}
	}
	// First item registered after seq.
	lo, hi := 0, len(s.items)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.items[m].seq <= seq {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == len(s.items) {
		return s.empty, nil
	}
	if lo%s.pageSize == 0 {
		return s.cached(lo / s.pageSize), nil
	}
	// A cursor from an earlier snapshot whose pages fell elsewhere.
	return s.encode(lo), nil
}

// cached returns page i, encoding it on first use.
func (s *set[T]) cached(i int) []byte {
	p := &s.pages[i]
	if b := p.Load(); b != nil {
		return *b
	}
	b := s.encode(i * s.pageSize)
	if p.CompareAndSwap(nil, &b) {
		return b
	}
	return *p.Load()
}

// encode returns the result object of the page starting at item start.
func (s *set[T]) encode(start int) []byte {
	end := min(start+s.pageSize, len(s.items))
	size := len(s.empty) + 32
	for _, it := range s.items[start:end] {
		size += len(it.enc) + 1
	}
	dst := make([]byte, 0, size)
	dst = append(dst, `{"`...)
	dst = append(dst, s.list.String()...)
	dst = append(dst, `":[`...)
	for i, it := range s.items[start:end] {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, it.enc...)
	}
	dst = append(dst, ']')
	if end < len(s.items) {
		dst = append(dst, `,"nextCursor":"`...)
		dst = appendCursor(dst, s.list, s.items[end-1].seq)
		dst = append(dst, '"')
	}
	return append(dst, '}')
}

// A cursor names the last item of the previous page by its list and
// sequence number: 9 bytes, base64url without padding (12 characters).
// Sequence numbers only grow, so a cursor stays meaningful across changes:
// the next page starts with the first item registered after it.
const (
	cursorBytes = 9
	cursorChars = 12
)

func appendCursor(dst []byte, list ListName, seq uint64) []byte {
	var raw [cursorBytes]byte
	raw[0] = byte(list)
	binary.BigEndian.PutUint64(raw[1:], seq)
	return base64.RawURLEncoding.AppendEncode(dst, raw[:])
}

func decodeCursor(list ListName, cursor string) (uint64, bool) {
	if len(cursor) != cursorChars {
		return 0, false
	}
	var src [cursorChars]byte
	copy(src[:], cursor)
	var raw [cursorBytes]byte
	n, err := base64.RawURLEncoding.Decode(raw[:], src[:])
	if err != nil || n != cursorBytes || raw[0] != byte(list) {
		return 0, false
	}
	return binary.BigEndian.Uint64(raw[1:]), true
}

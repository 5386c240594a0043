package handlers

import (
	"cmp"
	"encoding/binary"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
)

// A Class is a class of callers who may see and use the same items:
// package auth's policy class, which its rules decide from a caller's
// token. The Registry asks Allows once per item of a list and snapshot,
// and keeps the answers as a view of the list: the items the class
// allows, with list pages of their own, encoded once and shared by every
// class that allows the same items. Requests of a caller are then served
// and checked against the view of its class (ListPageFor, Check,
// CheckRead), without asking the Class again.
//
// A Class must be comparable (a pointer, typically), and two equal
// Classes must allow the same items: the Registry keys its views by the
// Class. Allows must be safe for concurrent use and must not call the
// Registry.
type Class interface {
	// Allows reports whether the callers of the class may see and use
	// the item of list whose key is key: a tool's or a prompt's name, a
	// resource's URI, a resource template's URI template.
	Allows(list ListName, key string) bool
}

// DefaultMaxClasses is how many classes' views each list keeps when
// Options.MaxClasses is not positive.
const DefaultMaxClasses = 256

// SetMaxClasses sets how many classes' views each list keeps (n <= 0:
// DefaultMaxClasses); past it the class used least recently loses its
// view, which is made again, from its Allows, when it comes back. Safe
// for concurrent use.
func (r *Registry) SetMaxClasses(n int) {
	if n <= 0 {
		n = DefaultMaxClasses
	}
	r.maxClasses.Store(int64(n))
}

// ListPageFor is ListPage as the callers of class c see it: the list of
// the items c allows, with the same cursors (a cursor of any caller is
// valid, and opens the next page of the items c allows). A nil c allows
// every item: ListPageFor(nil, …) is ListPage.
//
// Pages are encoded once per snapshot and set of items allowed, and
// shared by the classes that allow the same items; serving one that is
// already encoded does not allocate. The first request of a class after
// a change of the list asks c about each item of the list. Safe for
// concurrent use.
func (r *Registry) ListPageFor(c Class, list ListName, cursor string) ([]byte, error) {
	if c == nil {
		return r.ListPage(list, cursor)
	}
	s := r.snap.Load()
	max := int(r.maxClasses.Load())
	switch list {
	case ListNameTools:
		return s.tools.view(c, max).page(cursor)
	case ListNameResources:
		return s.resources.view(c, max).page(cursor)
	case ListNameTemplates:
		return s.templates.view(c, max).page(cursor)
	case ListNamePrompts:
		return s.prompts.view(c, max).page(cursor)
	}
	return nil, ErrUnknownList
}

// Allowed reports whether the item of list whose key is key (a tool's or
// a prompt's name, a resource's URI, a template's URI template) is
// registered and allowed to the callers of class c (nil: to any caller).
// Lock-free; it does not allocate once c's view of the list is made.
func (r *Registry) Allowed(c Class, list ListName, key string) bool {
	s := r.snap.Load()
	max := int(r.maxClasses.Load())
	var ok bool
	switch list {
	case ListNameTools:
		_, ok = s.tools.view(c, max).get(key)
	case ListNameResources:
		_, ok = s.resources.view(c, max).get(key)
	case ListNameTemplates:
		_, ok = s.templates.view(c, max).get(key)
	case ListNamePrompts:
		_, ok = s.prompts.view(c, max).get(key)
	}
	return ok
}

// Check returns nil when the item of list whose key is key is allowed to
// the callers of class c (c nil: always), and otherwise the error the
// Registry answers for an item it does not have (CallTool's for a tool,
// GetPrompt's for a prompt, ReadResource's for a resource, Complete's for
// a template): a caller learns nothing of an item its class hides that
// it would not learn of one that does not exist.
func (r *Registry) Check(c Class, list ListName, key string) error {
	if c == nil || r.Allowed(c, list, key) {
		return nil
	}
	return notFound(list, key)
}

// CheckRead returns nil when resources/read of uri may be served to the
// callers of class c (c nil: always): uri is the URI of a resource c
// allows, or, when no resource has that URI, the first template that
// matches it (the one ReadResource would read it with) is allowed to c.
// Otherwise, for a URI hidden and for one nothing serves alike, it
// returns ReadResource's error for a URI nothing serves. It matches uri
// against the templates, as ReadResource does, when no resource has it.
func (r *Registry) CheckRead(c Class, uri string) error {
	if c == nil {
		return nil
	}
	s := r.snap.Load()
	max := int(r.maxClasses.Load())
	if _, ok := s.resources.get(uri); ok {
		if _, ok := s.resources.view(c, max).get(uri); ok {
			return nil
		}
		return notFound(ListNameResources, uri)
	}
	if e, _ := matchTemplate(s.templates, uri); e != nil {
		if _, ok := s.templates.view(c, max).get(e.key); ok {
			return nil
		}
	}
	return notFound(ListNameResources, uri)
}

// CheckComplete returns nil when the reference of completion/complete
// params p is allowed to the callers of class c (c nil: always): a
// prompt by name, a template or a resource by URI. Otherwise it returns
// Complete's error for a reference that is not registered.
func (r *Registry) CheckComplete(c Class, p *mcp.CompleteParams) error {
	if c == nil || p == nil {
		return nil
	}
	switch p.Ref.Type {
	case refPrompt:
		return r.Check(c, ListNamePrompts, p.Ref.Name)
	case refResource:
		if r.Allowed(c, ListNameTemplates, p.Ref.URI) || r.Allowed(c, ListNameResources, p.Ref.URI) {
			return nil
		}
		return notFound(ListNameTemplates, p.Ref.URI)
	}
	return nil // Complete refuses the type itself
}

// notFound is the error of a request naming an item that list does not
// have: the one answer for an item hidden and for one not registered.
func notFound(list ListName, key string) *codec.Error {
	switch list {
	case ListNameTools:
		return &codec.Error{Code: codec.CodeInvalidParams, Message: "unknown tool: " + key}
	case ListNamePrompts:
		return &codec.Error{Code: codec.CodeInvalidParams, Message: "unknown prompt: " + key}
	case ListNameTemplates:
		return &codec.Error{Code: codec.CodeInvalidParams, Message: "unknown resource template: " + key}
	}
	data := codec.AppendString(append(make([]byte, 0, len(key)+10), `{"uri":`...), key)
	return &codec.Error{Code: codec.CodeResourceNotFound, Message: "resource not found: " + key, Data: append(data, '}')}
}

// viewCache holds the views of one set (one list in one snapshot) by class:
// made on a class's first request, dropped with the set when the list
// changes. Lookups are lock-free (a map replaced whole on each miss);
// misses serialize on mu.
type viewCache[T any] struct {
	classes atomic.Pointer[map[Class]*classView[T]]
	// epoch counts the views made; a class's view records the epoch it
	// was last used in, and the one with the oldest is dropped first
	// (least recently used, to within the views made since).
	epoch atomic.Uint64

	mu     sync.Mutex
	shared map[uint64][]*sharedView[T] // by viewSeed's hash of their items' seqs; under mu
}

type classView[T any] struct {
	s    *set[T]
	sh   *sharedView[T]
	used atomic.Uint64 // the epoch it was last used in
}

// sharedView is one set of items allowed, shared by the classes that
// allow them: its pages are encoded once for all of them.
type sharedView[T any] struct {
	s    *set[T]
	hash uint64
	refs int // classes using it; under viewCache.mu
}

var viewSeed = maphash.MakeSeed()

// view returns the set of s's items that the callers of c may see: s
// itself for c nil or when c allows every item.
func (s *set[T]) view(c Class, max int) *set[T] {
	if c == nil {
		return s
	}
	if vs := s.views.Load(); vs != nil {
		if m := vs.classes.Load(); m != nil {
			if cv, ok := (*m)[c]; ok {
				if e := vs.epoch.Load(); cv.used.Load() != e {
					cv.used.Store(e)
				}
				return cv.s
			}
		}
	}
	return s.makeView(c, max)
}

// makeView makes c's view of s, sharing the set of another class that
// allows the same items, and keeps it, dropping the view used least
// recently when max are kept already.
func (s *set[T]) makeView(c Class, max int) *set[T] {
	vs := s.views.Load()
	if vs == nil {
		vs = &viewCache[T]{shared: map[uint64][]*sharedView[T]{}}
		if !s.views.CompareAndSwap(nil, vs) {
			vs = s.views.Load()
		}
	}
	vs.mu.Lock()
	defer vs.mu.Unlock()
	var cur map[Class]*classView[T]
	if m := vs.classes.Load(); m != nil {
		cur = *m
		if cv, ok := cur[c]; ok { // made meanwhile
			return cv.s
		}
	}
	items := make([]*entry[T], 0, len(s.items))
	var h maphash.Hash
	h.SetSeed(viewSeed)
	var b [8]byte
	for _, it := range s.items {
		if c.Allows(s.list, it.key) {
			items = append(items, it)
			binary.LittleEndian.PutUint64(b[:], it.seq)
			_, _ = h.Write(b[:])
		}
	}
	sum := h.Sum64()
	var sh *sharedView[T]
	for _, cand := range vs.shared[sum] {
		if sameEntries(cand.s.items, items) {
			sh = cand
			break
		}
	}
	if sh == nil {
		v := s
		if len(items) != len(s.items) {
			index := make(map[string]*entry[T], len(items))
			for _, it := range items {
				index[it.key] = it
			}
			v = s.derive(items, index, s.lastSeq)
		}
		sh = &sharedView[T]{s: v, hash: sum}
		vs.shared[sum] = append(vs.shared[sum], sh)
	}
	sh.refs++
	next := make(map[Class]*classView[T], min(len(cur)+1, max))
	var oldest Class
	var oldestUsed uint64
	for k, cv := range cur {
		next[k] = cv
		if u := cv.used.Load(); oldest == nil || u < oldestUsed {
			oldest, oldestUsed = k, u
		}
	}
	if len(next) >= max && oldest != nil {
		vs.drop(next[oldest].sh)
		delete(next, oldest)
	}
	cv := &classView[T]{s: sh.s, sh: sh}
	cv.used.Store(vs.epoch.Add(1))
	next[c] = cv
	vs.classes.Store(&next)
	return sh.s
}

// changed has the views of old, the snapshot a change replaced, made
// again for the snapshot in force by a goroutine of its own (warmViews),
// unless old has none (no classes: no rules) or one runs already, which
// then makes another pass. So the first request of a class after a change
// finds its view made (but for a request that comes first, which makes it
// itself), neither the event loop that serves it nor the goroutine that
// made the change pays for it, and a burst of changes (a gateway
// mirroring an upstream's list) is caught up with in a few passes, not
// one per change.
func (r *Registry) changed(old *snapshot) {
	r.warmMu.Lock()
	defer r.warmMu.Unlock()
	if r.warming {
		r.warmDirty = true // old may have no views yet: the pass running makes them
		return
	}
	if old.tools.views.Load() == nil && old.resources.views.Load() == nil &&
		old.templates.views.Load() == nil && old.prompts.views.Load() == nil {
		return
	}
	r.warming, r.warmBase = true, old
	go r.warmViews()
}

// warmViews makes, for every class that had a view of a list of the
// snapshot it starts from, its view of that list in the snapshot in
// force, and again while changes came meanwhile.
func (r *Registry) warmViews() {
	r.warmMu.Lock()
	base := r.warmBase
	r.warmMu.Unlock()
	for {
		cur := r.snap.Load()
		max := int(r.maxClasses.Load())
		cur.tools.warm(base.tools, max)
		cur.resources.warm(base.resources, max)
		cur.templates.warm(base.templates, max)
		cur.prompts.warm(base.prompts, max)
		r.warmMu.Lock()
		if !r.warmDirty {
			r.warming, r.warmBase = false, nil
			r.warmMu.Unlock()
			return
		}
		r.warmDirty = false
		r.warmMu.Unlock()
		base = cur
	}
}

// warm makes, for every class that has a view of old (at most max), its
// view of s, a set that replaced old, in the order they were last used.
func (s *set[T]) warm(old *set[T], limit int) {
	if s == old {
		return
	}
	vs := old.views.Load()
	if vs == nil {
		return
	}
	m := vs.classes.Load()
	if m == nil {
		return
	}
	type used struct {
		c Class
		u uint64
	}
	classes := make([]used, 0, len(*m))
	for c, cv := range *m {
		classes = append(classes, used{c, cv.used.Load()})
	}
	slices.SortFunc(classes, func(a, b used) int { return cmp.Compare(a.u, b.u) })
	for _, c := range classes[max(0, len(classes)-limit):] {
		s.view(c.c, limit)
	}
}

// drop releases a class's use of sh, forgetting sh when no class uses it.
// Under mu.
func (vs *viewCache[T]) drop(sh *sharedView[T]) {
	if sh.refs--; sh.refs > 0 {
		return
	}
	list := vs.shared[sh.hash]
	for i, cand := range list {
		if cand == sh {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(vs.shared, sh.hash)
	} else {
		vs.shared[sh.hash] = list
	}
}

func sameEntries[T any](a, b []*entry[T]) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

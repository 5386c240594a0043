package handlers

import (
	"errors"
	"sync"
	"sync/atomic"
)

// Errors returned by registration. Each is wrapped with the offending item's
// name and the cause; test with errors.Is.
var (
	ErrInvalidTool     = errors.New("handlers: invalid tool")
	ErrInvalidResource = errors.New("handlers: invalid resource")
	ErrInvalidTemplate = errors.New("handlers: invalid resource template")
	ErrInvalidPrompt   = errors.New("handlers: invalid prompt")
	// ErrInvalidCompletion is returned by AddPromptCompletion and
	// AddTemplateCompletion.
	ErrInvalidCompletion = errors.New("handlers: invalid completion")
	// ErrUnknownList is returned by ListPage for a ListName it does not know.
	ErrUnknownList = errors.New("handlers: unknown list")
)

// DefaultPageSize is the number of items per list page when Options.PageSize
// is not positive.
const DefaultPageSize = 100

// Options configure a Registry.
type Options struct {
	// PageSize is the number of items per list page; <= 0 means
	// DefaultPageSize.
	PageSize int
	// MaxClasses is how many classes of callers' views each list keeps
	// (Class, SetMaxClasses); <= 0 means DefaultMaxClasses.
	MaxClasses int
}

// Registry holds the tools, resources, resource templates, prompts and
// completion handlers a server offers.
//
// A Registry is safe for concurrent use. Reads take no lock: they load an
// immutable snapshot, so lookups and cached list pages cost a map lookup or
// a pointer load. Changes serialize on a mutex, copy what they change and
// publish a new snapshot; their cost grows with the size of the list changed,
// so a Registry suits the usual tens to thousands of items.
//
// Everything a Registry returns from its snapshot (descriptors, list pages,
// static results) is shared and must not be modified; it stays valid for as
// long as the caller holds it, whatever changes follow.
type Registry struct {
	pageSize int

	mu   sync.Mutex // serializes changes
	snap atomic.Pointer[snapshot]

	onChange atomic.Pointer[[]func(ListKind)] // copy on write under mu

	listHints [4]atomic.Pointer[CacheHint] // by ListName

	maxClasses atomic.Int64 // views kept per list (SetMaxClasses)

	// The views of the classes of callers are made again after a change
	// by a goroutine of their own (view.go, warmViews), while one runs.
	warmMu    sync.Mutex
	warming   bool      // under warmMu
	warmDirty bool      // a change since its pass began; under warmMu
	warmBase  *snapshot // what its first pass carries the views over from; under warmMu
}

// snapshot is the immutable state readers see. A change copies the struct,
// replaces the part it changed and publishes the copy.
type snapshot struct {
	tools       *set[*toolEntry]
	resources   *set[*resourceEntry]
	templates   *set[*templateEntry]
	prompts     *set[*promptEntry]
	completions map[completionKey]CompletionHandler

	raw          bool       // a raw item or foreignTasks was ever registered
	foreignTasks RawHandler // SetForeignTasks
}

// NewRegistry returns an empty Registry.
func NewRegistry(opts Options) *Registry {
	ps := opts.PageSize
	if ps <= 0 {
		ps = DefaultPageSize
	}
	r := &Registry{pageSize: ps}
	r.SetMaxClasses(opts.MaxClasses)
	r.snap.Store(&snapshot{
		tools:       newSet[*toolEntry](ListNameTools, ps),
		resources:   newSet[*resourceEntry](ListNameResources, ps),
		templates:   newSet[*templateEntry](ListNameTemplates, ps),
		prompts:     newSet[*promptEntry](ListNamePrompts, ps),
		completions: map[completionKey]CompletionHandler{},
	})
	return r
}

// update applies fn to a copy of the current snapshot under the write lock
// and publishes it when fn reports a change; then, outside the lock, it
// tells the OnChange callbacks about kind (when kind is not zero).
func (r *Registry) update(kind ListKind, fn func(s *snapshot) bool) {
	r.mu.Lock()
	old := r.snap.Load()
	ns := *old
	changed := fn(&ns)
	if changed {
		r.snap.Store(&ns)
	}
	r.mu.Unlock()
	if changed {
		r.changed(old)
	}
	if changed && kind != 0 {
		if fns := r.onChange.Load(); fns != nil {
			for _, f := range *fns {
				f(kind)
			}
		}
	}
}

// OnChange registers fn to be called after every change of a list: tools
// (ListTools), resources or resource templates (ListResources), prompts
// (ListPrompts). fn runs on the goroutine that made the change, outside any
// lock of the Registry, so it may read the Registry; it must not block for
// long. Several callbacks may be registered; they run in registration order.
// Safe for concurrent use.
func (r *Registry) OnChange(fn func(kind ListKind)) {
	if fn == nil {
		panic("handlers: OnChange with nil func")
	}
	r.mu.Lock()
	var fns []func(ListKind)
	if old := r.onChange.Load(); old != nil {
		fns = append(fns, *old...)
	}
	fns = append(fns, fn)
	r.onChange.Store(&fns)
	r.mu.Unlock()
}

// ListPage returns the encoded JSON result of tools/list, resources/list,
// resources/templates/list or prompts/list for the page cursor names ("" for
// the first), for example {"tools":[...],"nextCursor":"..."}; an empty list
// is {"tools":[]}. Items are in registration order; a replaced item keeps
// its position.
//
// Cursors are opaque. One stays valid across changes: the page it opens
// starts with the first item registered after the last item of the page
// that returned it. A malformed or unknown cursor yields a *codec.Error with
// code -32602.
//
// Pages are encoded once per snapshot and shared: the bytes must not be
// modified, and remain valid forever. Serving a page that is already
// encoded does not allocate. Safe for concurrent use.
func (r *Registry) ListPage(list ListName, cursor string) ([]byte, error) {
	s := r.snap.Load()
	switch list {
	case ListNameTools:
		return s.tools.page(cursor)
	case ListNameResources:
		return s.resources.page(cursor)
	case ListNameTemplates:
		return s.templates.page(cursor)
	case ListNamePrompts:
		return s.prompts.page(cursor)
	}
	return nil, ErrUnknownList
}

// Len returns the number of items in a list (0 for an unknown list). Safe
// for concurrent use.
func (r *Registry) Len(list ListName) int {
	s := r.snap.Load()
	switch list {
	case ListNameTools:
		return len(s.tools.items)
	case ListNameResources:
		return len(s.resources.items)
	case ListNameTemplates:
		return len(s.templates.items)
	case ListNamePrompts:
		return len(s.prompts.items)
	}
	return 0
}

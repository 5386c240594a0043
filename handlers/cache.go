package handlers

import (
	"time"

	"github.com/mcpedge/mcpedge/mcp"
)

// CacheHint is what a 2026-07-28 result tells its client about caching it
// (ttlMs and cacheScope): list results, resources/read and
// server/discover carry one. The zero value, "immediately stale, private",
// is what results carry unless configured otherwise.
type CacheHint struct {
	// TTL is how long the client may consider the result fresh.
	TTL time.Duration
	// Public allows any client or intermediary to share the result across
	// authorization contexts; otherwise it is private to the caller.
	Public bool
}

// Scope returns the hint's cacheScope.
func (h CacheHint) Scope() string {
	if h.Public {
		return mcp.CachePublic
	}
	return mcp.CachePrivate
}

// SetListCacheHint sets the cache hint of a list's results (tools/list,
// resources/list, resources/templates/list, prompts/list). Safe for
// concurrent use.
func (r *Registry) SetListCacheHint(list ListName, h CacheHint) {
	if int(list) < len(r.listHints) {
		r.listHints[list].Store(&h)
	}
}

// ListCacheHint returns the cache hint of a list's results. Lock-free.
func (r *Registry) ListCacheHint(list ListName) CacheHint {
	if int(list) < len(r.listHints) {
		if h := r.listHints[list].Load(); h != nil {
			return *h
		}
	}
	return CacheHint{}
}

// SetResourceCacheHint sets the cache hint of resources/read results for
// uri: a resource's URI, or a template's URI template (then every URI it
// matches). It reports false when nothing is registered under uri. Safe
// for concurrent use.
func (r *Registry) SetResourceCacheHint(uri string, h CacheHint) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.snap.Load()
	if e, ok := s.resources.get(uri); ok {
		e.v.hint.Store(&h)
		return true
	}
	for _, it := range s.templates.items {
		if it.v.tmpl.URITemplate == uri {
			it.v.hint.Store(&h)
			return true
		}
	}
	return false
}

// ResourceCacheHint returns the cache hint of resources/read of uri: its
// resource's, else that of the first template matching it. Lock-free.
func (r *Registry) ResourceCacheHint(uri string) CacheHint {
	s := r.snap.Load()
	if e, ok := s.resources.get(uri); ok {
		if h := e.v.hint.Load(); h != nil {
			return *h
		}
		return CacheHint{}
	}
	for _, it := range s.templates.items {
		if h := it.v.hint.Load(); h != nil && it.v.re.MatchString(uri) {
			return *h
		}
	}
	return CacheHint{}
}

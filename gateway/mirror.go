package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/yosida95/uritemplate/v3"
)

// A mirror keeps an upstream's lists in the engine's registry as raw
// items: each descriptor as the upstream encoded it (its name rewritten
// when prefixed or renamed), served from the registry's pre-encoded
// pages. It reads the lists when the upstream's first connection is up,
// when the upstream says one changed (list_changed, coalesced), and on a
// reload that changes how names are made; never per request. The route
// from a served name back to the upstream's is a map lookup, only for
// the names that differ.
type mirror struct {
	u   *upstream
	cfg Upstream // how names are made (prefix, tools.*); under mu

	mu        sync.Mutex // serializes refreshes
	names     atomic.Pointer[names]
	resources []string // URIs registered
	templates []string // URI templates registered
	compiled  []*uritemplate.Template
	descs     [4]map[string][]byte // what is registered, by listKind: an item listed again unchanged is not registered again (no list_changed)
	pending   [4]atomic.Bool
	from      atomic.Pointer[muxConn] // the connection that announced the last change

	first     chan struct{} // closed when the first refresh ended
	firstOnce sync.Once
	firstErr  error // collisions of the first refresh
}

// names are the served names of an upstream's tools and prompts and the
// upstream's name of each that differs.
type names struct {
	tools, prompts map[string][]byte // served name → upstream name
	toolsAll       []string          // served tool names
	promptsAll     []string
	taskRequired   map[string]bool              // served names of tools the upstream runs only as tasks
	taskSupport    map[string]string            // served names of tools the upstream may run as tasks: optional or required
	headers        map[string][]mcp.HeaderParam // upstream tool name → its x-mcp-header arguments
}

// headerParams returns the x-mcp-header arguments of the upstream's tool
// (its name upstream), for the headers of a 2026-07-28 call over HTTP.
func (m *mirror) headerParams(tool string) []mcp.HeaderParam { return m.names.Load().headers[tool] }

func newMirror(u *upstream) *mirror {
	m := &mirror{u: u, cfg: u.cfg, first: make(chan struct{})}
	m.names.Store(&names{})
	return m
}

// taskSupport returns whether the upstream may run served tool name as
// a task: "optional", "required", or "" (never).
func (m *mirror) taskSupport(name string) string { return m.names.Load().taskSupport[name] }

// toolName returns the upstream's name of served tool name, nil when it
// is the same.
func (m *mirror) toolName(name string) []byte { return m.names.Load().tools[name] }

func (m *mirror) promptName(name string) []byte { return m.names.Load().prompts[name] }

// listChanged re-reads a list after the upstream announced a change; the
// announcements of debounce ride on one read.
//
// The list is read from the connection that announced the change: with
// several connections (a pool of children, the 2026-07-28 ones), a
// server whose lists change at run time changed them in that one.
func (u *upstream) listChanged(kind handlers.ListKind, from *muxConn) {
	if u.retired.Load() {
		return // draining after a reload: its successor mirrors the lists
	}
	m := u.m
	m.from.Store(from)
	if !m.pending[kind].CompareAndSwap(false, true) {
		return
	}
	time.AfterFunc(listDebounce, func() {
		m.pending[kind].Store(false)
		if u.ctx.Err() == nil {
			m.refreshFrom(m.from.Load(), kind)
		}
	})
}

const listDebounce = 20 * time.Millisecond

var listKinds = []handlers.ListKind{handlers.ListTools, handlers.ListResources, handlers.ListPrompts}

// naming returns the configuration names are made with.
func (m *mirror) naming() *Upstream {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.cfg
	return &c
}

// renamed re-mirrors the lists with cfg's naming.
func (m *mirror) renamed(cfg Upstream) {
	m.clear()
	m.mu.Lock()
	m.cfg = cfg
	m.mu.Unlock()
	m.refresh(listKinds...)
}

// maxPages bounds the pages of one list.
const maxPages = 1000

// refresh reads the lists of kinds from the upstream and updates the
// registry. A failed read keeps what is mirrored (a down upstream's items
// stay listed; calling one answers that it is unavailable).
func (m *mirror) refresh(kinds ...handlers.ListKind) { m.refreshFrom(nil, kinds...) }

// refreshFrom is refresh reading from c when it is up, else from the
// session pool.
func (m *mirror) refreshFrom(c *muxConn, kinds ...handlers.ListKind) {
	m.mu.Lock()
	defer m.mu.Unlock()
	u := m.u
	if u.retired.Load() {
		m.firstDone(nil)
		return
	}
	var errs []error
	ctx, cancel := context.WithTimeout(u.ctx, u.cfg.Timeout)
	defer cancel()
	if c == nil || !c.ready.Load() {
		var err error
		if c, err = u.session.pick(ctx); err != nil {
			u.log.Warn("lists not read", "err", err)
			m.firstDone(nil)
			return
		}
	}
	caps := c.info.caps
	for _, k := range kinds {
		var err error
		switch k {
		case handlers.ListTools:
			if caps.Tools != nil {
				err = m.refreshTools(ctx, c)
			}
		case handlers.ListPrompts:
			if caps.Prompts != nil {
				err = m.refreshPrompts(ctx, c, caps.Completions != nil)
			}
		case handlers.ListResources:
			if caps.Resources != nil {
				err = m.refreshResources(ctx, c, caps.Completions != nil)
			}
		}
		if err != nil {
			if ce := (*collisionError)(nil); errors.As(err, &ce) {
				errs = append(errs, err)
			} else {
				u.log.Warn("list not read", "list", k, "err", err)
			}
		}
	}
	m.firstDone(errors.Join(errs...))
}

func (m *mirror) firstDone(err error) {
	m.firstOnce.Do(func() {
		m.firstErr = err
		close(m.first)
	})
	if err != nil {
		m.u.log.Error("names collide; the colliding items are not served", "err", err)
	}
}

// list reads every page of method and calls each for every item.
func (c *muxConn) list(ctx context.Context, method, field string, each func(item []byte) error) error {
	cursor := ""
	for range maxPages {
		params := []byte("{}")
		if cursor != "" {
			params = append(codec.AppendString([]byte(`{"cursor":`), cursor), '}')
		}
		if c.era == statelessEra {
			params = withStatelessMeta(params)
		}
		res, err := c.internal(ctx, method, params)
		if err != nil {
			return fmt.Errorf("%s: %w", method, err)
		}
		var v [2][]byte
		if err := codec.ObjectFields(res, []string{field, "nextCursor"}, v[:]); err != nil {
			return fmt.Errorf("%s: %w", method, err)
		}
		if err := eachElem(v[0], each); err != nil {
			return fmt.Errorf("%s: %w", method, err)
		}
		next := ""
		if len(v[1]) > 0 && string(v[1]) != "null" {
			if err := codec.Unmarshal(v[1], &next); err != nil {
				return fmt.Errorf("%s: nextCursor: %w", method, err)
			}
		}
		if next == "" || next == cursor {
			return nil
		}
		cursor = next
	}
	return fmt.Errorf("%s: more than %d pages", method, maxPages)
}

// eachElem calls fn for each element of the JSON array arr (nil: none).
func eachElem(arr []byte, fn func(elem []byte) error) error {
	if len(arr) == 0 || string(arr) == "null" {
		return nil
	}
	i := codec.SkipWS(arr, 0)
	if arr[i] != '[' {
		return errors.New("not an array")
	}
	i++
	for {
		i = codec.SkipWS(arr, i)
		if i >= len(arr) {
			return errors.New("unterminated array")
		}
		switch arr[i] {
		case ']':
			return nil
		case ',':
			i++
			continue
		}
		end := codec.SkipValue(arr, i)
		if end < 0 {
			return errors.New("malformed array")
		}
		if err := fn(arr[i:end]); err != nil {
			return err
		}
		i = end
	}
}

// rename returns desc with its string member key set to name.
func rename(desc []byte, key, name string) []byte {
	raw, ok, err := codec.ObjectField(desc, key)
	if err != nil || !ok {
		return desc
	}
	at := offset(desc, raw)
	return splice(nil, desc, []edit{{at: at, end: at + len(raw), with: codec.AppendString(nil, name)}})
}

// stringMember returns desc's string member key.
func stringMember(desc []byte, key string) (string, bool) {
	raw, ok, err := codec.ObjectField(desc, key)
	if err != nil || !ok {
		return "", false
	}
	var s string
	if codec.Unmarshal(raw, &s) != nil || s == "" {
		return "", false
	}
	return s, true
}

// collisionError reports a served name that two upstreams, or an
// upstream and the built-in handlers, both have.
type collisionError struct {
	kind        string
	name        string
	first, then string
}

func (e *collisionError) Error() string {
	return fmt.Sprintf("%s %q of upstream %q collides with %s", e.kind, e.name, e.then, e.first)
}

func (m *mirror) refreshTools(ctx context.Context, c *muxConn) error {
	u := m.u
	n := u.g.upstreamCount()
	cfg := &m.cfg
	prefix := cfg.prefix(n)
	nm := &names{tools: map[string][]byte{}, taskRequired: map[string]bool{}, taskSupport: map[string]string{}, headers: map[string][]mcp.HeaderParam{}}
	old := m.names.Load()
	nm.prompts, nm.promptsAll = old.prompts, old.promptsAll
	type item struct {
		served string
		desc   []byte
	}
	var items []item
	err := c.list(ctx, mcp.MethodToolsList, "tools", func(desc []byte) error {
		up, ok := stringMember(desc, "name")
		if !ok || !cfg.allowed(up) {
			return nil
		}
		served := prefix + up
		if r, ok := cfg.Rename[up]; ok {
			served = r
		}
		d := desc
		if served != up {
			d = rename(desc, "name", served)
			nm.tools[served] = []byte(up)
		} else {
			d = append([]byte(nil), desc...)
		}
		var ex struct {
			Execution   *mcp.ToolExecution `json:"execution"`
			InputSchema codec.RawJSON      `json:"inputSchema"`
		}
		if codec.Unmarshal(desc, &ex) == nil {
			if ex.Execution != nil && ex.Execution.TaskSupport == mcp.TaskRequired {
				nm.taskRequired[served] = true
			}
			if ex.Execution != nil && (ex.Execution.TaskSupport == mcp.TaskRequired || ex.Execution.TaskSupport == mcp.TaskOptional) {
				nm.taskSupport[served] = ex.Execution.TaskSupport
			}
			if hp, err := mcp.ParseHeaderParams(ex.InputSchema); err == nil && len(hp) > 0 {
				nm.headers[up] = hp
			}
		}
		items = append(items, item{served, d})
		return nil
	})
	if err != nil {
		return err
	}
	var errs []error
	g := u.g
	reg := g.reg
	// An upstream that does not speak 2026-07-28 has the engine run the
	// tasks of 2026-07-28 clients (down.go); the tool decides when its
	// call becomes one (handlers.StartTask, which the gateway calls).
	ro := handlers.RawOptions{Upstream: u.cfg.Name, Tasks: !u.passes2026(), DeferTask: true}
	mark := []byte{'0'}
	if ro.Tasks {
		mark[0] = '1'
	}
	for _, it := range items {
		ok, err := m.serve(listTool, "tool", it.served, append(bytes.Clone(it.desc), mark...), func() error {
			return reg.AddRawTool(it.desc, u.ref.tool, ro)
		})
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			nm.toolsAll = append(nm.toolsAll, it.served)
		}
	}
	m.names.Store(nm)
	m.drop(listTool, old.toolsAll, nm.toolsAll)
	return errors.Join(errs...)
}

// serve claims item name of kind for the upstream and registers it with
// add, unless the registry has it as desc says already: ok reports that
// the upstream serves it now; err is a claim refused (a collision). An
// item the registry refuses is released and logged under key.
func (m *mirror) serve(kind listKind, key, name string, desc []byte, add func() error) (ok bool, err error) {
	u, g := m.u, m.u.g
	if err := g.claim(kind, name, u); err != nil {
		return false, err
	}
	if m.same(kind, name, desc) {
		return true, nil
	}
	if err := add(); err != nil {
		m.forget(kind, []string{name})
		g.release(kind, name, u)
		u.log.Warn("item not served", key, name, "err", err)
		return false, nil
	}
	return true, nil
}

func (m *mirror) refreshPrompts(ctx context.Context, c *muxConn, completes bool) error {
	u := m.u
	prefix := m.cfg.prefix(u.g.upstreamCount())
	old := m.names.Load()
	nm := &names{tools: old.tools, toolsAll: old.toolsAll, taskRequired: old.taskRequired, taskSupport: old.taskSupport, headers: old.headers, prompts: map[string][]byte{}}
	type item struct {
		served string
		desc   []byte
	}
	var items []item
	err := c.list(ctx, mcp.MethodPromptsList, "prompts", func(desc []byte) error {
		up, ok := stringMember(desc, "name")
		if !ok {
			return nil
		}
		served := prefix + up
		d := append([]byte(nil), desc...)
		if served != up {
			d = rename(desc, "name", served)
			nm.prompts[served] = []byte(up)
		}
		items = append(items, item{served, d})
		return nil
	})
	if err != nil {
		return err
	}
	var errs []error
	g := u.g
	for _, it := range items {
		ok, err := m.serve(listPrompt, "prompt", it.served, it.desc, func() error {
			return g.reg.AddRawPrompt(it.desc, u.ref.prompt, handlers.RawOptions{Completions: completes})
		})
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			nm.promptsAll = append(nm.promptsAll, it.served)
		}
	}
	m.names.Store(nm)
	m.drop(listPrompt, old.promptsAll, nm.promptsAll)
	return errors.Join(errs...)
}

func (m *mirror) refreshResources(ctx context.Context, c *muxConn, completes bool) error {
	u := m.u
	g := u.g
	var errs []error
	var uris []string
	err := c.list(ctx, mcp.MethodResourcesList, "resources", func(desc []byte) error {
		uri, ok := stringMember(desc, "uri")
		if !ok {
			return nil
		}
		d := append([]byte(nil), desc...)
		ok, err := m.serve(listResource, "uri", uri, d, func() error { return g.reg.AddRawResource(d, u.ref.resource) })
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			uris = append(uris, uri)
		}
		return nil
	})
	if err != nil {
		return err
	}
	var tmpls []string
	err = c.list(ctx, mcp.MethodResourcesTemplatesList, "resourceTemplates", func(desc []byte) error {
		t, ok := stringMember(desc, "uriTemplate")
		if !ok {
			return nil
		}
		d := append([]byte(nil), desc...)
		ok, err := m.serve(listTemplate, "uriTemplate", t, d, func() error {
			return g.reg.AddRawResourceTemplate(d, u.ref.resource, handlers.RawOptions{Completions: completes})
		})
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			tmpls = append(tmpls, t)
		}
		return nil
	})
	if err != nil {
		// resources/templates/list is optional: a server without
		// templates may not know the method.
		if e, ok := errors.AsType[*codec.Error](err); !ok || e.Code != codec.CodeMethodNotFound {
			u.log.Warn("resource templates not read", "err", err)
		}
		tmpls = m.templates
	}
	m.drop(listResource, m.resources, uris)
	m.drop(listTemplate, m.templates, tmpls)
	m.resources, m.templates = uris, tmpls
	m.compiled = m.compiled[:0]
	for _, t := range tmpls {
		if ut, err := uritemplate.New(t); err == nil {
			m.compiled = append(m.compiled, ut)
		}
	}
	return errors.Join(errs...)
}

// same reports whether the item name of kind is registered with desc
// already; else it records desc as what will be.
func (m *mirror) same(kind listKind, name string, desc []byte) bool {
	if m.descs[kind] == nil {
		m.descs[kind] = map[string][]byte{}
	}
	if old, ok := m.descs[kind][name]; ok && bytes.Equal(old, desc) {
		return true
	}
	m.descs[kind][name] = desc
	return false
}

// forget drops what same recorded of items no longer registered.
func (m *mirror) forget(kind listKind, names []string) {
	for _, n := range names {
		delete(m.descs[kind], n)
	}
}

// drop unregisters the items of old not in now.
func (m *mirror) drop(kind listKind, old, now []string) {
	keep := make(map[string]bool, len(now))
	for _, n := range now {
		keep[n] = true
	}
	var gone []string
	for _, n := range old {
		if !keep[n] {
			gone = append(gone, n)
		}
	}
	m.forget(kind, gone)
	m.u.g.unregister(kind, gone, m.u)
}

// clear unregisters everything the upstream mirrors (it is removed).
func (m *mirror) clear() {
	m.mu.Lock()
	defer m.mu.Unlock()
	nm := m.names.Load()
	g := m.u.g
	g.unregister(listTool, nm.toolsAll, m.u)
	g.unregister(listPrompt, nm.promptsAll, m.u)
	g.unregister(listResource, m.resources, m.u)
	g.unregister(listTemplate, m.templates, m.u)
	m.names.Store(&names{})
	m.resources, m.templates, m.compiled = nil, nil, nil
	m.descs = [4]map[string][]byte{}
}

// inherit takes over what old (the mirror of the upstream this one's
// replaces, in a reload) registered: its first refresh then registers
// only what changed, and drops what the upstream no longer lists.
func (m *mirror) inherit(old *mirror) {
	old.mu.Lock()
	defer old.mu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.names.Store(old.names.Load())
	m.resources, m.templates = old.resources, old.templates
	m.compiled = slices.Clone(old.compiled)
	for k := range old.descs {
		m.descs[k] = maps.Clone(old.descs[k])
	}
}

// counts returns how many tools, resources (and templates) and prompts
// the upstream serves.
func (m *mirror) counts() (tools, resources, prompts int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	nm := m.names.Load()
	return len(nm.toolsAll), len(m.resources) + len(m.templates), len(nm.promptsAll)
}

// listKind indexes the gateway's claims on served names.
type listKind uint8

const (
	listTool listKind = iota
	listPrompt
	listResource
	listTemplate
)

func (k listKind) String() string {
	return [...]string{"tool", "prompt", "resource", "resource template"}[k]
}

package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
)

// Separator joins a server's name and one of its tools or prompts in a
// federation's qualified names: tool "echo" of server "a" is "a/echo".
// Server names cannot contain it, so a qualified name splits at its first
// Separator; what follows may contain anything.
const Separator = "/"

// maxServerName bounds the length of a federation server's name.
const maxServerName = 64

// Federation errors. Errors of calls routed to a server wrap that
// server's error as well (use errors.Is and errors.As).
var (
	ErrFederationClosed = errors.New("client: federation: closed")
	ErrServerName       = errors.New("client: federation: invalid server name")
	ErrServerExists     = errors.New("client: federation: server already added")
	ErrUnknownServer    = errors.New("client: federation: unknown server")
	ErrUnqualified      = errors.New("client: federation: name not qualified by a server")
	ErrPartial          = errors.New("client: federation: some servers failed")
	ErrTarget           = errors.New("client: invalid target")
)

// Notification is a notification a server sent: its method and its params
// (raw JSON, nil when absent; the client's copy, which the server's
// Options.OnNotification sees as well: do not modify it).
type Notification struct {
	Method string
	Params codec.RawJSON
}

// FederationOptions configure a Federation. The zero value works: servers
// reconnect forever with the default policy and notifications go nowhere.
type FederationOptions struct {
	// OnNotification receives every notification of every server with the
	// server's name (after the server's own Options callbacks). The
	// notifications of one server arrive one at a time, in order, on that
	// server's dispatch goroutine; those of different servers may arrive
	// concurrently. A list-changed notification has already invalidated
	// the server's cached list when it arrives. The callback may call the
	// federation, except Remove and Close.
	OnNotification func(server string, n Notification)
	// Reconnect is the reconnection policy of the servers whose
	// Options.Reconnect is nil; nil means the zero ReconnectPolicy (retry
	// forever, 100 ms to 30 s).
	Reconnect *ReconnectPolicy
	// Logger receives the federation's logs and, with a "server" attribute,
	// those of servers whose Options.Logger is nil; nil discards them.
	Logger *slog.Logger
}

// Federation is a registry of named MCP servers, each reached by a Client
// of its own (over any Transport), after barrel_mcp's barrel_mcp_clients.
// It lists the tools, resources and prompts of all its servers at once,
// with names qualified by the server ("a/echo"), routes calls by those
// names, hands every notification to one callback with the server's name,
// and caches each server's lists until that server says they changed or
// reconnects, and, for a server of 2026-07-28, no longer than the lists'
// ttlMs (caching.mdx; 0, the default, is stale at once). A server of
// 2026-07-28 says a list changed only on a subscriptions/listen stream:
// the federation keeps one open to each (for tools, resources and
// prompts), reopened after a reconnection. Every server's lists are
// cached for this federation alone, one authorization context, as
// cacheScope "private" allows (and "public" too).
//
// Each server reconnects on its own after a drop (Options.Reconnect, or
// FederationOptions.Reconnect); while one is down, aggregated lists still
// return the others' items along with a *PartialError naming it. A server
// whose reconnection gave up stays listed, failing, until it is removed;
// Add it again to dial it anew.
//
// A Federation is safe for concurrent use: Add, Remove, Get, Names and
// every call may run at the same time from any goroutine. Add serializes
// registration per name, so two callers cannot both add one name.
type Federation struct {
	opts FederationOptions
	log  *slog.Logger

	ctx    context.Context // cancelled by Close: aborts dials in progress
	cancel context.CancelFunc

	mu      sync.RWMutex
	servers map[string]*member
	pending map[string]bool // names being dialed by Add
	closed  bool
	adding  sync.WaitGroup
}

// member is one server of a federation.
type member struct {
	name      string
	c         *Client
	tools     listCache[mcp.Tool]
	resources listCache[mcp.Resource]
	prompts   listCache[mcp.Prompt]
}

// listChanges is the filter of a 2026-07-28 member's listen stream.
var listChanges = mcp.SubscriptionFilter{ToolsListChanged: true, ResourcesListChanged: true, PromptsListChanged: true}

// listen opens m's listen stream for its list changes, when its server
// speaks 2026-07-28. A server that refuses it is left to its lists' TTL.
func (f *Federation) listen(ctx context.Context, m *member) {
	if !m.c.Modern() {
		return
	}
	if _, err := m.c.Listen(ctx, listChanges); err != nil {
		f.log.Debug("server refused subscriptions/listen: its lists are cached for their ttlMs only", "server", m.name, "err", err)
	}
}

func (m *member) invalidate() {
	m.tools.invalidate()
	m.resources.invalidate()
	m.prompts.invalidate()
}

// NewFederation returns an empty federation.
func NewFederation(opts FederationOptions) *Federation {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &Federation{opts: opts, log: log, servers: map[string]*member{}, pending: map[string]bool{}}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	return f
}

// ValidServerName reports whether name can name a federation server: 1 to
// 64 ASCII letters, digits, '_', '-' and '.'.
func ValidServerName(name string) bool {
	if name == "" || len(name) > maxServerName {
		return false
	}
	for i := range len(name) {
		switch b := name[i]; {
		case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9', b == '_', b == '-', b == '.':
		default:
			return false
		}
	}
	return true
}

// Add connects to a server over t, initializes it and registers it as
// name. opts are the server's client options: their notification
// callbacks are kept and run before the federation's, and a nil Reconnect
// takes FederationOptions.Reconnect. If the first connection fails, the
// server is not added and the error says why. Add fails with ErrServerName,
// ErrServerExists (also while another Add of name is dialing) or
// ErrFederationClosed before dialing.
func (f *Federation) Add(ctx context.Context, name string, t Transport, opts Options) error {
	if !ValidServerName(name) {
		return fmt.Errorf("%w: %q", ErrServerName, name)
	}
	if t == nil {
		return fmt.Errorf("%w: server %q: no transport", ErrTarget, name)
	}
	f.mu.Lock()
	switch {
	case f.closed:
		f.mu.Unlock()
		return ErrFederationClosed
	case f.servers[name] != nil || f.pending[name]:
		f.mu.Unlock()
		return fmt.Errorf("%w: %q", ErrServerExists, name)
	}
	f.pending[name] = true
	f.adding.Add(1)
	f.mu.Unlock()
	defer f.adding.Done()

	m := &member{name: name}
	m.c = New(t, f.wrap(m, opts))
	// Close aborts the dial.
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(f.ctx, cancel)
	err := m.c.Connect(ctx)
	if err == nil && m.c.Modern() {
		// The stream lives as long as the federation (or the member: its
		// client's close ends it); Add waits for its acknowledgement, so
		// that a change after Add returns invalidates the lists, within
		// ctx.
		acked := make(chan struct{})
		go func() {
			defer close(acked)
			f.listen(f.ctx, m)
		}()
		select {
		case <-acked:
		case <-ctx.Done():
			err = context.Cause(ctx)
		}
	}
	stop()
	cancel()

	f.mu.Lock()
	delete(f.pending, name)
	if err == nil && f.closed {
		err = ErrFederationClosed
	}
	if err == nil {
		f.servers[name] = m
	}
	f.mu.Unlock()
	if err != nil {
		m.c.Close()
		if f.ctx.Err() != nil {
			return fmt.Errorf("%w: adding %q: %w", ErrFederationClosed, name, err)
		}
		return fmt.Errorf("client: federation: adding %q: %w", name, err)
	}
	f.log.Info("server added", "server", name)
	return nil
}

// wrap returns the options of member m's client: opts with the
// federation's routing chained after its callbacks.
func (f *Federation) wrap(m *member, opts Options) Options {
	if opts.Reconnect == nil {
		opts.Reconnect = f.opts.Reconnect
		if opts.Reconnect == nil {
			opts.Reconnect = &ReconnectPolicy{}
		}
	}
	if opts.Logger == nil && f.opts.Logger != nil {
		opts.Logger = f.opts.Logger.With("server", m.name)
	}
	onNote := opts.OnNotification
	opts.OnNotification = func(method string, params []byte) {
		switch method {
		case mcp.NotificationToolListChanged:
			m.tools.invalidate()
		case mcp.NotificationResourceListChanged:
			m.resources.invalidate()
		case mcp.NotificationPromptListChanged:
			m.prompts.invalidate()
		}
		if onNote != nil {
			onNote(method, params)
		}
		if fn := f.opts.OnNotification; fn != nil {
			fn(m.name, Notification{Method: method, Params: params})
		}
	}
	onLost := opts.OnConnectionLost
	opts.OnConnectionLost = func(err error) {
		m.invalidate()
		f.log.Warn("server connection lost", "server", m.name, "err", err)
		if onLost != nil {
			onLost(err)
		}
	}
	onBack := opts.OnReconnected
	opts.OnReconnected = func() {
		// The server's lists may have changed while it was away.
		m.invalidate()
		f.log.Info("server reconnected", "server", m.name)
		if onBack != nil {
			onBack()
		}
	}
	return opts
}

// Remove unregisters the server name and closes its client; its calls in
// flight fail. Do not call it from a notification callback.
func (f *Federation) Remove(name string) error {
	f.mu.Lock()
	m := f.servers[name]
	delete(f.servers, name)
	f.mu.Unlock()
	if m == nil {
		return fmt.Errorf("%w: %q", ErrUnknownServer, name)
	}
	m.c.Close()
	f.log.Info("server removed", "server", name)
	return nil
}

// Get returns the client of server name. The client stays the
// federation's: do not close it (use Remove).
func (f *Federation) Get(name string) (*Client, error) {
	m, err := f.member(name)
	if err != nil {
		return nil, err
	}
	return m.c, nil
}

func (f *Federation) member(name string) (*member, error) {
	f.mu.RLock()
	m, closed := f.servers[name], f.closed
	f.mu.RUnlock()
	switch {
	case m != nil:
		return m, nil
	case closed:
		return nil, ErrFederationClosed
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownServer, name)
}

// Names returns the names of the servers, sorted.
func (f *Federation) Names() []string {
	f.mu.RLock()
	names := make([]string, 0, len(f.servers))
	for n := range f.servers {
		names = append(names, n)
	}
	f.mu.RUnlock()
	slices.Sort(names)
	return names
}

// members returns the servers sorted by name.
func (f *Federation) members() []*member {
	f.mu.RLock()
	ms := make([]*member, 0, len(f.servers))
	for _, m := range f.servers {
		ms = append(ms, m)
	}
	f.mu.RUnlock()
	slices.SortFunc(ms, func(a, b *member) int { return strings.Compare(a.name, b.name) })
	return ms
}

// Close closes every server's client, concurrently, and aborts the Adds in
// progress; later calls fail with ErrFederationClosed. It waits for the
// clients to close until ctx ends, then returns ctx's error (the clients
// finish closing in the background). Close is idempotent. Do not call it
// from a notification callback.
func (f *Federation) Close(ctx context.Context) error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	ms := make([]*member, 0, len(f.servers))
	for _, m := range f.servers {
		ms = append(ms, m)
	}
	clear(f.servers)
	f.mu.Unlock()
	f.cancel()

	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		for _, m := range ms {
			wg.Go(func() { m.c.Close() })
		}
		wg.Wait()
		f.adding.Wait()
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("client: federation: close: %w", ctx.Err())
	}
}

// ServerError is one server's failure in an aggregated call.
type ServerError struct {
	Server string
	Err    error
}

func (e *ServerError) Error() string {
	return "client: federation: server " + e.Server + ": " + e.Err.Error()
}

// Unwrap returns the server's error.
func (e *ServerError) Unwrap() error { return e.Err }

// PartialError is the error of an aggregated call that some servers failed:
// the call's result holds the items of the others. It matches ErrPartial
// and, through its ServerErrors, their causes (errors.Is(err, ErrNotReady)
// is true if a server was reconnecting).
type PartialError struct {
	// Errors has one entry per failed server, sorted by server name.
	Errors []*ServerError
}

func (e *PartialError) Error() string {
	var b strings.Builder
	b.WriteString(ErrPartial.Error())
	for i, se := range e.Errors {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(se.Server + ": " + se.Err.Error())
	}
	return b.String()
}

// Is reports whether target is ErrPartial.
func (e *PartialError) Is(target error) bool { return target == ErrPartial }

// Unwrap returns the servers' errors.
func (e *PartialError) Unwrap() []error {
	errs := make([]error, len(e.Errors))
	for i, se := range e.Errors {
		errs[i] = se
	}
	return errs
}

// ServerFailed returns the error of server name in an aggregated call's
// error, or nil if that server did not fail.
func ServerFailed(err error, name string) error {
	var pe *PartialError
	if errors.As(err, &pe) {
		for _, se := range pe.Errors {
			if se.Server == name {
				return se.Err
			}
		}
	}
	return nil
}

// ServerTool is a tool of one of a federation's servers.
type ServerTool struct {
	// Server is the server's name.
	Server string
	// Tool is the tool as the server lists it (unqualified name). Its
	// JSON fields are shared with the federation's cache: do not modify
	// them.
	Tool mcp.Tool
}

// Name returns the tool's qualified name, server/tool.
func (t ServerTool) Name() string { return t.Server + Separator + t.Tool.Name }

// ServerResource is a resource of one of a federation's servers. URIs are
// not rewritten: read it with ReadResource(ctx, Server, Resource.URI).
type ServerResource struct {
	Server   string
	Resource mcp.Resource
}

// ServerPrompt is a prompt of one of a federation's servers.
type ServerPrompt struct {
	Server string
	Prompt mcp.Prompt
}

// Name returns the prompt's qualified name, server/prompt.
func (p ServerPrompt) Name() string { return p.Server + Separator + p.Prompt.Name }

// AllTools lists the tools of every server, sorted by server name, each
// server's in its own order. A server's list is cached until it sends
// notifications/tools/list_changed or reconnects. Servers that fail (down,
// reconnecting, erroring) are left out and reported by a *PartialError
// alongside the others' tools; the error is nil when all answered.
func (f *Federation) AllTools(ctx context.Context) ([]ServerTool, error) {
	return gather(ctx, f,
		func(m *member) *listCache[mcp.Tool] { return &m.tools },
		(*Client).allTools,
		func(s string, t mcp.Tool) ServerTool { return ServerTool{Server: s, Tool: t} })
}

// AllResources lists the resources of every server as AllTools lists the
// tools (the cache follows notifications/resources/list_changed).
func (f *Federation) AllResources(ctx context.Context) ([]ServerResource, error) {
	return gather(ctx, f,
		func(m *member) *listCache[mcp.Resource] { return &m.resources },
		(*Client).allResources,
		func(s string, r mcp.Resource) ServerResource { return ServerResource{Server: s, Resource: r} })
}

// AllPrompts lists the prompts of every server as AllTools lists the tools
// (the cache follows notifications/prompts/list_changed).
func (f *Federation) AllPrompts(ctx context.Context) ([]ServerPrompt, error) {
	return gather(ctx, f,
		func(m *member) *listCache[mcp.Prompt] { return &m.prompts },
		(*Client).allPrompts,
		func(s string, p mcp.Prompt) ServerPrompt { return ServerPrompt{Server: s, Prompt: p} })
}

// gather lists one kind of item on every server at once.
func gather[T, R any](ctx context.Context, f *Federation,
	cache func(*member) *listCache[T],
	fetch func(*Client, context.Context) ([]T, *time.Duration, error),
	wrap func(server string, v T) R,
) ([]R, error) {
	ms := f.members()
	if len(ms) == 0 && f.isClosed() {
		return nil, ErrFederationClosed
	}
	lists := make([][]T, len(ms))
	errs := make([]error, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Go(func() {
			// A server not connected is reported, not served from its
			// cache: the client's state changes before OnConnectionLost
			// invalidates it.
			if st := m.c.State(); st != StateReady {
				errs[i] = fmt.Errorf("%w (state %s)", ErrNotReady, st)
				return
			}
			lists[i], errs[i] = cache(m).get(ctx, func(ctx context.Context) ([]T, *time.Duration, error) { return fetch(m.c, ctx) })
		})
	}
	wg.Wait()
	var out []R
	var failed []*ServerError
	for i, m := range ms {
		if errs[i] != nil {
			failed = append(failed, &ServerError{Server: m.name, Err: errs[i]})
			continue
		}
		for _, v := range lists[i] {
			out = append(out, wrap(m.name, v))
		}
	}
	if failed != nil {
		return out, &PartialError{Errors: failed}
	}
	return out, nil
}

func (f *Federation) isClosed() bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.closed
}

// SplitName splits a qualified name, server/name, at its first Separator.
func SplitName(qualified string) (server, name string, err error) {
	server, name, ok := strings.Cut(qualified, Separator)
	if !ok || name == "" || !ValidServerName(server) {
		return "", "", fmt.Errorf("%w: %q (want server%sname)", ErrUnqualified, qualified, Separator)
	}
	return server, name, nil
}

// route finds the server of a qualified name.
func (f *Federation) route(qualified string) (*member, string, error) {
	server, name, err := SplitName(qualified)
	if err != nil {
		return nil, "", err
	}
	m, err := f.member(server)
	if err != nil {
		return nil, "", err
	}
	return m, name, nil
}

// CallTool calls the tool a qualified name (server/tool) names, on its
// server, as Client.CallTool does.
func (f *Federation) CallTool(ctx context.Context, qualified string, args any, opts ...CallOption) (*mcp.CallToolResult, error) {
	m, name, err := f.route(qualified)
	if err != nil {
		return nil, err
	}
	r, err := m.c.CallTool(ctx, name, args, opts...)
	if err != nil {
		return r, &ServerError{Server: m.name, Err: err}
	}
	return r, nil
}

// GetPrompt gets the prompt a qualified name (server/prompt) names.
func (f *Federation) GetPrompt(ctx context.Context, qualified string, args map[string]string) (*mcp.GetPromptResult, error) {
	m, name, err := f.route(qualified)
	if err != nil {
		return nil, err
	}
	r, err := m.c.GetPrompt(ctx, name, args)
	if err != nil {
		return nil, &ServerError{Server: m.name, Err: err}
	}
	return r, nil
}

// ReadResource reads resource uri of server.
func (f *Federation) ReadResource(ctx context.Context, server, uri string) (*mcp.ReadResourceResult, error) {
	m, err := f.member(server)
	if err != nil {
		return nil, err
	}
	r, err := m.c.ReadResource(ctx, uri)
	if err != nil {
		return nil, &ServerError{Server: m.name, Err: err}
	}
	return r, nil
}

// listCache caches one server list: until it is invalidated (a
// list_changed, a reconnection) and, when the list came with a ttlMs
// (2026-07-28), until that time has passed. A fetch that started before
// an invalidation does not fill the cache.
type listCache[T any] struct {
	mu      sync.Mutex
	gen     uint64
	valid   bool
	expires time.Time // zero: until invalidated
	items   []T
}

func (lc *listCache[T]) get(ctx context.Context, fetch func(context.Context) ([]T, *time.Duration, error)) ([]T, error) {
	lc.mu.Lock()
	if lc.valid && (lc.expires.IsZero() || time.Now().Before(lc.expires)) {
		items := lc.items
		lc.mu.Unlock()
		return items, nil
	}
	gen := lc.gen
	lc.mu.Unlock()
	items, ttl, err := fetch(ctx)
	if err != nil {
		return nil, err
	}
	lc.mu.Lock()
	if lc.gen == gen && (ttl == nil || *ttl > 0) {
		lc.items, lc.valid = items, true
		lc.expires = time.Time{}
		if ttl != nil {
			lc.expires = time.Now().Add(*ttl)
		}
	}
	lc.mu.Unlock()
	return items, nil
}

func (lc *listCache[T]) invalidate() {
	lc.mu.Lock()
	lc.gen++
	lc.valid, lc.items = false, nil
	lc.mu.Unlock()
}

// ParseTarget returns the transport a target names: "tcp://host:port"
// (newline-delimited JSON-RPC over TCP), "tcps://host:port" (the same
// over TLS, verified against the system's roots), "http://…" or "https://…"
// (Streamable HTTP; an empty path means /mcp), "sse+http://…" or
// "sse+https://…" (the legacy HTTP+SSE transport; an empty path means
// /sse) or "stdio:command args…" (a subprocess; the command line is split
// on spaces, without quoting).
func ParseTarget(target string) (Transport, error) {
	scheme, rest, _ := strings.Cut(target, ":")
	switch scheme {
	case "stdio":
		f := strings.Fields(rest)
		if len(f) == 0 {
			return nil, fmt.Errorf("%w: %q: no command", ErrTarget, target)
		}
		return &StdioTransport{Command: f[0], Args: f[1:]}, nil
	case "tcp", "tcps":
		addr, ok := strings.CutPrefix(rest, "//")
		if _, _, err := net.SplitHostPort(addr); !ok || err != nil {
			return nil, fmt.Errorf("%w: %q: want %s://host:port", ErrTarget, target, scheme)
		}
		t := &TCPTransport{Addr: addr}
		if scheme == "tcps" {
			t.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		return t, nil
	case "http", "https", "sse+http", "sse+https":
		u, err := url.Parse(strings.TrimPrefix(target, "sse+"))
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("%w: %q: want %s://host:port/path", ErrTarget, target, scheme)
		}
		if strings.HasPrefix(scheme, "sse+") {
			if u.Path == "" {
				u.Path = "/sse"
			}
			return &SSETransport{URL: u.String()}, nil
		}
		if u.Path == "" {
			u.Path = "/mcp"
		}
		return &HTTPTransport{URL: u.String()}, nil
	}
	return nil, fmt.Errorf("%w: %q: want tcp(s)://host:port, http(s)://host:port/path, sse+http(s)://host:port/path or stdio:command", ErrTarget, target)
}

// Package gateway makes an mcpedge server a gateway: it serves, as one
// server, the tools, resources, resource templates, prompts and
// completions of upstream MCP servers reached over stdio (child
// processes), Streamable HTTP (falling back to the legacy HTTP+SSE
// transport) or TCP.
//
// The engine knows nothing of upstreams. The gateway mirrors each
// upstream's lists into the engine's registry as raw items
// (handlers.Registry.AddRawTool and its siblings), whose handlers forward
// the request upstream and pass the upstream's result through as bytes,
// with only ids and names rewritten. What an upstream sends during a
// call (progress, log messages, sampling, elicitation and roots
// requests) reaches the downstream request that caused it through that
// request's handlers.Peer; resource updates and list changes are
// published on the engine's bus. See docs/gateway.md.
//
// Use: New with the upstreams, Bus around the engine's bus before the
// engine is made (resource subscriptions reach the upstreams through
// it), Start with the engine, Close at shutdown (after the engine has
// drained: the upstreams answer the calls in flight).
package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
)

// Options configure a Gateway.
type Options struct {
	// Upstreams are the upstream servers.
	Upstreams []Upstream
	// MaxMessage bounds one message from an upstream; <= 0 means 4 MiB.
	// An upstream that sends a larger one has its connection closed (its
	// calls fail) and reopened.
	MaxMessage int
	// MaxPending bounds the server-to-client requests (sampling,
	// elicitation, roots) relayed at once per upstream connection; <= 0
	// means 256. More are refused to the upstream.
	MaxPending int
	// NotifyRate bounds the notifications per second taken from one
	// upstream connection (a burst of as many); the rest are dropped and
	// counted. <= 0 means 1000.
	NotifyRate float64
	// StartTimeout bounds how long Start waits for the upstreams' first
	// lists; <= 0 means 30 s. An upstream not up by then is served once
	// it is.
	StartTimeout time.Duration
	// HoldTimeout bounds how long an upstream call of the session
	// revisions, translated for a 2026-07-28 client, is held open for
	// the client's retry with the input it asked for; <= 0 means 60 s.
	// Past it the upstream's requests get an error, the call is
	// cancelled, and the retry gets -32602.
	HoldTimeout time.Duration
	// MaxHeld bounds the calls held at once; <= 0 means 1024. MaxHeld
	// PerClient bounds those of one client (its authenticated subject,
	// else its address); <= 0 means 16. Past either the upstream's
	// request gets an error and the client -32000
	// {"limit":"upstream-held"}.
	MaxHeld, MaxHeldPerClient int
	// MaxRounds bounds the input rounds of one translated call, in
	// either direction; <= 0 means 16. Past it the upstream's request
	// gets an error, the call is cancelled, and the client gets -32000
	// {"limit":"upstream-input-rounds"}.
	MaxRounds int
	// MaxListenURIs bounds the resource URIs of the listen stream kept
	// open on an upstream that speaks only 2026-07-28, for the sessions'
	// resources/subscribe; <= 0 means 4096. Past it a URI subscribed
	// downstream is not subscribed upstream (logged).
	MaxListenURIs int
	// Logger receives the gateway's logs; nil discards them.
	Logger *slog.Logger
	// LatencyBuckets are the upper bounds, in seconds, of the histogram
	// of each upstream's call latencies (Status.Latency); nil keeps none.
	LatencyBuckets []float64
	// TaskTTL is how long the gateway routes the tasks methods of a
	// 2026-07-28 task an upstream created (to its connection, for its
	// caller) after the task was created; <= 0 means 10 minutes (the
	// engine's default -task-ttl).
	TaskTTL time.Duration
}

// Gateway serves the upstreams it is configured with through an engine.
type Gateway struct {
	opts Options
	log  *slog.Logger
	srv  *engine.Server
	reg  *handlers.Registry

	bounds []int64 // Options.LatencyBuckets, in nanoseconds

	mu       sync.Mutex
	ups      []*upstream // in configuration order
	claims   [4]map[string]*upstream
	refs     map[string]*upRef      // by upstream name
	draining map[*upstream]struct{} // retired by a reload, finishing their calls

	subMu sync.Mutex
	subs  map[string]int // resource URIs subscribed downstream, with how many subscribers

	elMu    sync.Mutex
	elicits map[string]string // URL elicitation id → downstream session
	elOrder []string

	insMu   sync.Mutex
	ownIns  string // the engine's own instructions, before the upstreams'
	lastIns string // what mergeInstructions set last

	taskMu    sync.Mutex
	tasks     map[string]taskRoute // 2026-07-28 task id → where it lives, whose it is
	taskOrder []string             // in the order noted, for the bound

	held     heldTable     // calls held for 2026-07-28 clients' input (held.go)
	stop     chan struct{} // closed by Close
	stopOnce sync.Once
	bg       sync.WaitGroup

	// A node's of a cluster (cluster.go).
	cluster    atomic.Pointer[Cluster]
	names      atomic.Pointer[nameIndex] // the claims, read without a lock
	indexStale atomic.Bool               // names is to be made again
	downs      atomic.Int32              // pooled upstreams down here
}

// New returns a gateway for opts, after checking the upstreams'
// configuration (every error names the upstream and the setting).
func New(opts Options) (*Gateway, error) {
	ups := slices.Clone(opts.Upstreams)
	if err := ValidateAll(ups); err != nil {
		return nil, err
	}
	opts.Upstreams = ups
	if opts.MaxMessage <= 0 {
		opts.MaxMessage = codec.DefaultMaxMessage
	}
	if opts.MaxPending <= 0 {
		opts.MaxPending = 256
	}
	if opts.NotifyRate <= 0 {
		opts.NotifyRate = 1000
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 30 * time.Second
	}
	if opts.TaskTTL <= 0 {
		opts.TaskTTL = 10 * time.Minute
	}
	if opts.HoldTimeout <= 0 {
		opts.HoldTimeout = DefaultHoldTimeout
	}
	if opts.MaxHeld <= 0 {
		opts.MaxHeld = DefaultMaxHeld
	}
	if opts.MaxHeldPerClient <= 0 {
		opts.MaxHeldPerClient = DefaultMaxHeldPerClient
	}
	if opts.MaxRounds <= 0 {
		opts.MaxRounds = DefaultMaxRounds
	}
	if opts.MaxListenURIs <= 0 {
		opts.MaxListenURIs = DefaultMaxListenURIs
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	g := &Gateway{opts: opts, log: log, stop: make(chan struct{})}
	g.indexStale.Store(true)
	for _, b := range opts.LatencyBuckets {
		g.bounds = append(g.bounds, int64(b*1e9))
	}
	for i := range g.claims {
		g.claims[i] = map[string]*upstream{}
	}
	return g, nil
}

// Bus returns inner wrapped so that a subscription to a resource an
// upstream serves (a session's resources/subscribe, a 2026-07-28 listen
// stream's) subscribes upstream, once per URI however many subscribe
// downstream, and the last one gone unsubscribes. Give it to the engine
// (engine.Options.Bus) before Start.
func (g *Gateway) Bus(inner session.Bus) session.Bus {
	if inner == nil {
		inner = session.NewLocalBus()
	}
	return &bus{inner: inner, g: g}
}

type bus struct {
	inner session.Bus
	g     *Gateway
}

func (b *bus) Publish(topic string, payload []byte) { b.inner.Publish(topic, payload) }

func (b *bus) Subscribe(topic string, fn func(string, []byte)) func() {
	cancel := b.inner.Subscribe(topic, fn)
	uri, ok := strings.CutPrefix(topic, session.TopicResourceUpdated)
	if !ok {
		return cancel
	}
	b.g.subscribe(uri)
	var once sync.Once
	return func() {
		cancel()
		once.Do(func() { b.g.unsubscribe(uri) })
	}
}

// maxInstructions bounds what one upstream's instructions add to the
// gateway's (sent in every initialize result).
const maxInstructions = 16 << 10

// mergeInstructions sets the engine's instructions: its own, then each
// upstream's in configuration order, under a line naming the upstream
// (and its prefix). With one upstream and none of its own, the gateway
// passes the upstream's as they are. An upstream down keeps the
// instructions it gave last.
func (g *Gateway) mergeInstructions() {
	g.insMu.Lock()
	defer g.insMu.Unlock()
	if g.srv == nil {
		return
	}
	g.mu.Lock()
	ups := slices.Clone(g.ups)
	g.mu.Unlock()
	var b strings.Builder
	b.WriteString(g.ownIns)
	for _, u := range ups {
		p := u.instructions.Load()
		if p == nil || strings.TrimSpace(*p) == "" {
			continue
		}
		text := *p
		if len(text) > maxInstructions {
			text = strings.ToValidUTF8(text[:maxInstructions], "") + "…"
		}
		if len(ups) == 1 && g.ownIns == "" {
			b.WriteString(text)
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString("From the server " + strconv.Quote(u.cfg.Name))
		if prefix := u.m.naming().prefix(len(ups)); prefix != "" {
			b.WriteString(" (its tools and prompts are named " + prefix + "...)")
		}
		b.WriteString(":\n" + text)
	}
	if text := b.String(); text != g.lastIns {
		g.lastIns = text
		g.srv.SetInstructions(text)
	}
}

// RootsListChanged relays a downstream session's
// notifications/roots/list_changed to the upstream connections that
// session has of its own (share = "session"): such an upstream may keep
// the client's roots, and ask for them again (roots/list, answered with
// that session's). Pooled connections are not told: many sessions share
// them, and a roots/list asked outside a call there names no session.
// Give it as engine.Options.OnRootsListChanged; it does not block.
func (g *Gateway) RootsListChanged(sess *session.Session) {
	id := sess.ID()
	g.mu.Lock()
	ups := slices.Clone(g.ups)
	g.mu.Unlock()
	for _, u := range ups {
		if !u.cfg.Share.Session {
			continue
		}
		u.sessMu.Lock()
		p := u.bySess[id]
		u.sessMu.Unlock()
		if p == nil {
			continue
		}
		if c := p.conn(0); c != nil {
			go func() {
				if err := c.notify(mcp.NotificationRootsListChanged, nil); err != nil {
					u.log.Debug("roots/list_changed not relayed", "err", err)
				}
			}()
		}
	}
}

// Start connects to the upstreams and mirrors their lists into srv's
// registry. It waits, within ctx and Options.StartTimeout, for each
// upstream's first lists; an upstream down by then is mirrored once it is
// up. Names that collide (two upstreams', or an upstream's and a built-in
// handler's) are an error naming both; Start then stops everything.
func (g *Gateway) Start(ctx context.Context, srv *engine.Server) error {
	g.srv, g.reg = srv, srv.Registry()
	g.ownIns = srv.Instructions()
	g.reg.SetForeignTasks(g.foreignTask)
	g.bg.Add(1)
	go func() {
		defer g.bg.Done()
		g.sweepHeldLoop(g.stop)
	}()
	g.mu.Lock()
	for _, cfg := range g.opts.Upstreams {
		u := newUpstream(g, cfg)
		g.current(u)
		g.ups = append(g.ups, u)
	}
	g.indexChanged()
	ups := slices.Clone(g.ups)
	g.mu.Unlock()
	for _, u := range ups {
		u.run()
	}
	wait, cancel := context.WithTimeout(ctx, g.opts.StartTimeout)
	defer cancel()
	var errs []error
	for _, u := range ups {
		select {
		case <-u.m.first:
			if u.m.firstErr != nil {
				errs = append(errs, u.m.firstErr)
			}
		case <-wait.Done():
			g.log.Warn("upstream not up yet; its items are served once it is", "upstream", u.cfg.Name, "err", u.lastError())
		}
	}
	if err := errors.Join(errs...); err != nil {
		g.Close()
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return nil
}

// Close stops every upstream connection (for stdio, every child and its
// process group) and unregisters nothing: the server is going away.
func (g *Gateway) Close() {
	g.stopOnce.Do(func() { close(g.stop) })
	g.bg.Wait()
	g.dropHeld(nil, errStopped)
	g.mu.Lock()
	ups := g.ups
	g.ups = nil
	for u := range g.draining {
		ups = append(ups, u)
	}
	g.draining = nil
	g.mu.Unlock()
	var wg sync.WaitGroup
	for _, u := range ups {
		wg.Go(u.stop)
	}
	wg.Wait()
}

// current makes u the upstream its name's items call (g.mu held).
func (g *Gateway) current(u *upstream) {
	if g.refs == nil {
		g.refs = map[string]*upRef{}
	}
	r := g.refs[u.cfg.Name]
	if r == nil {
		r = &upRef{}
		g.refs[u.cfg.Name] = r
	}
	u.ref = r
	r.cur.Store(u)
}

// retire has u, replaced or removed by a reload, finish its calls in
// flight, then stop (in the background).
func (g *Gateway) retire(u *upstream) {
	g.mu.Lock()
	if g.draining == nil {
		g.draining = map[*upstream]struct{}{}
	}
	g.draining[u] = struct{}{}
	g.mu.Unlock()
	u.healthMu.Lock()
	u.retired.Store(true)
	u.setDown(false) // no longer counted: its calls are no longer routed by it
	u.healthMu.Unlock()
	go func() {
		u.drain()
		g.mu.Lock()
		delete(g.draining, u)
		g.mu.Unlock()
	}()
}

// handOver gives the names old claims to nu, which replaces it (g.mu
// held).
func (g *Gateway) handOver(old, nu *upstream) {
	for k := range g.claims {
		for name, o := range g.claims[k] {
			if o == old {
				g.claims[k][name] = nu
			}
		}
	}
	g.indexChanged()
}

// upstreamCount is the number of upstreams, which decides the default
// prefix.
func (g *Gateway) upstreamCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.ups)
}

// claim reserves a served name for u: an error when another upstream, or
// the engine's own handlers, serve it already.
func (g *Gateway) claim(kind listKind, name string, u *upstream) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	o, ok := g.claims[kind][name]
	if ok && o != u {
		return &collisionError{kind: kind.String(), name: name, first: "upstream \"" + o.cfg.Name + "\"", then: u.cfg.Name}
	} else if !ok && g.builtin(kind, name) {
		return &collisionError{kind: kind.String(), name: name, first: "the built-in handler set", then: u.cfg.Name}
	}
	if !ok {
		g.claims[kind][name] = u
		g.indexChanged()
	}
	return nil
}

// builtin reports whether the registry serves name of its own (g.mu
// held).
func (g *Gateway) builtin(kind listKind, name string) bool {
	switch kind {
	case listTool:
		_, ok := g.reg.Tool(name)
		return ok
	}
	return false
}

func (g *Gateway) release(kind listKind, name string, u *upstream) {
	g.mu.Lock()
	if g.claims[kind][name] == u {
		delete(g.claims[kind], name)
		g.indexChanged()
	}
	g.mu.Unlock()
}

// unregister removes u's items names of kind from the registry.
func (g *Gateway) unregister(kind listKind, names []string, u *upstream) {
	if len(names) == 0 {
		return
	}
	var mine []string
	g.mu.Lock()
	for _, n := range names {
		if g.claims[kind][n] == u {
			delete(g.claims[kind], n)
			mine = append(mine, n)
		}
	}
	g.indexChanged()
	g.mu.Unlock()
	switch kind {
	case listTool:
		g.reg.RemoveTools(mine...)
	case listPrompt:
		g.reg.RemovePrompts(mine...)
	case listResource:
		g.reg.RemoveResources(mine...)
	case listTemplate:
		g.reg.RemoveResourceTemplates(mine...)
	}
}

// owner returns the upstream serving resource uri: the one that listed
// it, else the one whose template matches it, else the only upstream.
func (g *Gateway) owner(uri string) *upstream {
	g.mu.Lock()
	u, ok := g.claims[listResource][uri]
	ups := g.ups
	g.mu.Unlock()
	if ok {
		return u
	}
	for _, u := range ups {
		if u.servesTemplate(uri) {
			return u
		}
	}
	if len(ups) == 1 {
		return ups[0]
	}
	return nil
}

// servesTemplate reports whether one of u's templates matches uri.
func (u *upstream) servesTemplate(uri string) bool {
	u.m.mu.Lock()
	defer u.m.mu.Unlock()
	for _, t := range u.m.compiled {
		if t.Regexp().MatchString(uri) && t.Match(uri) != nil {
			return true
		}
	}
	return false
}

// resourceUpdated tells the downstream subscribers of uri.
func (g *Gateway) resourceUpdated(uri string) {
	if g.srv != nil {
		g.srv.ResourceUpdated(uri)
	}
}

// subscribe notes a downstream subscription to uri; the first subscribes
// upstream.
func (g *Gateway) subscribe(uri string) {
	g.subMu.Lock()
	if g.subs == nil {
		g.subs = map[string]int{}
	}
	g.subs[uri]++
	first := g.subs[uri] == 1
	g.subMu.Unlock()
	if first {
		if u := g.owner(uri); u != nil {
			go u.subscribe(uri, true)
		}
	}
}

// unsubscribe notes a downstream subscription to uri gone; the last
// unsubscribes upstream.
func (g *Gateway) unsubscribe(uri string) {
	g.subMu.Lock()
	g.subs[uri]--
	last := g.subs[uri] <= 0
	if last {
		delete(g.subs, uri)
	}
	g.subMu.Unlock()
	if last {
		if u := g.owner(uri); u != nil {
			go u.subscribe(uri, false)
		}
	}
}

// resubscribe renews u's subscriptions on its new mirror connection.
func (g *Gateway) resubscribe(u *upstream) {
	g.subMu.Lock()
	var uris []string
	for uri := range g.subs {
		uris = append(uris, uri)
	}
	g.subMu.Unlock()
	for _, uri := range uris {
		if g.owner(uri) == u {
			u.subscribe(uri, true)
		}
	}
}

// subscribe subscribes to (or unsubscribes from) uri on the upstream's
// mirror connection, whose notifications carry the updates.
func (u *upstream) subscribe(uri string, on bool) {
	c := u.session.conn(0)
	if c != nil && c.era == statelessEra {
		u.listenSoon() // one listen stream names them all (up.go)
		return
	}
	if c == nil || c.info == nil || c.info.caps.Resources == nil || !c.info.caps.Resources.Subscribe {
		return
	}
	method := "resources/unsubscribe"
	if on {
		method = "resources/subscribe"
	}
	ctx, cancel := context.WithTimeout(u.ctx, u.cfg.Timeout)
	defer cancel()
	if _, err := c.internal(ctx, method, append(codec.AppendString([]byte(`{"uri":`), uri), '}')); err != nil && u.ctx.Err() == nil {
		u.log.Warn(method+" failed", "uri", uri, "err", err)
	}
}

// Bounds of the gateway's own tables.
const (
	maxElicitations = 4096
	maxTaskOwners   = 1 << 14
)

// noteElicitation remembers the downstream session a URL-mode
// elicitation went to, for its notifications/elicitation/complete.
func (g *Gateway) noteElicitation(id, sessionID string) {
	if sessionID == "" {
		return
	}
	g.elMu.Lock()
	defer g.elMu.Unlock()
	if g.elicits == nil {
		g.elicits = map[string]string{}
	}
	if _, ok := g.elicits[id]; !ok {
		g.elOrder = append(g.elOrder, id)
		if len(g.elOrder) > maxElicitations {
			delete(g.elicits, g.elOrder[0])
			g.elOrder = g.elOrder[1:]
		}
	}
	g.elicits[id] = sessionID
}

// elicitationComplete relays notifications/elicitation/complete.
func (g *Gateway) elicitationComplete(id string) {
	g.elMu.Lock()
	sess, ok := g.elicits[id]
	g.elMu.Unlock()
	if ok && g.srv != nil {
		_ = g.srv.ElicitationComplete(sess, id)
	}
}

// taskRoute is a 2026-07-28 task an upstream created: the connection
// that created it (of its stateless pool, or of the session pool of an
// upstream that speaks 2026-07-28 only), where its tasks methods go, and
// the caller it is bound to (engine.TaskOwnerOf: its subject, else its
// address), the only one who reaches it.
type taskRoute struct {
	u       *upstream
	p       *pool
	conn    int
	owner   string
	expires int64 // nanotime
}

// noteTask binds task id, created through connection conn of u's pool
// p, to owner, for Options.TaskTTL. The table is bounded
// (maxTaskOwners): the expired go first, then the oldest.
func (g *Gateway) noteTask(id string, u *upstream, p *pool, conn int, owner string) {
	now := nanotime()
	g.taskMu.Lock()
	defer g.taskMu.Unlock()
	if g.tasks == nil {
		g.tasks = map[string]taskRoute{}
	}
	if _, ok := g.tasks[id]; !ok {
		for len(g.taskOrder) > 0 {
			old, ok := g.tasks[g.taskOrder[0]]
			if ok && old.expires > now && len(g.taskOrder) < maxTaskOwners {
				break
			}
			delete(g.tasks, g.taskOrder[0])
			g.taskOrder = g.taskOrder[1:]
		}
		g.taskOrder = append(g.taskOrder, id)
	}
	g.tasks[id] = taskRoute{u: u, p: p, conn: conn, owner: owner, expires: now + int64(g.opts.TaskTTL)}
}

// task returns the route of task id for a request whose tasks are bound
// to owner; false when there is none, it expired, or it is another's.
func (g *Gateway) task(id, owner string) (taskRoute, bool) {
	g.taskMu.Lock()
	defer g.taskMu.Unlock()
	r, ok := g.tasks[id]
	switch {
	case !ok:
		return taskRoute{}, false
	case r.expires <= nanotime():
		delete(g.tasks, id)
		return taskRoute{}, false
	case r.owner != owner:
		return taskRoute{}, false
	}
	return r, true
}

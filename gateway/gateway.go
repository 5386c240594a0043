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
	"strings"
	"sync"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
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
}

// Gateway serves the upstreams it is configured with through an engine.
type Gateway struct {
	opts Options
	log  *slog.Logger
	srv  *engine.Server
	reg  *handlers.Registry

	mu     sync.Mutex
	ups    []*upstream // in configuration order
	claims [4]map[string]*upstream

	instructions string // the engine's own (Options.Instructions): the upstreams' are used when it has none

	subMu sync.Mutex
	subs  map[string]int // resource URIs subscribed downstream, with how many subscribers

	elMu    sync.Mutex
	elicits map[string]string // URL elicitation id → downstream session
	elOrder []string

	taskMu    sync.Mutex
	tasks     map[string]*upstream // 2026-07-28 task id → upstream
	taskOrder []string

	held     heldTable     // calls held for 2026-07-28 clients' input (held.go)
	stop     chan struct{} // closed by Close
	stopOnce sync.Once
	bg       sync.WaitGroup
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

// Start connects to the upstreams and mirrors their lists into srv's
// registry. It waits, within ctx and Options.StartTimeout, for each
// upstream's first lists; an upstream down by then is mirrored once it is
// up. Names that collide (two upstreams', or an upstream's and a built-in
// handler's) are an error naming both; Start then stops everything.
func (g *Gateway) Start(ctx context.Context, srv *engine.Server) error {
	g.srv, g.reg = srv, srv.Registry()
	g.reg.SetForeignTasks(g.foreignTask)
	g.instructions = srv.Instructions()
	g.bg.Add(1)
	go func() {
		defer g.bg.Done()
		g.sweepHeldLoop(g.stop)
	}()
	g.mu.Lock()
	for _, cfg := range g.opts.Upstreams {
		g.ups = append(g.ups, newUpstream(g, cfg))
	}
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
	g.mu.Unlock()
	var wg sync.WaitGroup
	for _, u := range ups {
		wg.Go(u.stop)
	}
	wg.Wait()
}

// updateInstructions has the engine answer initialize and
// server/discover with the upstreams' instructions, when it has none of
// its own: with one upstream, its text; with several, each one's after
// its name.
func (g *Gateway) updateInstructions() {
	if g.srv == nil || g.instructions != "" {
		return
	}
	g.mu.Lock()
	ups := slices.Clone(g.ups)
	g.mu.Unlock()
	var parts []string
	for _, u := range ups {
		s := u.instructions.Load()
		if s == nil || strings.TrimSpace(*s) == "" {
			continue
		}
		if len(ups) > 1 {
			parts = append(parts, u.cfg.Name+": "+*s)
		} else {
			parts = append(parts, *s)
		}
	}
	g.srv.SetInstructions(strings.Join(parts, "\n\n"))
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
	if o, ok := g.claims[kind][name]; ok && o != u {
		return &collisionError{kind: kind.String(), name: name, first: "upstream \"" + o.cfg.Name + "\"", then: u.cfg.Name}
	} else if !ok && g.builtin(kind, name) {
		return &collisionError{kind: kind.String(), name: name, first: "the built-in handler set", then: u.cfg.Name}
	}
	g.claims[kind][name] = u
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

// noteTask remembers which upstream created a 2026-07-28 task.
func (g *Gateway) noteTask(id string, u *upstream) {
	g.taskMu.Lock()
	defer g.taskMu.Unlock()
	if g.tasks == nil {
		g.tasks = map[string]*upstream{}
	}
	if _, ok := g.tasks[id]; !ok {
		g.taskOrder = append(g.taskOrder, id)
		if len(g.taskOrder) > maxTaskOwners {
			delete(g.tasks, g.taskOrder[0])
			g.taskOrder = g.taskOrder[1:]
		}
	}
	g.tasks[id] = u
}

func (g *Gateway) taskOwner(id string) *upstream {
	g.taskMu.Lock()
	defer g.taskMu.Unlock()
	return g.tasks[id]
}

// Package cluster joins mcpedge servers into one, over NATS: any node
// accepts any request, and a load balancer in front needs no stickiness.
//
// A Node is one server's membership. It carries three things between the
// nodes, each on a subject of its own under Options.Prefix:
//
//   - Notifications (Bus): resource updates and list changes published on
//     any node reach the subscribed sessions of every node, each once, in
//     publish order per publisher. The engine and the handlers see only a
//     session.Bus.
//   - Forwarded requests (Route, Serve): a session of revisions 2024-11-05
//     to 2025-11-25 lives on the node that initialized it, whose name
//     starts its id ("<node>.<random>"). A Streamable HTTP request naming
//     it (POST, DELETE, GET and its Last-Event-ID resumption, the legacy
//     /message POST) that lands on another node is sent whole to the owner
//     by NATS request-reply, served there by the owner's own HTTP handler,
//     and its answer (JSON, or an SSE stream frame by frame) relayed back
//     through the node that received it. 2026-07-28 task ids name their
//     node the same way, so tasks/get, tasks/update and tasks/cancel reach
//     the task's node.
//   - Membership: with Options.Embed the Node runs a nats-server in
//     process whose route port links it to Options.Routes, a cluster with
//     nothing else to install; with Options.URL it joins an existing NATS
//     deployment.
//
// Who may speak on the subjects. With Embed, the node connects to its
// server in process, and that server takes no other client: its client
// port (which nats-server needs open before it routes) is on loopback and
// refuses every connection, with or without credentials, so no process on
// the host reads forwarded requests or answers them. The peers are the
// servers that present Options.RouteSecret. With URL, the deployment's
// own accounts and permissions decide who may publish and subscribe on
// the cluster's subjects (docs/cluster.md says what a node trusts there).
// Either way, what comes off the subjects is checked before it reaches a
// client: reply frames only on an unguessable reply subject, in order,
// with sane headers and JSON (or SSE events of JSON) bodies; bus payloads
// only as the JSON their topic carries. Anything else is dropped, counted
// (Stats.BadMessages) and logged at a bounded rate.
//
// What each node owns (sessions, their streams and event stores, tasks) is
// lost with it; its clients get 404 and initialize again, on any node.
// What is shared is what crosses the bus. A forwarded request is sent once
// and never retried, so it is never executed twice; a node that does not
// answer within Options.ForwardTimeout is answered 504.
//
// A Node's methods are safe for concurrent use.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/internal/lograte"
	"github.com/mcpedge/mcpedge/internal/redact"
	"github.com/mcpedge/mcpedge/session"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/valyala/fasthttp"
)

// Options configure a Node. Node is required, and one of Embed and URL.
type Options struct {
	// Node names this node: letters, digits, '-' and '_', at most 64.
	// Session and task ids start with it. Every node of a cluster needs a
	// name of its own.
	Node string

	// Embed, when set, runs a nats-server in this process whose cluster
	// (route) port listens on Embed ("host:port"; port 0 picks one, see
	// RouteAddr). Routes lists its peers. The node connects to it in
	// process; its client port, on loopback at a port the system picks,
	// refuses every connection (see the package documentation).
	Embed string
	// Routes are the route URLs of the other nodes
	// ("nats-route://host:port"), for Embed. A route to this node itself
	// is dropped and logged; a route that cannot be reached is retried
	// for as long as the node runs, and logged.
	Routes []string
	// RouteSecret, when set, authenticates the routes of the embedded
	// servers: a server routes to this one only if it presents the same
	// secret, and this one presents it to its peers. Empty: any server
	// that reaches the route port may join, and so read every forwarded
	// request: any process on the host, and any host that reaches it off
	// loopback. Start logs a warning then.
	RouteSecret string
	// Name names the NATS cluster of the embedded servers; empty means
	// "mcpedge". Every node of a cluster gives the same name.
	Name string

	// URL, when set instead of Embed, joins an existing NATS deployment
	// ("nats://host:4222", several separated by commas). NATSOptions
	// carry its credentials and TLS. The node trusts every client the
	// deployment lets publish on the cluster's subjects (Prefix): give
	// the nodes an account, or permissions on Prefix.>, of their own.
	// Credentials in the URL are never logged (internal/redact).
	URL string
	// NATSOptions are added to the connection's options: credentials
	// (nats.UserCredentials, nats.Token, nats.UserInfo), TLS
	// (nats.RootCAs, nats.ClientCert), and the like.
	NATSOptions []nats.Option

	// Prefix starts every subject the cluster uses; empty means
	// "mcpedge". Clusters that share a NATS deployment need prefixes of
	// their own.
	Prefix string
	// ForwardTimeout bounds the wait for the owner of a forwarded request
	// to start answering; the owner tells it is working every third of
	// it, so a long call is not cut. 0 means 5 s.
	ForwardTimeout time.Duration
	// StreamIdle bounds the silence of a relayed SSE stream: the owner
	// sends keep-alive comments (mcphttp.Options.KeepAlive, 15 s by
	// default), so a stream silent this long lost its owner and is ended
	// (the client resumes it with Last-Event-ID). 0 means 45 s.
	StreamIdle time.Duration
	// MaxForwarded bounds the forwarded requests this node serves at
	// once; beyond it they are answered 503. 0 means 16384.
	MaxForwarded int
	// Tracer, when set, traces the requests this node forwards (a span
	// each, whose context the owner's span is a child of: trace.go).
	Tracer Tracer
	// MaxPayload is the embedded server's largest message; 0 means 8 MiB.
	// It bounds a forwarded request (larger is answered 413); answers are
	// cut into frames of at most this size.
	MaxPayload int

	// Keys sign the cluster's own messages (membership, session records,
	// kept events, cancellations; sign.go): give every node the same,
	// the requestState keys (-state-key-file) as mcpedge does. The first
	// signs, any verifies. Empty: a key derived from RouteSecret, else a
	// fixed one that signs nothing anybody could not forge (Start logs a
	// warning).
	Keys [][]byte
	// Heartbeat is how often the node tells the others it is alive; a
	// node silent for three heartbeats is lost, and what it held is
	// taken over. 0 means 1 s.
	Heartbeat time.Duration
	// RecordBytes bounds the session records the node keeps
	// (records.go); the records of sessions used least recently go first,
	// and are asked for again when needed. Those of the sessions this
	// node is the home of always stay. 0 means 64 MiB.
	RecordBytes int
	// EventBytes bounds the events of other nodes' streams the node keeps
	// for clients that resume them (events.go); the sessions whose events
	// came least recently go first. 0 means 64 MiB.
	EventBytes int
	// EventSessionBytes bounds the events kept of one session; the oldest
	// go first. 0 means 1 MiB (mcphttp's EventStoreBytes).
	EventSessionBytes int

	// Link, when set, is the address ("host:port"; port 0 picks one) of
	// the node's direct link (link.go): forwarded requests and their
	// answers go over TCP straight between the nodes, each connection
	// authenticated with Keys, rather than through NATS. Other nodes dial
	// it at the address the heartbeats advertise, this one: give an
	// address they reach, not a wildcard. Empty: no link; what is
	// forwarded to this node comes through NATS.
	Link string

	// Logger receives the node's log and the embedded server's; nil
	// discards. Lines that input from the cluster can cause (a message
	// that does not parse, a client refused at the embedded server) are
	// rate-limited: a few at once, then about one a second, each saying
	// how many were suppressed before it.
	Logger *slog.Logger
}

// Errors of Start.
var (
	ErrBadName  = errors.New("cluster: a node name is 1 to 64 letters, digits, '-' or '_'")
	ErrNoNATS   = errors.New("cluster: neither Embed nor URL is set")
	ErrBothNATS = errors.New("cluster: Embed and URL are exclusive")
	ErrBadRoute = errors.New("cluster: bad route URL")
)

// Node is this server's membership of a cluster. Start it, give it to
// mcpedge.Options.Cluster (or wire Bus, Route and Serve by hand), and
// Close it after the server's Shutdown.
type Node struct {
	opts   Options
	log    *slog.Logger
	name   string
	prefix string

	srv *server.Server // embedded; nil with URL
	nc  *nats.Conn
	bus *Bus

	subs []*nats.Subscription

	// Forwarding, the sending side (forward.go).
	replyPrefix string // "<prefix>.reply.<node>."
	pendMu      sync.Mutex
	pending     map[uint64]*forward // by reply token, random (register)
	sweeps      atomic.Uint64       // the forwards' sweeps so far (sweepForwards)

	// Rate limits of the lines input from the cluster can cause: bad
	// messages, and the embedded server's and the NATS client's own.
	badWarns, natsWarns *lograte.Limiter

	// Forwarding, the owner's side (serve.go).
	handler     atomic.Pointer[fasthttp.RequestHandler]
	tunMu       sync.Mutex
	tunnels     map[tunKey]*tunnelConn
	serving     atomic.Int64
	ctxs        sync.Pool
	serveWG     sync.WaitGroup
	closed      atomic.Bool
	maxFrame    int
	peers       bool                   // embedded, with routes to other nodes configured
	unrouted    atomic.Bool            // peers, and no route to any (watchRoutes)
	routed      atomic.Pointer[[]Peer] // the peers routed to, as watchRoutes last saw them
	routedSeen  map[string]bool        // peers ever routed to (watchRoutes only)
	jobs        chan job               // forwarded requests for idle workers
	workersStop chan struct{}          // closed at Shutdown: idle workers exit
	tickOnce    sync.Once
	tickStop    chan struct{} // the pending ticker's; nil before Serve

	stats counters

	// Sessions shared (sessions.go, records.go, events.go, members.go).
	inc     string // this start's incarnation
	inst    string // name.inc
	sig     *signer
	members members
	recs    records
	events  eventStore
	host    atomic.Pointer[session.Shared]
	svcs    services // what the others report of their services (services.go)

	// The direct link (link.go).
	linkLn      net.Listener
	linkAddrS   string // advertised in heartbeats
	linkSem     chan struct{}
	linkConns   atomic.Int32
	linkMu      sync.Mutex
	links       map[*linkConn]struct{}
	linkDialers atomic.Pointer[map[string]*linkDialer] // by peer; copied on write, under linkMu
}

// counters are the node's statistics (Stats).
type counters struct {
	forwarded, forwardTimeouts, forwardNoOwner, forwardRefused atomic.Uint64
	served, servedRefused, cancelled                           atomic.Uint64
	busOut, busIn, busDropped, badMessages, streamsCut         atomic.Uint64
	disconnects, reconnects                                    atomic.Uint64
	peersLost, takenOver, recordFetches, eventsOut, eventsIn   atomic.Uint64
	forwardedLink, linkRefused                                 atomic.Uint64
	linkFrames, linkWrites                                     atomic.Uint64
	forwardedDirect, servedDirect, notDirect                   atomic.Uint64
}

// Stats are a Node's counters since Start.
type Stats struct {
	Forwarded       uint64 // requests sent to their owner
	ForwardTimeouts uint64 // of which the owner did not answer in time (504)
	ForwardNoOwner  uint64 // requests naming a node nobody answers for (served locally: 404)
	ForwardRefused  uint64 // not sent: too large, or NATS down (413, 503)
	Served          uint64 // requests other nodes forwarded here
	ServedRefused   uint64 // of which refused over MaxForwarded (503)
	Cancelled       uint64 // forwarded streams whose client went away
	BusOut          uint64 // notifications published to the other nodes
	BusIn           uint64 // notifications received from them
	BusDropped      uint64 // notifications not published (NATS down) or lost (slow consumer)
	BadMessages     uint64 // messages from NATS that did not parse, dropped
	StreamsCut      uint64 // relayed streams ended for a lost frame or a silent owner
	Disconnects     uint64 // losses of the NATS connection
	Reconnects      uint64 // and recoveries
	PeersLost       uint64 // nodes found gone (silent, left, restarted)
	TakenOver       uint64 // sessions this node became the home of, their home gone
	RecordFetches   uint64 // records asked of the other nodes (not known here)
	EventsOut       uint64 // events of this node's streams published to be kept
	EventsIn        uint64 // events of other nodes' streams kept here
	ForwardedLink   uint64 // of Forwarded, those sent on a direct link
	ForwardedDirect uint64 // of ForwardedLink, those sent as direct messages (direct.go)
	ServedDirect    uint64 // direct messages other nodes sent here, served so
	NotDirect       uint64 // direct messages other nodes sent here that were not served so (their whole request follows)
	LinksRefused    uint64 // link connections that failed their handshake
	LinkFrames      uint64 // frames written on direct links
	LinkWrites      uint64 // and the system calls that wrote them (frames written together share one)
	Records         int    // session records kept now
	RecordBytes     int    // and their bytes
	EventBytes      int    // bytes of the other nodes' events kept now
}

// Stats returns the node's counters.
func (n *Node) Stats() Stats {
	c := &n.stats
	st := Stats{
		Forwarded: c.forwarded.Load(), ForwardTimeouts: c.forwardTimeouts.Load(),
		ForwardNoOwner: c.forwardNoOwner.Load(), ForwardRefused: c.forwardRefused.Load(),
		Served: c.served.Load(), ServedRefused: c.servedRefused.Load(), Cancelled: c.cancelled.Load(),
		BusOut: c.busOut.Load(), BusIn: c.busIn.Load(), BusDropped: c.busDropped.Load(),
		BadMessages: c.badMessages.Load(), StreamsCut: c.streamsCut.Load(),
		Disconnects: c.disconnects.Load(), Reconnects: c.reconnects.Load(),
		PeersLost: c.peersLost.Load(), TakenOver: c.takenOver.Load(), RecordFetches: c.recordFetches.Load(),
		EventsOut: c.eventsOut.Load(), EventsIn: c.eventsIn.Load(),
		ForwardedLink: c.forwardedLink.Load(), LinksRefused: c.linkRefused.Load(),
		LinkFrames: c.linkFrames.Load(), LinkWrites: c.linkWrites.Load(),
		ForwardedDirect: c.forwardedDirect.Load(), ServedDirect: c.servedDirect.Load(), NotDirect: c.notDirect.Load(),
	}
	st.Records, st.RecordBytes = n.recs.size()
	_, st.EventBytes = n.events.size()
	return st
}

// ValidName reports whether name can name a node.
func ValidName(name string) bool { return validName(name) }

func validName[T string | []byte](name T) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !nameByte(name[i]) {
			return false
		}
	}
	return true
}

// nameByte reports whether c may stand in a node name (and so in a NATS
// subject token and before the '.' of a session id).
func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// DefaultName derives a node name from the host name and a port: "web-3"
// serving on 7401 is "web-3-7401". Characters a name cannot hold become
// '-'.
func DefaultName(host string, port int) string {
	if i := strings.IndexByte(host, '.'); i > 0 {
		host = host[:i]
	}
	b := []byte(host)
	for i, c := range b {
		if !nameByte(c) {
			b[i] = '-'
		}
	}
	name := string(b)
	if name == "" {
		name = "node"
	}
	suffix := "-" + strconv.Itoa(port)
	if len(name)+len(suffix) > 64 {
		name = name[:64-len(suffix)]
	}
	return name + suffix
}

// Start starts the node: the embedded nats-server (with Embed), the
// connection, and the subscriptions. The node serves forwarded requests
// once Serve gives it a handler; until then they are answered 503. It
// returns when connected; with Embed, the routes to the peers come up in
// the background (Ready reports them).
func Start(ctx context.Context, opts Options) (*Node, error) {
	if !ValidName(opts.Node) {
		return nil, fmt.Errorf("%w: %q", ErrBadName, opts.Node)
	}
	switch {
	case opts.Embed == "" && opts.URL == "":
		return nil, ErrNoNATS
	case opts.Embed != "" && opts.URL != "":
		return nil, ErrBothNATS
	}
	if opts.Name == "" {
		opts.Name = "mcpedge"
	}
	if opts.Prefix == "" {
		opts.Prefix = "mcpedge"
	}
	if opts.ForwardTimeout <= 0 {
		opts.ForwardTimeout = 5 * time.Second
	}
	if opts.StreamIdle <= 0 {
		opts.StreamIdle = 45 * time.Second
	}
	if opts.MaxForwarded <= 0 {
		opts.MaxForwarded = 16384
	}
	if opts.MaxPayload <= 0 {
		opts.MaxPayload = 8 << 20
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = time.Second
	}
	if opts.RecordBytes <= 0 {
		opts.RecordBytes = 64 << 20
	}
	if opts.EventBytes <= 0 {
		opts.EventBytes = 64 << 20
	}
	if opts.EventSessionBytes <= 0 {
		opts.EventSessionBytes = 1 << 20
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	n := &Node{
		opts:      opts,
		log:       log.With("node", opts.Node),
		name:      opts.Node,
		prefix:    opts.Prefix,
		pending:   make(map[uint64]*forward),
		tunnels:   make(map[tunKey]*tunnelConn),
		jobs:      make(chan job),
		badWarns:  lograte.New(badBurst, time.Second, 1),
		natsWarns: lograte.New(natsBurst, time.Second, 1),

		workersStop: make(chan struct{}),
	}
	n.replyPrefix = n.prefix + ".reply." + n.name + "."
	n.ctxs.New = func() any { return new(fasthttp.RequestCtx) }
	n.inc = newIncarnation()
	n.inst = n.name + "." + n.inc
	n.members.peers = make(map[string]*peer)
	n.recs.init()
	n.events.init(n.prefix)
	n.svcs.kick = make(chan struct{}, 1)
	keys := opts.Keys
	switch {
	case len(keys) > 0:
	case opts.RouteSecret != "":
		keys = [][]byte{[]byte(opts.RouteSecret)}
	default:
		keys = [][]byte{[]byte("mcpedge: no key")}
		n.log.Warn("cluster: no keys (Options.Keys): the cluster's messages are signed with a key anybody may forge them with")
	}
	n.sig = newSigner(keys)
	if err := n.startLink(); err != nil {
		return nil, err
	}

	nopts := []nats.Option{
		nats.Name("mcpedge " + opts.Node),
		nats.NoEcho(), // this node's own notifications are delivered in process
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectBufSize(8 << 20),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if n.closed.Load() { // Shutdown closing it: nothing lost
				n.log.Debug("cluster: NATS connection closed")
				return
			}
			n.stats.disconnects.Add(1)
			if err == nil {
				n.log.Warn("cluster: NATS connection lost; serving what this node owns")
				return
			}
			n.log.Warn("cluster: NATS connection lost; serving what this node owns", "err", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			n.stats.reconnects.Add(1)
			n.log.Info("cluster: NATS connection back", "url", redact.URLs(nc.ConnectedUrl()))
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrSlowConsumer) {
				n.stats.busDropped.Add(1)
			}
			subj := ""
			if sub != nil {
				subj = sub.Subject
			}
			n.natsWarns.Warn(n.log, netip.Addr{}, "cluster: NATS error", "subject", subj, "err", err)
		}),
	}
	url := opts.URL
	if opts.Embed != "" {
		srv, err := n.startEmbedded()
		if err != nil {
			n.closeLinks()
			return nil, err
		}
		n.srv = srv
		// In process, as the server's one client user; never to a TCP
		// port a peer's INFO might name.
		nopts = append(nopts, nats.InProcessServer(srv), nats.IgnoreDiscoveredServers())
		url = ""
	}
	nopts = append(nopts, opts.NATSOptions...)
	nc, err := nats.Connect(url, nopts...)
	if err != nil {
		n.shutdownEmbedded()
		n.closeLinks()
		return nil, fmt.Errorf("cluster: connect: %w", err)
	}
	n.nc = nc
	n.maxFrame = int(nc.MaxPayload()) - 64
	if n.maxFrame < 1024 {
		n.maxFrame = 1024
	}
	n.bus = newBus(n)
	for _, s := range []struct {
		subj string
		fn   nats.MsgHandler
	}{
		{n.prefix + ".bus", n.bus.receive},
		{n.replyPrefix + "*", n.onReply},
		{n.prefix + ".http." + n.name, n.onForwarded},
		{n.prefix + ".cancel." + n.name, n.onCancel},
		{n.prefix + ".ping." + n.name, func(m *nats.Msg) { _ = m.Respond(nil) }},
		{n.prefix + ".hb", n.onHeartbeat},
		{n.prefix + ".rec", n.onRecord},
		{n.prefix + ".recget", n.onRecordGet},
		{n.prefix + ".ev", n.onEvent},
		{n.prefix + ".svc", n.onServices},
	} {
		sub, err := nc.Subscribe(s.subj, s.fn)
		if err != nil {
			n.Close()
			return nil, fmt.Errorf("cluster: subscribe %s: %w", s.subj, err)
		}
		_ = sub.SetPendingLimits(1<<20, 256<<20)
		n.subs = append(n.subs, sub)
	}
	if err := nc.FlushWithContext(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		n.log.Warn("cluster: flush", "err", err)
	}
	if n.srv != nil {
		n.unrouted.Store(n.peers && n.srv.NumRoutes() == 0)
		n.routedSeen = map[string]bool{}
		go n.watchRoutes()
	}
	go n.heartbeat()
	go n.sweepForwards()
	go n.announceServices()
	n.log.Info("cluster: node started", "embed", opts.Embed, "routes", redact.URLs(strings.Join(opts.Routes, ",")), "url", redact.URLs(opts.URL))
	return n, nil
}

// The rate limits of log lines that the cluster's input can cause: so many
// at once, then one a second.
const (
	badBurst  = 5  // messages that do not parse
	natsBurst = 32 // the embedded server's lines (its start takes a dozen)
)

// startEmbedded starts the in-process nats-server: the route port on
// Options.Embed, the peers of Options.Routes, a client port on loopback.
func (n *Node) startEmbedded() (*server.Server, error) {
	host, portStr, err := net.SplitHostPort(n.opts.Embed)
	if err != nil {
		return nil, fmt.Errorf("cluster: embed address %q: %w", n.opts.Embed, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("cluster: embed address %q: bad port", n.opts.Embed)
	}
	var routes []*url.URL
	for _, r := range n.opts.Routes {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		u, err := url.Parse(r)
		if err != nil || u.Host == "" || (u.Scheme != "nats-route" && u.Scheme != "nats") {
			return nil, fmt.Errorf("%w: %q (want nats-route://host:port)", ErrBadRoute, r)
		}
		if sameAddr(u.Host, host, port) {
			n.log.Warn("cluster: a route names this node itself; dropped", "route", redact.URLs(r))
			continue
		}
		if n.opts.RouteSecret != "" && u.User == nil {
			u.User = url.UserPassword(routeUser, n.opts.RouteSecret)
		}
		routes = append(routes, u)
	}
	n.peers = len(routes) > 0
	if port == 0 {
		port = server.RANDOM_PORT // ":0" means any port, as for net.Listen
	}
	so := &server.Options{
		ServerName: n.opts.Node,
		// The node connects in process. The client port exists only
		// because the server starts routing once it listens for clients
		// (with DontListen it never routes): it is on loopback, on a port
		// of the system's choosing, and its one user takes in-process
		// connections only. A client that names no user is that user
		// (NoAuthUser), so the node's own connection needs no secret,
		// and a TCP client is refused whatever it presents.
		Host:       "127.0.0.1",
		Port:       server.RANDOM_PORT,
		Users:      []*server.User{{Username: nodeUser, AllowedConnectionTypes: map[string]struct{}{inProcess: {}}}},
		NoAuthUser: nodeUser,
		NoSigs:     true, // library code installs no signal handlers
		MaxPayload: int32(n.opts.MaxPayload),
		Cluster: server.ClusterOpts{
			Name: n.opts.Name,
			Host: host,
			Port: port,
			// Clients learn no other server's client port: there is
			// nothing there for them.
			NoAdvertise: true,
		},
		Routes: routes,
	}
	if n.opts.RouteSecret != "" {
		// Inbound routes must present it; implicit routes (learned by
		// gossip) present it too.
		so.Cluster.Username, so.Cluster.Password = routeUser, n.opts.RouteSecret
	} else if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		n.log.Warn("cluster: the route port is open to any server that reaches it, and every forwarded request with it; give every node the same route secret", "embed", n.opts.Embed)
	} else {
		n.log.Warn("cluster: the route port is open to every process on this host, and every forwarded request with it; give every node the same route secret", "embed", n.opts.Embed)
	}
	srv, err := server.NewServer(so)
	if err != nil {
		return nil, fmt.Errorf("cluster: embedded server: %w", err)
	}
	srv.SetLoggerV2(natsLogger{l: n.log, rate: n.natsWarns}, false, false, false)
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, fmt.Errorf("cluster: embedded server did not start (route port %s in use?)", n.opts.Embed)
	}
	return srv, nil
}

// routeUser is the user name routes authenticate with.
const routeUser = "mcpedge"

// nodeUser is the embedded server's one client user, and inProcess the
// only connection type it may use (jwt.ConnectionTypeInProcess; the
// server checks the name at start).
const (
	nodeUser  = "mcpedge-node"
	inProcess = "IN_PROCESS"
)

// sameAddr reports whether hostport names host:port, this node's route
// listener. A wildcard host matches the loopback names.
func sameAddr(hostport, host string, port int) bool {
	h, p, err := net.SplitHostPort(hostport)
	if err != nil || p != strconv.Itoa(port) {
		return false
	}
	if h == host {
		return true
	}
	loop := func(s string) bool { return s == "localhost" || s == "127.0.0.1" || s == "::1" }
	wild := host == "" || host == "0.0.0.0" || host == "::"
	return (wild || loop(host)) && loop(h)
}

func (n *Node) shutdownEmbedded() {
	if n.srv != nil {
		n.srv.Shutdown()
		n.srv.WaitForShutdown()
	}
}

// Name returns the node's name.
func (n *Node) Name() string { return n.name }

// Bus returns the cluster-wide notification bus, for
// engine.Options.Bus.
func (n *Node) Bus() session.Bus { return n.bus }

// RouteAddr returns the embedded server's route listener address, nil
// without Embed.
func (n *Node) RouteAddr() net.Addr {
	if n.srv == nil {
		return nil
	}
	if a := n.srv.ClusterAddr(); a != nil {
		return a
	}
	return nil
}

// InProcessConn connects to the embedded server in process, for tools and
// tests: nats.Connect("", nats.InProcessServer(node)). Such a connection
// may publish and subscribe on every subject, as the node does: it is
// code of this process. It fails without Embed.
func (n *Node) InProcessConn() (net.Conn, error) {
	if n.srv == nil {
		return nil, errors.New("cluster: no embedded server")
	}
	return n.srv.InProcessConn()
}

// Routes returns the number of peers the embedded server has a route to
// now (0 without Embed): nodes, not connections, which NATS pools (a
// 3-node cluster has 2, over 8 connections).
func (n *Node) Routes() int { return len(n.Peers()) }

// Peer is another node this node's embedded server has a route to.
type Peer struct {
	Name  string // its node name
	Addr  string // host:port of a route connection to it, the one this node dialled when there is one
	Conns int    // route connections to it
}

// Peers returns the nodes this node's embedded server has routes to, by
// name (none without Embed), as last seen (watchRoutes polls them).
func (n *Node) Peers() []Peer {
	if p := n.routed.Load(); p != nil {
		return *p
	}
	return n.peersNow()
}

// peersNow reads the embedded server's routes, grouped by peer.
func (n *Node) peersNow() []Peer {
	if n.srv == nil {
		return nil
	}
	rz, err := n.srv.Routez(nil)
	if err != nil {
		return nil
	}
	var out []Peer
	idx := map[string]int{}
	for _, r := range rz.Routes {
		name := r.RemoteName
		if name == "" {
			name = r.RemoteID
		}
		addr := net.JoinHostPort(r.IP, strconv.Itoa(r.Port))
		i, ok := idx[name]
		if !ok {
			idx[name] = len(out)
			out = append(out, Peer{Name: name, Addr: addr, Conns: 1})
			continue
		}
		out[i].Conns++
		if r.DidSolicit {
			out[i].Addr = addr
		}
	}
	slices.SortFunc(out, func(a, b Peer) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Ready reports whether the node is part of its cluster: connected to
// NATS and, with Embed and peers configured (routes to this node itself
// do not count), routed to at least one of them. A node that is not ready still serves what it owns.
func (n *Node) Ready() error {
	if n.closed.Load() {
		return errors.New("cluster: node closed")
	}
	if !n.nc.IsConnected() {
		return fmt.Errorf("cluster: NATS %s", n.nc.Status())
	}
	if n.peers && n.srv.NumRoutes() == 0 {
		return errors.New("cluster: no route to any peer")
	}
	return nil
}

// routePoll is how often the embedded server's routes are counted.
const routePoll = 200 * time.Millisecond

// watchRoutes keeps unrouted and the peers current until the node
// closes: forwarding reads unrouted on every request, where counting the
// routes would take the server's lock. A peer is logged once when it is
// first routed to, once when its last route goes (heartbeats, not
// routes, tell whether it is gone: members.go), and once when it is
// back: the embedded server's own lines about the routes it retries are
// at debug level (natsLevel).
func (n *Node) watchRoutes() {
	tk := time.NewTicker(routePoll)
	defer tk.Stop()
	n.notePeers()
	for {
		select {
		case <-n.workersStop:
			return
		case <-tk.C:
			unrouted := n.peers && n.srv.NumRoutes() == 0
			if n.unrouted.Swap(unrouted) && !unrouted {
				// Routed again, or at last: the others learn of this node
				// now (a hello sent before any route reached nobody).
				_ = n.nc.Publish(n.prefix+".hb", n.appendHeartbeat(nil, msgHello))
			}
			n.notePeers()
		}
	}
}

// notePeers reads the peers, stores them, and logs those that came or
// went since the last reading.
func (n *Node) notePeers() {
	now := n.peersNow()
	var before []Peer
	if p := n.routed.Load(); p != nil {
		before = *p
	}
	n.routed.Store(&now)
	has := func(ps []Peer, name string) bool {
		return slices.ContainsFunc(ps, func(p Peer) bool { return p.Name == name })
	}
	for _, p := range now {
		switch {
		case has(before, p.Name):
		case n.routedSeen[p.Name]:
			n.log.Info("cluster: peer back", "peer", p.Name, "addr", p.Addr)
		default:
			n.routedSeen[p.Name] = true
			n.log.Info("cluster: peer joined", "peer", p.Name, "addr", p.Addr)
		}
	}
	for _, p := range before {
		if !has(now, p.Name) && !n.closed.Load() {
			n.log.Warn("cluster: peer lost: no route to it; if its heartbeats stop too, its sessions go on at the other nodes", "peer", p.Name, "addr", p.Addr, "peers", len(now))
		}
	}
}

// Close leaves the cluster: the node stops taking forwarded requests,
// waits (within ctx) for those it serves to end, and closes its NATS
// connection and embedded server. Call it after the server's Shutdown,
// which ends the streams a forwarded request may hold.
func (n *Node) Close() error { return n.Shutdown(context.Background()) }

// Shutdown is Close bounded by ctx.
func (n *Node) Shutdown(ctx context.Context) error {
	n.tunMu.Lock() // onForwarded checks closed under it: no request starts after this
	if n.closed.Load() {
		n.tunMu.Unlock()
		return nil
	}
	n.closed.Store(true)
	n.tunMu.Unlock()
	for _, s := range n.subs {
		_ = s.Unsubscribe()
	}
	// The other nodes learn at once that nobody answers for this one any
	// more, and take over the sessions it was the home of.
	n.sayGoodbye()
	_ = n.nc.FlushTimeout(time.Second)
	n.abortTunnels()
	n.closeLinks()
	n.tickOnce.Do(func() {}) // no ticker starts from now on
	if n.tickStop != nil {
		close(n.tickStop)
	}
	done := make(chan struct{})
	go func() { n.serveWG.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	close(n.workersStop)
	n.failPending()
	if n.nc != nil {
		n.nc.Close()
	}
	n.shutdownEmbedded()
	return err
}

// natsLogger sends the embedded server's log to slog, at a bounded rate:
// a client refused at its client port, or a route that presents a wrong
// secret, is a line each time, and a local process can repeat either as
// fast as it likes. URLs lose their credentials.
type natsLogger struct {
	l    *slog.Logger
	rate *lograte.Limiter
}

func (g natsLogger) log(level slog.Level, format string, v []any) {
	if !g.l.Enabled(context.Background(), slog.LevelDebug) && level < slog.LevelWarn {
		return // at debug whatever it says (natsLevel)
	}
	text := fmt.Sprintf(format, v...)
	if level = natsLevel(level, text); !g.l.Enabled(context.Background(), level) {
		return
	}
	ok, suppressed := g.rate.Allow(netip.Addr{})
	if !ok {
		return
	}
	msg := "nats: " + redact.URLs(text)
	if suppressed > 0 {
		g.l.Log(context.Background(), level, msg, "suppressed", suppressed)
		return
	}
	g.l.Log(context.Background(), level, msg)
}

// natsLevel is the level a line of the embedded server is logged at. Its
// notices (some thirty at start: ports, routes created and closed) are
// at debug, and so is its warning that the route secret is a plain
// password, and so are its errors about route connections (a peer that
// went away is retried, and each of its pooled connections says so every
// second): watchRoutes logs a peer lost, and back, once. What an operator
// must act on keeps its level: a server or route refused for its
// credentials, a duplicate node name, TLS, and the rest of its warnings
// and errors.
func natsLevel(level slog.Level, msg string) slog.Level {
	if level < slog.LevelWarn {
		return slog.LevelDebug
	}
	for _, s := range []string{"uthentication", "uthorization", "Violation", "duplicate name", "TLS", "tls:"} {
		if strings.Contains(msg, s) {
			return level
		}
	}
	// "Plaintext passwords": the route secret is the routes' password by
	// design (each node presents it to its peers).
	for _, s := range []string{"connect to route", "rid:", "Route connection", "route connection", "Plaintext passwords"} {
		if strings.Contains(msg, s) {
			return slog.LevelDebug
		}
	}
	return level
}

func (g natsLogger) Noticef(format string, v ...any) { g.log(slog.LevelInfo, format, v) }
func (g natsLogger) Warnf(format string, v ...any)   { g.log(slog.LevelWarn, format, v) }
func (g natsLogger) Fatalf(format string, v ...any)  { g.log(slog.LevelError, format, v) }
func (g natsLogger) Errorf(format string, v ...any)  { g.log(slog.LevelError, format, v) }
func (g natsLogger) Debugf(format string, v ...any)  { g.log(slog.LevelDebug, format, v) }
func (g natsLogger) Tracef(format string, v ...any)  { g.log(slog.LevelDebug, format, v) }

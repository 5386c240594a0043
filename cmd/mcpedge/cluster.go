package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/mcpedge/mcpedge/admin"
	"github.com/mcpedge/mcpedge/cluster"
	"github.com/mcpedge/mcpedge/internal/redact"
	"github.com/nats-io/nats.go"
)

// clusterFlags configure membership of a cluster (docs/cluster.md).
type clusterFlags struct {
	node           string
	embed          string
	routes         string
	url            string
	name           string
	creds          string
	tlsCA          string
	tlsCert        string
	tlsKey         string
	forwardTimeout time.Duration
	secretFile     string
	heartbeat      time.Duration
	recordBytes    int64
	eventBytes     int64
	link           string
}

func registerClusterFlags(fs *flag.FlagSet, c *clusterFlags) {
	fs.StringVar(&c.node, "node", "", "this node's `name` in a cluster: letters, digits, '-', '_' (default: the host name and the HTTP, else TCP, port)")
	fs.StringVar(&c.embed, "cluster-embed", "", "run an embedded NATS server whose cluster (route) port listens on `addr`, joining the nodes of -cluster-routes")
	fs.StringVar(&c.routes, "cluster-routes", "", "comma-separated route `urls` of the other nodes' -cluster-embed (nats-route://host:port)")
	fs.StringVar(&c.url, "cluster", "", "join the cluster through an existing NATS deployment at `url` (nats://host:4222, comma-separated for several), instead of -cluster-embed")
	fs.StringVar(&c.name, "cluster-name", "mcpedge", "the cluster's `name`: NATS cluster name of the embedded servers, and the prefix of every subject the nodes use")
	fs.StringVar(&c.creds, "cluster-creds", "", "NATS credentials `file` for -cluster")
	fs.StringVar(&c.tlsCA, "cluster-tls-ca", "", "CA certificate `file` that -cluster's NATS servers are verified with")
	fs.StringVar(&c.tlsCert, "cluster-tls-cert", "", "client certificate `file` for -cluster (with -cluster-tls-key)")
	fs.StringVar(&c.tlsKey, "cluster-tls-key", "", "client key `file` for -cluster")
	fs.StringVar(&c.secretFile, "cluster-secret-file", "", "`file` holding the secret the embedded servers' routes authenticate with, the same on every node (empty: any server that reaches -cluster-embed may join)")
	fs.DurationVar(&c.forwardTimeout, "cluster-forward-timeout", 5*time.Second, "how long a request forwarded to another node (a session's home, a stream's or a task's node) waits for that node to start answering (504 after)")
	fs.DurationVar(&c.heartbeat, "cluster-heartbeat", time.Second, "how often a node tells the others it is alive; a node silent for three is lost, and the sessions it was the home of are taken over")
	fs.Var(newSize(&c.recordBytes, 64<<20), "cluster-record-bytes", "session `bytes` of records a node keeps, so that it serves any node's sessions without asking; the least recently used go first and are asked for again (units: KiB, MiB, GiB, KB, MB, GB)")
	fs.StringVar(&c.link, "cluster-link", "", "listen on `addr` (host:port, the host the other nodes reach this one at) for the direct links other nodes forward requests on, authenticated with -state-key-file, rather than through NATS; empty: requests forwarded to this node come through NATS")
	fs.Var(newSize(&c.eventBytes, 64<<20), "cluster-event-bytes", "`bytes` of other nodes' SSE events a node keeps, so that a client resumes a stream whose node is gone; each session's within -event-store-bytes, the sessions written least recently go first (units: KiB, MiB, GiB, KB, MB, GB)")
}

// on reports whether the flags ask for a cluster.
func (c *clusterFlags) on() bool { return c.embed != "" || c.url != "" }

// validateCluster checks the cluster flags against the rest.
func validateCluster(c *config) error {
	cf := &c.cluster
	if !cf.on() {
		if cf.routes != "" {
			return errors.New("-cluster-routes needs -cluster-embed")
		}
		if cf.link != "" {
			return errors.New("-cluster-link needs -cluster-embed or -cluster")
		}
		return nil
	}
	switch {
	case cf.embed != "" && cf.url != "":
		return errors.New("-cluster-embed and -cluster are exclusive: embed a NATS server or join one")
	case cf.routes != "" && cf.embed == "":
		return errors.New("-cluster-routes needs -cluster-embed")
	case cf.secretFile != "" && cf.embed == "":
		return errors.New("-cluster-secret-file is for -cluster-embed")
	case (cf.creds != "" || cf.tlsCA != "" || cf.tlsCert != "") && cf.url == "":
		return errors.New("-cluster-creds and -cluster-tls-* are for -cluster")
	case (cf.tlsCert == "") != (cf.tlsKey == ""):
		return errors.New("-cluster-tls-cert and -cluster-tls-key go together")
	case c.stdio:
		return errors.New("a cluster serves the network transports: -stdio cannot join one")
	case c.stateless:
		return errors.New("-stateless has no sessions to share: run stateless nodes without a cluster, behind any load balancer")
	case cf.node != "" && !cluster.ValidName(cf.node):
		return fmt.Errorf("-node %q: %w", cf.node, cluster.ErrBadName)
	case c.stateKeyFile == "":
		return errors.New("a cluster needs -state-key-file: every node signs and verifies 2026-07-28 requestState with the same keys, so that a retry may land on any node")
	case !cluster.ValidName(cf.name):
		return fmt.Errorf("-cluster-name %q: letters, digits, '-' and '_' only", cf.name)
	case cf.forwardTimeout <= 0:
		return errors.New("-cluster-forward-timeout: must be positive")
	}
	if cf.embed != "" {
		if _, _, err := net.SplitHostPort(cf.embed); err != nil {
			return fmt.Errorf("-cluster-embed %q: %w", cf.embed, err)
		}
	}
	if cf.link != "" {
		// The address is advertised as given: the other nodes dial it.
		host, _, err := net.SplitHostPort(cf.link)
		if err != nil {
			return fmt.Errorf("-cluster-link %q: %w", cf.link, err)
		}
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			return fmt.Errorf("-cluster-link %q: give the address the other nodes reach this one at, not a wildcard", cf.link)
		}
	}
	return nil
}

// nodeName is -node, or the host name and the port this node serves on.
func nodeName(c *config) string {
	if c.cluster.node != "" {
		return c.cluster.node
	}
	host, _ := os.Hostname()
	addr := c.http
	if addr == "" {
		addr = c.tcp
	}
	_, p, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(p)
	return cluster.DefaultName(host, port)
}

// startCluster starts this node's membership, nil when no cluster is
// configured. keys are the requestState keys: they sign the cluster's
// own messages too; tracer, when not nil, traces the requests it
// forwards.
func startCluster(c *config, keys [][]byte, log *slog.Logger, tracer cluster.Tracer) (*cluster.Node, error) {
	cf := &c.cluster
	if !cf.on() {
		return nil, nil
	}
	var nopts []nats.Option
	if cf.creds != "" {
		nopts = append(nopts, nats.UserCredentials(cf.creds))
	}
	if cf.tlsCA != "" {
		nopts = append(nopts, nats.RootCAs(cf.tlsCA))
	}
	if cf.tlsCert != "" {
		nopts = append(nopts, nats.ClientCert(cf.tlsCert, cf.tlsKey))
	}
	var secret string
	if cf.secretFile != "" {
		b, err := os.ReadFile(cf.secretFile)
		if err != nil {
			return nil, fmt.Errorf("-cluster-secret-file: %w", err)
		}
		if secret = strings.TrimSpace(string(b)); len(secret) < 16 {
			return nil, errors.New("-cluster-secret-file: the secret must be at least 16 characters")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := cluster.Start(ctx, cluster.Options{
		Node:           nodeName(c),
		Embed:          cf.embed,
		Routes:         splitList(cf.routes),
		RouteSecret:    secret,
		Name:           cf.name,
		Prefix:         cf.name,
		URL:            cf.url,
		NATSOptions:    nopts,
		ForwardTimeout: cf.forwardTimeout,
		StreamIdle:     streamIdle(c.sseKeep, cf.forwardTimeout),
		MaxPayload:     c.maxMessage + 64<<10,
		Keys:           keys,
		Heartbeat:      cf.heartbeat,
		RecordBytes:    int(cf.recordBytes),
		EventBytes:     int(cf.eventBytes),
		// A session's events kept elsewhere within what its home keeps.
		EventSessionBytes: c.eventStore,
		Link:              cf.link,
		Logger:            log,
		Tracer:            tracer,
	})
	if err != nil {
		return nil, err
	}
	log.Info("joined the cluster", "node", n.Name(), "embed", cf.embed, "link", cf.link, "routes", redact.URLs(cf.routes), "nats", redact.URLs(cf.url))
	return n, nil
}

// streamIdle is how long a relayed stream may stay silent: three
// keep-alive intervals and the forward timeout; without keep-alives, the
// cluster's default.
func streamIdle(keepAlive, forward time.Duration) time.Duration {
	if keepAlive <= 0 {
		return 0
	}
	return 3*keepAlive + forward
}

// clusterMetrics publishes the node's counters and its routes on the
// admin listener's /metrics, each family with its help and type, and the
// node, its peers and routes on the status page.
func clusterMetrics(m *admin.Metrics, n *cluster.Node, configured int) {
	counters := []struct {
		family, labels, help string
		get                  func(cluster.Stats) uint64
	}{
		{"mcpedge_cluster_forwarded_total", `result="sent"`, "Requests this node sent to the node owning their session or task, by result.", func(s cluster.Stats) uint64 { return s.Forwarded }},
		{"mcpedge_cluster_forwarded_total", `result="timeout"`, "", func(s cluster.Stats) uint64 { return s.ForwardTimeouts }},
		{"mcpedge_cluster_forwarded_total", `result="no_owner"`, "", func(s cluster.Stats) uint64 { return s.ForwardNoOwner }},
		{"mcpedge_cluster_forwarded_total", `result="refused"`, "", func(s cluster.Stats) uint64 { return s.ForwardRefused }},
		{"mcpedge_cluster_served_total", `result="served"`, "Requests other nodes forwarded to this one, by result.", func(s cluster.Stats) uint64 { return s.Served }},
		{"mcpedge_cluster_served_total", `result="refused"`, "", func(s cluster.Stats) uint64 { return s.ServedRefused }},
		{"mcpedge_cluster_cancelled_total", "", "Forwarded streams whose client went away.", func(s cluster.Stats) uint64 { return s.Cancelled }},
		{"mcpedge_cluster_bus_messages_total", `dir="out"`, "Notifications exchanged with the other nodes, by direction.", func(s cluster.Stats) uint64 { return s.BusOut }},
		{"mcpedge_cluster_bus_messages_total", `dir="in"`, "", func(s cluster.Stats) uint64 { return s.BusIn }},
		{"mcpedge_cluster_bus_dropped_total", "", "Notifications not published (NATS down) or lost (slow consumer).", func(s cluster.Stats) uint64 { return s.BusDropped }},
		{"mcpedge_cluster_bad_messages_total", "", "Messages from NATS that did not parse, dropped.", func(s cluster.Stats) uint64 { return s.BadMessages }},
		{"mcpedge_cluster_streams_cut_total", "", "Relayed streams ended for a lost frame or a silent owner.", func(s cluster.Stats) uint64 { return s.StreamsCut }},
		{"mcpedge_cluster_disconnects_total", "", "Losses of the NATS connection.", func(s cluster.Stats) uint64 { return s.Disconnects }},
		{"mcpedge_cluster_forwarded_link_total", "", "Of the requests forwarded, those sent on a direct link (-cluster-link) rather than through NATS.", func(s cluster.Stats) uint64 { return s.ForwardedLink }},
		{"mcpedge_cluster_forwarded_direct_total", "", "Of the requests forwarded on a direct link, those sent as their message alone, which the owner's engine answers at once.", func(s cluster.Stats) uint64 { return s.ForwardedDirect }},
		{"mcpedge_cluster_served_direct_total", `result="served"`, "Messages other nodes sent here alone on a direct link, by result: served, or not (their whole request follows).", func(s cluster.Stats) uint64 { return s.ServedDirect }},
		{"mcpedge_cluster_served_direct_total", `result="whole"`, "", func(s cluster.Stats) uint64 { return s.NotDirect }},
		{"mcpedge_cluster_links_refused_total", "", "Connections to -cluster-link that failed their handshake.", func(s cluster.Stats) uint64 { return s.LinksRefused }},
		{"mcpedge_cluster_peers_lost_total", "", "Nodes found gone: silent for three heartbeats, left, or restarted.", func(s cluster.Stats) uint64 { return s.PeersLost }},
		{"mcpedge_cluster_taken_over_total", "", "Sessions of lost nodes this node became the home of.", func(s cluster.Stats) uint64 { return s.TakenOver }},
	}
	for _, c := range counters {
		if c.help != "" {
			m.Describe(c.family, c.help)
		}
	}
	// Counters, written by hand: the Set's counters are incremented, these
	// are read from the node when scraped.
	m.Set().RegisterMetricsWriter(func(w io.Writer) {
		st := n.Stats()
		prev := ""
		for _, c := range counters {
			if c.family != prev {
				metrics.WriteMetadataIfNeeded(w, c.family, "counter")
				prev = c.family
			}
			series := c.family
			if c.labels != "" {
				series += "{" + c.labels + "}"
			}
			fmt.Fprintf(w, "%s %d\n", series, c.get(st))
		}
	})
	m.Describe("mcpedge_cluster_routes", "Peers this node's embedded NATS server has a route to now (nodes, not connections).")
	m.Describe("mcpedge_cluster_ready", "1 while the node is part of its cluster (connected to NATS, routed to a peer), else 0.")
	m.Set().NewGauge("mcpedge_cluster_routes", func() float64 { return float64(n.Routes()) })
	m.Set().NewGauge("mcpedge_cluster_ready", func() float64 {
		if n.Ready() != nil {
			return 0
		}
		return 1
	})
	m.SetCluster(func() *admin.ClusterStatus {
		cs := &admin.ClusterStatus{Node: n.Name(), Ready: true, Configured: configured, Peers: []admin.Peer{}}
		if err := n.Ready(); err != nil {
			cs.Ready, cs.Reason = false, err.Error()
		}
		for _, p := range n.Peers() {
			cs.Peers = append(cs.Peers, admin.Peer{Name: p.Name, Addr: p.Addr, Connections: p.Conns})
		}
		cs.Routes = len(cs.Peers)
		return cs
	})
}

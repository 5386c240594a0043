package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/mcpedge/mcpedge"
	"github.com/mcpedge/mcpedge/admin"
	"github.com/mcpedge/mcpedge/cluster"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/gateway"
	"github.com/mcpedge/mcpedge/session"
)

// The gateway's flags: -upstream (repeatable; MCPEDGE_UPSTREAM holds one
// per line; the config key upstream is an array of the same specs, or
// [upstream.NAME] tables) and the budgets every upstream shares.

// gatewayFlags are the gateway's flags.
type gatewayFlags struct {
	upstreams    upstreamFlag
	maxMessage   int
	maxPending   int
	notifyRate   float64
	startTimeout time.Duration
	translate    translateFlags // era translation's budgets (translate.go)
}

func registerGatewayFlags(fs *flag.FlagSet, g *gatewayFlags) {
	fs.Var(&g.upstreams, "upstream", "serve an upstream MCP server through this one: `NAME=stdio:COMMAND ARGS...`, NAME=http://HOST:PORT/PATH (Streamable HTTP, else legacy SSE) or NAME=tcp://HOST:PORT; repeatable (MCPEDGE_UPSTREAM: one per line; config: upstream = [...] or [upstream.NAME] tables, see docs/gateway.md); with any, the built-in handlers are off unless -handlers is given")
	fs.Var(newSize(&g.maxMessage, codec.DefaultMaxMessage), "upstream-max-message", "largest message taken from an upstream, in `bytes` (units: KiB, MiB, GiB, KB, MB, GB); a larger one closes that upstream connection (its calls fail) and it reconnects")
	fs.IntVar(&g.maxPending, "upstream-max-pending", 256, "server-to-client requests (sampling, elicitation, roots) relayed at once per upstream connection; more are refused to the upstream")
	fs.Float64Var(&g.notifyRate, "upstream-notify-rate", 1000, "notifications per second taken from one upstream connection (bursts of as many); the rest are dropped and counted")
	fs.DurationVar(&g.startTimeout, "upstream-start-timeout", 30*time.Second, "how long start-up waits for the upstreams' first lists (an upstream not up by then is served once it is)")
	registerTranslateFlags(fs, &g.translate)
}

// upstreamFlag is -upstream: the specs given, or the config file's
// upstream key (an array of specs, or a table of [upstream.NAME] tables).
type upstreamFlag struct {
	specs    []string
	tables   map[string]any
	fromFile bool
}

func (f *upstreamFlag) String() string {
	if f == nil {
		return ""
	}
	s := strings.Join(f.specs, "\n")
	if len(f.tables) > 0 {
		b, _ := json.Marshal(f.tables) // sorted keys: a stable form for reload's comparison
		s += "\n" + string(b)
	}
	return s
}

// Set adds specs, one per line (the environment twin holds several).
// Values from the config file are replaced, not added to.
func (f *upstreamFlag) Set(v string) error {
	if f.fromFile {
		*f = upstreamFlag{}
	}
	for _, line := range strings.Split(v, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			f.specs = append(f.specs, line)
		}
	}
	return nil
}

// SetTOML implements tomlValue: upstream = ["NAME=...", ...], or
// [upstream.NAME] tables.
func (f *upstreamFlag) SetTOML(v any) error {
	*f = upstreamFlag{fromFile: true}
	switch v := v.(type) {
	case []any:
		for _, item := range v {
			s, ok := item.(string)
			if !ok {
				return fmt.Errorf("an array of NAME=... specs, got a %T", item)
			}
			f.specs = append(f.specs, s)
		}
		return nil
	case map[string]any:
		f.tables = v
		return nil
	case string:
		return f.Set(v)
	}
	return fmt.Errorf("an array of NAME=... specs or [upstream.NAME] tables, got a %T", v)
}

// Upstreams returns the configured upstreams, checked. Every error names
// the flag or the config key.
func (f *upstreamFlag) Upstreams() ([]gateway.Upstream, error) {
	var ups []gateway.Upstream
	for _, s := range f.specs {
		u, err := gateway.ParseSpec(s)
		if err != nil {
			return nil, fmt.Errorf("-upstream: %w", err)
		}
		ups = append(ups, u)
	}
	names := make([]string, 0, len(f.tables))
	for name := range f.tables {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t, ok := f.tables[name].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("key %q: a table ([upstream.%s]), got a %T", "upstream."+name, name, f.tables[name])
		}
		u, err := upstreamTable(name, t)
		if err != nil {
			return nil, err
		}
		ups = append(ups, u)
	}
	if err := gateway.ValidateAll(ups); err != nil {
		return nil, fmt.Errorf("upstream: %w", err)
	}
	return ups, nil
}

// tableReader reads the members of one table, naming each key in its
// errors and refusing the unknown ones.
type tableReader struct {
	prefix string
	t      map[string]any
	used   map[string]bool
	err    error
}

func (r *tableReader) fail(key, format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("key %q: "+format, append([]any{r.prefix + key}, args...)...)
	}
}

func (r *tableReader) get(key string) (any, bool) {
	v, ok := r.t[key]
	if ok {
		r.used[key] = true
	}
	return v, ok
}

func (r *tableReader) str(key string) string {
	v, ok := r.get(key)
	if !ok {
		return ""
	}
	s, isStr := v.(string)
	if !isStr {
		r.fail(key, "a string, got a %T", v)
	}
	return s
}

func (r *tableReader) strs(key string) []string {
	v, ok := r.get(key)
	if !ok {
		return nil
	}
	arr, isArr := v.([]any)
	if !isArr {
		r.fail(key, "an array of strings, got a %T", v)
		return nil
	}
	out := make([]string, 0, len(arr))
	for _, item := range arr {
		s, isStr := item.(string)
		if !isStr {
			r.fail(key, "an array of strings, got a %T in it", item)
			return nil
		}
		out = append(out, s)
	}
	return out
}

func (r *tableReader) strMap(key string) map[string]string {
	v, ok := r.get(key)
	if !ok {
		return nil
	}
	m, isMap := v.(map[string]any)
	if !isMap {
		r.fail(key, "a table of strings, got a %T", v)
		return nil
	}
	out := make(map[string]string, len(m))
	for k, item := range m {
		s, isStr := item.(string)
		if !isStr {
			r.fail(key+"."+k, "a string, got a %T", item)
			return nil
		}
		out[k] = s
	}
	return out
}

func (r *tableReader) integer(key string) int {
	v, ok := r.get(key)
	if !ok {
		return 0
	}
	n, isInt := v.(int64)
	if !isInt || n < 0 || n > 1<<30 {
		r.fail(key, "a non-negative integer, got %v", v)
	}
	return int(n)
}

func (r *tableReader) number(key string) float64 {
	v, ok := r.get(key)
	if !ok {
		return 0
	}
	f, err := nonNegative(v)
	if err != nil {
		r.fail(key, "%v", err)
	}
	return f
}

func (r *tableReader) boolean(key string) bool {
	v, ok := r.get(key)
	if !ok {
		return false
	}
	b, isBool := v.(bool)
	if !isBool {
		r.fail(key, "true or false, got %v", v)
	}
	return b
}

func (r *tableReader) duration(key string) time.Duration {
	s := r.str(key)
	if s == "" {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		r.fail(key, "a positive duration (30s, 2m), got %q", s)
	}
	return d
}

func (r *tableReader) sub(key string) *tableReader {
	v, ok := r.get(key)
	if !ok {
		return &tableReader{prefix: r.prefix + key + ".", t: map[string]any{}, used: map[string]bool{}}
	}
	m, isMap := v.(map[string]any)
	if !isMap {
		r.fail(key, "a table, got a %T", v)
		m = map[string]any{}
	}
	return &tableReader{prefix: r.prefix + key + ".", t: m, used: map[string]bool{}}
}

// done reports the first error, or an unknown key.
func (r *tableReader) done() error {
	if r.err != nil {
		return r.err
	}
	var unknown []string
	for k := range r.t {
		if !r.used[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return fmt.Errorf("unknown key %q", r.prefix+unknown[0])
	}
	return nil
}

// upstreamTable reads an [upstream.NAME] table.
func upstreamTable(name string, t map[string]any) (gateway.Upstream, error) {
	r := &tableReader{prefix: "upstream." + name + ".", t: t, used: map[string]bool{}}
	u := gateway.Upstream{Name: name}
	u.Command, u.Args, u.Dir, u.URL = r.str("command"), r.strs("args"), r.str("cwd"), r.str("url")
	switch {
	case u.Command != "" && u.URL != "":
		r.fail("url", "give command or url, not both")
	case u.Command != "":
		u.Transport = gateway.Stdio
	case strings.HasPrefix(u.URL, "http://"), strings.HasPrefix(u.URL, "https://"):
		u.Transport = gateway.HTTP
	case strings.HasPrefix(u.URL, "tcp://"):
		u.Transport = gateway.TCP
	case u.URL != "":
		r.fail("url", "want http://, https:// or tcp://, got %q", u.URL)
	default:
		r.fail("command", "give command (stdio) or url (http, tcp)")
	}
	if v, ok := r.t["env"]; ok {
		if _, isMap := v.(map[string]any); isMap {
			env := r.strMap("env")
			keys := make([]string, 0, len(env))
			for k := range env {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				u.Env = append(u.Env, k+"="+env[k])
			}
		} else {
			u.Env = r.strs("env")
		}
	}
	if _, ok := r.t["prefix"]; ok {
		p := r.str("prefix")
		u.Prefix = &p
	}
	tools := r.sub("tools")
	u.Allow, u.Deny, u.Rename = tools.strs("allow"), tools.strs("deny"), tools.strMap("rename")
	if err := tools.done(); err != nil && r.err == nil {
		r.err = err
	}
	if s := r.str("share"); s != "" {
		sh, err := gateway.ParseShare(s)
		if err != nil {
			r.fail("share", "%v", err)
		}
		u.Share = sh
	}
	u.Timeout = r.duration("timeout")
	u.MaxInflight = r.integer("max-inflight")
	u.Rate = r.number("rate")
	u.Burst = r.integer("burst")
	u.MaxSessions = r.integer("max-sessions")
	u.Lazy = r.boolean("lazy")
	u.Pipeline = r.integer("pipeline")
	u.Headers = r.strMap("headers")
	if f := r.str("headers-file"); f != "" {
		h, err := readHeaderFile(f)
		if err != nil {
			r.fail("headers-file", "%v", err)
		}
		u.Headers = mergeHeaders(u.Headers, h)
	}
	for hdr, env := range r.strMap("headers-env") {
		v, ok := os.LookupEnv(env)
		if !ok {
			r.fail("headers-env."+hdr, "environment variable %s is not set", env)
			continue
		}
		u.Headers = mergeHeaders(u.Headers, map[string]string{hdr: v})
	}
	if _, ok := r.t["oauth"]; ok {
		o := r.sub("oauth")
		oa := &gateway.OAuth{ClientID: o.str("client-id"), ClientSecret: o.str("client-secret"), Scopes: o.strs("scopes")}
		if f := o.str("client-secret-file"); f != "" {
			b, err := os.ReadFile(f)
			if err != nil {
				o.fail("client-secret-file", "%v", err)
			}
			oa.ClientSecret = strings.TrimSpace(string(b))
		}
		if env := o.str("client-secret-env"); env != "" {
			v, ok := os.LookupEnv(env)
			if !ok {
				o.fail("client-secret-env", "environment variable %s is not set", env)
			}
			oa.ClientSecret = v
		}
		if err := o.done(); err != nil && r.err == nil {
			r.err = err
		}
		u.OAuth = oa
	}
	if err := r.done(); err != nil {
		return u, err
	}
	return u, nil
}

// readHeaderFile reads "Name: value" lines (blank lines and # comments
// skipped).
func readHeaderFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("%s:%d: want Name: value", path, n)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out, sc.Err()
}

func mergeHeaders(a, b map[string]string) map[string]string {
	if a == nil {
		a = map[string]string{}
	}
	for k, v := range b {
		a[k] = v
	}
	return a
}

// handlersGiven reports whether -handlers was set (on the command line,
// in the environment or in the config file): with upstreams, the
// built-in handler set is off unless it was.
func handlersGiven(fs *flag.FlagSet) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "handlers" })
	_, env := os.LookupEnv(envName("handlers"))
	return given || env
}

// validateGateway checks the gateway's flags.
func validateGateway(c *config) error {
	g := &c.gateway
	if err := atLeast("upstream-max-pending", int64(g.maxPending), 1, strconv.Itoa(g.maxPending)); err != nil {
		return err
	}
	if g.notifyRate <= 0 {
		return atLeast("upstream-notify-rate", int64(math.Ceil(g.notifyRate)), 1, strconv.FormatFloat(g.notifyRate, 'g', -1, 64))
	}
	if err := atLeast("upstream-max-message", int64(g.maxMessage), 1, strconv.Itoa(g.maxMessage)); err != nil {
		return err
	}
	if err := atLeast("upstream-start-timeout", int64(g.startTimeout), 1, g.startTimeout.String()); err != nil {
		return err
	}
	if err := g.translate.validate(); err != nil {
		return err
	}
	_, err := g.upstreams.Upstreams()
	return err
}

// newGateway returns the gateway of c, nil without upstreams, wraps
// opts' bus so that resource subscriptions reach the upstreams, and has
// the clients' roots/list_changed relayed.
func newGateway(c *config, opts *mcpedge.Options, log *slog.Logger) (*gateway.Gateway, error) {
	ups, err := c.gateway.upstreams.Upstreams()
	if err != nil || len(ups) == 0 {
		return nil, err
	}
	gw, err := gateway.New(gatewayOptions(c, ups, log))
	if err != nil {
		return nil, err
	}
	bus := opts.Bus
	if bus == nil {
		bus = session.NewLocalBus()
	}
	opts.Bus = gw.Bus(bus)
	opts.OnRootsListChanged = gw.RootsListChanged
	return gw, nil
}

func gatewayOptions(c *config, ups []gateway.Upstream, log *slog.Logger) gateway.Options {
	return gateway.Options{
		Upstreams:    ups,
		MaxMessage:   c.gateway.maxMessage,
		MaxPending:   c.gateway.maxPending,
		NotifyRate:   c.gateway.notifyRate,
		StartTimeout: c.gateway.startTimeout,
		Logger:       log.With("component", "gateway"),
		// Each upstream's call latencies, for its histogram in /metrics.
		LatencyBuckets: admin.LatencyBuckets,
		// The upstreams' 2026-07-28 tasks are routed as long as the
		// engine keeps its own.
		TaskTTL: c.taskTTL,

		HoldTimeout:      c.gateway.translate.hold,
		MaxHeld:          c.gateway.translate.maxHeld,
		MaxHeldPerClient: c.gateway.translate.maxHeldPerClient,
		MaxRounds:        c.gateway.translate.maxRounds,
		MaxListenURIs:    c.gateway.translate.maxListenURIs,
	}
}

// gatewayReloadHook applies a changed upstream configuration: upstreams
// added, removed or changed, without disturbing the others.
func gatewayReloadHook(gw *gateway.Gateway) reloadHook {
	return reloadHook{name: "upstreams", keys: []string{"upstream"}, prepare: func(c *config) (func(), error) {
		ups, err := c.gateway.upstreams.Upstreams()
		if err != nil {
			return nil, err
		}
		if len(ups) == 0 {
			return nil, errors.New("upstream: removing every upstream needs a restart")
		}
		apply, err := gw.PrepareReload(ups)
		if err != nil {
			return nil, err
		}
		return func() { apply(context.Background()) }, nil
	}}
}

// gatewayCluster makes gw a node's of a cluster (docs/cluster.md, "The
// gateway in a cluster"): the requests of a session that a share =
// "session" upstream serves go to the session's home, the others are
// told of the upstreams' state here, and a call to a pooled upstream down
// here goes to a node where it is up.
func gatewayCluster(gw *gateway.Gateway, node *cluster.Node) {
	gw.SetCluster(node)
	node.SetPlacer(gw.Place)
	node.SetServices(gw.Health)
}

// gatewayAdmin adds the gateway to the admin listener: /upstreams (each
// upstream's state as JSON), the upstream metrics, the status page's
// upstreams, and readiness (not ready while no upstream is reachable).
func gatewayAdmin(adm *adminRun, gw *gateway.Gateway, node *cluster.Node) {
	if adm == nil {
		return
	}
	adm.srv.Handle("GET /upstreams", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		var peers map[string]map[string]bool
		if node != nil {
			peers = node.PeerServices()
		}
		_ = enc.Encode(struct {
			Upstreams []gateway.Status `json:"upstreams"`
			// Peers are what the other nodes of the cluster report of
			// their upstreams: node → upstream → up.
			Peers map[string]map[string]bool `json:"peers,omitempty"`
		}{gw.Status(), peers})
	}))
	check := gw.Ready
	if node != nil {
		check = func() error { return errors.Join(node.Ready(), gw.Ready()) }
	}
	adm.ready.SetCheck(check)
	for _, f := range upstreamFamilies {
		adm.metrics.Describe(f.name, f.help)
	}
	adm.metrics.Set().RegisterMetricsWriter(func(w io.Writer) { writeUpstreamMetrics(w, gw.Status()) })
	if node != nil {
		adm.metrics.Describe(peersUpFamily, "Other nodes of the cluster that report the upstream up (a call to it that finds it down here goes to one of them).")
		adm.metrics.Set().RegisterMetricsWriter(func(w io.Writer) { writePeersUp(w, gw.Status(), node.PeerServices()) })
	}
	adm.metrics.SetUpstreams(func() []admin.Upstream { return statusUpstreams(gw.Status()) })
}

// statusUpstreams is the status page's view of the upstreams.
func statusUpstreams(st []gateway.Status) []admin.Upstream {
	out := make([]admin.Upstream, 0, len(st))
	for _, s := range st {
		u := admin.Upstream{Name: s.Name, Healthy: s.Connections > 0, State: s.State, Tools: s.Tools}
		if !u.Healthy || s.State != "ready" {
			u.Detail = s.LastFailure
		}
		out = append(out, u)
	}
	return out
}

// upstreamFamilies are the gateway's metric families, in the order
// written, each with its type and help text. Their label values are the
// configured upstreams' names (and a bounded kind or class).
var upstreamFamilies = []struct {
	name, typ, help string
	value           func(s *gateway.Status) uint64 // nil: written by writeUpstreamMetrics itself
}{
	{"mcpedge_upstream_up", "gauge", "1 while at least one connection to the upstream is up, else 0.", func(s *gateway.Status) uint64 {
		if s.Connections > 0 {
			return 1
		}
		return 0
	}},
	{"mcpedge_upstream_connections", "gauge", "Connections to the upstream up now (MCP sessions; stdio children).", func(s *gateway.Status) uint64 { return uint64(s.Connections) }},
	{"mcpedge_upstream_children", "gauge", "Child processes of a stdio upstream running now.", func(s *gateway.Status) uint64 { return uint64(s.Children) }},
	{"mcpedge_upstream_inflight", "gauge", "Calls to the upstream in flight now.", func(s *gateway.Status) uint64 { return uint64(s.InFlight) }},
	{"mcpedge_upstream_calls_total", "counter", "Calls forwarded to the upstream.", func(s *gateway.Status) uint64 { return s.Calls }},
	{"mcpedge_upstream_errors_total", "counter", "Calls to the upstream that failed, by class: unavailable, timeout, invalid, limit, upstream (its own JSON-RPC error), cancelled.", nil},
	{"mcpedge_upstream_request_duration_seconds", "histogram", "Time from a call's arrival at the upstream's handler to the upstream's answer (or failure).", nil},
	{"mcpedge_upstream_restarts_total", "counter", "Upstream connections that failed or ended, each followed by a reconnection.", func(s *gateway.Status) uint64 { return s.Restarts }},
	{"mcpedge_upstream_children_started_total", "counter", "Child processes of a stdio upstream started, restarts included.", func(s *gateway.Status) uint64 { return s.ChildrenStarted }},
	{"mcpedge_upstream_bad_messages_total", "counter", "Messages of the upstream dropped, by kind: garbage (not JSON-RPC), unknown_id (an answer to no call), unrouted (no downstream request could take it), dropped (over -upstream-notify-rate).", nil},
}

// peersUpFamily is the metric of what the other nodes report of the
// upstreams: its labels are this node's upstreams' names only.
const peersUpFamily = "mcpedge_upstream_peers_up"

// writePeersUp writes, for each upstream of st, how many other nodes
// report it up (peers: node → upstream → up).
func writePeersUp(w io.Writer, st []gateway.Status, peers map[string]map[string]bool) {
	if len(st) == 0 {
		return
	}
	metrics.WriteMetadataIfNeeded(w, peersUpFamily, "gauge")
	var b []byte
	for i := range st {
		k := uint64(0)
		for _, ups := range peers {
			if ups[st[i].Name] {
				k++
			}
		}
		b = appendSample(b, peersUpFamily, `upstream=`+strconv.Quote(st[i].Name), k)
	}
	_, _ = w.Write(b)
}

// writeUpstreamMetrics writes each family of upstreamFamilies once, its
// metadata first, then its series for every upstream.
func writeUpstreamMetrics(w io.Writer, st []gateway.Status) {
	if len(st) == 0 {
		return
	}
	var b []byte
	for _, f := range upstreamFamilies {
		metrics.WriteMetadataIfNeeded(w, f.name, f.typ)
		b = b[:0]
		for i := range st {
			s := &st[i]
			l := `upstream=` + strconv.Quote(s.Name)
			switch f.name {
			case "mcpedge_upstream_errors_total":
				for _, class := range gateway.ErrorClasses {
					b = appendSample(b, f.name, l+`,class="`+class+`"`, s.ErrorsByClass[class])
				}
			case "mcpedge_upstream_bad_messages_total":
				for _, k := range []struct {
					kind string
					n    uint64
				}{{"garbage", s.Garbage}, {"unknown_id", s.UnknownIDs}, {"unrouted", s.Unrouted}, {"dropped", s.Dropped}} {
					b = appendSample(b, f.name, l+`,kind="`+k.kind+`"`, k.n)
				}
			case "mcpedge_upstream_request_duration_seconds":
				b = appendHistogram(b, f.name, l, s.Latency, s.LatencySum)
			default:
				b = appendSample(b, f.name, l, f.value(s))
			}
		}
		_, _ = w.Write(b)
	}
}

func appendSample(b []byte, name, labels string, v uint64) []byte {
	b = append(b, name...)
	b = append(b, '{')
	b = append(b, labels...)
	b = append(b, "} "...)
	b = strconv.AppendUint(b, v, 10)
	return append(b, '\n')
}

// appendHistogram appends a histogram's series: counts (per bucket of
// admin.LatencyBuckets, then +Inf, not cumulative) made cumulative.
func appendHistogram(b []byte, name, labels string, counts []uint64, sum float64) []byte {
	if len(counts) != len(admin.LatencyBuckets)+1 {
		return b
	}
	var cum uint64
	for i, n := range counts {
		cum += n
		le := "+Inf"
		if i < len(admin.LatencyBuckets) {
			le = strconv.FormatFloat(admin.LatencyBuckets[i], 'g', -1, 64)
		}
		b = appendSample(b, name+"_bucket", labels+`,le="`+le+`"`, cum)
	}
	b = append(b, name+"_sum{"+labels+"} "...)
	b = strconv.AppendFloat(b, sum, 'g', -1, 64)
	b = append(b, '\n')
	return appendSample(b, name+"_count", labels, cum)
}

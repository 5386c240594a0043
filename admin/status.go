package admin

import (
	"context"
	_ "embed"
	"encoding/json"
	"net"
	"net/http"
	"runtime"
	rmetrics "runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge"
	"github.com/mcpedge/mcpedge/engine"
)

// The status page: / serves status.html, a page with no external asset
// that polls /status.json (Status) and shows the figures live: rates and
// p99 are computed in the page from the difference of two polls.

//go:embed status.html
var statusPage []byte

// Listener is one listener of the server, as the status page shows it.
type Listener struct {
	Name string `json:"name"` // "tcp", "http", "admin"...
	Addr string `json:"addr"`
}

// Upstream is one server behind a gateway, as the status page shows it
// (SetUpstreams).
type Upstream struct {
	Name    string `json:"name"`
	Healthy bool   `json:"healthy"`
	State   string `json:"state,omitempty"`  // what the gateway calls its state: "connected", "restarting"...
	Detail  string `json:"detail,omitempty"` // the last error, when not healthy
	Tools   int    `json:"tools"`            // the tools it serves through this one
}

// ClusterStatus is the node's cluster, as the status page shows it
// (SetCluster).
type ClusterStatus struct {
	Node   string `json:"node"`
	Ready  bool   `json:"ready"`
	Reason string `json:"reason,omitempty"` // why not ready
	Routes int    `json:"routes"`           // peers routed to now
	Peers  []Peer `json:"peers"`
	// Configured is the number of peers named in the configuration
	// (-cluster-routes); 0 when the node joins an existing NATS.
	Configured int `json:"configured"`
}

// Peer is another node of the cluster, routed to now.
type Peer struct {
	Name        string `json:"name"`
	Addr        string `json:"addr"`
	Connections int    `json:"connections"` // route connections to it (NATS pools them)
}

// statusSources are what the status page reads beyond the counters.
type statusSources struct {
	srv       atomic.Pointer[mcpedge.Server]
	mu        sync.Mutex
	listeners func() []Listener
	upstreams func() []Upstream
	cluster   func() *ClusterStatus
}

func (s *statusSources) attach(srv *mcpedge.Server) { s.srv.Store(srv) }

// SetListeners sets what lists the server's listeners on the status page
// (nil: the TCP and HTTP listeners of the attached server).
func (m *Metrics) SetListeners(fn func() []Listener) {
	m.status.mu.Lock()
	m.status.listeners = fn
	m.status.mu.Unlock()
}

// SetUpstreams sets what lists a gateway's upstreams and their health on
// the status page; nil (the default) shows none. fn is called on each
// poll of /status.json: it must be quick.
func (m *Metrics) SetUpstreams(fn func() []Upstream) {
	m.status.mu.Lock()
	m.status.upstreams = fn
	m.status.mu.Unlock()
}

// SetCluster sets what describes the node's cluster on the status page;
// nil (the default) shows none. fn is called on each poll of
// /status.json: it must be quick.
func (m *Metrics) SetCluster(fn func() *ClusterStatus) {
	m.status.mu.Lock()
	m.status.cluster = fn
	m.status.mu.Unlock()
}

// Status is what /status.json answers: the figures of the status page.
// Counts are totals since start; the page derives rates and p99 from two
// of them.
type Status struct {
	Version   string     `json:"version"`
	Go        string     `json:"go"`
	Started   time.Time  `json:"started"`
	Uptime    float64    `json:"uptime_seconds"`
	Now       int64      `json:"now_ms"` // when these figures were read, Unix ms
	Ready     bool       `json:"ready"`
	Draining  bool       `json:"draining"`
	Listeners []Listener `json:"listeners"`

	Sessions      int              `json:"sessions"`
	InFlight      int64            `json:"in_flight"`
	WorkersBusy   int              `json:"workers_busy"`
	WorkersQueued int              `json:"workers_queued"`
	Connections   map[string]int64 `json:"connections"` // open, by transport
	Goroutines    int              `json:"goroutines"`
	HeapBytes     uint64           `json:"heap_bytes"`

	Buckets []float64     `json:"buckets"` // the latency histograms' upper bounds, seconds
	Methods []MethodStats `json:"methods"`
	Tools   []ToolStats   `json:"tools"`

	Upstreams []Upstream     `json:"upstreams,omitempty"`
	Cluster   *ClusterStatus `json:"cluster,omitempty"`
}

// MethodStats are one method's counts, all transports together.
type MethodStats struct {
	Method   string   `json:"method"`
	Requests uint64   `json:"requests"`
	Latency  []uint64 `json:"latency"` // timed requests per bucket of Buckets, then +Inf (not cumulative)
}

// ToolStats are one tool's counts.
type ToolStats struct {
	Tool     string            `json:"tool"`
	Upstream string            `json:"upstream"`
	Calls    uint64            `json:"calls"`
	Failed   uint64            `json:"failed"` // every outcome but ok
	Outcomes map[string]uint64 `json:"outcomes"`
	Latency  []uint64          `json:"latency"` // as MethodStats.Latency
}

// Status returns the figures of the status page. ready may be nil.
func (m *Metrics) Status(ctx context.Context, ready *Readiness) *Status {
	st := &Status{
		Version:     engine.Version,
		Go:          runtime.Version(),
		Started:     m.started,
		Uptime:      time.Since(m.started).Seconds(),
		Now:         time.Now().UnixMilli(),
		Buckets:     LatencyBuckets,
		Connections: map[string]int64{},
		Goroutines:  runtime.NumGoroutine(),
		Methods:     []MethodStats{},
		Tools:       []ToolStats{},
		Listeners:   []Listener{},
	}
	// runtime/metrics, not ReadMemStats: no stop of the world per poll.
	heap := []rmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	rmetrics.Read(heap)
	if heap[0].Value.Kind() == rmetrics.KindUint64 {
		st.HeapBytes = heap[0].Value.Uint64()
	}
	if ready != nil {
		st.Ready, st.Draining = ready.Ready(), ready.Draining()
	}
	for i, t := range transports[:2] {
		st.Connections[t] = m.open[i].Load()
	}
	for mi := range nMethods {
		var n uint64
		var lat [nBuckets + 1]uint64
		for t := range transports {
			n += m.requests[t][mi].sum()
			c, _, _ := m.latency[t][mi].snapshot()
			for i := range lat {
				lat[i] += c[i]
			}
		}
		if n > 0 {
			st.Methods = append(st.Methods, MethodStats{Method: engine.MethodLabel(mi), Requests: n, Latency: lat[:]})
		}
	}
	tt := m.tools.current()
	for _, ts := range tt.list {
		t := ToolStats{Tool: ts.name, Upstream: ts.upstream, Outcomes: map[string]uint64{}}
		for o := range outcomes {
			if n := ts.count(o); n > 0 {
				t.Outcomes[outcomes[o]] = n
				t.Calls += n
				if o != 0 {
					t.Failed += n
				}
			}
		}
		c, _, _ := ts.dur.snapshot()
		t.Latency = c[:]
		if t.Calls > 0 || ts != tt.other {
			st.Tools = append(st.Tools, t)
		}
	}
	srv := m.status.srv.Load()
	if srv != nil {
		eng := srv.Engine()
		st.Sessions = eng.Sessions().Len()
		st.InFlight = int64(eng.Active())
		st.WorkersBusy, st.WorkersQueued = eng.PoolStats()
	}
	m.status.mu.Lock()
	listeners, upstreams, cluster := m.status.listeners, m.status.upstreams, m.status.cluster
	m.status.mu.Unlock()
	switch {
	case listeners != nil:
		st.Listeners = append(st.Listeners, listeners()...)
	case srv != nil:
		// Listening already, or not at all: do not wait for either.
		lctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		if a := srv.TCPAddr(lctx); a != nil {
			st.Listeners = append(st.Listeners, Listener{Name: "tcp", Addr: a.String()})
		}
		if a := srv.HTTPAddr(lctx); a != nil {
			st.Listeners = append(st.Listeners, Listener{Name: "http", Addr: a.String()})
		}
		cancel()
	}
	if a, ok := ctx.Value(http.LocalAddrContextKey).(net.Addr); ok {
		st.Listeners = append(st.Listeners, Listener{Name: "admin", Addr: a.String()})
	}
	if upstreams != nil {
		st.Upstreams = upstreams()
	}
	if cluster != nil {
		st.Cluster = cluster()
	}
	return st
}

// serveStatus answers /status.json.
func serveStatus(m *Metrics, ready *Readiness) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(m.Status(r.Context(), ready))
	}
}

// servePage answers /: the status page.
func servePage(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	// Nothing but the page's own inline script and style, and its polls
	// of this listener.
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(statusPage)
}

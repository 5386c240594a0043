// Package admin is mcpedge's operations surface: Metrics, an
// engine.Observer that counts requests, errors, refusals, connections,
// bytes and bus traffic in a VictoriaMetrics Set of its own; Readiness,
// what /readyz answers; and Server, the admin listener that serves
// /metrics (Prometheus text format), /healthz, /readyz and /debug/pprof/.
//
// Nothing here is package-level state: each Metrics owns its Set, so two
// servers in one process count apart. The engine and the transports do not
// import this package: they call the engine.Observer and
// engine.ConnObserver interfaces, and pay one nil check when none is
// installed.
package admin

import (
	"bytes"
	"io"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/VictoriaMetrics/metrics"
	"github.com/mcpedge/mcpedge"
	"github.com/mcpedge/mcpedge/auth"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
)

// Transports, the values of the transport label.
var transports = [...]string{"tcp", "http", "stdio", "other"}

const nTransports = len(transports)

func transportIndex(t string) int {
	switch t {
	case "tcp":
		return 0
	case "http":
		return 1
	case "stdio":
		return 2
	}
	return 3
}

// nMethods is the number of values of the method label: the methods of
// the engine's method table (engine.MethodIndex, engine.MethodLabel), and
// "other" for any other, so that a client cannot grow the label set.
const nMethods = engine.NumMethods + 1

// codes are the JSON-RPC error codes counted by their own label value;
// others are "other".
var codes = [...]int{
	codec.CodeParseError, codec.CodeInvalidRequest, codec.CodeMethodNotFound, codec.CodeInvalidParams,
	codec.CodeInternalError, codec.CodeServerBusy, codec.CodeRequestTimeout, codec.CodeResourceNotFound,
	codec.CodeURLElicitationNeeded, codec.CodeRequestCancelled,
	mcp.CodeHeaderMismatch, mcp.CodeMissingClientCapability, mcp.CodeUnsupportedProtocolVersion,
}

const nCodes = len(codes) + 1 // and "other"

// limits are the values of the limit label of refusals.
var limits = [...]string{engine.LimitRate, engine.LimitRateIP, engine.LimitInflight, engine.LimitWorkers, engine.LimitShutdown, engine.LimitSubscriptions, engine.LimitTasks, engine.LimitTaskWorkers, "other"}

// nReasons bounds the distinct reason label values: one per
// codec.CloseReason. Every layer's close causes carry one, so that the
// label of a cause is read from it (codec.ReasonOf), whatever transport
// made it.
const nReasons = codec.NumCloseReasons

// Reason returns the label value of a close cause: its
// codec.CloseReason's label, "closed" for nil, "other" for a cause that
// carries no reason.
func Reason(err error) string { return codec.ReasonOf(err).String() }

func reasonIndex(err error) int { return int(codec.ReasonOf(err)) }

func reasonName(i int) string { return codec.CloseReason(i).String() }

// LatencyBuckets are the upper bounds, in seconds, of the request and tool
// latency histograms.
var LatencyBuckets = []float64{
	0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
	0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
}

// Metrics counts what a server does, in a metrics.Set of its own. It is
// an engine.Observer and an engine.ConnObserver: install it as
// engine.Options.Observer (mcpedge.Options.Observer) before the server is
// built, wrap the bus with Bus, then call Attach with the server for the
// figures read when scraped (sessions, in-flight requests, the worker
// pool, event stores). Its methods are safe for concurrent use; those on
// the request path are a few atomic additions, and a map lookup for the
// method.
//
// Series are created on first use, so a scrape lists only the methods,
// codes and reasons seen.
type Metrics struct {
	set *metrics.Set

	codeIndex map[int]int

	requests [nTransports][nMethods]shardedCounter // written by writeRequests
	latency  [nTransports][nMethods]histogram      // written by writeRequests
	errs     [nTransports][nCodes]lazyCounter
	refused  [nTransports][len(limits)]lazyCounter

	connOpened  [nTransports]lazyCounter
	open        [nTransports]atomic.Int64 // opened less closed
	connReason  [nTransports][nReasons]lazyCounter
	connRefused [nTransports][nReasons]lazyCounter
	sessClosed  [nTransports][nReasons]lazyCounter
	bytesIn     [nTransports]shardedCounter // per read and write: sharded as requests
	bytesOut    [nTransports]shardedCounter
	slow        [nTransports]lazyCounter

	busPublished *metrics.Counter
	busDelivered *metrics.Counter
	authFailures [len(authReasons)]*metrics.Counter

	tools toolSeries // tools.go

	help    helps
	started time.Time
	status  statusSources // status.go
}

// authReasons are the values of mcpedge_auth_failures_total's reason
// label (auth.Failure.Reason); any other is "other".
var authReasons = [...]string{auth.ReasonMissing, auth.ReasonInvalid, auth.ReasonInsufficientScope, "other"}

// shards spreads the hottest counter, requests by transport and method,
// over cache lines, so that event loops on different cores serving
// different sessions do not contend for one: a shared atomic counter
// bounced between cores cost more than the rest of the observer.
const shards = 16

type shardedCounter struct {
	s [shards]struct {
		n atomic.Uint64
		_ [56]byte // a cache line each
	}
}

// shardOf picks the shard of a session: each session keeps to one.
func shardOf(sess *session.Session) int {
	p := uintptr(unsafe.Pointer(sess))
	return int((p>>6 ^ p>>12) % shards)
}

// add adds n to the shard of a random pick, for counters with no
// session at hand.
func (c *shardedCounter) add(n int) { c.s[rand.Uint32()%shards].n.Add(uint64(n)) }

func (c *shardedCounter) sum() (n uint64) {
	for i := range c.s {
		n += c.s[i].n.Load()
	}
	return n
}

// writeRequests writes the series counted by hand: mcpedge_requests_total,
// mcpedge_request_duration_seconds and mcpedge_{received,sent}_bytes_total,
// each family with its metadata once, and only the series counted.
func (m *Metrics) writeRequests(w io.Writer) {
	head := false
	for t := range m.requests {
		for mi := range m.requests[t] {
			if n := m.requests[t][mi].sum(); n > 0 {
				if !head {
					m.writeFamily(w, "mcpedge_requests_total", "counter")
					head = true
				}
				writeSample(w, `mcpedge_requests_total{transport="`+transports[t]+`",method="`+engine.MethodLabel(mi)+`"}`, n)
			}
		}
	}
	var buf bytes.Buffer
	for t := range m.latency {
		for mi := range m.latency[t] {
			m.latency[t][mi].write(&buf, "mcpedge_request_duration_seconds", `transport="`+transports[t]+`",method="`+engine.MethodLabel(mi)+`"`)
		}
	}
	if buf.Len() > 0 {
		m.writeFamily(w, "mcpedge_request_duration_seconds", "histogram")
		_, _ = w.Write(buf.Bytes())
	}
	for _, f := range []struct {
		family string
		c      *[nTransports]shardedCounter
	}{{"mcpedge_received_bytes_total", &m.bytesIn}, {"mcpedge_sent_bytes_total", &m.bytesOut}} {
		head = false
		for t := range transports {
			if n := f.c[t].sum(); n > 0 {
				if !head {
					m.writeFamily(w, f.family, "counter")
					head = true
				}
				writeSample(w, f.family+`{transport="`+transports[t]+`"}`, n)
			}
		}
	}
}

// writeSample writes one sample line.
func writeSample(w io.Writer, series string, v uint64) {
	b := make([]byte, 0, len(series)+24)
	b = append(b, series...)
	b = append(b, ' ')
	b = strconv.AppendUint(b, v, 10)
	b = append(b, '\n')
	_, _ = w.Write(b)
}

// lazyCounter is a counter made on first use.
type lazyCounter struct {
	c atomic.Pointer[metrics.Counter]
}

func (l *lazyCounter) get(set *metrics.Set, name func() string) *metrics.Counter {
	if c := l.c.Load(); c != nil {
		return c
	}
	c := set.GetOrCreateCounter(name())
	l.c.Store(c)
	return c
}

// NewMetrics returns a Metrics with a Set of its own.
func NewMetrics() *Metrics {
	// HELP and TYPE lines on every family (process-wide: it only adds
	// metadata to what VictoriaMetrics writes).
	metrics.ExposeMetadata(true)
	m := &Metrics{
		set:       metrics.NewSet(),
		codeIndex: make(map[int]int, len(codes)),
		started:   time.Now(),
	}
	m.tools.init()
	for i, c := range codes {
		m.codeIndex[c] = i
	}
	for i, t := range transports[:2] { // tcp, http: stdio has no connections
		open := &m.open[i]
		m.set.NewGauge(`mcpedge_connections_open{transport="`+t+`"}`, func() float64 {
			return float64(open.Load())
		})
	}
	m.set.RegisterMetricsWriter(m.writeRequests)
	m.set.RegisterMetricsWriter(m.writeTools)
	m.busPublished = m.set.NewCounter("mcpedge_bus_published_total")
	m.busDelivered = m.set.NewCounter("mcpedge_bus_delivered_total")
	for i, r := range authReasons {
		m.authFailures[i] = m.set.NewCounter(`mcpedge_auth_failures_total{reason="` + r + `"}`)
	}
	return m
}

// Set returns the metrics.Set the Metrics count in, to add metrics of
// one's own to /metrics.
func (m *Metrics) Set() *metrics.Set { return m.set }

// RequestDone implements engine.Observer.
func (m *Metrics) RequestDone(sess *session.Session, method string, code int, d time.Duration) {
	t, mi := transportIndex(sess.Transport), engine.MethodIndex(method)
	m.requests[t][mi].s[shardOf(sess)].n.Add(1)
	if d >= 0 { // timed (one in 16 answers given at once: engine.Observer)
		m.latency[t][mi].observe(d)
	}
	if code != 0 {
		ci, ok := m.codeIndex[code]
		if !ok {
			ci = nCodes - 1
		}
		m.errs[t][ci].get(m.set, func() string {
			c := "other"
			if ci < len(codes) {
				c = strconv.Itoa(codes[ci])
			}
			return `mcpedge_request_errors_total{transport="` + transports[t] + `",code="` + c + `"}`
		}).Inc()
	}
}

// Refused implements engine.Observer.
func (m *Metrics) Refused(sess *session.Session, limit string) {
	t, li := transportIndex(sess.Transport), len(limits)-1
	for i, l := range limits[:len(limits)-1] {
		if l == limit {
			li = i
			break
		}
	}
	m.refused[t][li].get(m.set, func() string {
		return `mcpedge_requests_refused_total{transport="` + transports[t] + `",limit="` + limits[li] + `"}`
	}).Inc()
}

// counter returns the counter of name with the transport label and, when
// reason >= 0, the reason label, made on first use in c.
func (m *Metrics) counter(c *lazyCounter, name string, t, reason int) *metrics.Counter {
	return c.get(m.set, func() string {
		if reason < 0 {
			return name + `{transport="` + transports[t] + `"}`
		}
		return name + `{transport="` + transports[t] + `",reason="` + reasonName(reason) + `"}`
	})
}

// SessionClosed implements engine.Observer.
func (m *Metrics) SessionClosed(sess *session.Session, cause error) {
	t, r := transportIndex(sess.Transport), reasonIndex(cause)
	m.counter(&m.sessClosed[t][r], "mcpedge_sessions_closed_total", t, r).Inc()
}

// ConnOpened implements engine.ConnObserver.
func (m *Metrics) ConnOpened(transport string) {
	t := transportIndex(transport)
	m.open[t].Add(1)
	m.counter(&m.connOpened[t], "mcpedge_connections_accepted_total", t, -1).Inc()
}

// ConnClosed implements engine.ConnObserver.
func (m *Metrics) ConnClosed(transport string, reason error) {
	t, r := transportIndex(transport), reasonIndex(reason)
	m.open[t].Add(-1)
	m.counter(&m.connReason[t][r], "mcpedge_connections_closed_total", t, r).Inc()
	if codec.CloseReason(r) == codec.ReasonSlowConsumer {
		m.SlowConsumer(transport)
	}
}

// ConnRefused implements engine.ConnObserver.
func (m *Metrics) ConnRefused(transport string, reason error) {
	t, r := transportIndex(transport), reasonIndex(reason)
	m.counter(&m.connRefused[t][r], "mcpedge_connections_refused_total", t, r).Inc()
}

// Bytes implements engine.ConnObserver.
func (m *Metrics) Bytes(transport string, in, out int) {
	t := transportIndex(transport)
	if in > 0 {
		m.bytesIn[t].add(in)
	}
	if out > 0 {
		m.bytesOut[t].add(out)
	}
}

// SlowConsumer implements engine.ConnObserver.
func (m *Metrics) SlowConsumer(transport string) {
	t := transportIndex(transport)
	m.counter(&m.slow[t], "mcpedge_slow_consumers_total", t, -1).Inc()
}

// AuthFailed counts a request refused by authentication or authorization
// (mcpedge_auth_failures_total{reason}), reason being auth.Failure.Reason
// (missing, invalid, insufficient_scope; any other counts as other). The
// auth layer's failure hook (auth.Verifier.OnFailure) calls it once per
// refusal; a nil *Metrics does nothing, so a caller may hold one
// unconditionally.
func (m *Metrics) AuthFailed(reason string) {
	if m == nil {
		return
	}
	i := len(authReasons) - 1
	for j, r := range authReasons[:i] {
		if r == reason {
			i = j
			break
		}
	}
	m.authFailures[i].Inc()
}

// Bus returns inner counting its messages: published
// (mcpedge_bus_published_total) and delivered to a subscriber
// (mcpedge_bus_delivered_total). Give it as engine.Options.Bus.
func (m *Metrics) Bus(inner session.Bus) session.Bus { return &countingBus{inner: inner, m: m} }

type countingBus struct {
	inner session.Bus
	m     *Metrics
}

func (b *countingBus) Publish(topic string, payload []byte) {
	b.m.busPublished.Inc()
	b.inner.Publish(topic, payload)
}

func (b *countingBus) Subscribe(topic string, fn func(topic string, payload []byte)) func() {
	return b.inner.Subscribe(topic, func(topic string, payload []byte) {
		b.m.busDelivered.Inc()
		fn(topic, payload)
	})
}

// Attach adds the figures of srv read when scraped: live sessions,
// requests in flight, the worker pool's busy workers and queue, the
// event stores' bytes (HTTP), and panics recovered.
func (m *Metrics) Attach(srv *mcpedge.Server) {
	eng := srv.Engine()
	m.set.NewGauge("mcpedge_sessions_live", func() float64 { return float64(eng.Sessions().Len()) })
	m.set.NewGauge("mcpedge_requests_in_flight", func() float64 { return float64(eng.Active()) })
	m.set.NewGauge("mcpedge_workers_busy", func() float64 { r, _ := eng.PoolStats(); return float64(r) })
	m.set.NewGauge("mcpedge_workers_queued", func() float64 { _, w := eng.PoolStats(); return float64(w) })
	m.set.NewGauge("mcpedge_event_store_bytes", func() float64 { return float64(srv.EventStoreBytes()) })
	m.set.NewGauge("mcpedge_buffered_bytes", func() float64 { return float64(srv.BufferedBytes()) })
	m.set.NewGauge("mcpedge_outbound_bytes", func() float64 { return float64(srv.OutboundBytes()) })
	m.set.RegisterMetricsWriter(func(w io.Writer) {
		m.writeFamily(w, "mcpedge_panics_total", "counter")
		writeSample(w, "mcpedge_panics_total", eng.Panics())
	})
	m.TrackTools(srv.Registry())
	m.status.attach(srv)
}

// WritePrometheus writes every metric of m, then the Go runtime's and the
// process's, in Prometheus text format, each family with its # HELP and
// # TYPE lines.
func (m *Metrics) WritePrometheus(w io.Writer) {
	var b bytes.Buffer
	m.set.WritePrometheus(&b)
	m.addHelp(w, b.Bytes())
	writeRuntime(w)
}

// Package tracing traces mcpedge's requests with OpenTelemetry: a span per
// request, following the semantic conventions for MCP, exported over
// OTLP/HTTP. It implements engine.Tracer (the engine itself knows nothing
// of OpenTelemetry) and cluster.Tracer (a span per request a node forwards
// to another; the cluster does not import it, nor it the cluster).
//
// A request's span is named "{mcp.method.name} {target}" ("tools/call
// echo"; the method alone when it names no registered tool or prompt), of
// kind server, and parented on the W3C trace context the request carries:
// its params._meta's traceparent and tracestate (the MCP convention, any
// revision), else its transport's (Streamable HTTP's traceparent header).
// It covers the request from its arrival to its answer, with the
// attributes mcp.method.name, mcp.session.id, mcp.protocol.version,
// jsonrpc.request.id, gen_ai.tool.name and gen_ai.operation.name
// (tools/call), gen_ai.prompt.name (prompts/get), network.transport and
// network.protocol.name, and, when it fails, error.type and
// rpc.response.status_code (the JSON-RPC code; "tool_error" for a tool
// result with isError) with an error status.
//
// Sampling is decided once per request, before anything is allocated for
// it: a request whose trace context is valid follows its sampled flag; one
// without is traced at Options.Sample's ratio. A request not traced costs
// the decision and nothing else: no span, no context.
//
// A handler finds its request's span in its context, and starts spans of
// its own as children, through the OpenTelemetry API:
//
//	span := trace.SpanFromContext(ctx) // the request's span
//	ctx, child := otel.Tracer("my-tools").Start(ctx, "query the index")
//	defer child.End()
//
// once the Tracer's Provider is the global one (otel.SetTracerProvider;
// cmd/mcpedge sets it). Spans a handler starts in a request not traced are
// sampled as roots, at the same ratio.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// Defaults of Options.
const (
	DefaultSample    = 0.01
	DefaultQueueSize = 4096
	// DefaultPath is the path of an endpoint given without one, as
	// OTEL_EXPORTER_OTLP_ENDPOINT has it appended.
	DefaultPath = "/v1/traces"
)

// Options configure a Tracer.
type Options struct {
	// Endpoint is the OTLP/HTTP URL spans are exported to
	// ("http://collector:4318"; without a path, /v1/traces is appended).
	// Empty: the OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
	// OTEL_EXPORTER_OTLP_ENDPOINT environment variable's. The exporter's
	// other standard variables (OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT,
	// _COMPRESSION, _CERTIFICATE, and their _TRACES_ twins) apply either
	// way.
	Endpoint string
	// Sample is the ratio of requests traced among those whose client sent
	// no trace context, 0 to 1. Requests that carry one follow its
	// sampled flag.
	Sample float64
	// Service and Version name the service (service.name, unless
	// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES say otherwise, and
	// service.version); Instance is service.instance.id (a cluster node's
	// name), when not empty.
	Service, Version, Instance string
	// QueueSize bounds the spans waiting to be exported; past it spans are
	// dropped and counted (Stats), never waited for. 0 means
	// DefaultQueueSize.
	QueueSize int
	// Exporter, when set, replaces the OTLP/HTTP exporter (tests).
	Exporter sdktrace.SpanExporter
	// Logger receives the exporter's errors, at most one a minute; nil
	// discards them.
	Logger *slog.Logger
}

// Errors of New.
var (
	ErrNoEndpoint = errors.New("tracing: no endpoint: give one, or set OTEL_EXPORTER_OTLP_ENDPOINT")
	ErrSample     = errors.New("tracing: the sample ratio must be between 0 and 1")
	ErrEndpoint   = errors.New("tracing: the endpoint must be an http or https URL")
)

// EnvEndpoint reports whether the environment names an OTLP endpoint for
// traces (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
// OTEL_EXPORTER_OTLP_ENDPOINT): tracing is on without -otel-endpoint then.
func EnvEndpoint() bool {
	return os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

// A Tracer traces requests (engine.Tracer) and forwards (cluster.Tracer).
// Its methods are safe for concurrent use.
type Tracer struct {
	tp    *sdktrace.TracerProvider
	tr    trace.Tracer
	bound uint64 // a root request is traced when a random uint64 is below it
	all   bool   // Sample is 1
	q     *bounded
}

// New returns a Tracer exporting to o.Endpoint; Shutdown flushes and stops
// it.
func New(ctx context.Context, o Options) (*Tracer, error) {
	if o.Sample < 0 || o.Sample > 1 || math.IsNaN(o.Sample) {
		return nil, ErrSample
	}
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	exp := o.Exporter
	if exp == nil {
		var opts []otlptracehttp.Option
		switch {
		case o.Endpoint != "":
			u, err := url.Parse(o.Endpoint)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return nil, fmt.Errorf("%w: %q", ErrEndpoint, o.Endpoint)
			}
			if u.Path == "" || u.Path == "/" {
				u.Path = DefaultPath
			}
			opts = append(opts, otlptracehttp.WithEndpointURL(u.String()))
		case !EnvEndpoint():
			return nil, ErrNoEndpoint
		}
		var err error
		if exp, err = otlptracehttp.New(ctx, opts...); err != nil {
			return nil, fmt.Errorf("tracing: %w", err)
		}
	}
	if o.Service == "" {
		o.Service = "mcpedge"
	}
	attrs := []resource.Option{resource.WithTelemetrySDK(), resource.WithAttributes(semconv.ServiceName(o.Service))}
	if o.Version != "" {
		attrs = append(attrs, resource.WithAttributes(semconv.ServiceVersion(o.Version)))
	}
	if o.Instance != "" {
		attrs = append(attrs, resource.WithAttributes(semconv.ServiceInstanceID(o.Instance)))
	}
	res, err := resource.New(ctx, append(attrs, resource.WithFromEnv())...)
	if err != nil && res == nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	t := &Tracer{all: o.Sample >= 1}
	if !t.all {
		t.bound = uint64(o.Sample * (1 << 64))
	}
	t.q = newBounded(exp, o.QueueSize, o.Logger)
	t.tp = sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sampler{root: sdktrace.ParentBased(sdktrace.TraceIDRatioBased(o.Sample))}),
		sdktrace.WithSpanProcessor(t.q),
	)
	t.tr = t.tp.Tracer("github.com/mcpedge/mcpedge", trace.WithInstrumentationVersion(o.Version),
		trace.WithSchemaURL(semconv.SchemaURL))
	return t, nil
}

// Provider is the Tracer's TracerProvider: set it as the global one
// (otel.SetTracerProvider) for handlers' spans to be exported with the
// requests'.
func (t *Tracer) Provider() trace.TracerProvider { return t.tp }

// Shutdown exports the spans ended and stops the Tracer, within ctx.
func (t *Tracer) Shutdown(ctx context.Context) error {
	return t.tp.Shutdown(ctx)
}

// Stats are counts of spans since New.
type Stats struct {
	// Exported spans were accepted by the endpoint; Failed were handed to
	// it and lost (an error, a timeout); Dropped found the queue full
	// (Options.QueueSize) and were never sent.
	Exported, Failed, Dropped uint64
}

// Stats returns the counts of spans since New.
func (t *Tracer) Stats() Stats {
	return Stats{Exported: t.q.exported.Load(), Failed: t.q.failed.Load(), Dropped: t.q.dropped.Load()}
}

// Sample implements engine.Tracer and cluster.Tracer: a valid traceparent
// decides by its sampled flag, and a request without one is traced at the
// ratio. It allocates nothing.
func (t *Tracer) Sample(traceparent string) bool {
	if sc, ok := parseParent(traceparent); ok {
		return sc.sampled
	}
	return t.all || rand.Uint64() < t.bound
}

// decidedKey marks the context of a span the Tracer decided to sample
// (Sample): the SDK's sampler samples it as it is, rather than decide
// again.
type decidedKey struct{}

// sampler is the provider's sampler: spans the Tracer started after
// Sample chose them are sampled; any other (a handler's) as root, its
// parent-based sampler says.
type sampler struct{ root sdktrace.Sampler }

func (s sampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	if p.ParentContext.Value(decidedKey{}) != nil {
		return sdktrace.SamplingResult{
			Decision:   sdktrace.RecordAndSample,
			Tracestate: trace.SpanContextFromContext(p.ParentContext).TraceState(),
		}
	}
	return s.root.ShouldSample(p)
}

func (s sampler) Description() string { return "mcpedge{" + s.root.Description() + "}" }

// startContext returns the context a sampled span starts from: the remote
// parent traceparent and tracestate name, if valid, marked as decided.
func startContext(traceparent, tracestate string) context.Context {
	ctx := context.WithValue(context.Background(), decidedKey{}, true)
	if p, ok := parseParent(traceparent); ok {
		cfg := trace.SpanContextConfig{TraceID: p.trace, SpanID: p.span, Remote: true}
		if p.sampled {
			cfg.TraceFlags = trace.FlagsSampled
		}
		if tracestate != "" {
			if ts, err := trace.ParseTraceState(tracestate); err == nil {
				cfg.TraceState = ts
			}
		}
		ctx = trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(cfg))
	}
	return ctx
}

// parent is a parsed W3C traceparent.
type parent struct {
	trace   trace.TraceID
	span    trace.SpanID
	sampled bool
}

// parseParent parses a W3C traceparent (version-traceid-parentid-flags),
// without allocating. Version ff, an all-zero id, a version 00 of another
// length or with reserved flags set (above 0x03, as OpenTelemetry's
// propagator) and anything malformed are invalid; a later version's fields
// past the flags are ignored, as the recommendation says.
func parseParent(s string) (p parent, ok bool) {
	if len(s) < 55 || s[2] != '-' || s[35] != '-' || s[52] != '-' || (len(s) > 55 && s[55] != '-') {
		return p, false
	}
	ver, ok1 := hexByte(s[0], s[1])
	flags, ok2 := hexByte(s[53], s[54])
	if !ok1 || !ok2 || ver == 0xff || (ver == 0 && (len(s) != 55 || flags > 3)) {
		return p, false
	}
	for i := range p.trace {
		b, ok := hexByte(s[3+2*i], s[4+2*i])
		if !ok {
			return p, false
		}
		p.trace[i] = b
	}
	for i := range p.span {
		b, ok := hexByte(s[36+2*i], s[37+2*i])
		if !ok {
			return p, false
		}
		p.span[i] = b
	}
	if !p.trace.IsValid() || !p.span.IsValid() {
		return p, false
	}
	p.sampled = flags&1 == 1
	return p, true
}

// hexByte decodes two lowercase hex digits (W3C: uppercase is invalid).
func hexByte(a, b byte) (byte, bool) {
	x, ok1 := hexDigit(a)
	y, ok2 := hexDigit(b)
	return x<<4 | y, ok1 && ok2
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// appendParent appends sc as a W3C traceparent (version 00).
func appendParent(dst []byte, sc trace.SpanContext) []byte {
	const digits = "0123456789abcdef"
	dst = append(dst, "00-"...)
	tid, sid := sc.TraceID(), sc.SpanID()
	for _, b := range tid {
		dst = append(dst, digits[b>>4], digits[b&15])
	}
	dst = append(dst, '-')
	for _, b := range sid {
		dst = append(dst, digits[b>>4], digits[b&15])
	}
	if sc.IsSampled() {
		return append(dst, "-01"...)
	}
	return append(dst, "-00"...)
}

// bounded is the span processor: the SDK's batch processor behind a
// bound of its own, so that the spans waiting for export (queued,
// batched, being sent) are at most max: past it a span is dropped and
// counted, at once. The batch processor's queue holds max, so it never
// drops one itself, nor blocks.
type bounded struct {
	sdktrace.SpanProcessor
	pending                   atomic.Int64
	max                       int64
	exported, failed, dropped atomic.Uint64
}

func newBounded(exp sdktrace.SpanExporter, max int, log *slog.Logger) *bounded {
	q := &bounded{max: int64(max)}
	q.SpanProcessor = sdktrace.NewBatchSpanProcessor(&counting{SpanExporter: exp, q: q, log: log},
		sdktrace.WithMaxQueueSize(max), sdktrace.WithMaxExportBatchSize(min(512, max)))
	return q
}

// OnEnd hands s to the batch processor, or drops it when max spans wait.
func (q *bounded) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	if q.pending.Add(1) > q.max {
		q.pending.Add(-1)
		q.dropped.Add(1)
		return
	}
	q.SpanProcessor.OnEnd(s)
}

// counting is the exporter behind bounded: it counts what it sends, and
// logs failures at most once a minute.
type counting struct {
	sdktrace.SpanExporter
	q      *bounded
	log    *slog.Logger
	logged atomic.Int64 // the last failure logged, unix nanoseconds
}

func (c *counting) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := c.SpanExporter.ExportSpans(ctx, spans)
	c.q.pending.Add(-int64(len(spans)))
	if err != nil {
		c.q.failed.Add(uint64(len(spans)))
		now := time.Now().UnixNano()
		if last := c.logged.Load(); c.log != nil && now-last > int64(time.Minute) && c.logged.CompareAndSwap(last, now) {
			c.log.Warn("tracing: spans not exported", "spans", len(spans), "err", err)
		}
		return err
	}
	c.q.exported.Add(uint64(len(spans)))
	return nil
}

// jsonID returns the text of a raw JSON-RPC id: a string's characters
// (without escapes; with them, the raw JSON), a number's digits.
func jsonID(id []byte) string {
	if len(id) >= 2 && id[0] == '"' && id[len(id)-1] == '"' && !strings.ContainsRune(string(id[1:len(id)-1]), '\\') {
		return string(id[1 : len(id)-1])
	}
	return string(id)
}

package tracing

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func TestParseParent(t *testing.T) {
	const tid, sid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	for _, tc := range []struct {
		name, in    string
		ok, sampled bool
	}{
		{"sampled", "00-" + tid + "-" + sid + "-01", true, true},
		{"not sampled", "00-" + tid + "-" + sid + "-00", true, false},
		{"random flag", "00-" + tid + "-" + sid + "-03", true, true},
		{"reserved flags, version 00", "00-" + tid + "-" + sid + "-09", false, false}, // as OpenTelemetry's propagator
		{"other flags, later version", "01-" + tid + "-" + sid + "-09", true, true},
		{"later version, more fields", "01-" + tid + "-" + sid + "-01-what-comes", true, true},
		{"version 00 with more", "00-" + tid + "-" + sid + "-01-x", false, false},
		{"version ff", "ff-" + tid + "-" + sid + "-01", false, false},
		{"uppercase", "00-" + "4BF92F3577B34DA6A3CE929D0E0E4736" + "-" + sid + "-01", false, false},
		{"zero trace", "00-" + "00000000000000000000000000000000" + "-" + sid + "-01", false, false},
		{"zero span", "00-" + tid + "-0000000000000000-01", false, false},
		{"short", "00-" + tid + "-" + sid + "-0", false, false},
		{"bad separator", "00_" + tid + "-" + sid + "-01", false, false},
		{"not hex", "00-" + tid[:31] + "g-" + sid + "-01", false, false},
		{"empty", "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, ok := parseParent(tc.in)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.sampled, p.sampled)
			if ok {
				assert.Equal(t, tid, p.trace.String())
				assert.Equal(t, sid, p.span.String())
			}
		})
	}
	assert.Zero(t, testing.AllocsPerRun(100, func() { _, _ = parseParent("00-" + tid + "-" + sid + "-01") }))
}

func newTest(t *testing.T, sample float64, queue int, exp sdktrace.SpanExporter) *Tracer {
	tr, err := New(context.Background(), Options{Sample: sample, QueueSize: queue, Exporter: exp})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	return tr
}

func TestSample(t *testing.T) {
	for _, ratio := range []float64{0, 0.01, 0.5, 1} {
		tr := newTest(t, ratio, 0, tracetest.NewInMemoryExporter())
		n := 0
		for range 100000 {
			if tr.Sample("") {
				n++
			}
		}
		assert.InDelta(t, ratio, float64(n)/100000, 0.005, "ratio %v", ratio)
		// The client's decision wins over the ratio.
		assert.True(t, tr.Sample("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
		assert.False(t, tr.Sample("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"))
		assert.Zero(t, testing.AllocsPerRun(100, func() { tr.Sample("") }))
	}
}

func TestNewErrors(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	for _, tc := range []struct {
		o    Options
		want error
	}{
		{Options{Sample: 2, Endpoint: "http://127.0.0.1:4318"}, ErrSample},
		{Options{Sample: -0.1, Endpoint: "http://127.0.0.1:4318"}, ErrSample},
		{Options{Sample: 0.5}, ErrNoEndpoint},
		{Options{Sample: 0.5, Endpoint: "127.0.0.1:4318"}, ErrEndpoint},
		{Options{Sample: 0.5, Endpoint: "ftp://h/x"}, ErrEndpoint},
	} {
		_, err := New(context.Background(), tc.o)
		assert.ErrorIs(t, err, tc.want, "%+v", tc.o)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	assert.True(t, EnvEndpoint())
	tr, err := New(context.Background(), Options{Sample: 0.5})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = tr.Shutdown(ctx)
}

// TestSpanEnd: the attributes and status a request's span ends with.
func TestSpanEnd(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tr := newTest(t, 1, 0, exp)
	for _, tc := range []struct {
		st        engine.SpanStart
		code      int
		toolError bool
		name      string
		want      map[string]string
		status    codes.Code
	}{
		{engine.SpanStart{Method: "tools/call", Tool: "echo", ID: []byte(`"r-1"`), Session: "a.1", Transport: "tcp", Version: "2025-11-25"}, 0, false, "tools/call echo",
			map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "echo", "jsonrpc.request.id": "r-1", "mcp.session.id": "a.1", "network.transport": "tcp", "mcp.protocol.version": "2025-11-25"}, codes.Unset},
		{engine.SpanStart{Method: "tools/call", Tool: "echo", ID: []byte(`3`), Transport: "http"}, 0, true, "tools/call echo",
			map[string]string{"error.type": "tool_error", "jsonrpc.request.id": "3", "network.protocol.name": "http"}, codes.Error},
		{engine.SpanStart{Method: "tools/call", ID: []byte(`4`), Transport: "stdio"}, codec.CodeInvalidParams, false, "tools/call",
			map[string]string{"error.type": "-32602", "rpc.response.status_code": "-32602", "network.transport": "pipe"}, codes.Error},
		{engine.SpanStart{Method: "prompts/get", Prompt: "greet", ID: []byte(`5`)}, 0, false, "prompts/get greet",
			map[string]string{"gen_ai.prompt.name": "greet"}, codes.Unset},
	} {
		exp.Reset()
		tc.st.Time = time.Now()
		tr.Start(&tc.st).End(tc.code, tc.toolError)
		require.NoError(t, tr.tp.ForceFlush(context.Background()))
		spans := exp.GetSpans()
		require.Len(t, spans, 1)
		s := spans[0]
		assert.Equal(t, tc.name, s.Name)
		got := map[string]string{}
		for _, kv := range s.Attributes {
			got[string(kv.Key)] = kv.Value.String()
		}
		for k, v := range tc.want {
			assert.Equal(t, v, got[k], "%s: %s", tc.name, k)
		}
		assert.Equal(t, tc.status, s.Status.Code)
	}
}

// blockingExporter holds its first export until released.
type blockingExporter struct {
	release chan struct{}
	fail    error
	tracetest.InMemoryExporter
}

func (b *blockingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	<-b.release
	if b.fail != nil {
		return b.fail
	}
	return b.InMemoryExporter.ExportSpans(ctx, spans)
}

// TestQueueBound: spans past the queue's bound are dropped and counted,
// at once, never waited for; failed exports are counted.
func TestQueueBound(t *testing.T) {
	exp := &blockingExporter{release: make(chan struct{})}
	tr := newTest(t, 1, 8, exp)
	// The exporter holds its first batch: ending spans never waits for
	// it (this loop would not end).
	for range 100 {
		tr.Start(&engine.SpanStart{Method: "ping", Time: time.Now()}).End(0, false)
	}
	st := tr.Stats()
	assert.Equal(t, uint64(92), st.Dropped)
	close(exp.release)
	require.NoError(t, tr.Shutdown(context.Background()))
	assert.Equal(t, Stats{Exported: 8, Dropped: 92}, tr.Stats())

	fail := &blockingExporter{release: make(chan struct{}), fail: errors.New("refused")}
	close(fail.release)
	tr = newTest(t, 1, 8, fail)
	tr.Start(&engine.SpanStart{Method: "ping", Time: time.Now()}).End(0, false)
	_ = tr.Shutdown(context.Background())
	assert.Equal(t, Stats{Failed: 1}, tr.Stats())
}

// discard is an exporter that drops every span.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkSample is the decision every request pays with tracing on.
func BenchmarkSample(b *testing.B) {
	tr, err := New(context.Background(), Options{Sample: 0.01, Exporter: discard{}})
	require.NoError(b, err)
	defer tr.Shutdown(context.Background())
	for _, tc := range []struct{ name, tp string }{{"no parent", ""}, {"parent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tr.Sample(tc.tp)
			}
		})
	}
}

// BenchmarkSpan is what a sampled request pays: its span started, its
// attributes set, ended and queued for export.
func BenchmarkSpan(b *testing.B) {
	tr, err := New(context.Background(), Options{Sample: 1, Exporter: discard{}})
	require.NoError(b, err)
	defer tr.Shutdown(context.Background())
	st := engine.SpanStart{Method: "tools/call", Tool: "echo", ID: []byte("12"), Session: "a.4f9c", Transport: "tcp", Version: "2025-11-25",
		TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	b.ReportAllocs()
	for b.Loop() {
		st.Time = time.Now()
		tr.Start(&st).End(0, false)
	}
}

// FuzzParseParent: a traceparent from a client never panics the parser,
// and what it accepts is what OpenTelemetry's own propagator accepts,
// with the same ids and flag.
func FuzzParseParent(f *testing.F) {
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	f.Add("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-x")
	f.Add("ff-00000000000000000000000000000000-0000000000000000-00")
	f.Fuzz(func(t *testing.T, s string) {
		p, ok := parseParent(s)
		sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": s}))
		if ok != sc.IsValid() {
			t.Fatalf("%q: parsed %v, the propagator %v", s, ok, sc.IsValid())
		}
		if ok && (p.trace != sc.TraceID() || p.span != sc.SpanID() || p.sampled != sc.IsSampled()) {
			t.Fatalf("%q: %+v, the propagator %v", s, p, sc)
		}
		if ok {
			if got := string(appendParent(nil, sc)); s[:2] == "00" && got != s[:53]+got[53:] {
				t.Fatalf("%q re-encoded %q", s, got)
			}
		}
	})
}

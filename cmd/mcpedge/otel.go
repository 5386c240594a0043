package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/mcpedge/mcpedge/admin"
	"github.com/mcpedge/mcpedge/cluster"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/tracing"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

// otelFlags are the tracing flags: -otel-endpoint, -otel-sample.
type otelFlags struct {
	endpoint string
	sample   float64
}

func registerOtelFlags(fs *flag.FlagSet, o *otelFlags) {
	fs.StringVar(&o.endpoint, "otel-endpoint", "", "export OpenTelemetry traces over OTLP/HTTP to this `URL` (http://collector:4318; /v1/traces is appended to a URL without a path): a span per request, parented on the trace context of its _meta or its traceparent header (empty: the standard OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT, else off; the other OTEL_EXPORTER_OTLP_* variables apply either way)")
	fs.Float64Var(&o.sample, "otel-sample", tracing.DefaultSample, "the `ratio` of requests traced among those that carry no trace context, 0 to 1 (0: only requests whose trace context is sampled); requests that carry one follow its sampled flag")
}

// startTracing starts the tracer -otel-endpoint (or the environment)
// asks for, and makes it the global OpenTelemetry provider, for
// handlers' spans; nil when tracing is off.
func startTracing(c *config, node string, log *slog.Logger) (*tracing.Tracer, error) {
	o := &c.otel
	if o.endpoint == "" && !tracing.EnvEndpoint() {
		return nil, nil
	}
	t, err := tracing.New(context.Background(), tracing.Options{
		Endpoint: o.endpoint,
		Sample:   o.sample,
		Version:  engine.Version,
		Instance: node,
		Logger:   log,
	})
	switch {
	case errors.Is(err, tracing.ErrSample):
		return nil, fmt.Errorf("-otel-sample: %w", err)
	case err != nil:
		return nil, fmt.Errorf("-otel-endpoint: %w", err)
	}
	otel.SetTracerProvider(t.Provider())
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	log.Info("tracing requests", "endpoint", o.endpoint, "sample", o.sample)
	return t, nil
}

// stopTracing exports the spans left, within at most a few seconds.
func stopTracing(t *tracing.Tracer, drain time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), min(5*time.Second, max(drain, time.Second)))
	defer cancel()
	if err := t.Shutdown(ctx); err != nil {
		log.Warn("tracing: spans left unexported at shutdown", "err", err)
	}
	if st := t.Stats(); st.Dropped > 0 || st.Failed > 0 {
		log.Info("tracing: spans lost", "dropped", st.Dropped, "failed", st.Failed, "exported", st.Exported)
	}
}

// tracingMetrics adds mcpedge_otel_spans_total{result} to m.
func tracingMetrics(m *admin.Metrics, t *tracing.Tracer) {
	const family = "mcpedge_otel_spans_total"
	m.Describe(family, "Spans of traced requests, by result: exported, failed (the endpoint refused them or did not answer), dropped (the export queue was full).")
	m.Set().RegisterMetricsWriter(func(w io.Writer) {
		st := t.Stats()
		metrics.WriteMetadataIfNeeded(w, family, "counter")
		fmt.Fprintf(w, "%s{result=\"exported\"} %d\n", family, st.Exported)
		fmt.Fprintf(w, "%s{result=\"failed\"} %d\n", family, st.Failed)
		fmt.Fprintf(w, "%s{result=\"dropped\"} %d\n", family, st.Dropped)
	})
}

var _ cluster.Tracer = (*tracing.Tracer)(nil)

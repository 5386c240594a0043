package tracing

import (
	"context"
	"strconv"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

var _ engine.Tracer = (*Tracer)(nil)

// Attributes of mcpedge's own.
const (
	// ClusterOwnerKey names the node a forwarded request was sent to.
	ClusterOwnerKey = attribute.Key("mcpedge.cluster.owner")
)

// Start implements engine.Tracer: the server span of a request Sample
// chose.
func (t *Tracer) Start(st *engine.SpanStart) engine.Span {
	name, target := st.Method, st.Tool
	if target == "" {
		target = st.Prompt
	}
	if target != "" {
		name += " " + target
	}
	attrs := make([]attribute.KeyValue, 0, 10)
	attrs = append(attrs, semconv.McpMethodNameKey.String(st.Method))
	if len(st.ID) > 0 && string(st.ID) != "null" {
		attrs = append(attrs, semconv.JSONRPCRequestID(jsonID(st.ID)))
	}
	if st.Session != "" {
		attrs = append(attrs, semconv.McpSessionID(st.Session))
	}
	if st.Version != "" {
		attrs = append(attrs, semconv.McpProtocolVersion(st.Version))
	}
	if st.Tool != "" {
		attrs = append(attrs, semconv.GenAIToolName(st.Tool), semconv.GenAIOperationNameExecuteTool)
	}
	if st.Prompt != "" {
		attrs = append(attrs, semconv.GenAIPromptName(st.Prompt))
	}
	switch st.Transport {
	case "stdio":
		attrs = append(attrs, semconv.NetworkTransportPipe)
	case "http":
		attrs = append(attrs, semconv.NetworkTransportTCP, semconv.NetworkProtocolName("http"))
	case "tcp":
		attrs = append(attrs, semconv.NetworkTransportTCP)
	}
	ctx, sp := t.tr.Start(startContext(st.TraceParent, st.TraceState), name,
		trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(st.Time), trace.WithAttributes(attrs...))
	_ = ctx // it carries the decided mark: handlers get a context without it
	sc := sp.SpanContext()
	return &span{sp: sp, ctx: trace.ContextWithSpan(context.Background(), sp),
		tp: string(appendParent(make([]byte, 0, 55), sc)), ts: sc.TraceState().String()}
}

// span is a request's span (engine.Span).
type span struct {
	sp     trace.Span
	ctx    context.Context // the span alone, for handlers' contexts
	tp, ts string          // its W3C trace context
}

// Value implements engine.Span: the request's context answers
// trace.SpanFromContext with the span.
func (s *span) Value(key any) any { return s.ctx.Value(key) }

// TraceContext implements engine.Span.
func (s *span) TraceContext() (traceparent, tracestate string) { return s.tp, s.ts }

// End implements engine.Span.
func (s *span) End(code int, toolError bool) {
	switch {
	case toolError:
		s.sp.SetAttributes(semconv.ErrorTypeKey.String("tool_error"))
		s.sp.SetStatus(codes.Error, "tool_error")
	case code != 0:
		c := strconv.Itoa(code)
		s.sp.SetAttributes(semconv.ErrorTypeKey.String(c), semconv.RPCResponseStatusCode(c))
		s.sp.SetStatus(codes.Error, codeText(code))
	}
	s.sp.End()
}

// codeText describes a JSON-RPC error code: the span status's text.
func codeText(code int) string {
	switch code {
	case codec.CodeParseError:
		return "parse error"
	case codec.CodeInvalidRequest:
		return "invalid request"
	case codec.CodeMethodNotFound:
		return "method not found"
	case codec.CodeInvalidParams:
		return "invalid params"
	case codec.CodeInternalError:
		return "internal error"
	case codec.CodeServerBusy:
		return "refused by a limit"
	case codec.CodeRequestCancelled:
		return "cancelled"
	}
	return "error " + strconv.Itoa(code)
}

// StartForward implements cluster.Tracer: the client span of a request
// this node forwards to node owner, named "cluster forward", a child of
// the client's trace context (traceparent, tracestate). It returns the
// span's traceparent, which the forwarded request carries, and the
// function ending it with the HTTP status relayed (0: no node answered
// for the owner).
func (t *Tracer) StartForward(traceparent, tracestate, owner, session string) (string, func(status int)) {
	attrs := []attribute.KeyValue{ClusterOwnerKey.String(owner)}
	if session != "" {
		attrs = append(attrs, semconv.McpSessionID(session))
	}
	_, sp := t.tr.Start(startContext(traceparent, tracestate), "cluster forward",
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return string(appendParent(make([]byte, 0, 55), sp.SpanContext())), func(status int) { endForward(sp, status) }
}

// endForward ends the span of a forward, whose answer had status.
func endForward(sp trace.Span, status int) {
	switch {
	case status == 0:
		sp.SetAttributes(semconv.ErrorTypeKey.String("no_owner"))
		sp.SetStatus(codes.Error, "no node answers for the owner")
	case status >= 400:
		c := strconv.Itoa(status)
		sp.SetAttributes(semconv.ErrorTypeKey.String(c), semconv.HTTPResponseStatusCode(status))
		sp.SetStatus(codes.Error, "HTTP "+c)
	default:
		sp.SetAttributes(semconv.HTTPResponseStatusCode(status))
	}
	sp.End()
}

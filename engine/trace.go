package engine

import (
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/internal/bytesconv"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
)

// A Tracer traces requests: a span per request, from its arrival to its
// answer (package tracing implements it with OpenTelemetry). Set it as
// Options.Tracer; nil costs one nil check per request. The engine knows
// nothing of OpenTelemetry: it hands the Tracer what it knows of the
// request and keeps the Span it gets back.
type Tracer interface {
	// Sample decides whether a request is traced, once per request and
	// before anything is allocated for it. traceparent is the W3C trace
	// context the request carries ("" when none): its params._meta's,
	// else its transport's (an HTTP request's traceparent header); a
	// valid one decides by its sampled flag, and a request without one is
	// traced at the Tracer's ratio. It runs on event loops: it must be
	// cheap, must not block and must not allocate.
	Sample(traceparent string) bool
	// Start starts the span of a request Sample chose. st and its strings
	// are the engine's: Start copies what it keeps.
	Start(st *SpanStart) Span
}

// SpanStart is what the engine knows of a request when its span starts.
// Its strings alias the request: valid only during Tracer.Start.
type SpanStart struct {
	// Time is when the request arrived.
	Time time.Time
	// TraceParent and TraceState are the W3C trace context the request
	// carries (its _meta's, else its transport's), the span's parent when
	// valid.
	TraceParent, TraceState string
	// Method is the request's method, one of the method table's
	// (MethodLabel's "other" for any other).
	Method string
	// Tool is the name of a tools/call's tool, Prompt of a prompts/get's
	// prompt, "" when the call names none the registry serves now (the
	// span is named by the method alone then: names stay bounded).
	Tool, Prompt string
	// ID is the request's id, raw JSON (a string keeps its quotes).
	ID []byte
	// Session is the session's id, "" for a stateless request.
	Session string
	// Version is the protocol revision the request is served in.
	Version string
	// Transport names the transport: "tcp", "http" or "stdio".
	Transport string
}

// A Span is the span of one request, which the engine ends when the
// request is answered. A handler's context carries it: Value answers the
// keys of the tracing library the Tracer uses, so that the handler finds
// the span there (trace.SpanFromContext in OpenTelemetry's API) and
// starts its own spans as children.
type Span interface {
	// Value returns the span's context value for key, nil for none.
	Value(key any) any
	// TraceContext returns the span's W3C trace context, to propagate to
	// whatever the request calls (a gateway's upstream).
	TraceContext() (traceparent, tracestate string)
	// End ends the span: code is the answer's JSON-RPC error code (0: a
	// result), toolError reports a tools/call answered with isError.
	End(code int, toolError bool)
}

// A TraceCarrier is a reply sink that carries the W3C trace context of
// the transport's request (Streamable HTTP: the POST's traceparent and
// tracestate headers), the parent of a request whose _meta carries none.
// The engine asks only when it has a Tracer. The slices are the sink's:
// valid while the request is served.
type TraceCarrier interface {
	TraceHeaders() (traceparent, tracestate []byte)
}

// Tracing reports whether the server traces requests (Options.Tracer):
// transports copy the trace context of their requests only then.
func (s *Server) Tracing() bool { return s.tracer != nil }

// traceKeys are the members of _meta the trace of a request reads: its
// trace context, and the revision of a stateless request.
var traceKeys = []string{mcp.MetaTraceParent, mcp.MetaTraceState, mcp.MetaProtocolVersion}

// traced is what the trace of a request reads of it before its span
// starts. Its slices alias the request.
type traced struct {
	parent, state []byte // its W3C trace context
	version       []byte // _meta's protocol version (2026-07-28), nil: none
}

// read fills t from request m: its params' _meta (found already when meta
// is not nil), else, for the trace context, reply's (a TraceCarrier).
func (t *traced) read(m *codec.Message, meta []byte, reply session.Sink) {
	*t = traced{}
	if meta == nil && len(m.Params) > 0 {
		meta, _, _ = codec.ObjectField(m.Params, "_meta")
	}
	if len(meta) > 1 && meta[0] == '{' {
		var v [3][]byte
		if codec.ObjectFields(meta, traceKeys, v[:]) == nil {
			for i, dst := range [...]*[]byte{&t.parent, &t.state, &t.version} {
				if v[i] != nil {
					*dst, _ = codec.StringValue(v[i])
				}
			}
		}
	}
	if len(t.parent) == 0 {
		if c, ok := reply.(TraceCarrier); ok {
			t.parent, t.state = c.TraceHeaders()
		}
	}
}

// startSpan starts the span of request m of sess, arrived at at, which
// Sample chose: name is the tool or prompt name its params carry, "" when
// none.
func (s *Server) startSpan(sess *session.Session, m *codec.Message, name string, t *traced, at time.Time) Span {
	st := SpanStart{
		Time:        at,
		TraceParent: bytesconv.B2S(t.parent),
		TraceState:  bytesconv.B2S(t.state),
		Method:      MethodLabel(MethodIndex(m.Method)),
		ID:          m.ID,
		Transport:   sess.Transport,
		Version:     sess.Version(),
	}
	if sess.Stateless() {
		st.Version = bytesconv.B2S(t.version)
	} else {
		st.Session = sess.ID()
	}
	switch {
	case name == "":
	case m.Method == mcp.MethodToolsCall:
		if _, ok := s.reg.ToolOptionsOf(name); ok {
			st.Tool = name
		}
	case m.Method == mcp.MethodPromptsGet:
		if s.reg.HasPrompt(name) {
			st.Prompt = name
		}
	}
	return s.tracer.Start(&st)
}

// targetName returns the tool or prompt name of m's params (tools/call,
// prompts/get), "" for other methods; f holds a tools/call's fields when
// scanned.
func targetName(m *codec.Message, f *toolFields) string {
	switch m.Method {
	case mcp.MethodToolsCall:
		if f.ok {
			return bytesconv.B2S(f.name)
		}
	case mcp.MethodPromptsGet:
	default:
		return ""
	}
	name, _ := routeField(m.Params, "name")
	return name
}

// traceNow traces m, a request of sess answered at once with code (on the
// event loop, or refused): when the Tracer samples it, its span is
// started from its arrival at at and ended here. f holds its tools/call
// fields as far as the dispatch scanned them. Handlers answered at once
// (NonBlocking tools) run before their span exists: their context carries
// none.
func (s *Server) traceNow(sess *session.Session, m *codec.Message, reply session.Sink, code int, f *toolFields, at time.Time) {
	var meta []byte
	if f.ok {
		meta = f.meta
	}
	var t traced
	t.read(m, meta, reply)
	if !s.tracer.Sample(bytesconv.B2S(t.parent)) {
		return
	}
	s.startSpan(sess, m, targetName(m, f), &t, at).End(code, f.isError && code == 0)
}

// traceStart starts the span of r, a request about to be served on the
// worker pool, when the Tracer samples it; its handler's context carries
// it (reqCtx.Value).
func (s *Server) traceStart(r *request) {
	var meta []byte
	if r.tool.ok {
		meta = r.tool.meta
	}
	var t traced
	t.read(&r.msg, meta, r.reply)
	if !s.tracer.Sample(bytesconv.B2S(t.parent)) {
		return
	}
	r.rc.span = s.startSpan(r.sess, &r.msg, targetName(&r.msg, &r.tool), &t, s.epoch.Add(r.obsStart))
}

// traceEnd ends the span of r, answered with code; unanswered when no
// answer was due (the client cancelled it, or its session closed), which
// the span records as cancelled.
func (s *Server) traceEnd(r *request, code int, unanswered bool) {
	if unanswered && r.refused == nil {
		code = codec.CodeRequestCancelled
	}
	r.rc.span.End(code, r.toolErr && code == 0)
}

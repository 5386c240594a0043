package cluster

import (
	"unsafe"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/internal/bytesconv"
	"github.com/valyala/fasthttp"
)

// A Tracer traces the requests a node forwards to their owner (package
// tracing implements it with OpenTelemetry): each forward a span, a child
// of the client's trace context, whose own context replaces the client's
// in the forwarded request (its traceparent header, and its
// params._meta.traceparent when it has one), so that the owner's span of
// the request is the forward's child. Set it as Options.Tracer; nil costs
// one nil check per forward.
type Tracer interface {
	// Sample decides whether a forward whose client sent traceparent (""
	// when none) is traced, as engine.Tracer's Sample does.
	Sample(traceparent string) bool
	// StartForward starts the span of a forward to node owner of a
	// request of session (its id; "" for a task's), whose client's trace
	// context is traceparent and tracestate. It returns the span's W3C
	// traceparent (version 00), which the forwarded request carries, and
	// the function ending the span with the HTTP status relayed to the
	// client (0 when no node answered for the owner, and the request is
	// served here; a streamed answer's when its head is relayed). The
	// strings are the caller's: it copies what it keeps.
	StartForward(traceparent, tracestate, owner, session string) (spanParent string, end func(status int))
}

var (
	hdrTraceParent = []byte("Traceparent") // as fasthttp keeps them (PeekCanonical)
	hdrTraceState  = []byte("Tracestate")
	hdrSession     = []byte("Mcp-Session-Id")
	traceKeys      = []string{"traceparent", "tracestate"}
)

// requestTrace returns the W3C trace context of ctx's request, and where
// its body holds the traceparent's value (a JSON string: its quotes
// included), end 0 when it holds none: params._meta's first (the MCP
// convention), else the traceparent and tracestate headers.
func requestTrace(ctx *fasthttp.RequestCtx) (tp, ts []byte, at, end int) {
	body := ctx.Request.Body()
	if params, ok, err := codec.ObjectField(body, "params"); err == nil && ok && len(params) > 1 && params[0] == '{' {
		if meta, ok, err := codec.ObjectField(params, "_meta"); err == nil && ok && len(meta) > 1 && meta[0] == '{' {
			var v [2][]byte
			if codec.ObjectFields(meta, traceKeys, v[:]) == nil && v[0] != nil {
				if s, err := codec.StringValue(v[0]); err == nil && len(s) > 0 {
					tp = s
					at = offsetIn(body, v[0])
					end = at + len(v[0])
					if v[1] != nil {
						ts, _ = codec.StringValue(v[1])
					}
					return tp, ts, at, end
				}
			}
		}
	}
	return ctx.Request.Header.PeekCanonical(hdrTraceParent), ctx.Request.Header.PeekCanonical(hdrTraceState), 0, 0
}

// tracedForward runs forward, which sends ctx's request to owner carrying
// the trace context it is given, with its span: started when the Tracer
// samples the request, ended when forward returns.
func (n *Node) tracedForward(ctx *fasthttp.RequestCtx, owner string, forward func(*forwardTrace) bool) bool {
	tp, ts, at, end := requestTrace(ctx)
	if !n.opts.Tracer.Sample(bytesconv.B2S(tp)) {
		return forward(nil)
	}
	parent, endSpan := n.opts.Tracer.StartForward(bytesconv.B2S(tp), bytesconv.B2S(ts), owner, bytesconv.B2S(ctx.Request.Header.PeekBytes(hdrSession)))
	ok := forward(&forwardTrace{parent: parent, at: at, end: end})
	status := 0
	if ok {
		status = ctx.Response.StatusCode()
	}
	endSpan(status)
	return ok
}

// forwardTrace is the trace context a traced forward carries instead of
// its client's: parent, in the traceparent header and at body[at:end]
// (end 0: the body has none).
type forwardTrace struct {
	parent  string
	at, end int
}

// offsetIn returns where sub, a sub-slice of b, starts in b.
func offsetIn(b, sub []byte) int {
	return int(uintptr(unsafe.Pointer(unsafe.SliceData(sub))) - uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}

// appendBody appends ctx's request body, with the traceparent of tr
// instead of the client's when tr is not nil.
func appendBody(dst []byte, ctx *fasthttp.RequestCtx, tr *forwardTrace) []byte {
	body := ctx.Request.Body()
	if tr == nil || tr.end == 0 || tr.end > len(body) {
		return append(dst, body...)
	}
	dst = append(dst, body[:tr.at]...)
	dst = append(dst, '"')
	dst = append(dst, tr.parent...)
	dst = append(dst, '"')
	return append(dst, body[tr.end:]...)
}

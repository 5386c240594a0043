package gateway

import (
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/valyala/fasthttp"
)

// Trace context propagation: an upstream request carries the trace
// context of the downstream request it serves (handlers.TraceScope: the
// request's span when the server traces it, else what its client sent),
// in params._meta (traceparent, tracestate: the MCP convention), and,
// for an HTTP upstream, in the POST's traceparent and tracestate headers
// too, so that the upstream's span of the call is a child of this
// server's.

// traceOf sets fp's trace context from peer's.
func traceOf(fp *forwardParams, peer handlers.Peer) {
	if ts, ok := peer.(handlers.TraceScope); ok {
		fp.traceParent, fp.traceState, _ = ts.TraceContext()
	}
}

// traceEdit returns the edit putting fp's trace context in meta, the
// params' _meta object (inside params), whose traceparent member's value
// is tp (nil: none) and which has a tracestate member when hasState: tp
// replaced when it differs, else the members added. ok is false when
// meta carries fp's traceparent already.
func traceEdit(params, meta, tp []byte, hasState bool, fp *forwardParams, buf []byte) (edit, bool) {
	if tp != nil {
		if s, err := codec.StringValue(tp); err == nil && string(s) == fp.traceParent {
			return edit{}, false
		}
		at := offset(params, tp)
		return edit{at: at, end: at + len(tp), with: codec.AppendString(buf, fp.traceParent)}, true
	}
	buf = appendTraceMembers(buf, fp, !hasState)
	if !empty(meta) {
		buf = append(buf, ',')
	}
	at := offset(params, meta) + 1
	return edit{at: at, end: at, with: buf}, true
}

// traceMetaEdit returns the edit adding a _meta with fp's trace context
// to params, an object without one.
func traceMetaEdit(params []byte, fp *forwardParams, buf []byte) edit {
	buf = append(buf, `"_meta":{`...)
	buf = appendTraceMembers(buf, fp, true)
	buf = append(buf, '}')
	at := codec.SkipWS(params, 0) + 1
	if !empty(params[at-1:]) {
		buf = append(buf, ',')
	}
	return edit{at: at, end: at, with: buf}
}

// appendTraceMembers appends "traceparent":…, and "tracestate":… when
// withState and fp has one.
func appendTraceMembers(dst []byte, fp *forwardParams, withState bool) []byte {
	dst = append(dst, `"`+mcp.MetaTraceParent+`":`...)
	dst = codec.AppendString(dst, fp.traceParent)
	if withState && fp.traceState != "" {
		dst = append(dst, `,"`+mcp.MetaTraceState+`":`...)
		dst = codec.AppendString(dst, fp.traceState)
	}
	return dst
}

var (
	hTraceParent = []byte("traceparent")
	hTraceState  = []byte("tracestate")
	traceKeys    = []string{mcp.MetaTraceParent, mcp.MetaTraceState}
)

// traceHeaders sets the traceparent and tracestate headers of req, the
// POST of request m, from its params._meta.
func traceHeaders(req *fasthttp.Request, m *codec.Message) {
	if m.Kind != codec.KindRequest || len(m.Params) == 0 {
		return
	}
	meta, ok, err := codec.ObjectField(m.Params, "_meta")
	if err != nil || !ok || len(meta) < 2 || meta[0] != '{' {
		return
	}
	var v [2][]byte
	if codec.ObjectFields(meta, traceKeys, v[:]) != nil || v[0] == nil {
		return
	}
	if tp, err := codec.StringValue(v[0]); err == nil && len(tp) > 0 {
		req.Header.SetBytesKV(hTraceParent, tp)
		if v[1] != nil {
			if ts, err := codec.StringValue(v[1]); err == nil && len(ts) > 0 {
				req.Header.SetBytesKV(hTraceState, ts)
			}
		}
	}
}

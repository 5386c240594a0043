package gateway

import (
	"bytes"
	"strconv"
	"unsafe"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
)

// The gateway passes messages through as bytes and rewrites only what it
// must: a tool's or prompt's name (prefix, rename), the progress token
// (unique per upstream connection), a 2026-07-28 requestState (which
// names the connection that issued it) and the upstream's identity in a
// result's _meta. Each rewrite is a splice at an offset the scanner
// found: no decode, no re-encode, no allocation once the buffers have
// grown.

// edit replaces b[at:end] with with.
type edit struct {
	at, end int
	with    []byte
}

// offset returns where sub, a sub-slice of b, starts in b.
func offset(b, sub []byte) int {
	return int(uintptr(unsafe.Pointer(unsafe.SliceData(sub))) - uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}

// splice appends b with edits (in ascending order, not overlapping)
// applied to dst.
func splice(dst, b []byte, edits []edit) []byte {
	at := 0
	for _, e := range edits {
		dst = append(dst, b[at:e.at]...)
		dst = append(dst, e.with...)
		at = e.end
	}
	return append(dst, b[at:]...)
}

// forwardParams are what the gateway changes in a request's params.
type forwardParams struct {
	name      []byte // the upstream's name for params.name (tools/call, prompts/get), nil: unchanged
	refName   []byte // the upstream's name for params.ref.name (completion/complete)
	token     []byte // the progress token to put in params._meta.progressToken, nil: unchanged
	stateless bool   // strip the gateway's prefix from params.requestState
	linkCap   bool   // add the related-request capability to a 2026-07-28 request's clientCapabilities
	addTask   bool   // make the call task-augmented (params.task)
	// The W3C trace context to put in params._meta (traceparent replaced
	// or added, tracestate added with it), "": unchanged (trace.go).
	traceParent, traceState string
}

var paramKeys = []string{"name", "_meta", "requestState", "ref"}

// appendParams appends params with fp's changes made. Params it cannot
// scan (escapes, not an object) are passed as they are: the upstream
// answers them.
func appendParams(dst, params []byte, fp *forwardParams) []byte {
	if len(params) == 0 || (fp.name == nil && fp.refName == nil && fp.token == nil && !fp.stateless && !fp.linkCap && !fp.addTask && fp.traceParent == "") {
		return append(dst, params...)
	}
	var v [4][]byte
	if codec.ObjectFields(params, paramKeys, v[:]) != nil {
		return append(dst, params...)
	}
	var eb [6]edit
	edits := eb[:0]
	if fp.addTask {
		at := codec.SkipWS(params, 0) + 1
		with := taskAddComma
		if empty(params[at-1:]) {
			with = taskAdd
		}
		edits = append(edits, edit{at: at, end: at, with: with})
	}
	if fp.name != nil && v[0] != nil && len(v[0]) >= 2 && v[0][0] == '"' {
		at := offset(params, v[0])
		edits = append(edits, edit{at: at + 1, end: at + len(v[0]) - 1, with: fp.name})
	}
	if fp.refName != nil && v[3] != nil {
		if n, ok, err := codec.ObjectField(v[3], "name"); err == nil && ok && len(n) >= 2 && n[0] == '"' {
			at := offset(params, n)
			edits = append(edits, edit{at: at + 1, end: at + len(n) - 1, with: fp.refName})
		}
	}
	var tb *codec.Buffer // the trace members' bytes, when added (trace.go)
	if meta := v[1]; len(meta) >= 2 && meta[0] == '{' {
		var mv [4][]byte
		if codec.ObjectFields(meta, metaKeys, mv[:]) == nil {
			if tok := mv[0]; fp.token != nil && tok != nil {
				at := offset(params, tok)
				edits = append(edits, edit{at: at, end: at + len(tok), with: fp.token})
			}
			if caps := mv[1]; fp.linkCap && len(caps) >= 2 && caps[0] == '{' {
				edits = append(edits, linkCapEdit(params, caps))
			}
			if fp.traceParent != "" {
				tb = codec.GetBuffer()
				if e, ok := traceEdit(params, meta, mv[2], mv[3] != nil, fp, tb.B[:0]); ok {
					edits = append(edits, e)
				}
			}
		}
	} else if fp.traceParent != "" && v[1] == nil {
		tb = codec.GetBuffer()
		edits = append(edits, traceMetaEdit(params, fp, tb.B[:0]))
	}
	if st := v[2]; fp.stateless && len(st) > 2 && st[0] == '"' {
		if _, n := stateConn(st); n > 0 {
			at := offset(params, st)
			edits = append(edits, edit{at: at + 1, end: at + 1 + n})
		}
	}
	sortEdits(edits)
	dst = splice(dst, params, edits)
	if tb != nil {
		codec.PutBuffer(tb) // its bytes were copied (its growth is lost: rare)
	}
	return dst
}

var metaKeys = []string{"progressToken", mcp.MetaClientCapabilities, mcp.MetaTraceParent, mcp.MetaTraceState}

// What declares the related-request link in a clientCapabilities object:
// with no experimental member, or inside its experimental object (with
// the comma when something follows).
var (
	linkCapAdd        = []byte(`"experimental":{"` + mcp.MetaRelatedRequest + `":{}}`)
	linkCapAddComma   = []byte(`"experimental":{"` + mcp.MetaRelatedRequest + `":{}},`)
	linkCapInner      = []byte(`"` + mcp.MetaRelatedRequest + `":{}`)
	linkCapInnerComma = []byte(`"` + mcp.MetaRelatedRequest + `":{},`)
	linkCapKey        = []byte(mcp.MetaRelatedRequest)
	taskAdd           = []byte(`"task":{}`)
	taskAddComma      = []byte(`"task":{},`)
)

// linkCapEdit returns the edit declaring the related-request link in the
// clientCapabilities object caps (inside params).
func linkCapEdit(params, caps []byte) edit {
	if exp, ok, err := codec.ObjectField(caps, "experimental"); err == nil && ok && len(exp) >= 2 && exp[0] == '{' {
		if bytes.Contains(exp, linkCapKey) {
			return edit{at: 0, end: 0}
		}
		at := offset(params, exp) + 1
		if empty(exp) {
			return edit{at: at, end: at, with: linkCapInner}
		}
		return edit{at: at, end: at, with: linkCapInnerComma}
	}
	at := offset(params, caps) + 1
	if empty(caps) {
		return edit{at: at, end: at, with: linkCapAdd}
	}
	return edit{at: at, end: at, with: linkCapAddComma}
}

// empty reports whether the object obj has no member.
func empty(obj []byte) bool { return len(obj) < 2 || len(bytes.TrimSpace(obj[1:len(obj)-1])) == 0 }

func sortEdits(e []edit) {
	for i := 1; i < len(e); i++ {
		for j := i; j > 0 && e[j].at < e[j-1].at; j-- {
			e[j], e[j-1] = e[j-1], e[j]
		}
	}
}

// The requestState a 2026-07-28 upstream issues names the connection it
// came from: the gateway prefixes it with ~gwN~ (N the connection's index
// in its pool; '~' is not in the base64url alphabet of mcpedge's states)
// and routes the retry that carries it to that connection, stripped.

// stateConn returns the connection index a raw requestState string (with
// its quotes) names and the length of its prefix after the opening quote,
// n = 0 when it has none.
func stateConn(st []byte) (idx, n int) {
	s := st[1:]
	if len(s) < 5 || s[0] != '~' || s[1] != 'g' || s[2] != 'w' {
		return 0, 0
	}
	i := 3
	for i < len(s) && s[i] >= '0' && s[i] <= '9' && i < 7 {
		idx = idx*10 + int(s[i]-'0')
		i++
	}
	if i == 3 || i >= len(s) || s[i] != '~' {
		return 0, 0
	}
	return idx, i + 1
}

// appendStatePrefix appends the prefix naming connection idx.
func appendStatePrefix(dst []byte, idx int) []byte {
	dst = append(dst, "~gw"...)
	dst = strconv.AppendInt(dst, int64(idx), 10)
	return append(dst, '~')
}

// requestStateOf returns the raw requestState of params, nil when none.
func requestStateOf(params []byte) []byte {
	st, ok, err := codec.ObjectField(params, "requestState")
	if err != nil || !ok || len(st) < 2 || st[0] != '"' {
		return nil
	}
	return st
}

var resultKeys = []string{"_meta", "requestState", "resultType", "taskId"}

// statelessResult rewrites a 2026-07-28 result in place at out[start:]
// (the result object the upstream answered): the upstream's identity
// leaves its _meta (the engine puts the gateway's in, statelessTail), and a
// requestState gets pre, the prefix naming its connection. It returns
// the result, and the task id of a CreateTaskResult, nil otherwise.
func statelessResult(out []byte, start int, pre []byte) ([]byte, []byte) {
	res := out[start:]
	var v [4][]byte
	if codec.ObjectFields(res, resultKeys, v[:]) != nil {
		return out, nil
	}
	var eb [2]edit
	edits := eb[:0]
	if meta := v[0]; len(meta) >= 2 && meta[0] == '{' {
		if e, ok := dropKey(res, meta, mcp.MetaServerInfo); ok {
			edits = append(edits, e)
		}
	}
	if st := v[1]; len(st) >= 2 && st[0] == '"' {
		at := offset(res, st) + 1
		edits = append(edits, edit{at: at, end: at, with: pre})
	}
	var task []byte
	if rt := v[2]; string(rt) == `"task"` {
		if id, err := codec.StringValue(v[3]); err == nil {
			task = id
		}
	}
	if len(edits) == 0 {
		return out, task
	}
	sortEdits(edits)
	if task != nil {
		task = bytes.Clone(task) // the splice moves it
	}
	// Splice through a scratch copy of the result: it is small next to
	// the answer, and dst must not overlap what is read.
	b := codec.GetBuffer()
	b.B = append(b.B[:0], res...)
	out = splice(out[:start], b.B, edits)
	codec.PutBuffer(b)
	return out, task
}

// dropKey returns the edit removing key (with its value and one comma)
// from the object meta inside b, or false when meta has no such key. An
// object left empty is left as {}.
func dropKey(b, meta []byte, key string) (edit, bool) {
	i := codec.SkipWS(meta, 1)
	for i < len(meta) && meta[i] != '}' {
		if meta[i] == ',' {
			i = codec.SkipWS(meta, i+1)
			continue
		}
		ks := i
		ke := codec.SkipValue(meta, i)
		if ke < 0 {
			return edit{}, false
		}
		j := codec.SkipWS(meta, ke)
		if j >= len(meta) || meta[j] != ':' {
			return edit{}, false
		}
		ve := codec.SkipValue(meta, codec.SkipWS(meta, j+1))
		if ve < 0 {
			return edit{}, false
		}
		if ke-ks == len(key)+2 && string(meta[ks+1:ke-1]) == key {
			end := codec.SkipWS(meta, ve)
			if end < len(meta) && meta[end] == ',' {
				end = codec.SkipWS(meta, end+1)
			} else {
				// the last member: take the comma before it, if any
				p := ks - 1
				for p > 0 && (meta[p] == ' ' || meta[p] == '\t' || meta[p] == '\n' || meta[p] == '\r') {
					p--
				}
				if meta[p] == ',' {
					ks = p
				}
			}
			base := offset(b, meta)
			return edit{at: base + ks, end: base + end}, true
		}
		i = codec.SkipWS(meta, ve)
	}
	return edit{}, false
}

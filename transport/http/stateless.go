package http

import (
	"bytes"
	"encoding/base64"
	"strconv"
	"sync"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/internal/bytesconv"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
	"github.com/valyala/fasthttp"
)

// Revision 2026-07-28 is stateless: each POST is one exchange, served on
// a session of its own (engine.Server.OpenStateless) that no id names and
// that ends with the POST. A POST is of that revision when its
// MCP-Protocol-Version header names it (or a later revision mcpedge does
// not know: the engine answers that one with -32022), or when it carries
// a request whose params._meta names a protocol version and no
// Mcp-Session-Id. Its headers are checked against its body first
// (SEP-2243: Mcp-Method, Mcp-Name, MCP-Protocol-Version and the tool's
// Mcp-Param-* headers), a mismatch answered 400 with -32020
// (HeaderMismatch); the engine then checks the request's _meta. Errors
// of the revision are answered with their own status (call.Reject): 400,
// or 404 for an unknown method. There is no GET stream and no DELETE:
// both are answered 405 when they name the revision.

// verKind classifies an MCP-Protocol-Version header.
type verKind uint8

const (
	verSession   verKind = iota // absent, or a session revision
	verStateless                // a stateless revision, or one that looks newer than every session revision
	verBad                      // any other value: refused as before
)

var (
	hdrMethod = []byte("Mcp-Method")
	hdrName   = []byte("Mcp-Name")

	metaVersionKey = []byte(mcp.MetaProtocolVersion)
	b64Prefix      = []byte("=?base64?")
	b64Suffix      = []byte("?=")
)

// versionOf classifies the value of MCP-Protocol-Version; absent means
// 2025-03-26. A value that is not a date, or a date later than the newest
// session revision, looks like a stateless revision: the engine tells the
// client which ones are served.
func versionOf(v []byte) (string, verKind) {
	if len(v) == 0 {
		return mcp.Version20250326, verSession
	}
	for _, sv := range mcp.SessionVersions {
		if string(v) == sv {
			return sv, verSession
		}
	}
	if mcp.StatelessVersion(bytesconv.B2S(v)) {
		return mcp.Version20260728, verStateless
	}
	if !isDate(v) || string(v) > mcp.SessionVersions[0] {
		return "", verStateless
	}
	return "", verBad
}

// isDate reports whether v is shaped YYYY-MM-DD.
func isDate(v []byte) bool {
	if len(v) != 10 || v[4] != '-' || v[7] != '-' {
		return false
	}
	for i, c := range v {
		if i != 4 && i != 7 && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// statelessHeader reports whether a request's MCP-Protocol-Version header
// names a stateless revision (GET and DELETE are then refused).
func statelessHeader(ctx *fasthttp.RequestCtx) bool {
	_, k := versionOf(ctx.Request.Header.PeekCanonical(hdrVersion))
	return k == verStateless
}

// field returns the raw value of key in the JSON object obj, or nil. An
// object with escaped keys is decoded the slow way.
func field(obj []byte, key string) []byte {
	v, _, err := codec.ObjectField(obj, key)
	if err == codec.ErrEscaped {
		var m map[string]codec.RawJSON
		if codec.Unmarshal(obj, &m) == nil {
			return m[key]
		}
		return nil
	}
	return v
}

// stringOf returns the content of the raw JSON string v; ok is false when v
// is not a string.
func stringOf(v []byte) ([]byte, bool) {
	s, err := codec.StringValue(v)
	switch err {
	case nil:
		return s, true
	case codec.ErrEscaped:
		var str string
		if codec.Unmarshal(v, &str) != nil {
			return nil, false
		}
		return []byte(str), true
	}
	return nil, false
}

// metaVersion returns the raw io.modelcontextprotocol/protocolVersion of
// params._meta, or nil.
func metaVersion(params []byte) []byte {
	if len(params) == 0 || !bytes.Contains(params, metaVersionKey) {
		return nil
	}
	meta := field(params, "_meta")
	if len(meta) == 0 || meta[0] != '{' {
		return nil
	}
	return field(meta, mcp.MetaProtocolVersion)
}

// trimOWS trims the optional white space around a header value.
func trimOWS(v []byte) []byte { return bytes.Trim(v, " \t") }

// decodeHeaderValue decodes a header value that may use the Base64 sentinel,
// =?base64?...?= (standard alphabet, padded, strictly decoded). ok is
// false for an invalid encoding or, unencoded, characters other than
// visible ASCII and inner spaces.
func decodeHeaderValue(v []byte) (val []byte, ok bool) {
	if len(v) >= len(b64Prefix)+len(b64Suffix) && bytes.HasPrefix(v, b64Prefix) && bytes.HasSuffix(v, b64Suffix) {
		in := v[len(b64Prefix) : len(v)-len(b64Suffix)]
		out := make([]byte, base64.StdEncoding.DecodedLen(len(in)))
		n, err := base64.StdEncoding.Strict().Decode(out, in)
		if err != nil {
			return nil, false
		}
		return out[:n], true
	}
	for _, c := range v {
		if (c < 0x20 && c != '\t') || c > 0x7e {
			return nil, false
		}
	}
	return v, true
}

// checkStatelessHeaders checks a stateless request's headers against its
// body (SEP-2243), in order: Mcp-Method, Mcp-Name, MCP-Protocol-Version
// against _meta, then the tool's Mcp-Param-* headers. It answers a
// mismatch with 400 and -32020 carrying the request's id, and reports
// false.
func (s *Server) checkStatelessHeaders(ctx *fasthttp.RequestCtx, m *codec.Message) bool {
	h := &ctx.Request.Header
	method := trimOWS(h.PeekCanonical(hdrMethod))
	switch {
	case len(method) == 0:
		return s.mismatch(ctx, m, "Mcp-Method header is required")
	case string(method) != m.Method:
		return s.mismatch(ctx, m, "Mcp-Method header value '"+string(method)+"' does not match body value '"+m.Method+"'")
	}
	// One scan of the params finds the members the headers mirror; the
	// engine's method table says which member Mcp-Name mirrors.
	key := engine.NameParam(m.Method)
	var v [3][]byte // key, _meta, arguments
	if key == "" || codec.ObjectFields(m.Params, []string{key, "_meta", "arguments"}, v[:]) != nil {
		if key != "" {
			v[0] = field(m.Params, key)
		}
		v[1], v[2] = field(m.Params, "_meta"), field(m.Params, "arguments")
	}
	var name []byte
	if key != "" {
		raw := v[0]
		hv := h.PeekCanonical(hdrName)
		body, isStr := stringOf(raw)
		switch {
		case len(hv) == 0 && raw == nil:
			// Nothing to mirror: the engine answers the missing member.
		case len(hv) == 0:
			return s.mismatch(ctx, m, "Mcp-Name header is required for "+m.Method)
		default:
			v, ok := decodeHeaderValue(trimOWS(hv))
			switch {
			case !ok:
				return s.mismatch(ctx, m, "Mcp-Name header value is not valid (invalid characters or Base64)")
			case !isStr || !bytes.Equal(v, body):
				return s.mismatch(ctx, m, "Mcp-Name header value '"+string(v)+"' does not match body value '"+string(body)+"'")
			}
		}
		name = body
	}
	hv := trimOWS(h.PeekCanonical(hdrVersion))
	var mv []byte
	if meta := v[1]; len(meta) > 0 && meta[0] == '{' {
		mv = field(meta, mcp.MetaProtocolVersion)
	}
	if mv != nil {
		switch ver, ok := stringOf(mv); {
		case len(hv) == 0:
			return s.mismatch(ctx, m, "MCP-Protocol-Version header is required")
		case ok && !bytes.Equal(ver, hv):
			return s.mismatch(ctx, m, "MCP-Protocol-Version header value '"+string(hv)+"' does not match body value '"+string(ver)+"'")
		}
	}
	if m.Method == mcp.MethodToolsCall && name != nil {
		return s.checkParamHeaders(ctx, m, name, v[2])
	}
	return true
}

// checkParamHeaders checks the Mcp-Param-* headers of a tools/call of the
// tool named name: each argument annotated x-mcp-header that the call
// carries (not null) must be mirrored, equal.
func (s *Server) checkParamHeaders(ctx *fasthttp.RequestCtx, m *codec.Message, name, args []byte) bool {
	params := s.eng.Registry().ToolHeaderParams(bytesconv.B2S(name))
	if len(params) == 0 {
		return true
	}
	for i := range params {
		p := &params[i]
		v := args
		for _, k := range p.Path {
			if len(v) == 0 || v[0] != '{' {
				v = nil
				break
			}
			v = field(v, k)
		}
		if len(v) == 0 || string(v) == "null" {
			continue
		}
		hv := ctx.Request.Header.Peek(p.Header)
		if len(hv) == 0 {
			return s.mismatch(ctx, m, p.Header+" header is required: argument "+p.Name+" is present")
		}
		dec, ok := decodeHeaderValue(trimOWS(hv))
		if !ok {
			return s.mismatch(ctx, m, p.Header+" header value is not valid (invalid characters or Base64)")
		}
		if !paramMatches(dec, v) {
			return s.mismatch(ctx, m, p.Header+" header value '"+string(dec)+"' does not match body value "+string(v))
		}
	}
	return true
}

// paramMatches compares a decoded header value with the raw JSON value
// of its argument: strings exactly, numbers numerically, booleans as
// true and false.
func paramMatches(hv, raw []byte) bool {
	switch c := raw[0]; {
	case c == '"':
		s, ok := stringOf(raw)
		return ok && bytes.Equal(s, hv)
	case c == 't' || c == 'f':
		return bytes.Equal(hv, raw)
	case c == '-' || (c >= '0' && c <= '9'):
		a, err1 := strconv.ParseFloat(bytesconv.B2S(hv), 64)
		b, err2 := strconv.ParseFloat(bytesconv.B2S(raw), 64)
		return err1 == nil && err2 == nil && a == b
	}
	return false
}

// mismatch answers 400 with HeaderMismatch (-32020) and the request's id.
func (s *Server) mismatch(ctx *fasthttp.RequestCtx, m *codec.Message, msg string) bool {
	b := codec.GetBuffer()
	b.B = codec.AppendError(b.B, m.ID, mcp.CodeHeaderMismatch, "Header mismatch: "+msg, nil)
	s.writeJSON(ctx, fasthttp.StatusBadRequest, b.B)
	codec.PutBuffer(b)
	return false
}

var _ engine.Rejecter = (*call)(nil)

// Reject implements engine.Rejecter: the answer to the call's 2026-07-28
// request is an error answered with a status of its own (rejectStatus),
// the JSON-RPC error its body.
func (c *call) Reject(code int) {
	c.mu.Lock()
	c.rejected = code
	c.mu.Unlock()
}

// rejectStatus is the HTTP status of a rejected 2026-07-28 request.
func rejectStatus(code int) int {
	if code == codec.CodeMethodNotFound {
		return fasthttp.StatusNotFound
	}
	return fasthttp.StatusBadRequest
}

// liveStateless are the stateless sessions whose POST streams: Shutdown
// closes them, so that a long stream (subscriptions/listen, a slow tool)
// does not hold the connection's drain up.
type liveStateless struct {
	mu  sync.Mutex
	set map[*session.Session]struct{}
}

func (l *liveStateless) add(sess *session.Session) {
	l.mu.Lock()
	if l.set == nil {
		l.set = make(map[*session.Session]struct{})
	}
	l.set[sess] = struct{}{}
	l.mu.Unlock()
}

func (l *liveStateless) remove(sess *session.Session) {
	l.mu.Lock()
	delete(l.set, sess)
	l.mu.Unlock()
}

// closeAll closes every session with cause.
func (l *liveStateless) closeAll(s *Server, cause error) {
	l.mu.Lock()
	all := make([]*session.Session, 0, len(l.set))
	for sess := range l.set {
		all = append(all, sess)
	}
	l.mu.Unlock()
	for _, sess := range all {
		s.eng.Conn(sess).Close(cause)
	}
}

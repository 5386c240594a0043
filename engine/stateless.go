package engine

import (
	"bytes"
	"hash/maphash"
	"slices"
	"strconv"
	"sync/atomic"
	"unsafe"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/internal/bytesconv"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
)

// Revision 2026-07-28, stateless, is chosen per request: a request whose
// params._meta names io.modelcontextprotocol/protocolVersion, or a
// server/discover, is served statelessly, with the client's capabilities,
// info and log level read from that _meta, beside the sessions of the
// older revisions on the same connection, endpoint or pipe. Its answers
// take the same path as every other request's (route, serve), and the
// method table says which methods the revision serves; appendTail then
// adds what the revision requires of a result (resultType, the server's
// identity in _meta, cache hints), from what the engine knows of the
// result it encoded.

// statelessMeta is what the engine reads of a stateless request's _meta. Its
// slices alias the request's params.
type statelessMeta struct {
	on      bool
	version string
	caps    []byte // clientCapabilities, a raw object
	info    []byte // clientInfo, a raw object or nil
	level   int8   // minimum log level index; -1: no notifications/message
	trace   [3][]byte
	caller  any // the request's verified caller (Options.Authorize), when authorized
}

var statelessKeys = []string{
	mcp.MetaProtocolVersion, mcp.MetaClientCapabilities, mcp.MetaClientInfo, mcp.MetaLogLevel,
	mcp.MetaTraceParent, mcp.MetaTraceState, mcp.MetaBaggage,
}

// errMeta is the answer to a stateless request whose _meta is missing or
// malformed.
func errMeta(msg string) *codec.Error {
	return codec.NewError(codec.CodeInvalidParams, "invalid params: "+msg)
}

// parseStateless reads params._meta into mm. It reports found false when the
// request names no protocol version (then it is a request of an older
// revision, unless its session is stateless); a request that names one
// but whose _meta is malformed, or that names a version not served, gets
// the error returned.
//
// meta, when not nil, is params' _meta found by an earlier scan (tools/call).
func parseStateless(params, meta []byte, mm *statelessMeta) (found bool, e *codec.Error) {
	*mm = statelessMeta{level: -1}
	if len(params) == 0 {
		return false, errMeta("_meta with " + mcp.MetaProtocolVersion + " and " + mcp.MetaClientCapabilities + " is required")
	}
	ok := meta != nil
	if !ok {
		var err error
		if meta, ok, err = codec.ObjectField(params, "_meta"); err != nil {
			return false, errMeta("params must be an object")
		}
	}
	if !ok || string(meta) == "null" {
		return false, errMeta("_meta with " + mcp.MetaProtocolVersion + " and " + mcp.MetaClientCapabilities + " is required")
	}
	return parseMeta(meta, mm)
}

// parseMeta is parseStateless given params' _meta, not null.
func parseMeta(meta []byte, mm *statelessMeta) (found bool, e *codec.Error) {
	*mm = statelessMeta{level: -1}
	if meta[0] != '{' {
		return false, errMeta("_meta must be an object")
	}
	var v [7][]byte
	if err := codec.ObjectFields(meta, statelessKeys, v[:]); err != nil {
		return false, errMeta("_meta must be an object of well-formed members")
	}
	if v[0] == nil {
		return false, errMeta("_meta." + mcp.MetaProtocolVersion + " is required")
	}
	ver, err := codec.StringValue(v[0])
	if err != nil {
		return true, errMeta("_meta." + mcp.MetaProtocolVersion + " must be a string")
	}
	mm.version = bytesconv.B2S(ver)
	if !mcp.StatelessVersion(mm.version) {
		return true, unsupportedVersion(mm.version)
	}
	if v[1] == nil || v[1][0] != '{' {
		return true, errMeta("_meta." + mcp.MetaClientCapabilities + " is required and must be an object")
	}
	mm.caps = v[1]
	if v[2] != nil {
		if v[2][0] != '{' {
			return true, errMeta("_meta." + mcp.MetaClientInfo + " must be an object")
		}
		mm.info = v[2]
	}
	if v[3] != nil {
		lv, err := codec.StringValue(v[3])
		i := mcp.LogLevelIndex(bytesconv.B2S(lv))
		if err != nil || i < 0 {
			return true, errMeta("_meta." + mcp.MetaLogLevel + " must be a log level")
		}
		mm.level = int8(i)
	}
	for i := range mm.trace {
		if raw := v[4+i]; raw != nil {
			s, err := codec.StringValue(raw)
			if err != nil {
				return true, errMeta("_meta." + statelessKeys[4+i] + " must be a string")
			}
			mm.trace[i] = s
		}
	}
	mm.on = true
	return true, nil
}

// maxMemo bounds the _meta a session memoizes.
const maxMemo = 1 << 10

// parseStatelessMemo is parseStateless, memoized per session: a client sends the
// same _meta with each request, and a request whose _meta is byte for byte
// the last one parsed on its session gets the same reading, its slices
// aliasing the memo's own copy, without a scan. A _meta that carries a
// trace context (different with every request) is not memoized.
func (s *Server) parseStatelessMemo(sess *session.Session, params, meta []byte, mm *statelessMeta) (bool, *codec.Error) {
	if meta == nil && len(params) > 0 {
		meta, _, _ = codec.ObjectField(params, "_meta")
	}
	// A stateless exchange (an HTTP POST) lives for one request: its
	// memo is the server's, a few slots chosen by a hash of the _meta.
	var slot *atomic.Pointer[session.Memo]
	var memo *session.Memo
	if sess.Stateless() {
		if len(meta) > 0 && len(meta) <= maxMemo {
			slot = &s.memos[maphash.Bytes(s.memoSeed, meta)%uint64(len(s.memos))]
			memo = slot.Load()
		}
	} else {
		memo = sess.Memo()
	}
	if memo != nil && bytes.Equal(meta, memo.Key) {
		if v, ok := memo.Value.(*statelessMeta); ok {
			*mm = *v
			return true, nil
		}
	}
	found, e := parseStateless(params, meta, mm)
	if e != nil || !mm.on || len(meta) == 0 || len(meta) > maxMemo ||
		mm.trace[0] != nil || mm.trace[1] != nil || mm.trace[2] != nil {
		return found, e
	}
	key := bytes.Clone(meta)
	v := new(statelessMeta)
	if _, e := parseMeta(key, v); e == nil && v.on {
		if slot != nil {
			slot.Store(&session.Memo{Key: key, Value: v})
		} else {
			sess.SetMemo(&session.Memo{Key: key, Value: v})
		}
	}
	return found, e
}

// unsupportedVersion is UnsupportedProtocolVersionError.
func unsupportedVersion(requested string) *codec.Error {
	data := make([]byte, 0, 128)
	data = append(data, `{"supported":[`...)
	for i, v := range mcp.AllVersions {
		if i > 0 {
			data = append(data, ',')
		}
		data = codec.AppendString(data, v)
	}
	data = append(data, `],"requested":`...)
	data = codec.AppendString(data, requested)
	data = append(data, '}')
	return &codec.Error{Code: mcp.CodeUnsupportedProtocolVersion, Message: "Unsupported protocol version: " + requested, Data: data}
}

// rebase moves mm's slices of old to the same place in nw (see rebase).
func (mm *statelessMeta) rebase(old, nw []byte) {
	mv := codec.Mover{Old: old, New: nw}
	mm.version = mv.String(mm.version)
	mm.caps, mm.info = mv.Bytes(mm.caps), mv.Bytes(mm.info)
	for i := range mm.trace {
		mm.trace[i] = mv.Bytes(mm.trace[i])
	}
}

// A Rejecter is a reply sink told that the answer to a 2026-07-28 request
// is an error its transport binding answers with a status of its own:
// Streamable HTTP answers a malformed or unsupported request (-32602 for
// its _meta, -32020, -32021, -32022) with 400 and an unknown method
// (-32601) with 404. Reject is called before the answer is appended or
// handed to Final; it must not block.
type Rejecter interface {
	Reject(code int)
}

func reject(reply session.Sink, code int) {
	if r, ok := reply.(Rejecter); ok {
		r.Reject(code)
	}
}

// handleStateless serves a request that may be of the stateless revision, of
// method row. It reports handled false when the request names no
// protocol version after all: the caller serves it as a request of its
// session. caller is what Options.Authorize returned for it (nil without
// authorization): the request's own, kept in its statelessMeta for whatever
// serves it. here is route's: a request already on a worker, which serves
// the request when it needs a handler, and f its tools/call fields. code
// is the JSON-RPC error code of an answer given at once.
func (s *Server) handleStateless(sess *session.Session, m *codec.Message, row *method, frame, out []byte, reply session.Sink, caller any, here *request, f *toolFields) (res []byte, code int, queued, handled bool) {
	var mm statelessMeta
	var meta []byte
	if row.statelessNow == opInlineTool && f.scan(m.Params) {
		meta = f.meta // the one scan of the params serves both
	}
	found, e := s.parseStatelessMemo(sess, m.Params, meta, &mm)
	if !found && e != nil && !sess.Stateless() && row.statelessNow != opDiscover {
		return out, 0, false, false
	}
	if (e == nil && !s.offer.stateless) || (e != nil && e.Code == mcp.CodeUnsupportedProtocolVersion) {
		e = s.offer.unsupported(mm.version) // Options.Versions
	}
	if reply == nil {
		reply = sess.Out
	}
	if e != nil {
		reject(reply, e.Code)
		return codec.AppendErrorObject(out, m.ID, e), e.Code, false, true
	}
	mm.caller = caller
	if le := s.checkRate(sess, caller); le != nil {
		return s.refuse(sess, out, reply, m.ID, le), codec.CodeServerBusy, false, true
	}
	if row.statelessNow == opInlineTool {
		if le := s.checkToolCall(m, f); le != nil {
			return s.refuse(sess, out, reply, m.ID, le), codec.CodeServerBusy, false, true
		}
		defer toolDone(f) // unless a request took the call's place
	}
	if !row.stateless {
		reject(reply, codec.CodeMethodNotFound)
		msg := "method not found: " + m.Method
		if row.since != "" {
			msg += " (removed in " + mcp.Version20260728 + ")"
		}
		res, code = errAnswer(out, m.ID, codec.CodeMethodNotFound, msg)
		return res, code, false, true
	}
	switch row.statelessNow {
	case opDiscover:
		res, code = s.appendDiscover(out, m.ID)
		return res, code, false, true
	case opListPage:
		c := s.class(caller)
		res, code = s.listPage(row.list, m, out, c, s.listHint(row.list, c))
		return res, code, false, true
	case opListen:
		return s.listen(sess, m, &mm, out, reply)
	case opStatelessTask:
		if !hasTasksExt(mm.caps) || !s.foreignTask(m) {
			res, code = s.statelessTaskMethod(sess, m, &mm, out, reply)
			return res, code, false, true
		} // a task of a raw handler's server (a gateway's upstream): the pool serves it
	case opInlineTool:
		if dst, code, ok := s.inlineTool(sess, m, row, out, f, &mm, reply); ok {
			return dst, code, false, true
		}
	}
	res, code, queued = s.enqueue(sess, m, row, frame, out, reply, f, &mm, here)
	return res, code, queued, true
}

// appendDiscover appends the answer to server/discover, and its code.
func (s *Server) appendDiscover(dst, id []byte) ([]byte, int) {
	res := mcp.DiscoverResult{
		ResultType:        mcp.ResultComplete,
		SupportedVersions: s.offer.all,
		Capabilities:      s.statelessCapabilities(),
		Instructions:      s.Instructions(),
		TTLMs:             s.opts.DiscoverCache.TTL.Milliseconds(),
		CacheScope:        s.opts.DiscoverCache.Scope(),
		Meta:              s.serverInfoMeta,
	}
	body, err := codec.Marshal(&res)
	if err != nil {
		return errAnswer(dst, id, codec.CodeInternalError, "internal error: "+err.Error())
	}
	return codec.AppendResult(dst, id, body), 0
}

// statelessCapabilities returns what the server advertises to 2026-07-28
// clients (server/discover): Capabilities, with tasks as an extension.
func (s *Server) statelessCapabilities() mcp.ServerCapabilities {
	c := s.Capabilities()
	if c.Tasks != nil {
		c.Tasks = nil
		c.Extensions = codec.RawJSON(`{"` + mcp.ExtensionTasks + `":{}}`)
	}
	return c
}

// listHint returns the cache hint of a list's results as the callers of
// class c get them: never public when a class narrows them (c not nil),
// since another caller's list may differ.
func (s *Server) listHint(list handlers.ListName, c handlers.Class) *handlers.CacheHint {
	h := s.reg.ListCacheHint(list)
	if c != nil {
		h.Public = false
	}
	return &h
}

// What the engine knows of a result it encoded, for the members
// 2026-07-28 adds to it (finishStateless): the tail goes in without a scan.
type resultShape uint8

const (
	shapeUnknown resultShape = iota // bytes the engine did not encode (a middleware's): scanned (statelessTail)
	shapePlain                      // an object with neither resultType nor _meta
	shapeMeta                       // an object with its own _meta (the server's identity merged in), no resultType
	shapeTyped                      // an object with resultType and no _meta (CreateTaskResult)
)

// appendTail appends, inside a result object the engine encoded (dst
// holds it up to its closing brace; more says it has members already),
// what 2026-07-28 adds to it, in this order: resultType "complete" when
// addType, ttlMs and cacheScope for hint non-nil (a cacheable result),
// and the server's identity as _meta when addMeta (the result has no
// _meta of its own).
func (s *Server) appendTail(dst []byte, more bool, hint *handlers.CacheHint, addType, addMeta bool) []byte {
	sep := func() {
		if more {
			dst = append(dst, ',')
		}
		more = true
	}
	if addType {
		sep()
		dst = append(dst, `"resultType":"complete"`...)
	}
	if hint != nil {
		sep()
		dst = append(dst, `"ttlMs":`...)
		dst = strconv.AppendInt(dst, hint.TTL.Milliseconds(), 10)
		dst = append(dst, `,"cacheScope":`...)
		dst = codec.AppendString(dst, hint.Scope())
	}
	if addMeta {
		sep()
		dst = append(dst, `"_meta":`...)
		dst = append(dst, s.serverInfoMeta...)
	}
	return dst
}

// withServerInfo returns meta, the _meta a handler gave its result, with
// the server's identity added when it is an object without it (a copy);
// otherwise meta itself.
func (s *Server) withServerInfo(meta []byte) []byte {
	obj := bytes.TrimSpace(meta)
	if len(obj) < 2 || obj[0] != '{' || obj[len(obj)-1] != '}' {
		return meta
	}
	if _, has, err := codec.ObjectField(obj, mcp.MetaServerInfo); err != nil || has {
		return meta
	}
	end := len(bytes.TrimRight(meta, " \t\r\n")) - 1 // the object's closing brace
	out := make([]byte, 0, len(meta)+len(s.serverInfoMeta))
	out = append(out, meta[:end]...)
	if len(bytes.TrimSpace(obj[1:len(obj)-1])) > 0 {
		out = append(out, ',')
	}
	out = append(out, s.serverInfoMeta[1:len(s.serverInfoMeta)-1]...)
	return append(out, meta[end:]...)
}

// statelessTail completes the answer at dst[start:], when it is a result,
// as 2026-07-28 requires: resultType "complete" unless the result has
// one, the server's identity in its _meta, and, for hint non-nil (a
// cacheable result), ttlMs and cacheScope unless present. An error
// answer is left as it is. It scans the result: it serves the results
// the engine did not encode itself (receiving middleware's); the
// engine's own get their tail from appendTail.
func (s *Server) statelessTail(dst []byte, start int, hint *handlers.CacheHint) []byte {
	resp := dst[start:]
	res, found, err := codec.ObjectField(resp, "result")
	if err != nil || !found || len(res) < 2 || res[0] != '{' {
		return dst
	}
	resOff := start + int(uintptr(unsafe.Pointer(unsafe.SliceData(res)))-uintptr(unsafe.Pointer(unsafe.SliceData(resp))))
	var v [4][]byte
	if codec.ObjectFields(res, tailKeys, v[:]) != nil {
		return dst
	}
	var meta []byte
	if len(v[1]) >= 2 && v[1][0] == '{' {
		meta = v[1]
	}
	metaEnd := -1
	if meta != nil {
		if _, has, _ := codec.ObjectField(meta, mcp.MetaServerInfo); !has {
			metaEnd = start + int(uintptr(unsafe.Pointer(unsafe.SliceData(meta)))-uintptr(unsafe.Pointer(unsafe.SliceData(resp)))) + len(meta) - 1
		}
	}
	resEnd := resOff + len(res) - 1 // the result's closing brace
	var ins [256]byte
	add := ins[:0]
	empty := bytes.Equal(bytes.TrimSpace(res[1:len(res)-1]), nil)
	sep := func() {
		if !empty || len(add) > 0 {
			add = append(add, ',')
		}
	}
	if v[0] == nil {
		sep()
		add = append(add, `"resultType":"complete"`...)
	}
	if hint != nil {
		if v[2] == nil {
			sep()
			add = append(add, `"ttlMs":`...)
			add = strconv.AppendInt(add, hint.TTL.Milliseconds(), 10)
		}
		if v[3] == nil {
			sep()
			add = append(add, `"cacheScope":`...)
			add = codec.AppendString(add, hint.Scope())
		}
	}
	if v[1] == nil {
		sep()
		add = append(add, `"_meta":`...)
		add = append(add, s.serverInfoMeta...)
	}
	if len(add) > 0 {
		dst = slices.Insert(dst, resEnd, add...)
	}
	if metaEnd >= 0 {
		if len(bytes.TrimSpace(meta[1:len(meta)-1])) > 0 {
			dst = slices.Insert(dst, metaEnd, ',')
			metaEnd++
		}
		dst = slices.Insert(dst, metaEnd, s.serverInfoMeta[1:len(s.serverInfoMeta)-1]...)
	}
	return dst
}

var tailKeys = []string{"resultType", "_meta", "ttlMs", "cacheScope"}

package cluster

import (
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/internal/bytesconv"
	"github.com/mcpedge/mcpedge/session"
	"github.com/valyala/fasthttp"
)

// Direct messages (docs/cluster.md, "A cheaper hop"). Most of what a
// session's request must have its owner serve is a message the owner's
// engine answers at once (engine.ServedAtOnce): a client's answer to a
// server-to-client request, tasks/get, tasks/list, tasks/cancel,
// logging/setLevel, resources/subscribe and unsubscribe, a notification
// for the home. On a direct link such a message goes alone, as a
// direct message: the session's id, the subject its credentials name,
// the request's trace context headers, the message. The node that
// received the request checked all its HTTP part (Host, Origin,
// credentials, headers) before it offered it to the cluster; the owner
// serves the message in the session it holds (session.Shared's
// ServeDirect) on the link's reader itself, since the engine answers it
// without waiting, and sends back the status, Retry-After and body the
// request would have had there, which the receiving node writes as its
// own answer (directWriter). So a direct message costs the owner no
// worker, no tunnel and no HTTP request rebuilt, and both ends no
// headers encoded and parsed.
//
// The owner serves a direct message only when nothing is out of the
// ordinary: the session held there, bound to that subject, the server
// not shutting down. Otherwise it answers frNotDirect, having done
// nothing, and the whole request follows, as any other forward: the
// owner's transport then does what it does (restores the session,
// refuses the credentials, answers 404 or 503).
//
// The link frame of a direct message (kind lkDirect):
//
//	session(len, bytes) subject(len, bytes) traceparent(len, bytes)
//	tracestate(len, bytes) decoded message...
//
// decoded is 0, or 1 and the message as the receiving node decoded it:
// its kind (a byte, codec.Kind) and where its id, method, params, result
// and error lie in it (each an offset and its length plus one, 0 for
// none), so that the owner does not decode it again (0 when one of them
// lies outside the message: Decode unescaped or corrected it).
//
// Its answer is one frame, frDirect or frNotDirect (wire.go).

// lkDirect is the link frame kind of a direct message.
const lkDirect = 'M'

// maxRetryAfter bounds the Retry-After of a direct answer, in seconds.
const maxRetryAfter = 1 << 20

// direct is a request's message, which may go to its owner as a direct
// message (sendDirect decides).
type direct struct {
	m   *codec.Message        // the request's message, decoded from its body
	req session.DirectRequest // its session and subject set by directOf, the rest by fill
	w   directWriter          // writes its answer (fill)
}

// directWriter is what the transport attached to a node (Attach) offers
// to write a direct message's answer as it writes its own
// (mcphttp.Server.WriteDirect: compressed, as the client admits).
type directWriter interface {
	WriteDirect(ctx *fasthttp.RequestCtx, status, retryAfter int, body []byte)
}

// directOf fills dm with m, the message of ctx's request of session sid,
// whose credentials name subject, and returns it, when this node has
// links to send it on; nil otherwise. Nothing is looked at yet: most
// requests are served where they land, and sendDirect decides for those
// that are not.
func (n *Node) directOf(dm *direct, sid []byte, m *codec.Message, subject string) *direct {
	if n.linkLn == nil {
		return nil
	}
	dm.m, dm.req.Session, dm.req.Subject = m, sid, subject
	return dm
}

// fill fills dm.req from ctx, and reports whether dm may go as a direct
// message: the engine answers its message at once, the request's body is
// the message as it stands (not compressed), and this node's transport
// writes direct answers.
func (n *Node) fill(dm *direct, ctx *fasthttp.RequestCtx) bool {
	if !engine.ServedAtOnce(dm.m) || len(ctx.Request.Header.ContentEncoding()) > 0 {
		return false
	}
	w, ok := n.shared().(directWriter)
	if !ok {
		return false
	}
	dm.w = w
	dm.req.Message = ctx.Request.Body()
	dm.req.TraceParent = ctx.Request.Header.PeekCanonical(hdrTraceParent)
	dm.req.TraceState = ctx.Request.Header.PeekCanonical(hdrTraceState)
	return true
}

// sendDirect sends dm, ctx's message, when it is not nil, on the direct
// link to owner (with tr, carrying its trace context) and returns the
// forward its answer comes to. It returns nil, having sent nothing, when
// dm may not go: not such a message (fill), this node cut off from the
// cluster (the owner's changes would reach no other node), no link
// (useLink false, or none to owner), a message over the frame limit, the
// link down. The whole request goes then, and meets what refuses it.
func (n *Node) sendDirect(ctx *fasthttp.RequestCtx, owner string, useLink bool, tr *forwardTrace, dm *direct) *forward {
	if dm == nil || !useLink || !n.fill(dm, ctx) || n.cutOff() {
		return nil
	}
	lc := n.linkTo(owner)
	if lc == nil {
		return nil
	}
	r := &dm.req
	size := len(r.Session) + len(r.Subject) + len(r.TraceParent) + len(r.TraceState) + len(r.Message) + 64
	if size > n.maxFrame {
		return nil
	}
	f := n.register(owner, lc)
	wake, err := lc.startFrame(lkDirect, f.token, size)
	if err != nil {
		n.unregister(f)
		return nil
	}
	lc.out = appendDirect(lc.out, r, dm.m, tr) // encoded where it waits: no copy
	lc.endFrame(wake)
	n.stats.forwardedLink.Add(1)
	n.stats.forwardedDirect.Add(1)
	return f
}

// appendDirect appends the link frame's payload of direct message r,
// which m is decoded from, with tr's trace parent in place of the
// request's when tr is not nil.
func appendDirect(dst []byte, r *session.DirectRequest, m *codec.Message, tr *forwardTrace) []byte {
	dst = appendBytes(dst, r.Session)
	dst = appendStr(dst, r.Subject)
	if tr != nil {
		dst = appendStr(dst, tr.parent)
	} else {
		dst = appendBytes(dst, r.TraceParent)
	}
	dst = appendBytes(dst, r.TraceState)
	dst = appendDecoded(dst, r.Message, m)
	return append(dst, r.Message...)
}

// appendDecoded appends where m's members lie in msg, which m is decoded
// from; 0 alone when one of them lies elsewhere, or m is nil.
func appendDecoded(dst, msg []byte, m *codec.Message) []byte {
	if m == nil {
		return append(dst, 0)
	}
	k := len(dst)
	dst = append(dst, 1, byte(m.Kind))
	mv := codec.Mover{Old: msg}
	for _, f := range [...][]byte{m.ID, bytesconv.S2B(m.Method), m.Params, m.Result, m.Error} {
		if f == nil {
			dst = append(dst, 0, 0)
			continue
		}
		off, ok := mv.Offset(f)
		if !ok {
			return append(dst[:k], 0)
		}
		dst = appendUvarint(appendUvarint(dst, off), len(f)+1)
	}
	return dst
}

// parseDirect parses the payload of a direct message into r, whose slices
// (and Subject) alias b; its decoded message, when the payload carries
// it, into m.
func parseDirect(b []byte, r *session.DirectRequest, m *codec.Message) bool {
	rd := reader{b: b}
	r.Session = rd.bytes()
	subject := rd.bytes()
	r.TraceParent = rd.bytes()
	r.TraceState = rd.bytes()
	var at [5][2]uint64
	decoded := rd.byte() == 1
	var kind byte
	if decoded {
		kind = rd.byte()
		for i := range at {
			at[i] = [2]uint64{rd.uvarint(), rd.uvarint()}
		}
	}
	r.Message = rd.b
	r.Subject = bytesconv.B2S(subject)
	if rd.bad || len(r.Session) == 0 || len(r.Session) > maxIDLen || len(r.Message) == 0 ||
		len(subject) > maxIDLen || len(r.TraceParent) > maxIDLen || len(r.TraceState) > 512 {
		return false
	}
	r.Decoded = nil
	if !decoded {
		return true
	}
	var f [5][]byte
	for i, a := range at {
		if a[1] == 0 {
			continue
		}
		end := a[0] + a[1] - 1
		if a[0] > uint64(len(r.Message)) || end > uint64(len(r.Message)) || end < a[0] {
			return false
		}
		f[i] = r.Message[a[0]:end:end]
	}
	*m = codec.Message{JSONRPC: "2.0", Kind: codec.Kind(kind), ID: f[0], Method: bytesconv.B2S(f[1]), Params: f[2], Result: f[3], Error: f[4]}
	if !decodedOK(m) {
		return false
	}
	r.Decoded = m
	return true
}

// decodedOK reports whether m, a message a peer decoded, is one Decode
// could give: its members those of its kind.
func decodedOK(m *codec.Message) bool {
	hasID, hasMethod := len(m.ID) > 0, len(m.Method) > 0
	switch m.Kind {
	case codec.KindRequest:
		return hasID && hasMethod && m.Result == nil && m.Error == nil
	case codec.KindNotification:
		return !hasID && hasMethod && m.Result == nil && m.Error == nil
	case codec.KindResponse:
		return hasID && !hasMethod && m.Result != nil && m.Error == nil
	case codec.KindError:
		return hasID && !hasMethod && m.Error != nil && m.Result == nil
	}
	return false
}

// serveDirect serves a direct message that came on link lc as request id:
// with the attached transport's ServeDirect, on the link's reader, which
// the engine does not keep waiting. Not served so, it is answered
// frNotDirect, and its whole request follows.
func (n *Node) serveDirect(lc *linkConn, id uint64, payload []byte) {
	r := &lc.dreq
	ok := parseDirect(payload, r, &lc.dmsg)
	if !ok {
		n.badMessage("direct message", payload)
	}
	var h session.Shared
	if ok {
		h = n.shared()
	}
	if h != nil && !n.closed.Load() && h.ServeDirect(r, lc, id) {
		n.stats.servedDirect.Add(1)
	} else {
		n.stats.notDirect.Add(1)
		_ = lc.write(lkAnswer, id, notDirectFrame)
	}
	*r = session.DirectRequest{}
	lc.dmsg = codec.Message{}
}

// notDirectFrame answers a direct message that was not served so.
var notDirectFrame = []byte{frNotDirect, 0}

// DirectAnswer implements session.DirectReply: the answer of the direct
// message this link carried as request token goes back on it, one frame.
func (lc *linkConn) DirectAnswer(token uint64, status, retryAfter int, body []byte) {
	var head [24]byte
	h := appendFrameStart(head[:0], frDirect, 0)
	h = appendUvarint(h, status)
	h = appendUvarint(h, min(retryAfter, maxRetryAfter))
	_ = lc.write2(lkAnswer, token, h, body)
}

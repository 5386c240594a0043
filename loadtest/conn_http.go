package loadtest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/valyala/fasthttp"
)

// httpDoer is the part of fasthttp's HostClient and PipelineClient that
// mcpload uses.
type httpDoer interface {
	DoTimeout(req *fasthttp.Request, resp *fasthttp.Response, timeout time.Duration) error
}

// httpSession is one MCP session over Streamable HTTP: each call is a POST
// carrying the session id, answered with JSON or with an SSE stream that
// ends with the answer. Calls are safe for concurrent use; the HTTP
// connections are the target's, shared by its sessions. In a cluster (the
// target has peers) the session is initialized, notified and closed on its
// own target, and each call goes to the next peer in turn, with the same
// session id.
type httpSession struct {
	t       *httpTarget
	rr      atomic.Uint64 // cluster: the peer of the last call
	sid     []byte
	version []byte
	nextID  atomic.Uint64
	lost    atomic.Pointer[Error]
	// initializing is set while the handshake runs, alone on the session:
	// only then is the session id read from an answer.
	initializing bool
	// modern: protocol 2026-07-28, each POST on its own, with the
	// revision's headers (version is ProtocolStateless) and no session.
	modern bool
}

const protocolVersion = "2025-11-25"

var (
	hAccept  = []byte("application/json, text/event-stream")
	hJSON    = []byte("application/json")
	hSSE     = []byte("text/event-stream")
	hSession = "Mcp-Session-Id"
	hVersion = "Mcp-Protocol-Version"
	hMethod  = "Mcp-Method"
	hName    = "Mcp-Name"
	hAuth    = []byte("Authorization")
)

// bearerHeaders encodes each token's Authorization header value once.
func bearerHeaders(tokens []string) [][]byte {
	if len(tokens) == 0 {
		return nil
	}
	out := make([][]byte, len(tokens))
	for i, t := range tokens {
		out[i] = []byte("Bearer " + t)
	}
	return out
}

// authorize sets the next bearer token on req, if the run has any.
func (o *sessionOpts) authorize(req *fasthttp.Request) {
	switch n := uint64(len(o.bearer)); n {
	case 0:
	case 1:
		req.Header.SetCanonical(hAuth, o.bearer[0])
	default:
		req.Header.SetCanonical(hAuth, o.bearer[(o.bearerNext.Add(1)-1)%n])
	}
}

func (s *httpSession) broken() *Error { return s.lost.Load() }

// Close ends the session on the server with a DELETE.
func (s *httpSession) Close() error {
	if len(s.sid) == 0 {
		return nil
	}
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(s.t.url)
	req.Header.SetMethod(fasthttp.MethodDelete)
	req.Header.SetBytesV(hSession, s.sid)
	s.t.opts.authorize(req)
	_ = s.t.client.DoTimeout(req, resp, s.t.opts.timeout)
	return nil
}

// Call POSTs one request and reads its answer. It is safe for concurrent
// use: the target's connection pool bounds the requests in flight. In a
// cluster, the request goes to the next peer (initialize to the session's
// own target).
func (s *httpSession) Call(ctx context.Context, method string, params, dst []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return dst, err
	}
	if e := s.lost.Load(); e != nil {
		return dst, e
	}
	t := s.t
	if t.peers == nil || s.initializing {
		return s.call(t, method, params, dst)
	}
	if !t.opts.sticky {
		t = t.peers[s.rr.Add(1)%uint64(len(t.peers))]
	}
	t.calls.Add(1)
	res, err := s.call(t, method, params, dst)
	if err != nil {
		t.failed.Add(1)
	}
	return res, err
}

// call POSTs one request to t and reads its answer.
func (s *httpSession) call(t *httpTarget, method string, params, dst []byte) ([]byte, error) {
	var idb [20]byte
	id := strconv.AppendUint(idb[:0], s.nextID.Add(1), 10)
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	s.prepare(req, t)
	b := codec.GetBuffer()
	defer codec.PutBuffer(b)
	if s.modern {
		s.modernHeaders(req, method, params, b)
	}
	b.B = codec.AppendRequest(b.B[:0], id, method, params)
	req.SetBodyRaw(b.B)
	if err := t.client.DoTimeout(req, resp, t.opts.timeout); err != nil {
		return dst, httpError(err)
	}
	return s.answer(resp, id, dst)
}

// prepare sets the headers of a POST to t.
func (s *httpSession) prepare(req *fasthttp.Request, t *httpTarget) {
	req.SetRequestURI(t.url)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentTypeBytes(hJSON)
	req.Header.SetBytesV("Accept", hAccept)
	if len(s.sid) > 0 {
		req.Header.SetBytesV(hSession, s.sid)
	}
	if len(s.version) > 0 {
		req.Header.SetBytesV(hVersion, s.version)
	}
	s.t.opts.authorize(req)
}

// modernHeaders sets the 2026-07-28 headers that name a request's method
// and, for tools/call, prompts/get and resources/read, its tool, prompt
// or resource (SEP-2243); b is scratch.
func (s *httpSession) modernHeaders(req *fasthttp.Request, method string, params []byte, b *codec.Buffer) {
	req.Header.Set(hMethod, method)
	var ok bool
	if b.B, ok = mcpName(b.B[:0], method, params); ok {
		req.Header.SetBytesV(hName, b.B)
	}
}

// notify POSTs a notification, which must be answered 202.
func (s *httpSession) notify(method string, params []byte) error {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	s.prepare(req, s.t)
	req.SetBody(codec.AppendNotification(nil, method, params))
	if err := s.t.client.DoTimeout(req, resp, s.t.opts.timeout); err != nil {
		return httpError(err)
	}
	if c := resp.StatusCode(); c != fasthttp.StatusAccepted && c != fasthttp.StatusOK {
		return &Error{Kind: KindTransport, Code: c, Msg: "notification " + method + " answered " + strconv.Itoa(c)}
	}
	return nil
}

// answer reads the answer to the request with id from resp.
func (s *httpSession) answer(resp *fasthttp.Response, id, dst []byte) ([]byte, error) {
	status := resp.StatusCode()
	if status != fasthttp.StatusOK {
		e := &Error{Kind: KindTransport, Code: status, Msg: "HTTP status " + strconv.Itoa(status)}
		if m := errorBody(resp); m != "" {
			e.Msg += ": " + m
		}
		if status == fasthttp.StatusNotFound && len(s.sid) > 0 {
			e.Msg += ": session lost"
			s.lost.CompareAndSwap(nil, e)
		}
		return dst, e
	}
	if s.initializing {
		if sid := resp.Header.Peek(hSession); len(sid) > 0 {
			s.sid = append([]byte(nil), sid...)
		}
	}
	ct := resp.Header.ContentType()
	body := resp.Body()
	var msg codec.Message
	switch {
	case bytes.HasPrefix(ct, hJSON):
		return s.result(body, id, &msg, dst)
	case bytes.HasPrefix(ct, hSSE):
		var p codec.SSEParser
		p.MaxSize = s.t.opts.maxFrame
		for len(body) > 0 {
			ev, n, ok, err := p.Next(body)
			if err != nil {
				return dst, &Error{Kind: KindProtocol, Err: err, Msg: "event stream"}
			}
			if n == 0 {
				break
			}
			body = body[n:]
			if !ok || len(ev.Data) == 0 {
				continue
			}
			if err := codec.Decode(ev.Data, &msg); err != nil {
				return dst, &Error{Kind: KindProtocol, Err: err, Msg: "event " + clip(ev.Data)}
			}
			switch msg.Kind {
			case codec.KindNotification:
				if s.t.opts.onNote != nil {
					s.t.opts.onNote(msg.Method, msg.Params)
				}
				continue
			case codec.KindRequest:
				continue // a server request on a POST stream: nothing to answer it with here
			}
			return s.result(ev.Data, id, &msg, dst)
		}
		return dst, &Error{Kind: KindProtocol, Msg: "event stream ended without the answer"}
	}
	return dst, &Error{Kind: KindTransport, Code: status, Msg: "content type " + strconv.Quote(string(ct))}
}

// errorBody returns what the body of a refusal says: the JSON-RPC error
// it carries (2026-07-28 answers some errors with a status of their own),
// or the start of a text body, or "".
func errorBody(resp *fasthttp.Response) string {
	body := bytes.TrimSpace(resp.Body())
	if len(body) == 0 {
		return ""
	}
	if bytes.HasPrefix(resp.Header.ContentType(), hJSON) {
		var msg codec.Message
		if codec.Decode(body, &msg) == nil && msg.Kind == codec.KindError {
			return rpcError(msg.Error).Error()
		}
	}
	return clip(body)
}

// result checks that data is the answer to id and appends its result.
func (s *httpSession) result(data, id []byte, msg *codec.Message, dst []byte) ([]byte, error) {
	if msg.Kind == codec.KindInvalid {
		if err := codec.Decode(data, msg); err != nil {
			return dst, &Error{Kind: KindProtocol, Err: err, Msg: "answer " + clip(data)}
		}
	}
	switch msg.Kind {
	case codec.KindResponse, codec.KindError:
	default:
		return dst, &Error{Kind: KindProtocol, Msg: "answer is a " + msg.Kind.String()}
	}
	if !bytes.Equal(msg.ID, id) {
		return dst, &Error{Kind: KindIDMismatch, Msg: "answer to id " + string(msg.ID) + ", asked " + string(id)}
	}
	if msg.Kind == codec.KindError {
		return dst, rpcError(msg.Error)
	}
	return append(dst, msg.Result...), nil
}

// httpError classifies a fasthttp client error.
func httpError(err error) *Error {
	var ne net.Error
	var oe *net.OpError
	switch {
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, fasthttp.ErrNoFreeConns):
		return &Error{Kind: KindTimeout, Err: err}
	case errors.Is(err, fasthttp.ErrDialTimeout):
		return &Error{Kind: KindConnect, Err: err}
	case errors.As(err, &oe) && oe.Op == "dial":
		return &Error{Kind: KindConnect, Err: err}
	case errors.Is(err, fasthttp.ErrConnectionClosed), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return &Error{Kind: KindClosed, Err: err}
	case errors.As(err, &ne) && ne.Timeout():
		return &Error{Kind: KindTimeout, Err: err}
	}
	return &Error{Kind: KindTransport, Err: err}
}

package gateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/client"
	"github.com/mcpedge/mcpedge/client/oauth"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/valyala/fasthttp"
)

// An HTTP upstream is reached over Streamable HTTP with fasthttp: a
// bounded pool of keep-alive connections (fasthttp.HostClient) that every
// session of the upstream shares. Each upstream "connection" of a pool
// is an httpPipe, one MCP session (or, in 2026-07-28, none), carrying the
// messages of a muxConn as POSTs: the same multiplexing, linking and
// relays as a stream's. A POST's answer (JSON, or an SSE stream of the
// request's progress, logs and server-to-client requests before its
// result) is fed to the muxConn as it arrives. POSTs run on the pipe's
// workers (bounded by max-inflight), so a caller waiting for an answer is
// never blocked in the HTTP exchange: a downstream cancellation is sent
// upstream at once. A stream that breaks before its answer is resumed
// with GET and Last-Event-ID. An endpoint that refuses Streamable HTTP's
// initialize (404, 405) is spoken to with the legacy HTTP+SSE transport
// instead (client.SSETransport, over the same muxConn).
//
// The client library's HTTP transport (net/http, a goroutine and several
// allocations per call: about 27.8 µs of client CPU per call) is not used
// here: this path is fasthttp's, as mcpload's (about 8.4 µs).

// httpShared is what an HTTP upstream's pipes share.
type httpShared struct {
	url     string
	hc      *fasthttp.HostClient // calls
	stream  *fasthttp.HostClient // long-lived streams: GET, subscriptions/listen
	headers [][2]string          // static credentials and the like
	oauth   *oauth.Authorizer    // client credentials, when configured
	maxMsg  int
	timeout time.Duration
	legacy  atomic.Bool // the endpoint speaks HTTP+SSE only
	params  func(tool string) []mcp.HeaderParam
}

func newHTTPShared(u *upstream) (*httpShared, error) {
	pu, err := url.Parse(u.cfg.URL)
	if err != nil {
		return nil, err
	}
	addr := pu.Host
	tls := pu.Scheme == "https"
	if pu.Port() == "" {
		if tls {
			addr += ":443"
		} else {
			addr += ":80"
		}
	}
	sh := &httpShared{url: u.cfg.URL, maxMsg: u.g.opts.MaxMessage, timeout: u.cfg.Timeout, params: u.m.headerParams}
	mk := func(conns int, read time.Duration) *fasthttp.HostClient {
		return &fasthttp.HostClient{
			Addr: addr, IsTLS: tls, Name: "mcpedge-gateway",
			MaxConns:                      conns,
			MaxIdleConnDuration:           30 * time.Second,
			ReadTimeout:                   read,
			WriteTimeout:                  u.cfg.Timeout,
			MaxResponseBodySize:           sh.maxMsg,
			StreamResponseBody:            true,
			DisableHeaderNamesNormalizing: false,
			NoDefaultUserAgentHeader:      false,
		}
	}
	// A call's exchange lives at most twice the call's timeout: by then
	// the call has failed, and its worker is let go.
	sh.hc = mk(u.cfg.MaxInflight, 2*u.cfg.Timeout)
	sh.stream = mk(4*len(u.session.slots)+8, 0)
	for k, v := range u.cfg.Headers {
		sh.headers = append(sh.headers, [2]string{k, v})
	}
	if o := u.cfg.OAuth; o != nil {
		sh.oauth, err = oauth.New(u.cfg.URL, oauth.Config{ClientID: o.ClientID, ClientSecret: o.ClientSecret, Scopes: o.Scopes, GrantType: oauth.GrantClientCredentials})
		if err != nil {
			return nil, err
		}
	}
	return sh, nil
}

// httpPipe is one upstream session over Streamable HTTP: a client.Conn
// for a muxConn.
type httpPipe struct {
	sh    *httpShared
	in    client.Inbound
	era   era
	sid   atomic.Pointer[[]byte] // Mcp-Session-Id
	ver   atomic.Pointer[[]byte] // MCP-Protocol-Version
	work  chan *codec.Buffer
	nwork atomic.Int32
	max   int32

	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup
	once   sync.Once
	ended  atomic.Bool

	smu     sync.Mutex
	streams map[*fasthttp.Response]struct{} // event streams being read, interrupted by end
	byID    map[string]*fasthttp.Response   // 2026-07-28: those streams by the id of the request they answer (cancelStream)
}

// track registers an event stream being read, so that end interrupts
// it; it reports false when the pipe has ended.
func (p *httpPipe) track(resp *fasthttp.Response) bool {
	p.smu.Lock()
	defer p.smu.Unlock()
	if p.ended.Load() {
		return false
	}
	if p.streams == nil {
		p.streams = map[*fasthttp.Response]struct{}{}
	}
	p.streams[resp] = struct{}{}
	return true
}

func (p *httpPipe) untrack(resp *fasthttp.Response) {
	p.smu.Lock()
	delete(p.streams, resp)
	p.smu.Unlock()
}

// errLegacy reports an endpoint that refused Streamable HTTP's initialize.
var errLegacy = errors.New("the endpoint does not speak Streamable HTTP")

func newHTTPPipe(sh *httpShared, in client.Inbound, e era, maxWorkers int) *httpPipe {
	p := &httpPipe{sh: sh, in: in, era: e, work: make(chan *codec.Buffer), max: int32(maxWorkers)}
	p.ctx, p.cancel = context.WithCancelCause(context.Background())
	if e == statelessEra {
		v := []byte(mcp.Version20260728)
		p.ver.Store(&v)
	}
	return p
}

// Send implements client.Conn: msg (copied) goes to a worker, which POSTs
// it and feeds the answer to the muxConn.
func (p *httpPipe) Send(_ context.Context, msg []byte) error {
	if p.ended.Load() {
		return context.Cause(p.ctx)
	}
	b := codec.GetBuffer()
	b.B = append(b.B[:0], msg...)
	select {
	case p.work <- b:
		return nil
	default:
	}
	if n := p.nwork.Add(1); n <= p.max {
		p.wg.Add(1)
		go p.worker()
	} else {
		p.nwork.Add(-1)
	}
	select {
	case p.work <- b:
		return nil
	case <-p.ctx.Done():
		codec.PutBuffer(b)
		return context.Cause(p.ctx)
	}
}

// workerIdle is how long an idle worker waits for work before it exits.
const workerIdle = 30 * time.Second

func (p *httpPipe) worker() {
	defer p.wg.Done()
	defer p.nwork.Add(-1)
	t := time.NewTimer(workerIdle)
	defer t.Stop()
	for {
		select {
		case b := <-p.work:
			p.post(b.B)
			codec.PutBuffer(b)
			t.Reset(workerIdle)
		case <-t.C:
			return
		case <-p.ctx.Done():
			return
		}
	}
}

// Close implements client.Conn.
func (p *httpPipe) Close() error {
	p.end(client.ErrClosed)
	p.wg.Wait()
	return nil
}

// end ends the pipe with cause, once: the muxConn is told.
func (p *httpPipe) end(cause error) {
	p.once.Do(func() {
		p.smu.Lock()
		p.ended.Store(true)
		for resp := range p.streams {
			_ = resp.CloseBodyStream() // interrupts its read
		}
		p.smu.Unlock()
		p.cancel(cause)
		go func() {
			// After the workers: no Message after Closed.
			p.wg.Wait()
			if sid := p.sid.Load(); sid != nil && !errors.Is(cause, errSessionGone) {
				p.deleteSession(*sid)
			}
			p.in.Closed(cause)
		}()
	})
}

var errSessionGone = errors.New("the upstream ended the session (404)")

var (
	hJSON     = []byte("application/json")
	hSSE      = []byte("text/event-stream")
	hAccept   = []byte("application/json, text/event-stream")
	hSession  = []byte("Mcp-Session-Id")
	hVersion  = []byte("MCP-Protocol-Version")
	hLastID   = []byte("Last-Event-ID")
	hMethod   = []byte("Mcp-Method")
	hName     = []byte("Mcp-Name")
	hAuthz    = []byte("Authorization")
	hAcceptN  = []byte("Accept")
	initBytes = []byte(`"method":"initialize"`)
)

// prepare sets what every request to the upstream carries.
func (p *httpPipe) prepare(req *fasthttp.Request, method string) error {
	req.SetRequestURI(p.sh.url)
	req.Header.SetMethod(method)
	req.Header.SetBytesKV(hAcceptN, hAccept)
	if sid := p.sid.Load(); sid != nil {
		req.Header.SetBytesKV(hSession, *sid)
	}
	if v := p.ver.Load(); v != nil {
		req.Header.SetBytesKV(hVersion, *v)
	}
	for _, h := range p.sh.headers {
		req.Header.Set(h[0], h[1])
	}
	if p.sh.oauth != nil {
		tok, err := p.sh.oauth.Authorization(p.ctx)
		if err != nil {
			return fmt.Errorf("credentials: %w", err)
		}
		if tok != "" {
			req.Header.SetBytesK(hAuthz, tok)
		}
	}
	return nil
}

// challenged answers a 401 (or 403 insufficient_scope) with the OAuth
// client credentials flow; it reports whether to send the request again.
func (p *httpPipe) challenged(req *fasthttp.Request, resp *fasthttp.Response) bool {
	st := resp.StatusCode()
	if p.sh.oauth == nil || (st != fasthttp.StatusUnauthorized && st != fasthttp.StatusForbidden) {
		return false
	}
	hr := &http.Response{StatusCode: st, Header: http.Header{}, Request: &http.Request{Header: http.Header{}}}
	hr.Header.Set("WWW-Authenticate", string(resp.Header.Peek("WWW-Authenticate")))
	hr.Request.Header.Set("Authorization", string(req.Header.PeekBytes(hAuthz)))
	return p.sh.oauth.Challenge(p.ctx, hr) == nil
}

// post sends one message and feeds its answer, if any, to the muxConn.
func (p *httpPipe) post(msg []byte) {
	var m codec.Message
	_ = codec.Decode(msg, &m) // the gateway's own encoding
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	if err := p.prepare(req, fasthttp.MethodPost); err != nil {
		p.failRequest(&m, err)
		return
	}
	req.Header.SetContentTypeBytes(hJSON)
	if p.era == statelessEra && m.Kind == codec.KindRequest {
		p.statelessHeaders(req, &m)
	}
	req.SetBodyRaw(msg)
	hc := p.sh.hc
	if m.Method == mcp.MethodSubscriptionsListen {
		hc = p.sh.stream
	}
	for try := 0; ; try++ {
		if err := hc.Do(req, resp); err != nil {
			p.failRequest(&m, fmt.Errorf("POST: %w", err))
			if isConnError(err) {
				p.end(fmt.Errorf("%w: %w", client.ErrConnectionLost, err))
			}
			return
		}
		if try > 0 || !p.challenged(req, resp) {
			break
		}
		_ = resp.CloseBodyStream()
		if err := p.prepare(req, fasthttp.MethodPost); err != nil {
			p.failRequest(&m, err)
			return
		}
	}
	defer resp.CloseBodyStream() //nolint:errcheck
	status := resp.StatusCode()
	switch {
	case status == fasthttp.StatusAccepted:
		return
	case status == fasthttp.StatusNotFound && p.sid.Load() != nil:
		p.failRequest(&m, errSessionGone)
		p.end(errSessionGone)
		return
	case status >= 300:
		if m.Kind == codec.KindRequest && bytes.Contains(msg[:min(len(msg), 64)], initBytes) &&
			(status == fasthttp.StatusNotFound || status == fasthttp.StatusMethodNotAllowed) {
			p.sh.legacy.Store(true)
			p.failRequest(&m, errLegacy)
			return
		}
		p.refused(&m, resp, status)
		return
	}
	if m.Kind == codec.KindRequest && m.Method == mcp.MethodInitialize {
		if sid := resp.Header.PeekBytes(hSession); len(sid) > 0 {
			s := bytes.Clone(sid)
			p.sid.Store(&s)
		}
	}
	p.read(resp, &m)
}

// read feeds the answer in resp to the muxConn: one JSON message, or an
// event stream, resumed with GET and Last-Event-ID when it ends before
// the answer to m.
func (p *httpPipe) read(resp *fasthttp.Response, m *codec.Message) {
	ct := resp.Header.ContentType()
	body := resp.BodyStream()
	switch {
	case bytes.HasPrefix(ct, hJSON):
		b := codec.GetBuffer()
		defer codec.PutBuffer(b)
		var err error
		if b.B, err = readAll(body, b.B[:0], p.sh.maxMsg); err != nil {
			p.failRequest(m, err)
			return
		}
		if len(bytes.TrimSpace(b.B)) > 0 {
			p.in.Message(b.B)
		}
	case bytes.HasPrefix(ct, hSSE):
		if !p.track(resp) {
			return
		}
		defer p.untrack(resp)
		if p.era == statelessEra && m.Kind == codec.KindRequest {
			p.trackID(m.ID, resp)
			defer p.untrackID(m.ID)
		}
		var sp codec.SSEParser
		sp.MaxSize = p.sh.maxMsg
		answered, retry, err := p.events(body, &sp, m.ID)
		for tries := 0; !answered && m.Kind == codec.KindRequest && sp.LastEventID() != "" && p.ctx.Err() == nil; tries++ {
			if tries == 5 || err != nil && errors.Is(err, codec.ErrTooLarge) {
				break
			}
			answered, retry, err = p.resume(&sp, m.ID, retry)
		}
		if !answered && m.Kind == codec.KindRequest && m.Method != mcp.MethodSubscriptionsListen {
			if err == nil {
				err = errors.New("the event stream ended before the answer")
			}
			p.failRequest(m, err)
		}
	default:
		p.failRequest(m, fmt.Errorf("content type %q", ct))
	}
}

// events reads an event stream, feeding each message to the muxConn, and
// reports whether it carried the answer to id.
func (p *httpPipe) events(body io.Reader, sp *codec.SSEParser, id []byte) (answered bool, retry time.Duration, err error) {
	b := codec.GetBuffer()
	defer codec.PutBuffer(b)
	buf := b.B[:0]
	if cap(buf) < 16<<10 {
		buf = make([]byte, 0, 16<<10)
	}
	defer func() { b.B = buf[:0] }()
	var m codec.Message
	for {
		if len(buf) == cap(buf) {
			if cap(buf) >= p.sh.maxMsg+4096 {
				return answered, retry, codec.ErrTooLarge
			}
			buf = append(buf, make([]byte, cap(buf))...)[:len(buf)]
		}
		n, rerr := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		used := 0
		for used < len(buf) {
			ev, k, ok, err := sp.Next(buf[used:])
			if err != nil {
				return answered, retry, err
			}
			if k == 0 {
				break
			}
			used += k
			if ev.HasRetry {
				retry = time.Duration(ev.Retry) * time.Millisecond
			}
			if !ok || len(ev.Data) == 0 {
				continue
			}
			if len(id) > 0 && codec.Decode(ev.Data, &m) == nil && (m.Kind == codec.KindResponse || m.Kind == codec.KindError) && bytes.Equal(m.ID, id) {
				answered = true
			}
			p.in.Message(ev.Data)
		}
		buf = buf[:copy(buf, buf[used:])]
		if rerr != nil {
			if errors.Is(rerr, io.EOF) {
				return answered, retry, nil
			}
			return answered, retry, rerr
		}
		if answered {
			return true, retry, nil
		}
	}
}

// resume reopens a broken event stream with GET and Last-Event-ID (after
// the retry delay the server asked for).
func (p *httpPipe) resume(sp *codec.SSEParser, id []byte, retry time.Duration) (bool, time.Duration, error) {
	if retry > 0 {
		t := time.NewTimer(min(retry, p.sh.timeout))
		select {
		case <-t.C:
		case <-p.ctx.Done():
			t.Stop()
			return false, retry, context.Cause(p.ctx)
		}
	}
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	if err := p.prepare(req, fasthttp.MethodGet); err != nil {
		return false, retry, err
	}
	req.Header.SetBytesKV(hAcceptN, hSSE)
	req.Header.SetBytesK(hLastID, sp.LastEventID())
	if err := p.sh.hc.Do(req, resp); err != nil {
		return false, retry, err
	}
	defer resp.CloseBodyStream() //nolint:errcheck
	if resp.StatusCode() != fasthttp.StatusOK || !bytes.HasPrefix(resp.Header.ContentType(), hSSE) {
		return false, retry, fmt.Errorf("resuming the stream: HTTP %d", resp.StatusCode())
	}
	if !p.track(resp) {
		return false, retry, context.Cause(p.ctx)
	}
	defer p.untrack(resp)
	return p.events(resp.BodyStream(), sp, id)
}

// standalone reads the session's GET stream (messages tied to no request:
// list changes, resource updates) until the pipe ends; it reconnects
// with Last-Event-ID when it breaks, and gives up when the server offers
// none (405).
func (p *httpPipe) standalone() {
	defer p.wg.Done()
	var sp codec.SSEParser
	sp.MaxSize = p.sh.maxMsg
	backoff := backoffMin
	for p.ctx.Err() == nil {
		req := fasthttp.AcquireRequest()
		resp := fasthttp.AcquireResponse()
		ok := func() bool {
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			if p.prepare(req, fasthttp.MethodGet) != nil {
				return true
			}
			req.Header.SetBytesKV(hAcceptN, hSSE)
			if id := sp.LastEventID(); id != "" {
				req.Header.SetBytesK(hLastID, id)
			}
			if err := p.sh.stream.Do(req, resp); err != nil {
				return true
			}
			defer resp.CloseBodyStream() //nolint:errcheck
			switch st := resp.StatusCode(); {
			case st == fasthttp.StatusMethodNotAllowed:
				return false
			case st == fasthttp.StatusNotFound:
				p.end(errSessionGone)
				return false
			case st != fasthttp.StatusOK || !bytes.HasPrefix(resp.Header.ContentType(), hSSE):
				return true
			}
			backoff = backoffMin
			if !p.track(resp) {
				return false
			}
			defer p.untrack(resp)
			_, _, _ = p.events(resp.BodyStream(), &sp, nil)
			return true
		}()
		if !ok {
			return
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-p.ctx.Done():
			t.Stop()
			return
		}
		backoff = min(2*backoff, backoffMax)
	}
}

// initialized starts the standalone stream once the session is open.
func (p *httpPipe) initialized(version string) {
	v := []byte(version)
	p.ver.Store(&v)
	p.wg.Add(1)
	go p.standalone()
}

// deleteSession ends the upstream session (DELETE), best effort.
func (p *httpPipe) deleteSession(sid []byte) {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(p.sh.url)
	req.Header.SetMethod(fasthttp.MethodDelete)
	req.Header.SetBytesKV(hSession, sid)
	for _, h := range p.sh.headers {
		req.Header.Set(h[0], h[1])
	}
	if p.sh.oauth != nil {
		if tok, err := p.sh.oauth.Authorization(context.Background()); err == nil && tok != "" {
			req.Header.SetBytesK(hAuthz, tok)
		}
	}
	if err := p.sh.hc.DoTimeout(req, resp, time.Second); err == nil {
		_ = resp.CloseBodyStream()
	}
}

// statelessHeaders sets the 2026-07-28 headers of a request (SEP-2243):
// Mcp-Method, Mcp-Name (what params names: a tool, a prompt, a resource,
// a task), and the Mcp-Param-* headers of the tool's arguments that its
// input schema mirrors (x-mcp-header).
func (p *httpPipe) statelessHeaders(req *fasthttp.Request, m *codec.Message) {
	req.Header.SetBytesK(hMethod, m.Method)
	var key string
	switch m.Method {
	case mcp.MethodToolsCall, mcp.MethodPromptsGet:
		key = "name"
	case mcp.MethodResourcesRead:
		key = "uri"
	case mcp.MethodTasksGet, mcp.MethodTasksUpdate, mcp.MethodTasksCancel:
		key = "taskId"
	default:
		return
	}
	raw, ok, err := codec.ObjectField(m.Params, key)
	if err != nil || !ok {
		return
	}
	var name string
	if codec.UnmarshalNoCopy(raw, &name) != nil {
		return
	}
	setHeaderValue(req, hName, name)
	if m.Method != mcp.MethodToolsCall || p.sh.params == nil {
		return
	}
	hp := p.sh.params(name)
	if len(hp) == 0 {
		return
	}
	args, _, _ := codec.ObjectField(m.Params, "arguments")
	for _, h := range hp {
		if v, ok := argValue(args, h.Path); ok {
			setHeaderValue(req, []byte(h.Header), v)
		}
	}
}

// setHeaderValue sets a header mirroring a value of the body: as it is
// when it is plain visible ASCII, else in the =?base64?...?= form.
func setHeaderValue(req *fasthttp.Request, key []byte, v string) {
	safe := v == strings.TrimSpace(v) && !(strings.HasPrefix(v, "=?base64?") && strings.HasSuffix(v, "?="))
	for i := 0; safe && i < len(v); i++ {
		if c := v[i]; (c < 0x20 || c > 0x7e) && c != '\t' {
			safe = false
		}
	}
	if safe {
		req.Header.SetBytesK(key, v)
		return
	}
	req.Header.SetBytesK(key, "=?base64?"+base64.StdEncoding.EncodeToString([]byte(v))+"?=")
}

// argValue returns the header value of the argument at path in args: a
// string as it is, a number or boolean as its JSON text.
func argValue(args []byte, path []string) (string, bool) {
	v := args
	for _, k := range path {
		raw, ok, err := codec.ObjectField(v, k)
		if err != nil || !ok {
			return "", false
		}
		v = raw
	}
	if len(v) == 0 || v[0] == '{' || v[0] == '[' || string(v) == "null" {
		return "", false
	}
	if v[0] == '"' {
		var s string
		if codec.Unmarshal(v, &s) != nil {
			return "", false
		}
		return s, true
	}
	return string(v), true
}

// failRequest fails the call of request m (a notification or a response
// has none) with an error answer fed to the muxConn.
func (p *httpPipe) failRequest(m *codec.Message, err error) {
	if m.Kind != codec.KindRequest || len(m.ID) == 0 {
		return
	}
	b := codec.AppendError(nil, m.ID, codec.CodeServerBusy, "upstream HTTP: "+err.Error(), nil)
	p.in.Message(b)
}

// refused answers the call of request m that the upstream refused with
// an HTTP status: its JSON-RPC error when the body is one (2026-07-28
// answers some errors with a status of their own), else one naming the
// status.
func (p *httpPipe) refused(m *codec.Message, resp *fasthttp.Response, status int) {
	if m.Kind != codec.KindRequest {
		return
	}
	if bytes.HasPrefix(resp.Header.ContentType(), hJSON) {
		b := codec.GetBuffer()
		defer codec.PutBuffer(b)
		var err error
		if b.B, err = readAll(resp.BodyStream(), b.B[:0], 64<<10); err == nil {
			var e codec.Message
			if codec.Decode(b.B, &e) == nil && e.Kind == codec.KindError && bytes.Equal(e.ID, m.ID) {
				p.in.Message(b.B)
				return
			}
		}
	}
	p.failRequest(m, errors.New("HTTP status "+strconv.Itoa(status)))
}

// readAll appends r's bytes to dst, at most max.
func readAll(r io.Reader, dst []byte, max int) ([]byte, error) {
	for {
		if len(dst) == cap(dst) {
			if len(dst) > max {
				return dst, codec.ErrTooLarge
			}
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if errors.Is(err, io.EOF) {
			if len(dst) > max {
				return dst, codec.ErrTooLarge
			}
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}

// isConnError reports an error reaching the upstream at all (as opposed
// to one exchange going wrong).
func isConnError(err error) bool {
	var oe *net.OpError
	return errors.Is(err, fasthttp.ErrDialTimeout) || (errors.As(err, &oe) && oe.Op == "dial")
}

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
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/client"
	"github.com/mcpedge/mcpedge/client/oauth"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/internal/bytesconv"
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
	fast    *h1Client // the calls (h1.go)

	authMu  sync.Mutex
	authTok *oauth.Token // the token authHdr was made from
	authHdr []byte       // "Bearer ...", read-only once made
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
	slices.SortFunc(sh.headers, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	if o := u.cfg.OAuth; o != nil {
		sh.oauth, err = oauth.New(u.cfg.URL, oauth.Config{ClientID: o.ClientID, ClientSecret: o.ClientSecret, Scopes: o.Scopes, GrantType: oauth.GrantClientCredentials})
		if err != nil {
			return nil, err
		}
	}
	// The calls' connections: as many as one connection's calls in
	// flight (max-inflight), each carrying Pipeline requests at once.
	if sh.fast, err = newH1Client(sh, u.cfg.URL, u.cfg.MaxInflight, u.cfg.Pipeline, u.cfg.Timeout); err != nil {
		return nil, err
	}
	return sh, nil
}

// close closes the upstream's connections.
func (sh *httpShared) close() {
	sh.fast.close()
	sh.hc.CloseIdleConnections()
	sh.stream.CloseIdleConnections()
}

// authorization returns the Authorization header value to send (nil
// without a token yet): made once per token, not per request.
func (sh *httpShared) authorization(ctx context.Context) ([]byte, error) {
	t := sh.oauth.Token()
	sh.authMu.Lock()
	if t != nil && t == sh.authTok && (t.Expiry.IsZero() || time.Until(t.Expiry) > 10*time.Second) {
		h := sh.authHdr
		sh.authMu.Unlock()
		return h, nil
	}
	sh.authMu.Unlock()
	v, err := sh.oauth.Authorization(ctx)
	if err != nil || v == "" {
		return nil, err
	}
	h := []byte(v)
	sh.authMu.Lock()
	sh.authTok, sh.authHdr = sh.oauth.Token(), h
	sh.authMu.Unlock()
	return h, nil
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

	ctx      context.Context
	cancel   context.CancelCauseFunc
	wg       sync.WaitGroup
	once     sync.Once
	ended    atomic.Bool
	dmu      sync.RWMutex // held (read) while a message is fed to in: Closed waits for it
	closedIn bool         // in was told Closed: nothing more is fed to it (under dmu)

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

// Send implements client.Conn. A request (but initialize and
// subscriptions/listen) goes over the calls' connections (h1Client), its
// answer read by the connection's reader; anything else (msg copied) goes
// to a worker, which POSTs it and feeds the answer to the muxConn.
func (p *httpPipe) Send(_ context.Context, msg []byte) error {
	if p.ended.Load() {
		return context.Cause(p.ctx)
	}
	m := messages.Get().(*codec.Message)
	fast := codec.Decode(msg, m) == nil && m.Kind == codec.KindRequest && len(m.ID) <= len(h1Pending{}.id) &&
		m.Method != mcp.MethodInitialize && m.Method != mcp.MethodSubscriptionsListen
	var err error
	if fast {
		err = p.sendFast(msg, m)
	}
	m.Reset()
	messages.Put(m)
	if fast {
		return err
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

// sendFast writes request m (msg) on a connection of the calls.
func (p *httpPipe) sendFast(msg []byte, m *codec.Message) error {
	f := p.sh.fast
	c, err := f.acquire(p.ctx)
	if err != nil {
		if errors.Is(err, errDial) {
			err = fmt.Errorf("%w: %w", client.ErrConnectionLost, err)
			p.end(err)
		}
		return err
	}
	b := codec.GetBuffer()
	defer codec.PutBuffer(b)
	b.B = append(b.B[:0], f.head...)
	if sid := p.sid.Load(); sid != nil {
		b.B = append(append(append(b.B, "Mcp-Session-Id: "...), *sid...), "\r\n"...)
	}
	if v := p.ver.Load(); v != nil {
		b.B = append(append(append(b.B, "MCP-Protocol-Version: "...), *v...), "\r\n"...)
	}
	var retry *codec.Buffer
	if p.sh.oauth != nil {
		tok, err := p.sh.authorization(p.ctx)
		if err != nil {
			c.done()
			return fmt.Errorf("credentials: %w", err)
		}
		if tok != nil {
			b.B = append(append(append(b.B, "Authorization: "...), tok...), "\r\n"...)
		}
		retry = codec.GetBuffer()
		retry.B = append(retry.B[:0], msg...)
	}
	if p.era == statelessEra {
		p.statelessHeaders(m, func(k []byte, v string) { b.B = appendHeader(b.B, bytesconv.B2S(k), v) })
	}
	b.B = append(b.B, "Content-Length: "...)
	b.B = strconv.AppendInt(b.B, int64(len(msg)), 10)
	b.B = append(b.B, "\r\n\r\n"...)
	b.B = append(b.B, msg...)
	return c.send(p, m.ID, b.B, retry)
}

// deliver feeds msg to the muxConn, unless it was told Closed (which
// comes after every delivery begun).
func (p *httpPipe) deliver(msg []byte) {
	p.dmu.RLock()
	if !p.closedIn {
		p.in.Message(msg)
	}
	p.dmu.RUnlock()
}

// retryAuth answers the OAuth challenge of a request refused with 401 or
// 403 (status, its WWW-Authenticate challenge), then sends the request
// (msg) again over the slow path, which answers one more challenge at
// most.
func (p *httpPipe) retryAuth(status int, challenge string, msg *codec.Buffer) {
	defer codec.PutBuffer(msg)
	hr := &http.Response{StatusCode: status, Header: http.Header{}, Request: &http.Request{Header: http.Header{}}}
	hr.Header.Set("WWW-Authenticate", challenge)
	if t := p.sh.oauth.Token(); t != nil {
		hr.Request.Header.Set("Authorization", "Bearer "+t.AccessToken)
	}
	if err := p.sh.oauth.Challenge(p.ctx, hr); err != nil {
		var m codec.Message
		if codec.Decode(msg.B, &m) == nil {
			p.failID(m.ID, fmt.Errorf("HTTP status %d, and the credentials could not be renewed: %w", status, err))
		}
		return
	}
	p.post(msg.B)
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
			// After the workers and the deliveries begun: no Message
			// after Closed.
			p.wg.Wait()
			p.dmu.Lock()
			p.closedIn = true // waited for the deliveries in progress
			p.dmu.Unlock()
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
		p.statelessHeaders(&m, func(k []byte, v string) { req.Header.SetBytesK(k, v) })
	}
	traceHeaders(req, &m) // trace.go
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
		if sid := resp.Header.PeekBytes(hSession); len(sid) > 0 && headerSafe(sid) {
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
			p.deliver(b.B)
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
		answered, retry, err := p.events(body, &sp, m.ID, false)
		if answered || m.Kind != codec.KindRequest || m.Method == mcp.MethodSubscriptionsListen {
			return
		}
		p.resumeAnswer(&sp, m.ID, retry, err)
	default:
		p.failRequest(m, fmt.Errorf("content type %q", ct))
	}
}

// resumeAnswer resumes, with GET and Last-Event-ID, an event stream that
// ended (with err, or not) before the answer to request id, and fails
// the request when no resumption brings it.
func (p *httpPipe) resumeAnswer(sp *codec.SSEParser, id []byte, retry time.Duration, err error) {
	answered := false
	for tries := 0; sp.LastEventID() != "" && p.ctx.Err() == nil; tries++ {
		if tries == 5 || err != nil && errors.Is(err, codec.ErrTooLarge) {
			break
		}
		if answered, retry, err = p.resume(sp, id, retry); answered {
			return
		}
	}
	if err == nil {
		err = errors.New("the event stream ended before the answer")
	}
	p.failID(id, err)
}

// events reads an event stream, feeding each message to the muxConn, and
// reports whether it carried the answer to id. It returns once the answer
// came, or with toEnd at the end of the stream.
func (p *httpPipe) events(body io.Reader, sp *codec.SSEParser, id []byte, toEnd bool) (answered bool, retry time.Duration, err error) {
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
			p.deliver(ev.Data)
		}
		buf = buf[:copy(buf, buf[used:])]
		if rerr != nil {
			if errors.Is(rerr, io.EOF) {
				return answered, retry, nil
			}
			return answered, retry, rerr
		}
		if answered && !toEnd {
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
	return p.events(resp.BodyStream(), sp, id, false)
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
			_, _, _ = p.events(resp.BodyStream(), &sp, nil, false)
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
	if v := []byte(version); headerSafe(v) {
		p.ver.Store(&v)
	}
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
func (p *httpPipe) statelessHeaders(m *codec.Message, set func(k []byte, v string)) {
	set(hMethod, m.Method)
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
	name, ok := stringOf(raw)
	if !ok {
		return
	}
	setHeaderValue(set, hName, name)
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
			setHeaderValue(set, []byte(h.Header), v)
		}
	}
}

// stringOf returns the JSON string raw decoded: in place when it holds no
// escape (the usual case: nothing allocated).
func stringOf(raw []byte) (string, bool) {
	if v, err := codec.StringValue(raw); err == nil {
		return bytesconv.B2S(v), true
	}
	var s string
	if codec.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// setHeaderValue sets a header mirroring a value of the body: as it is
// when it is plain visible ASCII, else in the =?base64?...?= form.
func setHeaderValue(set func(k []byte, v string), key []byte, v string) {
	safe := v == strings.TrimSpace(v) && !(strings.HasPrefix(v, "=?base64?") && strings.HasSuffix(v, "?="))
	for i := 0; safe && i < len(v); i++ {
		if c := v[i]; (c < 0x20 || c > 0x7e) && c != '\t' {
			safe = false
		}
	}
	if safe {
		set(key, v)
		return
	}
	set(key, "=?base64?"+base64.StdEncoding.EncodeToString([]byte(v))+"?=")
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
	if m.Kind != codec.KindRequest {
		return
	}
	p.failID(m.ID, err)
}

// failID fails the call of the request with id: the upstream is
// unavailable to it (the HTTP exchange failed).
func (p *httpPipe) failID(id []byte, err error) {
	if len(id) == 0 {
		return
	}
	p.dmu.RLock()
	defer p.dmu.RUnlock()
	if p.closedIn {
		return
	}
	mc, ok := p.in.(*muxConn)
	n, isOurs := parseID(id)
	if !ok || !isOurs {
		p.in.Message(codec.AppendError(nil, id, codec.CodeServerBusy, "upstream HTTP: "+err.Error(), nil))
		return
	}
	mc.failCall(n, mc.u.unavailable(fmt.Errorf("upstream HTTP: %w", err)))
}

// headerSafe reports whether v may be sent as a header value as it is:
// visible ASCII.
func headerSafe(v []byte) bool {
	for _, c := range v {
		if c < 0x21 || c > 0x7e {
			return false
		}
	}
	return len(v) > 0
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
				p.deliver(b.B)
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

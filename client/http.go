package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
)

// HTTP transport errors.
var (
	// ErrSessionExpired: the server answered 404 to a request carrying the
	// session id, so the session is gone and the client must initialize
	// again (with reconnection enabled it does).
	ErrSessionExpired = errors.New("client: http: session expired (404)")
	// ErrStreamEnded: an SSE response ended before the answer and cannot
	// be resumed (it carried no event id).
	ErrStreamEnded = errors.New("client: http: response stream ended before the answer")
	// ErrUnauthorized: the server kept refusing the credentials.
	ErrUnauthorized = errors.New("client: http: unauthorized")
)

// HTTPError is a non-2xx answer to a POST.
type HTTPError struct {
	StatusCode int
	// Body is the start of the answer's body (at most 1 KiB).
	Body string
}

func (e *HTTPError) Error() string {
	s := "client: http: status " + strconv.Itoa(e.StatusCode) + " " + http.StatusText(e.StatusCode)
	if e.Body != "" {
		s += ": " + e.Body
	}
	return s
}

// Authorizer supplies credentials to the HTTP transports: client/oauth
// implements it for OAuth 2.1; a fixed token needs only
// HTTPTransport.BearerToken. Implementations must be safe for concurrent
// use.
type Authorizer interface {
	// Authorization returns the Authorization header value for a request
	// ("Bearer ..."), or "" to send none.
	Authorization(ctx context.Context) (string, error)
	// Challenge is called with a 401 answer, or a 403 whose
	// WWW-Authenticate names insufficient_scope. It obtains new
	// credentials (running the authorization flow if it must); nil means
	// the request is retried with them. The body is closed afterwards by
	// the caller.
	Challenge(ctx context.Context, resp *http.Response) error
}

// HTTPTransport speaks the Streamable HTTP transport (2025-11-25): one
// POST per message, answered with JSON or an SSE stream; the session id
// and protocol version headers; the standalone GET stream for server
// messages tied to no request; resumption of a broken stream by GET with
// Last-Event-ID after the server's retry delay; DELETE on close. It is safe
// for concurrent use; each Connect is a new session.
//
// A request's POST runs on the caller's goroutine and its answer is
// delivered before Send returns, so a call costs no goroutine.
type HTTPTransport struct {
	// URL is the MCP endpoint, such as http://127.0.0.1:7401/mcp.
	URL string
	// Client sends the requests; nil means a shared client with keep-alive
	// connections (up to 256 idle per host).
	Client *http.Client
	// Header is added to every request.
	Header http.Header
	// BearerToken, if set and Auth is nil, is sent as
	// "Authorization: Bearer <token>".
	BearerToken string
	// Auth supplies credentials and answers challenges.
	Auth Authorizer
	// MaxChallenges bounds the authorization rounds for one request;
	// <= 0 means 3.
	MaxChallenges int
	// MaxMessage bounds one inbound message; <= 0 means 4 MiB.
	MaxMessage int
	// NoStandaloneStream skips the GET stream opened after initialization.
	NoStandaloneStream bool
	// Logger receives the transport's logs; nil discards them.
	Logger *slog.Logger
}

var defaultHTTPClient = &http.Client{Transport: &http.Transport{
	Proxy:               http.ProxyFromEnvironment,
	MaxIdleConns:        1024,
	MaxIdleConnsPerHost: 256,
	IdleConnTimeout:     90 * time.Second,
	ForceAttemptHTTP2:   true,
}}

// httpBase is what the Streamable and legacy transports share: the HTTP
// client, the headers and the authorization loop.
type httpBase struct {
	hc        *http.Client
	header    http.Header
	bearer    string
	auth      Authorizer
	maxChall  int
	max       int
	log       *slog.Logger
	sessionID atomic.Pointer[string]
	version   atomic.Pointer[string]
}

func newHTTPBase(hc *http.Client, header http.Header, bearer string, auth Authorizer, maxChall, maxMsg int, log *slog.Logger) httpBase {
	if hc == nil {
		hc = defaultHTTPClient
	}
	if maxChall <= 0 {
		maxChall = 3
	}
	if maxMsg <= 0 {
		maxMsg = codec.DefaultMaxMessage
	}
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return httpBase{hc: hc, header: header, bearer: bearer, auth: auth, maxChall: maxChall, max: maxMsg, log: log}
}

// do sends one HTTP request, running the authorization flow on 401 and
// on 403 insufficient_scope up to maxChall times.
func (b *httpBase) do(ctx context.Context, method, url string, body []byte, lastEventID string, extra http.Header) (*http.Response, error) {
	for round := 0; ; round++ {
		req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("client: http: %w", err)
		}
		h := req.Header
		for k, vs := range b.header {
			h[k] = vs
		}
		switch method {
		case http.MethodPost:
			h.Set("Content-Type", "application/json")
			h.Set("Accept", "application/json, text/event-stream")
		case http.MethodGet:
			h.Set("Accept", "text/event-stream")
		}
		if sid := b.sessionID.Load(); sid != nil {
			h.Set("Mcp-Session-Id", *sid)
		}
		if v := b.version.Load(); v != nil {
			h.Set("Mcp-Protocol-Version", *v)
		}
		if lastEventID != "" {
			h.Set("Last-Event-ID", lastEventID)
		}
		for k, vs := range extra {
			h[k] = vs
		}
		switch {
		case b.auth != nil:
			a, err := b.auth.Authorization(ctx)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrUnauthorized, err)
			}
			if a != "" {
				h.Set("Authorization", a)
			}
		case b.bearer != "":
			h.Set("Authorization", "Bearer "+b.bearer)
		}
		resp, err := b.hc.Do(req)
		if err != nil {
			return nil, fmt.Errorf("client: http: %w", err)
		}
		if b.auth == nil || !challenged(resp) {
			return resp, nil
		}
		if round >= b.maxChall {
			err := statusError(resp)
			resp.Body.Close()
			return nil, fmt.Errorf("%w after %d authorization rounds: %w", ErrUnauthorized, round, err)
		}
		err = b.auth.Challenge(ctx, resp)
		drain(resp)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUnauthorized, err)
		}
	}
}

// challenged reports a 401, or a 403 asking for more scope.
func challenged(resp *http.Response) bool {
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		return true
	case http.StatusForbidden:
		return strings.Contains(resp.Header.Get("WWW-Authenticate"), "insufficient_scope")
	}
	return false
}

// drain reads a little of an unwanted body, so that the connection can be
// reused, and closes it.
func drain(resp *http.Response) {
	_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
	resp.Body.Close()
}

// statusError describes a non-2xx answer (its body is left open).
func statusError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	return &HTTPError{StatusCode: resp.StatusCode, Body: strings.TrimSpace(string(b))}
}

func mediaType(resp *http.Response) string {
	ct := resp.Header.Get("Content-Type")
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.ToLower(strings.TrimSpace(ct))
}

// readBody reads a JSON body of at most max bytes.
func (b *httpBase) readBody(resp *http.Response) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(b.max)+1))
	if err != nil {
		return nil, fmt.Errorf("%w: reading the answer: %w", ErrConnectionLost, err)
	}
	if len(body) > b.max {
		return nil, fmt.Errorf("client: answer over the size limit: %w", ErrTooLarge)
	}
	return body, nil
}

// sseStream reads an event stream with codec.SSEParser.
type sseStream struct {
	r        io.Reader
	p        codec.SSEParser
	buf      []byte
	start    int
	lastID   string
	retry    time.Duration
	hasRetry bool
	event    string
}

func newSSEStream(r io.Reader, max int) *sseStream {
	return &sseStream{r: r, p: codec.SSEParser{MaxSize: max}, buf: make([]byte, 0, 16<<10)}
}

// next returns the data of the next event that has some; it is valid until
// the following call. The stream's end is io.EOF.
func (s *sseStream) next() ([]byte, error) {
	for {
		ev, n, ok, err := s.p.Next(s.buf[s.start:])
		if err != nil {
			if errors.Is(err, codec.ErrTooLarge) {
				return nil, fmt.Errorf("client: SSE event over the size limit: %w", err)
			}
			return nil, fmt.Errorf("%w: SSE: %w", ErrProtocol, err)
		}
		if n > 0 {
			s.start += n
			s.lastID = ev.ID
			if ev.HasRetry {
				s.retry, s.hasRetry = time.Duration(ev.Retry)*time.Millisecond, true
			}
			if ok && len(ev.Data) > 0 {
				s.event = ev.Event
				return ev.Data, nil
			}
			continue
		}
		// Need more bytes: compact, grow, read.
		if s.start > 0 {
			s.buf = s.buf[:copy(s.buf, s.buf[s.start:])]
			s.start = 0
		}
		if len(s.buf) == cap(s.buf) {
			nb := make([]byte, len(s.buf), 2*cap(s.buf))
			copy(nb, s.buf)
			s.buf = nb
		}
		m, rerr := s.r.Read(s.buf[len(s.buf):cap(s.buf)])
		s.buf = s.buf[:len(s.buf)+m]
		if rerr != nil && m == 0 {
			if errors.Is(rerr, io.EOF) {
				return nil, io.EOF
			}
			return nil, fmt.Errorf("%w: %w", ErrConnectionLost, rerr)
		}
	}
}

// Connect implements Transport. It only prepares the session: the first
// POST (initialize) opens it.
func (t *HTTPTransport) Connect(_ context.Context, in Inbound) (Conn, error) {
	if t.URL == "" {
		return nil, errors.New("client: HTTPTransport: no URL")
	}
	c := &httpConn{
		httpBase: newHTTPBase(t.Client, t.Header, t.BearerToken, t.Auth, t.MaxChallenges, t.MaxMessage, t.Logger),
		url:      t.URL,
		in:       in,
		noStream: t.NoStandaloneStream,
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// httpConn is one Streamable HTTP session.
type httpConn struct {
	httpBase
	url      string
	in       Inbound
	noStream bool

	ctx    context.Context // ends when the connection does
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	aborted bool

	// modern is set while the connection speaks 2026-07-28.
	modern atomic.Pointer[modernHTTP]
}

// modernHTTP is the 2026-07-28 binding of a connection.
type modernHTTP struct {
	version string
	params  func(tool string) []mcp.HeaderParam
}

// setModern implements modernConn: no session, the MCP-Protocol-Version
// header on every POST, with Mcp-Method, Mcp-Name and Mcp-Param-*.
func (c *httpConn) setModern(version string, params func(string) []mcp.HeaderParam) {
	if version == "" {
		c.modern.Store(nil)
		c.version.Store(nil)
		return
	}
	c.modern.Store(&modernHTTP{version: version, params: params})
	c.version.Store(&version)
}

// Negotiated implements Negotiator.
func (c *httpConn) Negotiated(version string) { c.version.Store(&version) }

// Initialized implements Negotiator: it opens the standalone stream.
func (c *httpConn) Initialized() {
	if c.noStream {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.wg.Add(1)
	go c.standalone()
}

// requestID returns the id of msg if it is a request.
func requestID(msg []byte) ([]byte, bool) {
	var m codec.Message
	if codec.Decode(msg, &m) != nil || m.Kind != codec.KindRequest {
		return nil, false
	}
	return m.ID, true
}

// Send implements Conn: it POSTs msg and, for a request, delivers the
// answer (and whatever the server sends on its stream first).
func (c *httpConn) Send(ctx context.Context, msg []byte) error {
	if c.ctx.Err() != nil {
		return ErrClosed
	}
	id, isReq := requestID(msg)
	if isReq {
		id = append([]byte(nil), id...) // msg's buffer returns to its pool
	}
	var extra http.Header
	mod := c.modern.Load()
	if mod != nil {
		extra = make(http.Header, 4)
		setModernHeaders(extra, msg, mod.params)
	}
	resp, err := c.do(ctx, http.MethodPost, c.url, msg, "", extra)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" && c.sessionID.Load() == nil && mod == nil {
		c.sessionID.Store(&sid)
	}
	if mod != nil && isReq && resp.StatusCode/100 != 2 && mediaType(resp) == "application/json" {
		// 2026-07-28 answers some errors with a status of their own and
		// the JSON-RPC error as the body.
		body, err := c.readBody(resp)
		if err != nil {
			return err
		}
		var m codec.Message
		if codec.Decode(body, &m) == nil && m.Kind == codec.KindError && bytes.Equal(m.ID, id) {
			c.in.Message(body)
			return nil
		}
		b := strings.TrimSpace(string(body))
		if len(b) > 1<<10 {
			b = b[:1<<10]
		}
		return &HTTPError{StatusCode: resp.StatusCode, Body: b}
	}
	switch {
	case resp.StatusCode == http.StatusNotFound && c.sessionID.Load() != nil:
		c.Abort(ErrSessionExpired)
		return ErrSessionExpired
	case resp.StatusCode/100 != 2:
		return statusError(resp)
	case !isReq || resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusNoContent:
		return nil
	}
	switch mediaType(resp) {
	case "application/json":
		body, err := c.readBody(resp)
		if err != nil {
			return err
		}
		var m codec.Message
		if err := codec.Decode(body, &m); err != nil {
			return fmt.Errorf("%w: the answer is not JSON-RPC: %w", ErrProtocol, err)
		}
		c.in.Message(body)
		return nil
	case "text/event-stream":
		return c.responseStream(ctx, resp.Body, id)
	}
	return fmt.Errorf("%w: answer of type %q", ErrProtocol, resp.Header.Get("Content-Type"))
}

// responseStream delivers the events of a POST's SSE answer until the
// answer to id. A stream that ends early is resumed in the background
// when it carried an event id.
func (c *httpConn) responseStream(ctx context.Context, body io.Reader, id []byte) error {
	s := newSSEStream(body, c.max)
	done, err := c.deliver(s, id)
	if done {
		return nil
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if errors.Is(err, ErrTooLarge) || errors.Is(err, ErrProtocol) {
		return err
	}
	if s.lastID == "" {
		return ErrStreamEnded
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	c.wg.Add(1)
	go c.resume(ctx, id, s.lastID, s.retry, s.hasRetry)
	return nil
}

// deliver hands the events of s to Inbound until the answer to id (done)
// or the stream's end (err, io.EOF when it ended cleanly).
func (c *httpConn) deliver(s *sseStream, id []byte) (done bool, err error) {
	for {
		data, err := s.next()
		if err != nil {
			return false, err
		}
		var m codec.Message
		if err := codec.Decode(data, &m); err != nil {
			return false, fmt.Errorf("%w: an SSE event is not JSON-RPC: %w", ErrProtocol, err)
		}
		last := id != nil && (m.Kind == codec.KindResponse || m.Kind == codec.KindError) && bytes.Equal(m.ID, id)
		c.in.Message(data)
		if last {
			return true, nil
		}
	}
}

// resume reconnects a broken response stream with GET and Last-Event-ID
// after the server's retry delay (1 s if it named none), until the answer
// comes. When it cannot, it fails the request with an error answer so the
// caller does not wait for its timeout.
func (c *httpConn) resume(ctx context.Context, id []byte, lastID string, retry time.Duration, hasRetry bool) {
	defer c.wg.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.ctx, cancel)
	defer stop()
	if !hasRetry {
		retry = time.Second
	}
	var last error
	for attempt := 0; attempt < 5; attempt++ {
		if !sleepCtx(ctx, retry) {
			return
		}
		resp, err := c.do(ctx, http.MethodGet, c.url, nil, lastID, nil)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			last = err
			continue
		}
		if resp.StatusCode != http.StatusOK || mediaType(resp) != "text/event-stream" {
			last = statusError(resp)
			resp.Body.Close()
			break
		}
		s := newSSEStream(resp.Body, c.max)
		s.lastID = lastID
		done, err := c.deliver(s, id)
		resp.Body.Close()
		if done || ctx.Err() != nil {
			return
		}
		last = err
		if s.lastID != "" {
			lastID = s.lastID
		}
		if s.hasRetry {
			retry = s.retry
		}
	}
	c.log.Warn("response stream lost", "err", last)
	msg := fmt.Sprintf("response stream lost and not resumed: %v", last)
	c.in.Message(codec.AppendError(nil, id, codec.CodeInternalError, msg, nil))
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// standalone keeps the GET stream open for server messages tied to no
// request. A server without one (405, or any refusal) is left alone.
func (c *httpConn) standalone() {
	defer c.wg.Done()
	lastID := ""
	retry := time.Second
	failures := 0
	for c.ctx.Err() == nil {
		resp, err := c.do(c.ctx, http.MethodGet, c.url, nil, lastID, nil)
		if err != nil {
			if c.ctx.Err() != nil {
				return
			}
			if failures++; failures >= 5 {
				c.log.Warn("standalone stream given up", "err", err)
				return
			}
			sleepCtx(c.ctx, retry)
			continue
		}
		if resp.StatusCode != http.StatusOK || mediaType(resp) != "text/event-stream" {
			c.log.Debug("no standalone stream", "status", resp.StatusCode)
			drain(resp)
			return
		}
		failures = 0
		s := newSSEStream(resp.Body, c.max)
		s.lastID = lastID
		_, err = c.deliver(s, nil)
		resp.Body.Close()
		if errors.Is(err, ErrTooLarge) || errors.Is(err, ErrProtocol) {
			c.log.Warn("standalone stream dropped", "err", err)
			return
		}
		lastID = s.lastID
		if s.hasRetry {
			retry = s.retry
		}
		sleepCtx(c.ctx, retry)
	}
}

// Abort ends the session with cause without waiting (keep-alive, an
// expired session).
func (c *httpConn) Abort(cause error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed, c.aborted = true, true
	c.mu.Unlock()
	c.cancel()
	c.in.Closed(cause)
}

// Close implements Conn: it stops the streams and DELETEs the session.
func (c *httpConn) Close() error {
	c.mu.Lock()
	already, aborted := c.closed, c.aborted
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	if already {
		return nil
	}
	if sid := c.sessionID.Load(); sid != nil && !aborted {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if resp, err := c.do(ctx, http.MethodDelete, c.url, nil, "", nil); err == nil {
			drain(resp)
		}
		cancel()
	}
	c.in.Closed(ErrClosed)
	return nil
}

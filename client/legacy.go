package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/mcpedge/mcpedge/codec"
)

// SSETransport speaks the legacy HTTP+SSE transport of revision 2024-11-05:
// a GET opens an event stream whose first event, "endpoint", names the URL
// to POST messages to; every server message arrives on that stream. It is
// safe for concurrent use; each Connect opens a new stream.
type SSETransport struct {
	// URL is the SSE endpoint, such as http://127.0.0.1:7401/sse.
	URL string
	// Client sends the requests; nil means the shared keep-alive client.
	// It must not time out whole responses: the stream lives as long as
	// the connection.
	Client *http.Client
	// Header is added to every request.
	Header http.Header
	// BearerToken, if set and Auth is nil, is sent as a bearer token.
	BearerToken string
	// Auth supplies credentials and answers challenges.
	Auth Authorizer
	// MaxMessage bounds one inbound message; <= 0 means 4 MiB.
	MaxMessage int
	// Logger receives the transport's logs; nil discards them.
	Logger *slog.Logger
}

// Connect implements Transport: it opens the stream and waits for the
// endpoint event.
func (t *SSETransport) Connect(ctx context.Context, in Inbound) (Conn, error) {
	c := &sseConn{
		httpBase: newHTTPBase(t.Client, t.Header, t.BearerToken, t.Auth, 0, t.MaxMessage, t.Logger),
		in:       in,
		done:     make(chan struct{}),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, c.cancel) // only while connecting
	resp, err := c.do(c.ctx, http.MethodGet, t.URL, nil, "", nil)
	if err != nil {
		stop()
		c.cancel()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK || mediaType(resp) != "text/event-stream" {
		stop()
		err := statusError(resp)
		resp.Body.Close()
		c.cancel()
		return nil, fmt.Errorf("client: sse: opening the stream: %w", err)
	}
	c.body = resp.Body
	c.s = newSSEStream(resp.Body, c.max)
	endpoint, err := c.endpoint(t.URL)
	if !stop() && err == nil {
		err = context.Cause(ctx)
	}
	if err != nil {
		resp.Body.Close()
		c.cancel()
		return nil, err
	}
	c.endpointURL = endpoint
	go c.read()
	return c, nil
}

// sseConn is one legacy SSE connection.
type sseConn struct {
	httpBase
	in          Inbound
	body        io.ReadCloser
	s           *sseStream
	endpointURL string

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	cause error
}

// endpoint reads events until the endpoint event and resolves its URL.
func (c *sseConn) endpoint(base string) (string, error) {
	for {
		data, err := c.s.next()
		if err != nil {
			return "", fmt.Errorf("client: sse: no endpoint event: %w", err)
		}
		if c.s.event != "endpoint" {
			continue
		}
		b, err := url.Parse(base)
		if err != nil {
			return "", err
		}
		ref, err := url.Parse(strings.TrimSpace(string(data)))
		if err != nil {
			return "", fmt.Errorf("client: sse: bad endpoint %q: %w", data, err)
		}
		u := b.ResolveReference(ref)
		if u.Scheme != b.Scheme || u.Host != b.Host {
			return "", fmt.Errorf("client: sse: endpoint %q is not on the server's origin", data)
		}
		return u.String(), nil
	}
}

func (c *sseConn) read() {
	defer close(c.done)
	var cause error
	for {
		data, err := c.s.next()
		if err != nil {
			cause = err
			if errors.Is(err, io.EOF) {
				cause = fmt.Errorf("%w: the event stream ended", ErrConnectionLost)
			}
			break
		}
		if c.s.event != "message" {
			continue
		}
		var m codec.Message
		if err := codec.Decode(data, &m); err != nil {
			cause = fmt.Errorf("%w: an SSE event is not JSON-RPC: %w", ErrProtocol, err)
			break
		}
		c.in.Message(data)
	}
	c.body.Close()
	c.mu.Lock()
	if c.cause == nil {
		c.cause = cause
	}
	cause = c.cause
	c.mu.Unlock()
	c.cancel()
	c.in.Closed(cause)
}

// Send implements Conn: it POSTs msg to the endpoint; answers come on the
// stream.
func (c *sseConn) Send(ctx context.Context, msg []byte) error {
	if c.ctx.Err() != nil {
		return ErrClosed
	}
	resp, err := c.do(ctx, http.MethodPost, c.endpointURL, msg, "", nil)
	if err != nil {
		return err
	}
	defer drain(resp)
	if resp.StatusCode/100 != 2 {
		return statusError(resp)
	}
	return nil
}

// Abort ends the connection with cause without waiting.
func (c *sseConn) Abort(cause error) {
	c.mu.Lock()
	if c.cause == nil {
		c.cause = cause
	}
	c.mu.Unlock()
	c.cancel()
	c.body.Close()
}

// Close implements Conn.
func (c *sseConn) Close() error {
	c.Abort(ErrClosed)
	<-c.done
	return nil
}

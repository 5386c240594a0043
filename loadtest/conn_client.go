package loadtest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"

	"github.com/mcpedge/mcpedge/client"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
)

// poolDialer drives the load through the client library: a client.Pool of
// Connections members, each call on the member the pool's strategy picks.
// It is the path of Config.Client; mcpload's own lean transports are the
// default.
type poolDialer struct {
	pool *client.Pool
	hc   *http.Client
}

// poolSession is the pool seen as one session: the pool replaces failed
// members itself, so it never breaks.
type poolSession struct{ p *client.Pool }

func newPoolDialer(ctx context.Context, t Target, conns int, strategy client.Strategy, opts *sessionOpts, stderr io.Writer) (*poolDialer, error) {
	d := &poolDialer{}
	var tr client.Transport
	switch t.Transport {
	case "tcp":
		tr = &client.TCPTransport{Addr: t.Addr, MaxMessage: opts.maxFrame, TLS: t.TLS}
	case "http":
		d.hc = &http.Client{Transport: &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns, DisableCompression: true}}
		tr = &client.HTTPTransport{URL: t.Addr, Client: d.hc, MaxMessage: opts.maxFrame, NoStandaloneStream: true}
	case "stdio":
		st := &client.StdioTransport{Command: t.Command[0], Args: t.Command[1:], MaxMessage: opts.maxFrame}
		if stderr != io.Discard {
			st.Stderr = slog.New(slog.NewTextHandler(stderr, nil))
		}
		tr = st
	default:
		return nil, errors.Join(ErrConfig, errors.New("loadtest: transport "+t.Transport))
	}
	copts := client.Options{
		// The load is raw requests of the session revisions (ping
		// included): no server/discover first.
		Era:            client.EraLegacy,
		ClientInfo:     mcp.Implementation{Name: "mcpload", Version: "1"},
		RequestTimeout: opts.timeout,
		InitTimeout:    opts.timeout,
	}
	dial := func(ctx context.Context) (*client.Client, error) { return client.Dial(ctx, tr, copts) }
	p, err := client.NewPool(ctx, dial, client.PoolOptions{Size: conns, Strategy: strategy, HealthInterval: -1})
	if err != nil {
		if d.hc != nil {
			d.hc.CloseIdleConnections()
		}
		return nil, &Error{Kind: KindConnect, Err: err}
	}
	d.pool = p
	return d, nil
}

func (d *poolDialer) dial(context.Context, int) (session, error) { return poolSession{d.pool}, nil }
func (d *poolDialer) pid() int                                   { return 0 }

func (d *poolDialer) close() {
	_ = d.pool.Close()
	if d.hc != nil {
		d.hc.CloseIdleConnections()
	}
}

// Call implements session: a member the pool picks makes the call.
func (s poolSession) Call(ctx context.Context, method string, params, dst []byte) ([]byte, error) {
	c, err := s.p.Get()
	if err != nil {
		return dst, &Error{Kind: KindClosed, Err: err}
	}
	res, err := c.CallRaw(ctx, method, params)
	if err != nil {
		return dst, clientError(err)
	}
	return append(dst, res...), nil
}

// The pool and its members belong to poolDialer, which closes them.
func (poolSession) notify(string, []byte) error { return nil }
func (poolSession) broken() *Error              { return nil }
func (poolSession) Close() error                { return nil }

// clientError classifies an error of the client library.
func clientError(err error) *Error {
	var rpc *codec.Error
	var he *client.HTTPError
	switch {
	case errors.As(err, &rpc):
		return &Error{Kind: KindRPCError, Code: rpc.Code, Msg: rpc.Message}
	case errors.As(err, &he):
		return &Error{Kind: KindTransport, Code: he.StatusCode, Err: err}
	case errors.Is(err, client.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return &Error{Kind: KindTimeout, Err: err}
	case errors.Is(err, client.ErrProtocol), errors.Is(err, client.ErrTooLarge):
		return &Error{Kind: KindProtocol, Err: err}
	case errors.Is(err, client.ErrClosed), errors.Is(err, client.ErrConnectionLost),
		errors.Is(err, client.ErrClientClosed), errors.Is(err, client.ErrNotReady),
		errors.Is(err, client.ErrNoHealthy), errors.Is(err, client.ErrPoolClosed):
		return &Error{Kind: KindClosed, Err: err}
	}
	return &Error{Kind: KindTransport, Err: err}
}

package client

import (
	"context"
	"errors"

	"github.com/mcpedge/mcpedge/codec"
)

// Transport opens connections to one MCP server. A Transport is a
// description (an address, a command line) and is safe for concurrent use:
// the client calls Connect once per connection, again after a drop when
// reconnection is enabled.
type Transport interface {
	// Connect opens a connection and starts delivering what it reads to
	// in. The connection is ready for Send when Connect returns.
	Connect(ctx context.Context, in Inbound) (Conn, error)
}

// Inbound receives what a connection reads. The client implements it.
type Inbound interface {
	// Message is called for each JSON-RPC message read. msg is valid only
	// during the call. Stream transports call it from their read
	// goroutine; HTTP calls it from the goroutine of the Send whose
	// response carries it, or from its stream goroutines, so it must be
	// safe for concurrent use.
	Message(msg []byte)
	// Closed is called once when the connection ends, with the cause; no
	// Message call starts after it.
	Closed(err error)
}

// Conn is one open connection.
type Conn interface {
	// Send writes one JSON-RPC message (unframed). It does not retain msg
	// after it returns. Send is safe for concurrent use. A transport whose
	// answers come back on the request (HTTP) may deliver them to Inbound
	// before Send returns.
	Send(ctx context.Context, msg []byte) error
	// Close ends the connection and waits for its goroutines. It is
	// idempotent and safe for concurrent use.
	Close() error
}

// Negotiator is implemented by connections that need the outcome of the
// initialize handshake (Streamable HTTP: the protocol version header and
// the standalone stream).
type Negotiator interface {
	// Negotiated is called with the protocol version once the initialize
	// result is in, before notifications/initialized is sent.
	Negotiated(version string)
	// Initialized is called once notifications/initialized has been sent.
	Initialized()
}

// Errors of the connection layer. Causes reported to Inbound.Closed and
// returned by calls wrap one of them.
var (
	// ErrClosed is the cause when the client closed the connection.
	ErrClosed = errors.New("client: connection closed")
	// ErrConnectionLost is the cause when the server side ended it.
	ErrConnectionLost = errors.New("client: connection lost")
	// ErrProtocol reports a message that is not JSON-RPC 2.0.
	ErrProtocol = errors.New("client: protocol error")
	// ErrTooLarge reports an inbound message over the size limit: it is
	// codec.ErrTooLarge, the one error of an oversized message, server's
	// and client's.
	ErrTooLarge = codec.ErrTooLarge
	// ErrBackpressure reports an outbound queue over its bound: the
	// server is not reading.
	ErrBackpressure = errors.New("client: outbound queue full: the server is not reading")
)

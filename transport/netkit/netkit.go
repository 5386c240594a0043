// Package netkit is what the network transports share to listen, accept
// and drain, written once: a front door (package mcpedge's Server) holds
// its transports as a list of Transport and runs each the same way,
// whatever it serves.
//
//   - Listen binds, and a failure is a *BindError naming the address and
//     the cause.
//   - Acceptor accepts in a loop that backs off on errors a later accept
//     may not have (EMFILE, ENFILE, ECONNABORTED...: 5 ms doubling to
//     1 s, as net/http does) instead of ending, and admits each
//     connection through the shared connection limit
//     (netlimit.Limiter), refusing the others with the transport's own
//     answer.
//   - Drainer closes a transport's idle connections as they become idle,
//     every DrainTick, once a drain has begun; Unread is the check that
//     an idle connection has no request on its way (a MSG_PEEK), so that
//     a drain never drops a request unread.
//
// A transport's reasons for closing a connection are codec.CloseReason
// values; see package codec.
package netkit

import (
	"context"
	"errors"
	"net"
	"os"

	"github.com/mcpedge/mcpedge/transport/netlimit"
)

// Transport is a network transport as a front door runs it: it listens
// and serves, stops accepting, closes its idle connections (a few at a
// time in lame-duck mode, then all of them as they become idle), stops,
// and says what it holds. The front door's shutdown order (package
// mcpedge, "Shutdown") calls StopAccepting, CloseIdle and Drain, then
// drains the engine, then calls Shutdown. The TCP and Streamable HTTP
// transports implement it.
type Transport interface {
	// ListenAndServe listens and serves until Shutdown, then returns
	// nil. It returns a *BindError (wrapped) when it cannot listen, and
	// an accept error that no later accept can recover from. When ctx
	// ends the transport is shut down at once, as by Shutdown.
	ListenAndServe(ctx context.Context) error
	// Addr waits until the transport listens and returns its address,
	// or nil when it failed to listen or was shut down first, or when
	// ctx ends first.
	Addr(ctx context.Context) net.Addr
	// StopAccepting closes the listener: no connection is accepted
	// after it returns, and those open are served on.
	StopAccepting()
	// IdleConns returns the number of open connections idle now.
	IdleConns() int
	// CloseIdle closes up to max idle connections (max < 0: all of
	// them) and returns how many it closed; a connection with a byte of
	// a request waiting in its socket is not idle.
	CloseIdle(max int) int
	// Drain closes every idle connection now and then, until Shutdown,
	// each one as soon as it is idle (a Drainer).
	Drain()
	// Shutdown closes what is left and stops, within ctx.
	Shutdown(ctx context.Context) error
	// Conns returns the number of open connections.
	Conns() int64
	// Budgets returns the byte budgets the transport counts in: partial
	// inbound bytes and queued outbound bytes (maybe shared).
	Budgets() (buffered, outbound *netlimit.Budget)
}

// BindError is the error of a listener that cannot listen: the network,
// the address asked for and the cause (errors.Is(err,
// syscall.EADDRINUSE) for an address in use). A front door that cannot
// bind one of its listeners returns it and serves nothing.
type BindError struct {
	Network, Addr string
	Err           error
}

// Error reads "listen tcp 127.0.0.1:7400: address already in use".
func (e *BindError) Error() string {
	return "listen " + e.Network + " " + e.Addr + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *BindError) Unwrap() error { return e.Err }

// Listen listens on addr on network ("tcp", "tcp4", "tcp6", "unix") with
// lc, which may set keep-alive and socket options. Go sets SO_REUSEADDR on
// listening sockets on Unix, so that a restart binds at once although the
// connections just closed linger in TIME_WAIT. A failure is a *BindError
// whose cause is the system's (an errno) when there is one.
func Listen(lc net.ListenConfig, network, addr string) (net.Listener, error) {
	ln, err := lc.Listen(context.Background(), network, addr)
	if err == nil {
		return ln, nil
	}
	cause := err
	var oe *net.OpError
	if errors.As(err, &oe) {
		cause = oe.Err
		var se *os.SyscallError
		if errors.As(cause, &se) {
			cause = se.Err
		}
	}
	return nil, &BindError{Network: network, Addr: addr, Err: cause}
}

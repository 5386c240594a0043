package codec

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
)

// CloseReason is why a connection, a stream or a session ended, as logs
// and metrics name it (nats-server's ClosedState). Every layer's close
// errors carry one: a transport's, the engine's and the session's
// sentinels are made with CloseReason.Err, so that errors.Is(err,
// ReasonIdleTimeout) holds for a connection closed idle by any transport,
// and ReasonOf(err).String() is the label of any cause without knowing
// which package made it.
//
// The reasons are listed by precedence: a cause wrapping several (a
// stream ended because it was cut for a limit) is given the first.
type CloseReason uint8

// The reasons. ReasonOther, the zero value, is a cause that carries none.
const (
	ReasonOther          CloseReason = iota
	ReasonSlowConsumer               // the client did not read what it was sent
	ReasonTooLarge                   // a message over the size limit
	ReasonFraming                    // bytes that cannot be framed
	ReasonProxyHeader                // a PROXY header refused: malformed, or from a peer not trusted
	ReasonTLS                        // a TLS handshake that failed: plain text, a certificate refused
	ReasonReadTimeout                // a message left incomplete too long
	ReasonIdleTimeout                // a connection with no traffic too long
	ReasonBufferBudget               // cut to keep partial inbound bytes within the budget
	ReasonOutboundBudget             // cut to keep queued outbound bytes within the budget
	ReasonPanic                      // a message made the server panic
	ReasonKeepAlive                  // the client stopped answering pings
	ReasonShutdown                   // the server shut down
	ReasonSessionIdle                // an HTTP session unused too long
	ReasonInitTimeout                // an HTTP session never used after initialize
	ReasonEvicted                    // an HTTP session evicted to make room
	ReasonDeleted                    // an HTTP session the client deleted
	ReasonClientGone                 // the client went away mid-request
	ReasonServerClosed               // the transport stopped
	ReasonStreamEnded                // a legacy SSE stream, and its session, ended
	ReasonMaxConnsPerIP              // refused: the per-address connection limit
	ReasonMaxConns                   // refused: the connection limit
	ReasonDraining                   // an idle connection closed by a drain
	ReasonFlushTimeout               // output not written in time at the end
	ReasonNotInitialized             // a session whose initialize failed
	ReasonStateless                  // a stateless exchange ended with its request
	ReasonClosed                     // closed normally (end of stream)
	ReasonReset                      // the peer reset the connection
	ReasonTimeout                    // a socket deadline passed

	numReasons
)

// NumCloseReasons is the number of CloseReason values, ReasonOther
// included: a table indexed by reason has this many rows.
const NumCloseReasons = int(numReasons)

// reasonLabels are the labels of the reasons, for metrics and logs.
var reasonLabels = [NumCloseReasons]string{
	ReasonOther:          "other",
	ReasonSlowConsumer:   "slow_consumer",
	ReasonTooLarge:       "too_large",
	ReasonFraming:        "framing",
	ReasonProxyHeader:    "proxy_header",
	ReasonTLS:            "tls",
	ReasonReadTimeout:    "read_timeout",
	ReasonIdleTimeout:    "idle_timeout",
	ReasonBufferBudget:   "buffer_budget",
	ReasonOutboundBudget: "outbound_budget",
	ReasonPanic:          "panic",
	ReasonKeepAlive:      "keepalive",
	ReasonShutdown:       "shutdown",
	ReasonSessionIdle:    "session_idle",
	ReasonInitTimeout:    "init_timeout",
	ReasonEvicted:        "evicted",
	ReasonDeleted:        "deleted",
	ReasonClientGone:     "client_gone",
	ReasonServerClosed:   "server_closed",
	ReasonStreamEnded:    "stream_ended",
	ReasonMaxConnsPerIP:  "max_conns_per_ip",
	ReasonMaxConns:       "max_conns",
	ReasonDraining:       "draining",
	ReasonFlushTimeout:   "flush_timeout",
	ReasonNotInitialized: "not_initialized",
	ReasonStateless:      "stateless",
	ReasonClosed:         "closed",
	ReasonReset:          "reset",
	ReasonTimeout:        "timeout",
}

// String returns the reason's label: "idle_timeout", "slow_consumer"...
// A value out of range is "other".
func (r CloseReason) String() string {
	if int(r) < NumCloseReasons {
		return reasonLabels[r]
	}
	return reasonLabels[ReasonOther]
}

// Error returns the label: a CloseReason is an error that close errors
// wrap, and may be a cause itself.
func (r CloseReason) Error() string { return r.String() }

// Err returns a close error with text msg that wraps r: the way each
// package declares its typed close causes.
//
//	var ErrIdleTimeout = codec.ReasonIdleTimeout.Err("tcp: idle timeout")
func (r CloseReason) Err(msg string) error {
	return &closeError{msg: msg, reason: r}
}

// closeError is an error made by CloseReason.Err.
type closeError struct {
	msg    string
	reason CloseReason
}

func (e *closeError) Error() string { return e.msg }
func (e *closeError) Unwrap() error { return e.reason }

// foreign are the errors of other packages that end connections, with
// their reasons; they are tested, after the reasons a cause carries, in
// this order.
var foreign = [...]struct {
	err    error
	reason CloseReason
}{
	{io.EOF, ReasonClosed},
	{net.ErrClosed, ReasonClosed},
	{syscall.ECONNRESET, ReasonReset},
	{syscall.EPIPE, ReasonReset},
	{os.ErrDeadlineExceeded, ReasonTimeout},
}

// ReasonOf returns the reason of a close cause: of all the reasons err
// carries (errors.Is), the first by precedence; else that of the standard
// library's errors it wraps (end of stream, a reset, a deadline); else
// ReasonOther. A nil cause, a close without a reason given, is
// ReasonClosed. It does not allocate.
func ReasonOf(err error) CloseReason {
	if err == nil {
		return ReasonClosed
	}
	if r := carried(err); r != ReasonOther {
		return r
	}
	for _, f := range foreign {
		if errors.Is(err, f.err) {
			return f.reason
		}
	}
	return ReasonOther
}

// carried returns the first by precedence of the reasons in err's tree,
// or ReasonOther.
func carried(err error) CloseReason {
	for err != nil {
		switch e := err.(type) {
		case CloseReason:
			return e
		case interface{ Unwrap() []error }:
			best := ReasonOther
			for _, inner := range e.Unwrap() {
				if r := carried(inner); r != ReasonOther && (best == ReasonOther || r < best) {
					best = r
				}
			}
			return best
		case interface{ Unwrap() error }:
			err = e.Unwrap()
		default:
			return ReasonOther
		}
	}
	return ReasonOther
}

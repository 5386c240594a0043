package netkit

import (
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mcpedge/mcpedge/transport/netlimit"
)

// Accept back-off, as net/http's: 5 ms, doubling, at most 1 s.
const (
	acceptDelayMin = 5 * time.Millisecond
	acceptDelayMax = time.Second
)

// logEvery rate-limits the warnings of accept errors and of refused
// connections: one a second, with the count of those left out.
const logEvery = time.Second

// AcceptConfig configures an Acceptor.
type AcceptConfig struct {
	// Transport names the transport in logs and to Observer: "tcp",
	// "http".
	Transport string
	// Log receives the rate-limited warnings; nil discards them.
	Log *slog.Logger
	// Conns admits connections, bounding them in total and per client
	// address; nil admits every one.
	Conns *netlimit.Limiter
	// Refuse answers a connection Conns refused, in the transport's terms
	// (a JSON-RPC error, an HTTP 503), and closes it. It runs on the
	// accepting goroutine: it must not block for long. nil closes the
	// connection without an answer.
	Refuse func(c net.Conn, cause error)
	// Observer, when not nil, is told of each refused connection
	// (engine.ConnObserver implements it).
	Observer interface {
		ConnRefused(transport string, reason error)
	}
}

// Acceptor accepts connections from a listener for a transport: errors
// that a later accept may not have (out of descriptors, a connection
// aborted before it was accepted) are retried after a pause, 5 ms
// doubling to 1 s, and logged at most once a second, instead of ending the
// loop (gnet's own acceptor stops its engine on EMFILE; fasthttp's Serve
// returns); each connection is admitted by the connection limit or
// refused. It is the one accept loop of every network transport. Its
// methods are safe for concurrent use.
type Acceptor struct {
	ln  net.Listener
	cfg AcceptConfig

	closeOnce sync.Once
	done      chan struct{}

	errLog, refuseLog rateLog
}

// NewAcceptor returns an Acceptor of ln.
func NewAcceptor(ln net.Listener, cfg AcceptConfig) *Acceptor {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Acceptor{ln: ln, cfg: cfg, done: make(chan struct{})}
}

// Addr returns the listener's address.
func (a *Acceptor) Addr() net.Addr { return a.ln.Addr() }

// Close closes the listener and ends a back-off in progress: Accept
// returns net.ErrClosed.
func (a *Acceptor) Close() error {
	a.closeOnce.Do(func() { close(a.done) })
	return a.ln.Close()
}

// Accept waits for the next connection the limit admits and returns it
// with the client's IP address (the zero Addr for a non-IP listener),
// under which it was admitted: the caller releases it (Conns.Release)
// when the connection ends. It returns net.ErrClosed once the Acceptor is
// closed, and an accept error that a later accept cannot recover from
// (the listener is unusable).
func (a *Acceptor) Accept() (net.Conn, netip.Addr, error) {
	var delay time.Duration
	for {
		c, err := a.ln.Accept()
		if err != nil {
			if !Transient(err) {
				return nil, netip.Addr{}, err
			}
			delay = min(max(2*delay, acceptDelayMin), acceptDelayMax)
			if ok, left := a.errLog.allow(); ok {
				a.cfg.Log.Warn("accept failed; retrying", "transport", a.cfg.Transport, "addr", a.ln.Addr().String(),
					"err", err, "retry_in", delay, "not_logged", left)
			}
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-a.done:
				t.Stop()
				return nil, netip.Addr{}, net.ErrClosed
			}
			continue
		}
		delay = 0
		ip := AddrIP(c.RemoteAddr())
		if err := a.cfg.Conns.Acquire(ip); err != nil {
			a.refuse(c, err)
			continue
		}
		return c, ip, nil
	}
}

// refuse counts, logs and answers a connection over a limit.
func (a *Acceptor) refuse(c net.Conn, cause error) {
	if a.cfg.Observer != nil {
		a.cfg.Observer.ConnRefused(a.cfg.Transport, cause)
	}
	if ok, left := a.refuseLog.allow(); ok {
		a.cfg.Log.Warn("connection refused", "transport", a.cfg.Transport, "remote", c.RemoteAddr().String(),
			"cause", cause, "open", a.cfg.Conns.Open(), "not_logged", left)
	}
	if a.cfg.Refuse != nil {
		a.cfg.Refuse(c, cause)
		return
	}
	_ = c.Close()
}

// Transient reports whether an accept error is one a later accept may not
// have: every error but those that say the listener itself is unusable
// (closed, not a socket, invalid). Besides running out of descriptors or
// memory, Linux's accept reports the pending errors of the connection it
// was about to return (ECONNABORTED, EPROTO, EHOSTUNREACH, ENETDOWN...),
// which a client can cause: none of them may stop a listener.
func Transient(err error) bool {
	if errors.Is(err, net.ErrClosed) {
		return false
	}
	for _, e := range [...]error{syscall.EBADF, syscall.EINVAL, syscall.ENOTSOCK, syscall.EFAULT} {
		if errors.Is(err, e) {
			return false
		}
	}
	return true
}

// AddrIP is the IP address of a TCP address, unmapped; the zero Addr for
// other addresses.
func AddrIP(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// rateLog lets one log line through a second and counts the others.
type rateLog struct {
	last atomic.Int64 // UnixNano of the last line let through
	left atomic.Int64 // lines left out since
}

// allow reports whether a line may be logged now, and how many were left
// out since the last one.
func (r *rateLog) allow() (bool, int64) {
	now := time.Now().UnixNano()
	last := r.last.Load()
	if now-last < int64(logEvery) || !r.last.CompareAndSwap(last, now) {
		r.left.Add(1)
		return false, 0
	}
	return true, r.left.Swap(0)
}

package http

import (
	"errors"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// retryAfterSessions is the Retry-After, in seconds, of an initialize
// refused over a session limit.
const retryAfterSessions = 5

var (
	errTooManySessions      = errors.New("mcphttp: session limit reached")
	errTooManySessionsPerIP = errors.New("mcphttp: per-address session limit reached")
	// ErrInitTimeout ends a session whose client made no request after
	// initialize within Options.InitTimeout; ErrEvicted one that made
	// room for a new session while the table was full.
	ErrInitTimeout = errors.New("mcphttp: session not initialized in time")
	ErrEvicted     = errors.New("mcphttp: uninitialized session evicted: session limit reached")
)

var hdrRetryAfter = []byte("Retry-After")

// admitSession reserves a session slot for a client at ip: within
// MaxSessionsPerIP, then within MaxSessions, evicting the oldest session
// that never completed its initialization when the table is full.
func (s *Server) admitSession(ip netip.Addr) error {
	if s.perIP.Acquire(ip) != nil {
		return errTooManySessionsPerIP
	}
	for try := 0; ; try++ {
		if s.nsess.Add(1) <= int64(s.opts.MaxSessions) {
			return nil
		}
		s.nsess.Add(-1)
		if try == 3 || !s.evictPending() {
			s.perIP.Release(ip)
			return errTooManySessions
		}
	}
}

// releaseSession frees the slot of a session that ended.
func (s *Server) releaseSession(ip netip.Addr) {
	s.nsess.Add(-1)
	s.perIP.Release(ip)
}

// failLimit answers a request refused by a limit: 503 for the server's
// limits, 429 for the per-address one, with Retry-After and a JSON-RPC
// error naming the limit.
func (s *Server) failLimit(ctx *fasthttp.RequestCtx, err error) {
	status, what, limit := fasthttp.StatusServiceUnavailable, "max-sessions", s.opts.MaxSessions
	msg := "Service Unavailable: session limit reached (" + strconv.Itoa(limit) + " sessions)"
	if errors.Is(err, errTooManySessionsPerIP) {
		status, what, limit = fasthttp.StatusTooManyRequests, "max-sessions-per-ip", s.opts.MaxSessionsPerIP
		msg = "Too Many Requests: session limit per client address reached (" + strconv.Itoa(limit) + " sessions)"
	}
	data := `{"limit":"` + what + `","max":` + strconv.Itoa(limit) + `}`
	ctx.Response.Header.SetBytesK(hdrRetryAfter, strconv.Itoa(retryAfterSessions))
	s.failData(ctx, status, codeTransport, msg, []byte(data))
}

// pendingQueue lists sessions in the order they were created, for
// evicting the oldest one still waiting for its client's first request
// after initialize. Entries that completed or ended are dropped lazily;
// the reaper drops those older than the init timeout, so the queue holds
// at most the sessions of one init timeout.
type pendingQueue struct {
	mu   sync.Mutex
	q    []*hsession
	head int
}

func (p *pendingQueue) push(h *hsession) {
	p.mu.Lock()
	if p.head > 0 && p.head >= len(p.q)/2 {
		n := copy(p.q, p.q[p.head:])
		clear(p.q[n:])
		p.q, p.head = p.q[:n], 0
	}
	p.q = append(p.q, h)
	p.mu.Unlock()
}

// prune drops the leading entries that completed, ended or were created
// before cutoff.
func (p *pendingQueue) prune(cutoff time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.head < len(p.q) {
		h := p.q[p.head]
		if h != nil && h.pendingInit(h.sess) && !h.created.Before(cutoff) {
			break
		}
		p.q[p.head] = nil
		p.head++
	}
	if p.head == len(p.q) {
		p.q, p.head = p.q[:0], 0
	}
}

// evictScan bounds the entries one eviction looks at.
const evictScan = 256

// evictPending closes the oldest session that never completed its
// initialization and has no request in flight; false if there is none.
func (s *Server) evictPending() bool {
	p := &s.pending
	p.mu.Lock()
	var victim *hsession
	for i, n := p.head, 0; i < len(p.q) && n < evictScan; i, n = i+1, n+1 {
		h := p.q[i]
		if h == nil {
			continue
		}
		if !h.pendingInit(h.sess) {
			p.q[i] = nil
			continue
		}
		if h.busy() {
			continue
		}
		victim, p.q[i] = h, nil
		break
	}
	for p.head < len(p.q) && p.q[p.head] == nil {
		p.head++
	}
	p.mu.Unlock()
	if victim == nil {
		return false
	}
	s.eng.Conn(victim.sess).Close(ErrEvicted)
	return true
}

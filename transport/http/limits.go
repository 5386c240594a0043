package http

import (
	"errors"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/session"
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
	// room for a new session while the table was full: one never used
	// after initialize, else the idle one used least recently.
	ErrInitTimeout = codec.ReasonInitTimeout.Err("mcphttp: session not initialized in time")
	ErrEvicted     = codec.ReasonEvicted.Err("mcphttp: session evicted to make room: session limit reached")
)

var hdrRetryAfter = []byte("Retry-After")

// admitSession reserves a session slot for a client at ip: within
// MaxSessionsPerIP, then within MaxSessions. When the table is full, it
// evicts the oldest session that never completed its initialization, else
// the idle session used least recently (evictIdle), so that a new client
// gets in unless every session is busy.
func (s *Server) admitSession(ip netip.Addr) error {
	if s.perIP.Acquire(addrKey(ip)) != nil {
		return errTooManySessionsPerIP
	}
	for try := 0; ; try++ {
		if s.nsess.Add(1) <= int64(s.opts.MaxSessions) {
			return nil
		}
		s.nsess.Add(-1)
		if try == 3 || !(s.evictPending() || s.evictIdle()) {
			s.perIP.Release(addrKey(ip))
			return errTooManySessions
		}
	}
}

// releaseSession frees the slot of a session that ended.
func (s *Server) releaseSession(ip netip.Addr) {
	s.nsess.Add(-1)
	s.perIP.Release(addrKey(ip))
}

// addrKey is what the per-address session limit counts by: an IPv4
// address, or the /64 network of an IPv6 address, which one client
// usually holds whole.
func addrKey(ip netip.Addr) netip.Addr {
	ip = ip.Unmap()
	if ip.Is6() {
		if p, err := ip.Prefix(64); err == nil {
			return p.Addr()
		}
	}
	return ip
}

// perIPShare is MaxSessionsPerIP's default: a sixteenth of maxSessions,
// at least 64; none (0) when that is not below maxSessions.
func perIPShare(maxSessions int) int {
	if n := max(maxSessions/16, 64); n < maxSessions {
		return n
	}
	return 0
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

// lruQueue lists the Streamable HTTP sessions for evicting an idle one
// when the table is full, least recently used first, as a sampling LRU
// does (Redis's): eviction takes entries from the front until it holds
// evictSample idle ones, closes the one used least recently, and puts
// the others, and the busy ones met, at the back. So each eviction costs
// at most evictScan steps, touches no request's path (sessions record
// their last use in an atomic, as ever), and over successive evictions
// the window turns through the whole table. Entries of ended sessions
// are dropped when met, and swept when they are as many as the live ones.
type lruQueue struct {
	mu   sync.Mutex
	q    []*hsession
	head int
	cand []*hsession // evictIdle's scratch
}

// evictSample is the number of idle sessions one eviction compares.
const evictSample = 32

// push queues h, a new session; live is the number of live sessions.
func (p *lruQueue) push(h *hsession, live int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.q) - p.head; int64(n) > 2*live+64 {
		p.sweepLocked()
	}
	p.appendLocked(h)
}

// appendLocked adds h at the back, moving the entries to the front of the
// slice when the consumed part is half of it.
func (p *lruQueue) appendLocked(h *hsession) {
	if p.head > 0 && p.head >= len(p.q)/2 {
		n := copy(p.q, p.q[p.head:])
		clear(p.q[n:])
		p.q, p.head = p.q[:n], 0
	}
	p.q = append(p.q, h)
}

// sweepLocked drops the entries of sessions that ended.
func (p *lruQueue) sweepLocked() {
	live := p.q[:0]
	for _, h := range p.q[p.head:] {
		if h.sess.State() != session.StateClosed {
			live = append(live, h)
		}
	}
	clear(p.q[len(live):])
	p.q, p.head = live, 0
}

// evictIdle closes the idle session used least recently among those
// lruQueue samples; false when it finds none. Idle means no request in
// flight and no open stream.
func (s *Server) evictIdle() bool {
	p := &s.lru
	p.mu.Lock()
	cand := p.cand[:0]
	var busy []*hsession
	for n := min(len(p.q)-p.head, evictScan); n > 0 && len(cand) < evictSample; n-- {
		h := p.q[p.head]
		p.q[p.head] = nil
		p.head++
		switch sess := h.sess; {
		case sess.State() == session.StateClosed:
		case sess.InFlight() != 0 || h.busy():
			busy = append(busy, h)
		default:
			cand = append(cand, h)
		}
	}
	var victim *hsession
	for _, h := range cand {
		if victim == nil || h.sess.IdleSince().Before(victim.sess.IdleSince()) {
			victim = h
		}
	}
	for _, h := range cand {
		if h != victim {
			p.appendLocked(h)
		}
	}
	for _, h := range busy {
		p.appendLocked(h)
	}
	clear(cand)
	p.cand = cand[:0]
	p.mu.Unlock()
	if victim == nil {
		return false
	}
	s.eng.Conn(victim.sess).Close(ErrEvicted)
	return true
}

package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/client"
)

// A pool is an upstream's connections of one era, shared by the
// downstream sessions (share = "pool:N"), or the one connection of a
// downstream session (share = "session"). Each slot has a supervisor that
// connects, handshakes, and reconnects with backoff when the connection
// ends (for stdio, a new child).
type pool struct {
	u     *upstream
	era   era
	slots []*poolSlot
	sess  string // share = "session": the session it serves

	mu     sync.Mutex
	wake   chan struct{} // closed and replaced when a connection's readiness changes
	ctx    context.Context
	cancel context.CancelFunc
	rr     atomic.Uint32
}

// poolSlot is one connection of a pool, replaced at each reconnection.
type poolSlot struct {
	cur     atomic.Pointer[muxConn]
	started atomic.Bool
	gaveUp  atomic.Bool // a stateless slot whose upstream speaks no 2026-07-28: not restarted until it does (pool.revive)
}

func newPool(u *upstream, e era, n int) *pool {
	p := &pool{u: u, era: e, slots: make([]*poolSlot, n), wake: make(chan struct{})}
	p.ctx, p.cancel = context.WithCancel(u.ctx)
	for i := range p.slots {
		p.slots[i] = &poolSlot{}
	}
	return p
}

// start starts slot i's supervisor, once.
func (p *pool) start(i int) {
	s := p.slots[i]
	if s.started.CompareAndSwap(false, true) {
		p.u.wg.Add(1)
		go p.supervise(i)
	}
}

// changed wakes the callers waiting for a connection.
func (p *pool) changed() {
	p.mu.Lock()
	close(p.wake)
	p.wake = make(chan struct{})
	p.mu.Unlock()
}

// stop ends the pool's connections.
func (p *pool) stop() {
	p.cancel()
	for _, s := range p.slots {
		if c := s.cur.Load(); c != nil {
			c.close()
		}
	}
}

// Backoff between reconnections: from backoffMin, doubling to
// backoffMax; a connection that lived backoffReset starts over.
const (
	backoffMin   = 100 * time.Millisecond
	backoffMax   = 30 * time.Second
	backoffReset = 30 * time.Second
)

// supervise keeps slot i connected until the pool stops.
func (p *pool) supervise(i int) {
	defer p.u.wg.Done()
	backoff := backoffMin
	for p.ctx.Err() == nil {
		began := time.Now()
		c := newMuxConn(p, i)
		err := p.connect(c)
		if errors.Is(err, errRetryLegacy) {
			c.close()
			c = newMuxConn(p, i)
			err = p.connect(c)
		}
		if err == nil {
			p.slots[i].cur.Store(c)
			c.ready.Store(true)
			p.u.connected(c)
			p.changed()
			select {
			case <-c.endedCh:
			case <-p.ctx.Done():
			case <-c.procExited():
				// A child that died with a grandchild holding its
				// stdout: the stream may never end on its own.
			}
			c.close()
			c.mu.Lock()
			err = c.ended
			c.mu.Unlock()
			if err == nil {
				err = errStopped
			}
		} else {
			c.close()
		}
		c.ready.Store(false)
		p.changed()
		if p.ctx.Err() != nil {
			return
		}
		if p.era == statelessEra && errors.Is(err, errNoStateless) {
			// An upstream of the session revisions only: its 2026-07-28
			// requests are translated over the session pool. No child is
			// started again for nothing.
			p.slots[i].gaveUp.Store(true)
			p.u.log.Debug("the upstream speaks no 2026-07-28: its 2026-07-28 requests are translated", "conn", i)
			return
		}
		p.u.failed(c, err)
		if time.Since(began) > backoffReset {
			backoff = backoffMin
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

// errRetryLegacy: Streamable HTTP was refused; the legacy transport next.
var errRetryLegacy = errors.New("retry with the legacy HTTP+SSE transport")

// procExited is closed when the connection's child exits (never, for
// other transports).
func (c *muxConn) procExited() <-chan struct{} {
	if c.proc == nil {
		return nil
	}
	return c.proc.exited
}

// connect opens c's transport and handshakes.
func (p *pool) connect(c *muxConn) error {
	u := p.u
	ctx, cancel := context.WithTimeout(p.ctx, u.cfg.Timeout)
	defer cancel()
	var err error
	switch u.cfg.Transport {
	case Stdio:
		c.proc, err = startChild(&u.cfg, u.log)
		if err != nil {
			return err
		}
		u.stats.children.Add(1)
		t := &client.PipeTransport{Reader: c.proc.stdout, Writer: c.proc.stdin, MaxMessage: u.g.opts.MaxMessage}
		c.conn, err = t.Connect(ctx, c)
	case TCP:
		pu, _ := url.Parse(u.cfg.URL)
		t := &client.TCPTransport{Addr: pu.Host, MaxMessage: u.g.opts.MaxMessage}
		c.conn, err = t.Connect(ctx, c)
	case HTTP:
		if u.httpErr != nil {
			return u.httpErr
		}
		if u.http.legacy.Load() {
			if p.era == statelessEra {
				u.noStateless.Store(true)
				return errNoStateless
			}
			c.legacy = true
			t := &client.SSETransport{URL: u.cfg.URL, MaxMessage: u.g.opts.MaxMessage, Header: u.headers()}
			c.conn, err = t.Connect(ctx, c)
		} else if p.era == sessionEra {
			// server/discover first, on a pipe of 2026-07-28's (its
			// headers); the session's own pipe comes with initialize
			// (handshake), unless the upstream speaks 2026-07-28 only.
			c.httpProbe = &quietInbound{c: c}
			c.conn = newHTTPPipe(u.http, c.httpProbe, statelessEra, u.cfg.MaxInflight)
		} else {
			c.conn = newHTTPPipe(u.http, c, p.era, u.cfg.MaxInflight)
		}
	}
	if err != nil {
		return err
	}
	if err := c.handshake(ctx); err != nil {
		if errors.Is(err, errNoStateless) {
			u.noStateless.Store(true)
		}
		if u.http != nil && u.http.legacy.Load() {
			if _, isPipe := c.conn.(*httpPipe); isPipe {
				return errRetryLegacy // the legacy transport, at once
			}
		}
		return err
	}
	if hp, ok := c.conn.(*httpPipe); ok && c.era == sessionEra {
		hp.initialized(c.info.version)
	}
	return nil
}

// connFor picks the connection for x: the one a 2026-07-28 retry's
// requestState or a task names, else the least busy.
func (p *pool) connFor(ctx context.Context, x *exchange) (*muxConn, error) {
	if p.era == statelessEra || p.u.statelessOnly() {
		if st := requestStateOf(x.params); st != nil {
			if idx, n := stateConn(st); n > 0 {
				if c := p.conn(idx); c != nil {
					return c, nil
				}
			}
		}
	}
	return p.pick(ctx)
}

// pick returns a ready connection for a call, waiting for one (within
// ctx and the upstream's timeout) while none is. It prefers the
// connection with the fewest calls in flight; with Lazy, it starts the
// next connection when every one started is busy.
func (p *pool) pick(ctx context.Context) (*muxConn, error) {
	var deadline <-chan time.Time
	for {
		var best *muxConn
		started, busy := 0, true
		n := len(p.slots)
		off := int(p.rr.Add(1))
		for k := range n {
			s := p.slots[(off+k)%n]
			if !s.started.Load() {
				continue
			}
			started++
			c := s.cur.Load()
			if c == nil || !c.ready.Load() {
				continue
			}
			in := c.inflight.Load()
			if in == 0 {
				busy = false
			}
			if int(in) >= len(c.calls) {
				continue // full
			}
			if best == nil || in < best.inflight.Load() {
				best = c
			}
		}
		if started < n && (best == nil || busy) {
			p.startNext()
		}
		if best != nil {
			return best, nil
		}
		if p == p.u.session && p.u.downEverywhere() {
			return nil, p.u.downEverywhereError() // cluster.go
		}
		if p.era == statelessEra && p.u.noStateless.Load() {
			return nil, p.u.unavailable(errNoStateless)
		}
		p.mu.Lock()
		wake := p.wake
		p.mu.Unlock()
		if deadline == nil {
			t := time.NewTimer(p.u.cfg.Timeout)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-deadline:
			return nil, p.u.unavailable(p.u.lastError())
		case <-p.ctx.Done():
			return nil, p.u.unavailable(errStopped)
		}
	}
}

// startNext starts the first slot not started.
func (p *pool) startNext() {
	for i, s := range p.slots {
		if !s.started.Load() {
			p.start(i)
			return
		}
	}
}

// conn returns connection i when it is ready.
func (p *pool) conn(i int) *muxConn {
	if i < 0 || i >= len(p.slots) {
		return nil
	}
	if c := p.slots[i].cur.Load(); c != nil && c.ready.Load() {
		return c
	}
	return nil
}

func (p *pool) String() string { return fmt.Sprintf("%s/%s", p.u.cfg.Name, p.era) }

package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Strategy picks a pool member for each call.
type Strategy uint8

// Pool strategies.
const (
	RoundRobin Strategy = iota // members in turn
	Random                     // a member at random
	LeastBusy                  // the member with the fewest calls in flight
)

// PoolOptions configure a Pool. The zero value keeps 4 round-robin
// members checked every 10 s.
type PoolOptions struct {
	// Size is the number of connections; <= 0 means 4.
	Size int
	// Strategy picks the member for each call.
	Strategy Strategy
	// HealthInterval is how often each member is pinged; 0 means 10 s,
	// < 0 disables the checks.
	HealthInterval time.Duration
	// HealthTimeout bounds one health ping; <= 0 means 5 s.
	HealthTimeout time.Duration
	// Logger receives the pool's logs; nil discards them.
	Logger *slog.Logger
}

// drainTimeout bounds the wait for a replaced member's calls in flight.
const drainTimeout = 10 * time.Second

// Pool errors.
var (
	ErrPoolClosed = errors.New("client: pool closed")
	ErrNoHealthy  = errors.New("client: no healthy pool member")
)

// Pool holds several connections to one server and spreads calls over
// them. A member that fails its health ping, or closes, is replaced by a
// fresh dial. A Pool is safe for heavy concurrent use: Get and Do take no
// lock.
type Pool struct {
	dial    func(ctx context.Context) (*Client, error)
	opts    PoolOptions
	log     *slog.Logger
	members []atomic.Pointer[Client]
	next    atomic.Uint64

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex // serializes replacements
	closed atomic.Bool
}

// NewPool dials Size clients with dial and starts the health checks. If
// any dial fails, the clients already made are closed and the error is
// returned.
func NewPool(ctx context.Context, dial func(ctx context.Context) (*Client, error), opts PoolOptions) (*Pool, error) {
	if opts.Size <= 0 {
		opts.Size = 4
	}
	if opts.HealthInterval == 0 {
		opts.HealthInterval = 10 * time.Second
	}
	if opts.HealthTimeout <= 0 {
		opts.HealthTimeout = 5 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Pool{dial: dial, opts: opts, log: log, members: make([]atomic.Pointer[Client], opts.Size)}
	for i := range p.members {
		c, err := dial(ctx)
		if err != nil {
			for j := range i {
				p.members[j].Load().Close()
			}
			return nil, fmt.Errorf("client: pool: dialing member %d: %w", i, err)
		}
		p.members[i].Store(c)
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	if opts.HealthInterval > 0 {
		p.wg.Add(1)
		go p.health()
	}
	return p, nil
}

// Size returns the number of members.
func (p *Pool) Size() int { return len(p.members) }

// Healthy returns the number of members ready for calls.
func (p *Pool) Healthy() int {
	n := 0
	for i := range p.members {
		if usable(p.members[i].Load()) {
			n++
		}
	}
	return n
}

// Get returns a member chosen by the strategy, skipping closed ones. The
// client stays owned by the pool: do not close it.
func (p *Pool) Get() (*Client, error) {
	if p.closed.Load() {
		return nil, ErrPoolClosed
	}
	n := len(p.members)
	switch p.opts.Strategy {
	case Random:
		start := rand.IntN(n)
		for i := range n {
			if c := p.members[(start+i)%n].Load(); usable(c) {
				return c, nil
			}
		}
	case LeastBusy:
		var best *Client
		var load int64
		for i := range p.members {
			c := p.members[i].Load()
			if !usable(c) {
				continue
			}
			if l := c.InFlight(); best == nil || l < load {
				best, load = c, l
			}
		}
		if best != nil {
			return best, nil
		}
	default:
		start := p.next.Add(1)
		for i := range uint64(n) {
			if c := p.members[(start+i)%uint64(n)].Load(); usable(c) {
				return c, nil
			}
		}
	}
	return nil, ErrNoHealthy
}

func usable(c *Client) bool { return c != nil && c.State() == StateReady }

// Do runs fn with a member.
func (p *Pool) Do(ctx context.Context, fn func(ctx context.Context, c *Client) error) error {
	c, err := p.Get()
	if err != nil {
		return err
	}
	return fn(ctx, c)
}

// health pings every member each interval and replaces the failing ones.
func (p *Pool) health() {
	defer p.wg.Done()
	t := time.NewTicker(p.opts.HealthInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-p.ctx.Done():
			return
		}
		var wg sync.WaitGroup
		for i := range p.members {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.check(i)
			}()
		}
		wg.Wait()
	}
}

// check pings member i and replaces it if it does not answer.
func (p *Pool) check(i int) {
	c := p.members[i].Load()
	if c != nil && c.State() != StateClosed {
		ctx, cancel := context.WithTimeout(p.ctx, p.opts.HealthTimeout)
		err := c.Ping(ctx)
		cancel()
		if err == nil || p.ctx.Err() != nil {
			return
		}
		p.log.Warn("pool member unhealthy", "member", i, "err", err)
	}
	p.replace(i, c)
}

// replace dials a new member i in place of old.
func (p *Pool) replace(i int, old *Client) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() || p.members[i].Load() != old {
		return
	}
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	c, err := p.dial(ctx)
	cancel()
	if err != nil {
		p.log.Warn("pool member not replaced", "member", i, "err", err)
		return
	}
	if p.closed.Load() {
		c.Close()
		return
	}
	p.members[i].Store(c)
	if old != nil {
		// Let the calls in flight on the old member end (they fail at once
		// if it is dead), then close it, off the health goroutine.
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			deadline := time.Now().Add(drainTimeout)
			for old.InFlight() > 0 && time.Now().Before(deadline) && p.ctx.Err() == nil {
				time.Sleep(10 * time.Millisecond)
			}
			old.Close()
		}()
	}
}

// Close closes every member and stops the health checks.
func (p *Pool) Close() error {
	if !p.closed.CompareAndSwap(false, true) {
		return nil
	}
	p.cancel()
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.members {
		if c := p.members[i].Load(); c != nil {
			c.Close()
		}
	}
	return nil
}

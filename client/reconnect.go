package client

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// ReconnectPolicy says how a client reconnects after a drop: attempt n
// waits min(MaxDelay, MinDelay·Multiplier^(n-1)), randomized by ±Jitter.
// The zero value retries forever from 100 ms up to 30 s, doubling, with
// 20% jitter.
type ReconnectPolicy struct {
	// MaxAttempts bounds the attempts per drop; <= 0 means no bound.
	MaxAttempts int
	// MinDelay is the first wait; <= 0 means 100 ms.
	MinDelay time.Duration
	// MaxDelay caps the wait; <= 0 means 30 s.
	MaxDelay time.Duration
	// Multiplier grows the wait; <= 1 means 2.
	Multiplier float64
	// Jitter is the random fraction of each wait, in [0, 1]; 0 means 0.2
	// and a negative value none.
	Jitter float64
}

// Delay returns the wait before attempt n (from 1).
func (p *ReconnectPolicy) Delay(n int) time.Duration {
	minD, maxD, mult, jit := p.MinDelay, p.MaxDelay, p.Multiplier, p.Jitter
	if minD <= 0 {
		minD = 100 * time.Millisecond
	}
	if maxD <= 0 {
		maxD = 30 * time.Second
	}
	if mult <= 1 {
		mult = 2
	}
	switch {
	case jit == 0:
		jit = 0.2
	case jit < 0:
		jit = 0
	case jit > 1:
		jit = 1
	}
	d := float64(minD)
	for i := 1; i < n && d < float64(maxD); i++ {
		d *= mult
	}
	d = min(d, float64(maxD))
	if jit > 0 {
		d *= 1 + jit*(2*rand.Float64()-1)
	}
	return time.Duration(d)
}

// reconnect reopens the connection after a drop, with backoff, until it
// succeeds, the attempts run out or the client closes.
func (c *Client) reconnect(cause error) {
	defer c.bg.Done()
	p := c.opts.Reconnect
	attempt := 0
	for p.MaxAttempts <= 0 || attempt < p.MaxAttempts {
		attempt++
		t := time.NewTimer(p.Delay(attempt))
		select {
		case <-t.C:
		case <-c.bgCtx.Done():
			t.Stop()
			return
		}
		ctx, cancel := context.WithTimeout(c.bgCtx, c.opts.InitTimeout)
		err := c.connectOnce(ctx)
		cancel()
		if err == nil {
			c.log.Info("reconnected", "attempt", attempt)
			if f := c.opts.OnReconnected; f != nil {
				f()
			}
			return
		}
		if c.bgCtx.Err() != nil {
			return
		}
		c.log.Warn("reconnection attempt failed", "attempt", attempt, "err", err)
	}
	c.terminate(fmt.Errorf("%w after %d attempts: %w", ErrReconnectFailed, attempt, cause))
}

// keepAlive pings the server on l every KeepAlive; KeepAliveMisses
// unanswered pings in a row kill the connection.
func (c *Client) keepAlive(l *link) {
	defer c.bg.Done()
	iv := c.opts.KeepAlive
	t := time.NewTicker(iv)
	defer t.Stop()
	misses := 0
	for {
		select {
		case <-t.C:
		case <-l.done:
			return
		case <-c.bgCtx.Done():
			return
		}
		_, err := l.call(c.bgCtx, c.pingMethod(), nil, nil, iv)
		if err == nil {
			misses = 0
			continue
		}
		if l.dead.Load() || c.bgCtx.Err() != nil {
			return
		}
		misses++
		c.log.Debug("keep-alive ping failed", "misses", misses, "err", err)
		if misses >= c.opts.KeepAliveMisses {
			l.kill(fmt.Errorf("%w (%d in a row)", ErrKeepAlive, misses))
			return
		}
	}
}

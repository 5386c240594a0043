package engine

import (
	"context"
	"sync"
	"time"
)

// reqCtx is the context of a request served by a handler. It is part of
// the pooled request, so that serving a request allocates no context: its
// done channel is made only when someone asks for it, and a cancelled
// context carrying the cause only when the request is cancelled.
//
// It is not derived from the session's context with context.WithCancel;
// instead the session cancels every request it tracks when it closes
// (session.Session.Close), and the client's notifications/cancelled
// reaches it through session.Session.CancelRequest. Err, Deadline and
// Value fall back to the session's context (parent).
//
// context.Cause works on it: once cancelled, Value delegates to a
// standard context cancelled with the same cause, which is how
// context.Cause finds a cause.
//
// Like the request, it must not be used after the handler returns: it is
// reused for another request. A handler that hands work to a goroutine
// outliving it gives that goroutine a context of its own
// (context.WithoutCancel, or a fresh one).
type reqCtx struct {
	parent context.Context
	caller any  // the request's verified caller (Options.Authorize), or nil
	span   Span // the request's span (Options.Tracer), or nil

	mu     sync.Mutex
	done   chan struct{}   // made on first Done; closedChan once cancelled before that
	err    error           // set once cancelled or finished
	caused context.Context // a cancelled context carrying the cause, once cancelled
	afters []*afterFunc    // AfterFunc's functions not yet run or stopped
	notify chan<- struct{} // NotifyDone's channel
}

// DoneNotifier is implemented by the context the engine gives a handler.
// A handler that waits on a channel of its own anyway (an answer from
// elsewhere, on a reused channel) has the context's end signalled on that
// channel too, rather than selecting on Done as well, which makes a
// channel per request.
type DoneNotifier interface {
	// NotifyDone has a value sent on ch without blocking (give it room)
	// when the context ends, at once if it has ended. One channel at a
	// time: a second call replaces the first.
	NotifyDone(ch chan<- struct{})
	// StopNotify undoes NotifyDone: nothing is sent once it returns.
	StopNotify()
}

var _ DoneNotifier = (*reqCtx)(nil)

// NotifyDone implements DoneNotifier.
func (c *reqCtx) NotifyDone(ch chan<- struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		select {
		case ch <- struct{}{}:
		default:
		}
		return
	}
	c.notify = ch
}

// StopNotify implements DoneNotifier.
func (c *reqCtx) StopNotify() {
	c.mu.Lock()
	c.notify = nil
	c.mu.Unlock()
}

// afterFunc is one function registered with AfterFunc.
type afterFunc struct{ f func() }

// closedChan is the Done channel of a context cancelled before anyone
// asked for it.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// reset prepares c for a request of the session whose context is parent.
func (c *reqCtx) reset(parent context.Context) {
	c.parent, c.caller, c.span, c.done, c.err, c.caused, c.afters, c.notify = parent, nil, nil, nil, nil, nil, c.afters[:0], nil
}

// AfterFunc arranges for f to run in its own goroutine once the context
// ends, as context.AfterFunc does. The standard library calls it when a
// context is derived from this one (context.WithTimeout in a handler), so
// that deriving starts no goroutine to watch this one.
func (c *reqCtx) AfterFunc(f func()) (stop func() bool) {
	a := &afterFunc{f: f}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	c.afters = append(c.afters, a)
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, b := range c.afters {
			if b == a {
				c.afters = append(c.afters[:i], c.afters[i+1:]...)
				return true
			}
		}
		return false
	}
}

func (c *reqCtx) Deadline() (time.Time, bool) { return c.parent.Deadline() }

func (c *reqCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		if c.err != nil {
			c.done = closedChan
		} else {
			c.done = make(chan struct{})
		}
	}
	return c.done
}

func (c *reqCtx) Err() error {
	c.mu.Lock()
	err := c.err
	c.mu.Unlock()
	if err != nil {
		return err
	}
	return c.parent.Err()
}

func (c *reqCtx) Value(key any) any {
	if _, ok := key.(callerKey); ok && c.caller != nil {
		return c.caller
	}
	if c.span != nil {
		if v := c.span.Value(key); v != nil {
			return v
		}
	}
	c.mu.Lock()
	caused := c.caused
	c.mu.Unlock()
	if caused != nil {
		return caused.Value(key)
	}
	return c.parent.Value(key)
}

// Cancel implements session.Canceler: it cancels the request with cause.
func (c *reqCtx) Cancel(cause error) {
	if cause == nil {
		cause = context.Canceled
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	caused, cancel := context.WithCancelCause(c.parent)
	cancel(cause)
	c.err, c.caused = context.Canceled, caused
	c.closeLocked()
}

// finish ends the context when its request has been answered, as the
// standard library's request contexts end: what was started from it stops.
func (c *reqCtx) finish() {
	c.mu.Lock()
	if c.err == nil {
		c.err = context.Canceled
		c.closeLocked()
	}
	c.mu.Unlock()
}

func (c *reqCtx) closeLocked() {
	if c.done != nil && c.done != closedChan {
		close(c.done)
	}
	if c.notify != nil {
		select {
		case c.notify <- struct{}{}:
		default:
		}
		c.notify = nil
	}
	for i, a := range c.afters {
		go a.f()
		c.afters[i] = nil
	}
	c.afters = c.afters[:0]
}

// cause returns the cause the request was cancelled with, or nil.
func (c *reqCtx) cause() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.caused == nil {
		return nil
	}
	return context.Cause(c.caused)
}

// String names the context in logs, as the standard contexts do.
func (c *reqCtx) String() string { return "mcpedge request context" }

package engine

import (
	"sync"
	"sync/atomic"
)

// admission counts the requests being served and refuses new ones once
// closing begins, in one atomic step: the closing bit and the count share a
// word, so no request can slip in between the check and the count while
// Shutdown waits for the count to reach zero.
type admission struct {
	state   atomic.Int64 // closingBit | count
	once    sync.Once
	drained chan struct{}
}

const closingBit = int64(1) << 62

func newAdmission() *admission { return &admission{drained: make(chan struct{})} }

// admit counts a new request, or reports false once closing has begun.
func (a *admission) admit() bool {
	for {
		v := a.state.Load()
		if v&closingBit != 0 {
			return false
		}
		if a.state.CompareAndSwap(v, v+1) {
			return true
		}
	}
}

// done ends an admitted request.
func (a *admission) done() {
	if a.state.Add(-1) == closingBit {
		a.once.Do(func() { close(a.drained) })
	}
}

// close refuses new requests and returns a channel closed once every
// admitted request is done.
func (a *admission) close() <-chan struct{} {
	if a.state.Or(closingBit)|closingBit == closingBit {
		a.once.Do(func() { close(a.drained) })
	}
	return a.drained
}

func (a *admission) closing() bool { return a.state.Load()&closingBit != 0 }

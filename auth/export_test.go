package auth

import (
	"context"
	"time"
)

// SetKeyClock makes the key set of v's configuration read the time from
// now: the waits between its fetches are decided by it.
func SetKeyClock(v *Verifier, now func() time.Time) {
	ks := v.st.Load().keys
	ks.mu.Lock()
	ks.now = now
	ks.mu.Unlock()
}

// WaitKeyFetches waits until the key set of v's configuration has fetched
// the set successfully n times, or ctx ends.
func WaitKeyFetches(ctx context.Context, v *Verifier, n int) error {
	ks := v.st.Load().keys
	for {
		ks.mu.Lock()
		ok, changed := ks.okCount, ks.changed
		ks.mu.Unlock()
		if ok >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

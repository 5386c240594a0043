package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/mcpedge/mcpedge/internal/redact"
)

// ErrKeySetTooLarge is the error of a JWKS download bigger than
// Config.MaxKeySetBytes; the keys already cached stay in use.
var ErrKeySetTooLarge = errors.New("auth: JWKS larger than the limit")

// keySet is the JWKS of a configuration: fetched at start with a bounded
// wait, then by one goroutine every RefreshInterval, and on a token whose
// kid is unknown (refetch), at most once per UnknownKIDInterval after a
// fetch that succeeded. A failed fetch is retried after RetryInterval,
// doubled for each failure in a row up to 8 times that, so that keys are
// picked up within seconds of a key server recovering, and no sooner, so
// that a key server that is down is not hammered by tokens with unknown
// kids. Keys are replaced only by a fetch that succeeds: a key server that
// fails, stalls, answers garbage or too many bytes leaves the cached ones.
type keySet struct {
	url   string
	hc    *http.Client
	cfg   *Config
	store *jwkset.MemoryJWKSet
	log   *slog.Logger
	now   func() time.Time // time.Now; tests set a clock of their own
	wake  chan struct{}    // tells the refresh goroutine to recompute its wait

	mu       sync.Mutex
	fetching bool      // a fetch is under way
	unknown  time.Time // when the last fetch for an unknown kid began
	last     time.Time // when the last fetch ended
	ok       bool      // whether it succeeded
	fails    int       // failed fetches in a row
	okCount  int       // fetches that succeeded (tests)
	changed  chan struct{}
}

func newKeySet(cfg *Config, hc *http.Client, log *slog.Logger) *keySet {
	return &keySet{url: cfg.JWKSURL, hc: hc, cfg: cfg, store: jwkset.NewMemoryStorage(), log: log,
		now: time.Now, wake: make(chan struct{}, 1), changed: make(chan struct{})}
}

// retryAfter is the wait after fails failed fetches in a row: base, doubled
// for each failure after the first, at most 8 × base.
func retryAfter(base time.Duration, fails int) time.Duration {
	d := base
	for i := 1; i < fails && d < 8*base; i++ {
		d *= 2
	}
	return min(d, 8*base)
}

// dueLocked returns when the refresh goroutine's next fetch is due. ks.mu
// is held.
func (ks *keySet) dueLocked() time.Time {
	if ks.ok {
		return ks.last.Add(ks.cfg.RefreshInterval)
	}
	return ks.last.Add(retryAfter(ks.cfg.RetryInterval, ks.fails))
}

// run is the refresh goroutine: it fetches when due until ctx ends.
func (ks *keySet) run(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		ks.mu.Lock()
		wait := ks.dueLocked().Sub(ks.now())
		ks.mu.Unlock()
		t.Reset(max(wait, 0))
		select {
		case <-ctx.Done():
			return
		case <-ks.wake:
			t.Stop() // no stale tick is delivered after Stop (Go 1.23)
		case <-t.C:
			ks.fetch(ctx)
		}
	}
}

// refetch is called for a token whose kid is not in the set: it fetches
// the set again, waiting at most FetchTimeout, when that is allowed (no
// fetch under way; after a good fetch, UnknownKIDInterval since the last
// fetch for an unknown kid; after a failed one, the retry wait), and
// reports whether a fetch succeeded. Otherwise it returns false at once:
// the token is refused.
func (ks *keySet) refetch(ctx context.Context) bool {
	ks.mu.Lock()
	now := ks.now()
	next := ks.unknown.Add(ks.cfg.UnknownKIDInterval)
	if !ks.ok {
		next = ks.last.Add(retryAfter(ks.cfg.RetryInterval, ks.fails))
	}
	allowed := !ks.fetching && !now.Before(next)
	if allowed {
		ks.unknown = now
	}
	ks.mu.Unlock()
	if !allowed {
		return false
	}
	ok := ks.fetch(ctx)
	select { // the refresh goroutine's wait changed
	case ks.wake <- struct{}{}:
	default:
	}
	return ok
}

// fetch downloads and installs the set, unless a fetch is under way
// already; it reports whether it did, successfully.
func (ks *keySet) fetch(ctx context.Context) bool {
	ks.mu.Lock()
	if ks.fetching {
		ks.mu.Unlock()
		return false
	}
	ks.fetching = true
	ks.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, ks.cfg.FetchTimeout)
	err := ks.download(ctx)
	cancel()

	ks.mu.Lock()
	ks.fetching, ks.last, ks.ok = false, ks.now(), err == nil
	prev := ks.fails
	if err == nil {
		ks.fails = 0
		ks.okCount++
	} else {
		ks.fails++
	}
	n := ks.fails
	close(ks.changed)
	ks.changed = make(chan struct{})
	ks.mu.Unlock()

	// One warning per outage, not one per retry.
	switch {
	case err != nil && n == 1:
		ks.log.Warn("auth: JWKS fetch failed; cached keys stay in use, retrying", "url", redact.URLs(ks.url), "error", err)
	case err != nil:
		ks.log.Debug("auth: JWKS fetch failed again", "url", redact.URLs(ks.url), "error", err, "failures", n)
	case prev > 0:
		ks.log.Info("auth: JWKS fetched again", "url", redact.URLs(ks.url), "failures", prev)
	}
	return err == nil
}

// download fetches the set, refusing one over MaxKeySetBytes, and
// replaces the stored keys with it.
func (ks *keySet) download(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ks.url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := ks.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("auth: JWKS: status %d", resp.StatusCode)
	}
	limit := ks.cfg.MaxKeySetBytes
	tooLarge := fmt.Errorf("%w (%s bytes)", ErrKeySetTooLarge, strconv.FormatInt(limit, 10))
	if resp.ContentLength > limit {
		return tooLarge
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return err
	}
	if int64(len(body)) > limit {
		return tooLarge
	}
	var set jwkset.JWKSMarshal
	if err := json.Unmarshal(body, &set); err != nil {
		return fmt.Errorf("auth: JWKS: %w", err)
	}
	keys := make([]jwkset.JWK, 0, len(set.Keys))
	for _, m := range set.Keys {
		k, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{Private: true}, jwkset.JWKValidateOptions{})
		switch {
		case errors.Is(err, jwkset.ErrUnsupportedKey):
			continue // a key of a kind not verified here (Ed448...)
		case err != nil:
			return fmt.Errorf("auth: JWKS: %w", err)
		}
		keys = append(keys, k)
	}
	return ks.store.KeyReplaceAll(ctx, keys)
}

package http

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/internal/fairtest"
	"github.com/stretchr/testify/require"
)

// Fair scheduling over Streamable HTTP (issue 23): hog sessions with
// calls that run until released fill the worker pool and queue more; a
// well-behaved session's calls all succeed (200, never 503), each
// starting within the bound fairtest states (job ends, not seconds), and
// the hogs get their turns.

// exchange is one HTTP exchange's outcome.
type exchange struct {
	status int
	body   string
	err    error
}

// post sends r and delivers its answer on to.
func (e *env) post(ctx context.Context, r req, to chan<- exchange) {
	go func() {
		resp, err := e.try(ctx, r)
		if err != nil {
			to <- exchange{err: err}
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		to <- exchange{status: resp.StatusCode, body: string(b), err: err}
	}()
}

func TestFairSchedulingHTTP(t *testing.T) {
	for _, tc := range []struct {
		name               string
		hogs, per, workers int
		over               int // each hog's calls refused by its -max-inflight
	}{
		{"ten hogs", 10, 8, 4, 0},
		{"one hog over 64 workers", 1, 200, 64, 200 - 64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOpts{loopback: true, eng: engine.Options{Workers: tc.workers}})
			e.hc.Transport.(*http.Transport).MaxIdleConnsPerHost = tc.hogs*tc.per + 8
			g, err := fairtest.Register(e.eng.Registry())
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			sids := make([]string, tc.hogs)
			for h := range sids {
				sids[h] = e.initialize()
			}
			witness := e.initialize()
			hogs := make(chan exchange, tc.hogs*tc.per)
			refused := 0
			r := fairtest.Run(t, g, fairtest.Setup{
				Hogs: tc.hogs, PerHog: tc.per, Admitted: tc.hogs * (tc.per - tc.over),
				Stats: e.eng.PoolStats,
				Hog: func(h, i int) {
					e.post(ctx, req{sid: sids[h], body: fairtest.HogCall(h, i)}, hogs)
					if i < tc.per-1 {
						return
					}
					// No call ends before the first is released: the answers
					// that come before are the refusals, and once they have
					// come every call is run, queued or refused.
					for ; refused < tc.over; refused++ {
						requireInflightRefusal(t, <-hogs)
					}
				},
				Witness: func(i int) <-chan error {
					return e.witness(ctx, req{sid: witness, body: fairtest.WitnessCall(i)}, i)
				},
				WitnessCalls: 3,
			})
			if tc.hogs > 1 {
				fairtest.Shares(t, r, tc.hogs)
			}
			require.Equal(t, tc.over, refused)
			requireHogsServed(t, hogs, tc.hogs*(tc.per-tc.over))
		})
	}
}

// TestFairSchedulingStatelessHTTP is TestFairSchedulingHTTP for
// stateless 2026-07-28 clients, which have no session: the scheduler
// keys them by address (no subject here), and -max-inflight counts by
// address too. Every test client connects from 127.0.0.1, which the
// server trusts as a proxy (-trusted-proxies), so that each client is
// the address its X-Forwarded-For names: one per hog, another for the
// witness. Each hog pipelines its calls as concurrent POSTs.
func TestFairSchedulingStatelessHTTP(t *testing.T) {
	const witnessAddr = "10.0.1.1"
	for _, tc := range []struct {
		name               string
		hogs, per, workers int
		over               int // each hog's calls refused by -max-inflight, by address
	}{
		{"ten hogs", 10, 8, 4, 0},
		{"one hog over 64 workers", 1, 200, 64, 200 - 64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOpts{loopback: true, eng: engine.Options{Workers: tc.workers},
				opts: Options{TrustedProxies: trusted(t, "127.0.0.1/32")}})
			e.hc.Transport.(*http.Transport).MaxIdleConnsPerHost = tc.hogs*tc.per + 8
			g, err := fairtest.Register(e.eng.Registry())
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			hogs := make(chan exchange, tc.hogs*tc.per)
			refused := 0
			r := fairtest.Run(t, g, fairtest.Setup{
				Hogs: tc.hogs, PerHog: tc.per, Admitted: tc.hogs * (tc.per - tc.over),
				Stats: e.eng.PoolStats,
				Hog: func(h, i int) {
					e.post(ctx, forwardedStatelessCall("hog", fairtest.HogCall(h, i), fmt.Sprintf("10.0.0.%d", h+1)), hogs)
					if i < tc.per-1 {
						return
					}
					// As in TestFairSchedulingHTTP: no call ends before the
					// first is released, so the answers that come before are
					// the refusals.
					for ; refused < tc.over; refused++ {
						requireInflightRefusal(t, <-hogs)
					}
				},
				Witness: func(i int) <-chan error {
					return e.witness(ctx, forwardedStatelessCall("witness", fairtest.WitnessCall(i), witnessAddr), i)
				},
				WitnessCalls: 3,
			})
			if tc.hogs > 1 {
				fairtest.Shares(t, r, tc.hogs)
			}
			require.Equal(t, tc.over, refused)
			requireHogsServed(t, hogs, tc.hogs*(tc.per-tc.over))
		})
	}
}

// forwardedStatelessCall is frame, a tools/call of tool, as a stateless
// 2026-07-28 client behind a trusted proxy sends it: with the revision's
// _meta added to its params, and the client's address in
// X-Forwarded-For.
func forwardedStatelessCall(tool, frame, client string) req {
	body := strings.TrimSuffix(frame, "}}") + "," + statelessMeta + "}}"
	return statelessReq("tools/call", tool, body, map[string]string{"X-Forwarded-For": client})
}

// witness sends r, the witness's call i, and returns the channel its
// outcome comes on: nil once it is answered 200 with the witness tool's
// result.
func (e *env) witness(ctx context.Context, r req, i int) <-chan error {
	done := make(chan error, 1)
	ch := make(chan exchange, 1)
	e.post(ctx, r, ch)
	go func() {
		a := <-ch
		switch {
		case a.err != nil:
			done <- a.err
		case a.status != http.StatusOK || !strings.Contains(a.body, "witnessed"):
			done <- fmt.Errorf("witness call %d: %d %s", i, a.status, a.body)
		default:
			done <- nil
		}
	}()
	return done
}

// requireInflightRefusal checks that a is a hog call refused over
// -max-inflight: 429 with the limit named.
func requireInflightRefusal(t *testing.T, a exchange) {
	t.Helper()
	require.NoError(t, a.err)
	require.Equal(t, http.StatusTooManyRequests, a.status, a.body)
	require.Contains(t, a.body, `"limit":"`+engine.LimitInflight+`"`)
}

// requireHogsServed checks that the n hog calls admitted were all
// answered 200 with the hog tool's result.
func requireHogsServed(t *testing.T, hogs <-chan exchange, n int) {
	t.Helper()
	for range n {
		a := <-hogs
		require.NoError(t, a.err)
		require.Equal(t, http.StatusOK, a.status, a.body)
		require.Contains(t, a.body, `done h`)
	}
}

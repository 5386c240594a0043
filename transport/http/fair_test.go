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

// post sends body on session sid and delivers its answer on to.
func (e *env) post(ctx context.Context, sid, body string, to chan<- exchange) {
	go func() {
		resp, err := e.try(ctx, req{sid: sid, body: body})
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
					e.post(ctx, sids[h], fairtest.HogCall(h, i), hogs)
					if i < tc.per-1 {
						return
					}
					// No call ends before the first is released: the answers
					// that come before are the refusals, and once they have
					// come every call is run, queued or refused.
					for ; refused < tc.over; refused++ {
						a := <-hogs
						require.NoError(t, a.err)
						require.Equal(t, http.StatusTooManyRequests, a.status, a.body)
						require.Contains(t, a.body, `"limit":"`+engine.LimitInflight+`"`)
					}
				},
				Witness: func(i int) <-chan error {
					done := make(chan error, 1)
					ch := make(chan exchange, 1)
					e.post(ctx, witness, fairtest.WitnessCall(i), ch)
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
				},
				WitnessCalls: 3,
			})
			if tc.hogs > 1 {
				fairtest.Shares(t, r, tc.hogs)
			}
			require.Equal(t, tc.over, refused)
			for range tc.hogs * (tc.per - tc.over) {
				a := <-hogs
				require.NoError(t, a.err)
				require.Equal(t, http.StatusOK, a.status, a.body)
				require.Contains(t, a.body, `done h`)
			}
		})
	}
}

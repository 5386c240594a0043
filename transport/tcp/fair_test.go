package tcp_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/internal/fairtest"
	"github.com/mcpedge/mcpedge/transport/tcp"
	"github.com/stretchr/testify/require"
)

// Fair scheduling over raw TCP (issue 23): hog connections pipelining
// calls that run until released fill the worker pool and queue more; a
// well-behaved connection's calls all succeed, each starting within the
// bound fairtest states (job ends, not seconds), and the hogs get their
// turns.

// fairRun runs fairtest's proof on s with hogs connections pipelining
// per calls each, of which over are refused at once by each hog's own
// ceiling, and returns the hogs' answers: results and refusals by limit.
// The refusals are read as the hog's last call is sent, so that every
// call is run, queued or refused before the first job ends.
func fairRun(t *testing.T, s *server, hogs, per, over int) (results int, refused map[string]int) {
	t.Helper()
	g, err := fairtest.Register(s.eng.Registry())
	require.NoError(t, err)
	conns := make([]*conn, hogs)
	for h := range conns {
		conns[h] = dial(t, s.addr)
		conns[h].init(t)
	}
	witness := dial(t, s.addr)
	witness.init(t)
	refused = map[string]int{}
	r := fairtest.Run(t, g, fairtest.Setup{
		Hogs: hogs, PerHog: per, Admitted: hogs * (per - over),
		Stats: s.eng.PoolStats,
		Hog: func(h, i int) {
			require.NoError(t, conns[h].write(fairtest.HogCall(h, i)))
			if i < per-1 {
				return
			}
			for range over {
				m, err := conns[h].read()
				require.NoError(t, err, "hog %d", h)
				require.NotNil(t, m.Error, "hog %d: a result before any call was released", h)
				refused[string(m.Error.Data)]++
			}
		},
		Witness: func(i int) <-chan error {
			require.NoError(t, witness.write(fairtest.WitnessCall(i)))
			done := make(chan error, 1)
			go func() {
				m, err := witness.read()
				switch {
				case err != nil:
					done <- err
				case string(m.ID) != fmt.Sprintf(`"w%d"`, i):
					done <- fmt.Errorf("answer to %s, want w%d", m.ID, i)
				case m.Error != nil:
					done <- m.Error
				default:
					done <- nil
				}
			}()
			return done
		},
		WitnessCalls: 3,
	})
	if hogs > 1 {
		fairtest.Shares(t, r, hogs)
	}
	for h, c := range conns {
		for range per - over {
			m, err := c.read()
			require.NoError(t, err, "hog %d", h)
			if m.Error != nil {
				refused[string(m.Error.Data)]++
				continue
			}
			text, err := m.text()
			require.NoError(t, err)
			require.True(t, strings.HasPrefix(text, "done h"), text)
			results++
		}
	}
	return results, refused
}

// TestFairSchedulingTCP: ten hog connections over a pool of four.
func TestFairSchedulingTCP(t *testing.T) {
	const hogs, per = 10, 8
	s := start(t, engine.Options{Workers: 4}, tcp.Options{})
	results, refused := fairRun(t, s, hogs, per, 0)
	require.Equal(t, hogs*per, results, "every hog call served: %v", refused)
}

// TestFairSchedulingOneHogTCP: with -workers 64, one connection
// pipelining 200 calls takes every worker, within its -max-inflight (64;
// the rest refused as its own ceiling); the witness's calls wait for the
// next job end, and succeed.
func TestFairSchedulingOneHogTCP(t *testing.T) {
	const per, workers = 200, 64
	s := start(t, engine.Options{Workers: workers}, tcp.Options{})
	results, refused := fairRun(t, s, 1, per, per-workers)
	require.Equal(t, workers, results)
	n := 0
	for data, c := range refused {
		require.Contains(t, data, `"limit":"`+engine.LimitInflight+`"`)
		n += c
	}
	require.Equal(t, per-workers, n)
}

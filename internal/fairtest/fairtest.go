// Package fairtest drives the fair scheduler's proof, the same on every
// transport: hog clients fill the worker pool and its queues with calls
// that end only when the test releases them, one at a time, and a
// well-behaved witness client calls a quick tool meanwhile. The engine's
// guarantee is counted in job ends, not in seconds, so that the
// assertion does not depend on the machine's speed: the witness's call
// starts after at most one job end per other client with calls waiting,
// plus one, however many calls each of them has queued (the scheduler's
// round robin), and every hog still gets its turn in each round.
package fairtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
)

// Wait bounds every blocking step.
const Wait = 10 * time.Second

// Gate holds the tools of the proof: "hog", which reports its tag when it
// starts and ends only when released, and "witness", which reports its
// start and ends at once. Both report on one channel, in the order the
// pool starts them.
type Gate struct {
	started chan string
	release chan struct{}
}

// WitnessTag is what the witness tool reports when it starts.
const WitnessTag = "witness"

// Register adds the proof's tools to reg.
func Register(reg *handlers.Registry) (*Gate, error) {
	g := &Gate{started: make(chan string, 4096), release: make(chan struct{})}
	schema := codec.RawJSON(`{"type":"object","properties":{"tag":{"type":"string"}}}`)
	err := reg.AddTool(&mcp.Tool{Name: "hog", InputSchema: schema}, func(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct {
			Tag string `json:"tag"`
		}
		_ = codec.Unmarshal(req.Params.Arguments, &in)
		g.started <- in.Tag
		select {
		case <-g.release:
			return mcp.TextResult("done " + in.Tag), nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	})
	if err != nil {
		return nil, err
	}
	err = reg.AddTool(&mcp.Tool{Name: "witness", InputSchema: schema}, func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		g.started <- WitnessTag
		return mcp.TextResult("witnessed"), nil
	})
	return g, err
}

// HogCall is the tools/call frame of hog h's call i, id "h<h>-<i>".
func HogCall(h, i int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":"h%d-%d","method":"tools/call","params":{"name":"hog","arguments":{"tag":"h%d-%d"}}}`, h, i, h, i)
}

// WitnessCall is the witness's i-th tools/call frame, id "w<i>".
func WitnessCall(i int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":"w%d","method":"tools/call","params":{"name":"witness","arguments":{}}}`, i)
}

// Setup is one run of the proof on a transport.
type Setup struct {
	Hogs, PerHog int
	// Admitted is the number of hog calls the server admits (runs or
	// queues): all of them unless a per-client ceiling refuses some.
	Admitted int
	// Stats returns the engine's jobs running and requests queued
	// (engine.Server.PoolStats).
	Stats func() (running, queued int)
	// Hog sends hog h's call i (HogCall) without waiting for its answer;
	// the transport's test checks the answers once Run returns.
	Hog func(h, i int)
	// Witness sends the witness's call i (WitnessCall) and returns the
	// channel its outcome comes on: nil once its answer is a result.
	Witness func(i int) <-chan error
	// WitnessCalls is the number of calls the witness makes, one after
	// the other.
	WitnessCalls int
}

// Result is what Run saw.
type Result struct {
	// Ends is, for each witness call, the hog job ends after which it
	// started.
	Ends []int
	// Rounds counts, per hog, the calls of it started while the witness
	// waited.
	Rounds map[string]int
}

// Run runs the proof: it sends every hog call, waits for them to be
// running or queued, then makes the witness's calls one after the other,
// releasing one hog job at a time until each starts, and asserts the
// bound; then it releases the rest.
func Run(t testing.TB, g *Gate, s Setup) Result {
	t.Helper()
	for h := range s.Hogs {
		for i := range s.PerHog {
			s.Hog(h, i)
		}
	}
	running := 0
	eventually(t, "hog calls admitted", func() bool {
		r, q := s.Stats()
		running = r
		return r+q == s.Admitted
	})
	for range running {
		g.next(t)
	}
	started, ended := running, 0 // hog calls
	res := Result{Rounds: map[string]int{}}
	for w := range s.WitnessCalls {
		_, q0 := s.Stats()
		done := s.Witness(w)
		// It starts at once when a worker is free (the previous witness
		// call's), else it waits in the queue.
		n, waiting := 0, false
		eventually(t, "the witness's call started or queued", func() bool {
			select {
			case tag := <-g.started:
				if tag != WitnessTag {
					t.Fatalf("hog call %s started while no job ended", tag)
				}
				return true
			default:
			}
			_, q := s.Stats()
			waiting = q == q0+1
			return waiting
		})
		// Every hog with calls waiting is ahead of it in the ring at
		// most once: its call starts after at most that many job ends,
		// plus the one that frees the worker.
		bound := min(s.Hogs, q0) + 1
		for waiting {
			if n == bound {
				t.Fatalf("witness call %d: not started after %d hog job ends; the scheduler promises at most %d", w, n, bound)
			}
			g.releaseOne(t)
			ended++
			n++
			tag := g.next(t)
			if tag == WitnessTag {
				break
			}
			started++
			res.Rounds[hogOf(tag)]++
		}
		res.Ends = append(res.Ends, n)
		if started < s.Admitted { // the witness's worker takes the next hog call
			g.next(t)
			started++
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("witness call %d: %v", w, err)
			}
		case <-time.After(Wait):
			t.Fatalf("witness call %d: started, never answered", w)
		}
	}
	// The rest of the hogs' calls: each runs, and ends when released.
	for ; ended < s.Admitted; ended++ {
		g.releaseOne(t)
		if started < s.Admitted {
			g.next(t)
			started++
		}
	}
	return res
}

// hogOf returns the hog a tag "h<h>-<i>" belongs to.
func hogOf(tag string) string {
	h, _, _ := strings.Cut(tag, "-")
	return h
}

// Started returns the channel the tools report their starts on.
func (g *Gate) Started() <-chan string { return g.started }

// Release ends one hog call, failing after Wait when none runs.
func (g *Gate) Release(t testing.TB) {
	t.Helper()
	g.releaseOne(t)
}

func (g *Gate) next(t testing.TB) string {
	t.Helper()
	select {
	case tag := <-g.started:
		return tag
	case <-time.After(Wait):
		t.Fatal("no call started")
	}
	return ""
}

func (g *Gate) releaseOne(t testing.TB) {
	t.Helper()
	select {
	case g.release <- struct{}{}:
	case <-time.After(Wait):
		t.Fatal("no hog call to release")
	}
}

// eventually polls cond until it holds, failing after Wait.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// Shares checks that the hogs were served in turn while the witness
// waited: no hog started more than one call more than another.
func Shares(t testing.TB, r Result, hogs int) {
	t.Helper()
	if len(r.Rounds) == 0 {
		return
	}
	lo, hi := int(^uint(0)>>1), 0
	for h := range hogs {
		n := r.Rounds[fmt.Sprintf("h%d", h)]
		lo, hi = min(lo, n), max(hi, n)
	}
	if hi-lo > 1 {
		t.Fatalf("hogs not served in turn while the witness waited: %v", r.Rounds)
	}
}

//go:build !race

package engine_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestRulesZeroAlloc: under rules, a session's tools/call (its caller's
// class found with its caller, the tool checked in the class's view) and
// its tools/list (the class's page, encoded once) allocate nothing once
// the class's view is made.
func TestRulesZeroAlloc(t *testing.T) {
	sink := signalSink{ch: make(chan int, 1)}
	conn := rulesFixture(t, benchRules, sink)
	for _, tc := range []struct {
		name   string
		frame  []byte
		queued bool
	}{{"tools/call", rulesCall, true}, {"tools/list", rulesList, false}} {
		t.Run(tc.name, func(t *testing.T) {
			var out []byte
			call := func() {
				out = conn.HandleFrame(tc.frame, out[:0])
				if tc.queued {
					if len(out) > 0 {
						t.Fatalf("answered at once: %s", out)
					}
					<-sink.ch
				} else if len(out) < 100 {
					t.Fatalf("short answer: %s", out)
				}
			}
			call()
			assert.Zero(t, testing.AllocsPerRun(1000, call))
		})
	}
}

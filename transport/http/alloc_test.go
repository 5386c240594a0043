//go:build !race

package http

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestHandlerAllocs holds a POST of an initialized session, from the parsed
// request to the written answer, at one allocation at most: inline answers
// and a tools/call served on the worker pool alike.
func TestHandlerAllocs(t *testing.T) {
	for _, tc := range handlerCases {
		t.Run(tc.name, func(t *testing.T) {
			h, ctx := handlerBench(t, tc.body)
			serve := func() {
				ctx.Response.Reset()
				h(ctx)
				if ctx.Response.StatusCode() != 200 {
					t.Fatalf("status %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
				}
			}
			serve()
			assert.LessOrEqual(t, testing.AllocsPerRun(500, serve), 1.0)
		})
	}
}

// TestStatelessHandlerAllocs bounds a stateless 2026-07-28 tools/call
// (headers checked against the body, a session opened and closed) at the
// one allocation of its stateless session: its _meta is memoized, its
// Tracker shared.
func TestStatelessHandlerAllocs(t *testing.T) {
	h, ctx := statelessHandlerBench(t, statelessCall)
	serve := func() {
		ctx.Response.Reset()
		h(ctx)
		if ctx.Response.StatusCode() != 200 {
			t.Fatalf("status %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
		}
	}
	serve()
	assert.LessOrEqual(t, testing.AllocsPerRun(500, serve), 1.0)
}

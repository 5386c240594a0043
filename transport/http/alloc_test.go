//go:build !race

package http

import (
	"fmt"
	"testing"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/session"
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

// nopReply takes direct answers and drops them.
type nopReply struct{ status int }

func (r *nopReply) DirectAnswer(_ uint64, status, _ int, _ []byte) { r.status = status }

// TestServeDirectAllocs holds a direct message (what a cluster's link
// brings, session.Shared.ServeDirect), from the message to its answer,
// decoded by the sender or not, at the allocations of the engine's own
// work for it (none for ping; logging/setLevel decodes its params):
// serving it so adds none.
func TestServeDirectAllocs(t *testing.T) {
	_, srv, sid := benchServer(t, Options{})
	sess, ok := srv.eng.Sessions().Get(sid)
	if !ok {
		t.Fatal("no session")
	}
	for _, tc := range []struct{ name, msg string }{
		{"ping", `{"jsonrpc":"2.0","id":7,"method":"ping"}`},
		{"setLevel", `{"jsonrpc":"2.0","id":7,"method":"logging/setLevel","params":{"level":"info"}}`},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`},
	} {
		for _, decoded := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s decoded=%v", tc.name, decoded), func(t *testing.T) {
				r := &session.DirectRequest{Session: []byte(sid), Message: []byte(tc.msg)}
				var m codec.Message
				if decoded {
					if err := codec.Decode(r.Message, &m); err != nil {
						t.Fatal(err)
					}
					r.Decoded = &m
				}
				to := new(nopReply)
				serve := func() {
					to.status = 0
					if !srv.ServeDirect(r, to, 1) || to.status == 0 {
						t.Fatal("not served at once")
					}
				}
				serve()
				var em codec.Message
				out := codec.GetBuffer()
				engineOnly := func() {
					if err := codec.Decode(r.Message, &em); err != nil {
						t.Fatal(err)
					}
					var queued bool
					out.B, queued = srv.eng.Conn(sess).HandleMessage(&em, r.Message, out.B[:0], discard{})
					if queued {
						t.Fatal("queued")
					}
				}
				base := testing.AllocsPerRun(500, engineOnly)
				assert.Equal(t, base, testing.AllocsPerRun(500, serve), "the engine alone: %v", base)
				if tc.name == "ping" {
					assert.Zero(t, base)
				}
			})
		}
	}
}

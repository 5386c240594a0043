package cluster

import (
	"testing"

	"github.com/valyala/fasthttp"
)

// TestWireAllocs holds the encoders of the forwarding path at their
// allocations: none, the client's address written in place.
func TestWireAllocs(t *testing.T) {
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod("POST")
	ctx.Request.SetRequestURI("/mcp")
	ctx.Request.Header.Set("Mcp-Session-Id", "a.1")
	ctx.Request.SetBodyString(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	ctx.Response.Header.Set("Mcp-Session-Id", "a.1")
	ctx.Response.Header.SetContentType("application/json")
	buf := make([]byte, 0, 4096)
	if n := testing.AllocsPerRun(100, func() { buf = appendHead(buf[:0], &ctx) }); n != 0 {
		t.Errorf("appendHead: %v allocations", n)
	}
	if n := testing.AllocsPerRun(100, func() { buf = appendRequest(buf[:0], &ctx, nil) }); n != 0 {
		t.Errorf("appendRequest: %v allocations", n)
	}
	hdrs := make([][2][]byte, 0, 8)
	frame := appendHead(appendFrameStart(nil, frWhole, 0), &ctx)
	if n := testing.AllocsPerRun(100, func() { _, _ = parseFrame(frame, hdrs) }); n != 0 {
		t.Errorf("parseFrame: %v allocations", n)
	}
}

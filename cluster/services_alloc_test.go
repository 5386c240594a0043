package cluster

import (
	"testing"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/valyala/fasthttp"
)

// TestRouteStatelessAllocs: a 2026-07-28 request offered to the cluster
// costs no allocation when it is served where it lands: no placer, a
// placer with nothing down (a gateway's Place returns at once then), or
// a service down here that no other node has up (the gateway answers).
func TestRouteStatelessAllocs(t *testing.T) {
	var m codec.Message
	if err := codec.Decode([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`), &m); err != nil {
		t.Fatal(err)
	}
	var ctx fasthttp.RequestCtx
	for _, tc := range []struct {
		name   string
		placer Placer
	}{
		{"no placer", nil},
		{"nothing down", func(*codec.Message) (bool, string) { return false, "" }},
		{"down here, up nowhere", func(*codec.Message) (bool, string) { return false, "x" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &Node{}
			n.SetPlacer(tc.placer)
			if n.RouteStateless(&ctx, &m) {
				t.Fatal("routed: nothing to route to")
			}
			if a := testing.AllocsPerRun(200, func() { n.RouteStateless(&ctx, &m) }); a != 0 {
				t.Errorf("%v allocations", a)
			}
		})
	}
}

// TestHeldRetry: a retry whose requestState names the node that holds
// its call is not placed elsewhere; any other request may be.
func TestHeldRetry(t *testing.T) {
	for _, tc := range []struct {
		params string
		want   bool
	}{
		{`{"name":"t","requestState":"a.~xyz"}`, true},
		{`{"name":"t","requestState":"opaque"}`, false},
		{`{"name":"t","requestState":1}`, false},
		{`{"name":"t"}`, false},
		{`{"name":`, false},
	} {
		t.Run(tc.params, func(t *testing.T) {
			if got := heldRetry([]byte(tc.params)); got != tc.want {
				t.Errorf("heldRetry = %v, want %v", got, tc.want)
			}
		})
	}
}

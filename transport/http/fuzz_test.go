package http

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers/builtin"
	"github.com/valyala/fasthttp"
)

// FuzzHandler drives the HTTP handler with arbitrary POST bodies, on a
// session in every state the transport knows (none yet, initialized,
// unknown) and statelessly: no panic (recovered ones included), no 500,
// and every JSON answer is JSON. Seeded with the recorded traffic of the
// conformance and interop runs (engine/testdata/traffic.jsonl).
func FuzzHandler(f *testing.F) {
	data, err := os.ReadFile("../../engine/testdata/traffic.jsonl")
	if err != nil {
		f.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for i := 0; sc.Scan(); i++ {
		f.Add(append([]byte(nil), sc.Bytes()...), uint8(i), uint8(i/4))
	}
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"prompts/get\",\"params\":{\"name\":\"x\",\"arguments\":{\"name\":\"a\xffb\"}}}"), uint8(1), uint8(0))

	eng := engine.New(engine.Options{ClientRequestTimeout: 50 * time.Millisecond, MaxMessage: 1 << 16, BigMessage: 1 << 10})
	if err := builtin.Install("conformance", eng.Registry(), builtin.Env{ResourceUpdated: eng.ResourceUpdated}); err != nil {
		f.Fatal(err)
	}
	stateful, stateless := New(eng, Options{}), New(eng, Options{Stateless: true})
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = eng.Shutdown(ctx)
		_ = stateful.Shutdown(ctx)
		_ = stateless.Shutdown(ctx)
	})
	remote := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}
	serve := func(h fasthttp.RequestHandler, sid string, body []byte, ct string) *fasthttp.RequestCtx {
		var req fasthttp.Request
		benchRequest(&req, sid, "")
		req.Header.SetContentType(ct)
		req.SetBody(body)
		ctx := new(fasthttp.RequestCtx)
		ctx.Init(&req, remote, nil)
		h(ctx)
		return ctx
	}
	init := serve(stateful.Handler(), "", []byte(initBody), "application/json")
	sid := string(init.Response.Header.Peek("Mcp-Session-Id"))
	if sid == "" {
		f.Fatalf("initialize: %d %s", init.Response.StatusCode(), init.Response.Body())
	}

	f.Fuzz(func(t *testing.T, body []byte, state, variant uint8) {
		h, id := stateful.Handler(), ""
		switch state % 4 {
		case 1:
			id = sid
		case 2:
			id = "00000000000000000000000000000000"
		case 3:
			h = stateless.Handler()
		}
		ct := "application/json"
		if variant%8 == 7 {
			ct = "text/plain"
		}
		ctx := serve(h, id, body, ct)
		status := ctx.Response.StatusCode()
		if status >= 500 {
			t.Fatalf("status %d: %s", status, ctx.Response.Body())
		}
		if n := eng.Panics(); n != 0 {
			t.Fatalf("%d panic(s) recovered (see the log)", n)
		}
		if bytes.HasPrefix(ctx.Response.Header.ContentType(), []byte("application/json")) && !ctx.Response.IsBodyStream() {
			if b := ctx.Response.Body(); len(b) > 0 && !json.Valid(b) {
				t.Fatalf("status %d: body is not JSON: %q", status, b)
			}
		}
	})
}

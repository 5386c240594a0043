package http

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net"
	"os"
	"strings"
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
	// 2026-07-28 requests: a variant with its high bit set sends them with
	// that revision's headers (statelessHeaders, variant>>4&7 choosing how),
	// others without.
	for i, b := range []string{
		statelessBody(1, "server/discover", ""),
		statelessBody(2, "tools/list", ""),
		statelessBody(3, "tools/call", `"name":"echo","arguments":{"text":"hi"}`),
		statelessBody(4, "tools/call", `"name":"test_simple_text","arguments":{}`),
		statelessBody(5, "resources/read", `"uri":"test://static-text"`),
		statelessBody(6, "prompts/get", `"name":"test_simple_prompt"`),
		statelessBody(7, "subscriptions/listen", `"notifications":{"toolsListChanged":true}`),
		statelessBody(8, "subscriptions/listen", `"notifications":7`),
		statelessBody(9, "ping", ""),
		statelessBody(10, "tasks/get", `"taskId":"nope"`),
		`{"jsonrpc":"2.0","id":11,"method":"server/discover","params":{}}`,
		strings.Replace(statelessBody(12, "server/discover", ""), `"2026-07-28"`, `"v999.0.0"`, 1),
		`{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"debug"}}}`,
	} {
		for state := range 4 {
			f.Add([]byte(b), uint8(state), uint8(0x80|(1+i%6)<<4))
		}
	}

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
	serve := func(h fasthttp.RequestHandler, sid string, body []byte, ct string, hdrs map[string]string) *fasthttp.RequestCtx {
		var req fasthttp.Request
		benchRequest(&req, sid, "")
		req.Header.SetContentType(ct)
		for k, v := range hdrs {
			req.Header.Set(k, v)
		}
		req.SetBody(body)
		ctx := new(fasthttp.RequestCtx)
		ctx.Init(&req, remote, nil)
		h(ctx)
		return ctx
	}
	init := serve(stateful.Handler(), "", []byte(initBody), "application/json", nil)
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
		var hdrs map[string]string
		if variant&0x80 != 0 {
			hdrs = statelessHeaders(body, variant>>4&7)
		}
		ctx := serve(h, id, body, ct, hdrs)
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

// statelessHeaders are the 2026-07-28 headers of a body, as a client derives
// them (Mcp-Method, Mcp-Name), variant choosing small departures: 0 to
// 2 and 7 as derived, 3 Mcp-Name Base64-encoded, 4 without Mcp-Name, 5 an
// Mcp-Param header, 6 an unsupported version.
func statelessHeaders(body []byte, variant uint8) map[string]string {
	var m struct {
		Method string `json:"method"`
		Params struct {
			Name   string `json:"name"`
			URI    string `json:"uri"`
			TaskID string `json:"taskId"`
		} `json:"params"`
	}
	_ = json.Unmarshal(body, &m)
	h := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": m.Method}
	name := m.Params.Name + m.Params.URI + m.Params.TaskID
	switch variant {
	case 3:
		h["Mcp-Name"] = "=?base64?" + base64.StdEncoding.EncodeToString([]byte(name)) + "?="
	case 4:
	case 5:
		h["Mcp-Name"], h["Mcp-Param-Region"] = name, "=?base64?!!?="
	case 6:
		h["Mcp-Name"], h["Mcp-Protocol-Version"] = name, "v999.0.0"
	default:
		if name != "" {
			h["Mcp-Name"] = name
		}
	}
	return h
}

package gateway

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
)

// nopConn is an upstream connection that sends nowhere.
type nopConn struct{}

func (nopConn) Send(context.Context, []byte) error { return nil }
func (nopConn) Close() error                       { return nil }

// nopPeer is a downstream request's Peer that takes everything.
type nopPeer struct{}

func (nopPeer) SessionID() string                           { return "s" }
func (nopPeer) ProtocolVersion() string                     { return mcp.Version20251125 }
func (nopPeer) ClientInfo() mcp.Implementation              { return mcp.Implementation{} }
func (nopPeer) ClientCapabilities() *mcp.ClientCapabilities { return &mcp.ClientCapabilities{} }
func (nopPeer) Progress(float64, float64, string) error     { return nil }
func (nopPeer) Log(string, string, any) error               { return nil }
func (nopPeer) CloseStream()                                {}
func (nopPeer) ListRoots(context.Context) (*mcp.ListRootsResult, error) {
	return &mcp.ListRootsResult{Roots: []mcp.Root{}}, nil
}
func (nopPeer) CreateMessage(context.Context, *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	return &mcp.CreateMessageResult{Role: "assistant", Content: []byte(`{"type":"text","text":""}`)}, nil
}
func (nopPeer) Elicit(context.Context, *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	return &mcp.ElicitResult{Action: "decline"}, nil
}

// FuzzUpstreamMessage feeds an upstream connection arbitrary messages
// while calls are in flight on it: whatever an upstream sends, the
// gateway does not panic, and a call it answers gets bytes that are one
// JSON value. The same bytes go through the rewriters of params and
// results.
func FuzzUpstreamMessage(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":65537,"result":{"content":[]}}`,
		`{"jsonrpc":"2.0","id":65537,"error":{"code":-32602,"message":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"1.0","id":65537,"result":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":65537,"progress":1}}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":1,"_meta":{"io.github.mcpedge/related-request":{"requestId":65537}}}}`,
		`{"jsonrpc":"2.0","id":"e1","method":"elicitation/create","params":{"message":"?","_meta":{"io.github.mcpedge/related-request":{"requestId":65537}}}}`,
		`{"jsonrpc":"2.0","id":"e2","method":"sampling/createMessage","params":{"messages":[],"maxTokens":1,"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t"}}}}`,
		`{"jsonrpc":"2.0","id":"r1","method":"roots/list"}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"e1"}}`,
		`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`,
		`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"x://y"}}`,
		`{"jsonrpc":"2.0","id":"p","method":"ping"}`,
		`not json`, `[]`, `{}`, `{"id":`,
		`{"name":"a","_meta":{"progressToken":1,"io.modelcontextprotocol/clientCapabilities":{"experimental":{}}},"requestState":"~gw1~s"}`,
		`{"resultType":"task","taskId":"t","_meta":{"io.modelcontextprotocol/serverInfo":{},"a":1},"requestState":"s"}`,
	} {
		f.Add([]byte(s))
	}
	g, err := New(Options{Upstreams: []Upstream{{Name: "f", Transport: TCP, URL: "tcp://127.0.0.1:1"}}})
	if err != nil {
		f.Fatal(err)
	}
	cfg := g.opts.Upstreams[0]
	f.Fuzz(func(t *testing.T, data []byte) {
		u := newUpstream(g, cfg)
		defer u.cancel()
		c := newMuxConn(u.session, 0)
		c.conn = nopConn{}
		c.era = sessionEra
		cl, err := c.begin(nopPeer{}, []byte("HEAD"), cfg.Timeout)
		if err != nil {
			t.Fatal(err)
		}
		internal, err := c.begin(nil, nil, cfg.Timeout)
		if err != nil {
			t.Fatal(err)
		}
		c.linkTask(cl, "t")
		c.Message(data)
		c.Closed(nil)
		cl.mu.Lock()
		out := cl.out
		cl.mu.Unlock()
		if len(out) > 4 && !json.Valid(out[4:]) {
			t.Fatalf("a result that is not JSON: %q", out[4:])
		}
		c.end(cl)
		c.end(internal)

		if json.Valid(data) {
			fp := forwardParams{name: []byte("n"), refName: []byte("r"), token: []byte("7"), stateless: true, linkCap: true, addTask: true}
			if p := appendParams(nil, data, &fp); len(data) > 0 && data[0] == '{' && !json.Valid(p) {
				t.Fatalf("params rewritten into invalid JSON: %s", p)
			}
			if res, _ := statelessResult(append([]byte("HEAD"), data...), 4, []byte("~gw1~")); !json.Valid(res[4:]) {
				t.Fatalf("result rewritten into invalid JSON: %s", res[4:])
			}
		}
	})
}

// FuzzTranslateParams feeds the era translation's parsers arbitrary
// params: a 2026-07-28 request's made a session's (downParams), a
// session's made a 2026-07-28 one (withUpMeta), the answers of a retry
// (inputResponses) and a requestState (heldToken). None panics; what
// downParams and withUpMeta make of a JSON object is one, without the
// members they take out.
func FuzzTranslateParams(f *testing.F) {
	for _, s := range []string{
		`{"name":"a","arguments":{"x":1},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":7}}`,
		`{"inputResponses":{"k":{"action":"accept"}},"requestState":"a.~h~x.y","task":{}}`,
		`{"_meta":{}}`, `{}`, `[]`, `{"a":`, `{"_meta":{"io.modelcontextprotocol/logLevel":1},"_meta":2}`,
	} {
		f.Add([]byte(s))
	}
	meta := []byte(`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`)
	f.Fuzz(func(t *testing.T, params []byte) {
		valid := json.Valid(params) && len(params) > 0 && params[0] == '{'
		if out, err := downParams(params); err == nil && valid {
			var m map[string]json.RawMessage
			if json.Unmarshal(out, &m) != nil {
				t.Fatalf("downParams(%s) = %s: not an object", params, out)
			}
			for _, k := range downTop {
				if _, ok := m[k]; ok {
					t.Fatalf("downParams(%s) = %s: %s kept", params, out, k)
				}
			}
		}
		if out, err := withUpMeta(params, meta); err == nil && valid && !json.Valid(out) {
			t.Fatalf("withUpMeta(%s) = %s: not JSON", params, out)
		}
		_, _ = inputResponses(params)
		_, _ = heldToken(string(params))
	})
}

// FuzzPlace feeds the params of every method the cluster asks Place
// about: none may panic, and the name an item is claimed under finds its
// upstream however the params spell it.
func FuzzPlace(f *testing.F) {
	for _, s := range []string{
		`{"name":"t","arguments":{}}`, `{"name":"\u0074"}`, `{"uri":"mem://r"}`, `{"uri":"mem://x/1"}`,
		`{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":""}}`,
		`{"ref":{"type":"ref/resource","uri":"mem://x/{id}"}}`, `{"ref":1}`, `{"name":1}`, `{}`, `[]`, `{"name":`, ``,
	} {
		f.Add(s)
	}
	g, err := New(Options{Upstreams: []Upstream{{Name: "s", Transport: TCP, URL: "tcp://127.0.0.1:1", Share: Share{Session: true}}, {Name: "o", Transport: TCP, URL: "tcp://127.0.0.1:1"}}})
	if err != nil {
		f.Fatal(err)
	}
	s, o := newUpstream(g, g.opts.Upstreams[0]), newUpstream(g, g.opts.Upstreams[1])
	defer s.cancel()
	defer o.cancel()
	g.ups = []*upstream{s, o}
	g.claims[listTool]["t"], g.claims[listPrompt]["p"], g.claims[listResource]["mem://r"], g.claims[listTemplate]["mem://x/{id}"] = s, s, s, s
	g.indexChanged()
	f.Fuzz(func(t *testing.T, params string) {
		for _, method := range []string{mcp.MethodToolsCall, mcp.MethodPromptsGet, mcp.MethodResourcesRead, mcp.MethodCompletionComplete} {
			m := codec.Message{Kind: codec.KindRequest, Method: method, Params: []byte(params)}
			home, down := g.Place(&m)
			if down != "" {
				t.Fatalf("%s %s: down %q: nothing is down", method, params, down)
			}
			var p map[string]any
			if method == mcp.MethodToolsCall && json.Unmarshal([]byte(params), &p) == nil && p["name"] == "t" && !home {
				t.Fatalf("%s %s: not sent home", method, params)
			}
		}
	})
}

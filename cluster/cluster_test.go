package cluster_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge"
	"github.com/mcpedge/mcpedge/cluster"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/handlers/builtin"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// stateKey is the requestState key every test node shares.
var stateKey = []byte("0123456789abcdef0123456789abcdef")

// routeSecret authenticates the test nodes' routes.
const routeSecret = "test-route-secret-0123456789"

// node is one running node of a test cluster.
type node struct {
	name string
	n    *cluster.Node
	srv  *mcpedge.Server
	url  string
	stop context.CancelFunc
	done chan error

	cancelled chan error // why each call of the tool "hang" ended
}

// startNode starts a node routed to routes, serving the demo set and a
// tool that elicits.
func startNode(t *testing.T, name string, routes []string, opts ...func(*cluster.Options)) *node {
	t.Helper()
	co := cluster.Options{Node: name, Embed: "127.0.0.1:0", Routes: routes, ForwardTimeout: 2 * time.Second, RouteSecret: routeSecret}
	for _, o := range opts {
		o(&co)
	}
	n, err := cluster.Start(context.Background(), co)
	require.NoError(t, err)
	srv := mcpedge.New(mcpedge.Options{
		EngineOptions: mcpedge.EngineOptions{Name: "cluster-test", StateKeys: [][]byte{stateKey}, ListChangedDelay: 20 * time.Millisecond},
		HTTP:          &mcpedge.HTTPOptions{Addr: "127.0.0.1:0"},
		Cluster:       n,
		DrainTimeout:  time.Second,
	})
	bus := srv.Engine().Bus()
	require.NoError(t, builtin.Install("demo", srv.Registry(), builtin.Env{ResourceUpdated: srv.ResourceUpdated, Publish: bus.Publish, Subscribe: bus.Subscribe}))
	require.NoError(t, handlers.AddTool(srv.Registry(), &mcp.Tool{Name: "ask"}, func(ctx context.Context, req *handlers.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		res, err := req.Peer.Elicit(ctx, &mcp.ElicitParams{Message: "name?", RequestedSchema: []byte(`{"type":"object","properties":{"name":{"type":"string"}}}`)})
		if err != nil {
			return nil, nil, err
		}
		return mcp.TextResult(res.Action + " " + string(res.Content)), nil, nil
	}))
	require.NoError(t, srv.Registry().AddToolWith(&mcp.Tool{Name: "bake", InputSchema: []byte(`{"type":"object"}`)},
		func(ctx context.Context, _ *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
			select {
			case <-time.After(100 * time.Millisecond):
				return mcp.TextResult("baked by " + name), nil
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		}, handlers.ToolOptions{TaskSupport: mcp.TaskOptional}))
	cancelled := make(chan error, 16)
	require.NoError(t, handlers.AddTool(srv.Registry(), &mcp.Tool{Name: "hang"}, func(ctx context.Context, _ *handlers.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		<-ctx.Done()
		cancelled <- context.Cause(ctx)
		return nil, nil, context.Cause(ctx)
	}))
	ctx, cancel := context.WithCancel(context.Background())
	nd := &node{name: name, n: n, srv: srv, stop: cancel, done: make(chan error, 1), cancelled: cancelled}
	go func() { nd.done <- srv.Serve(ctx) }()
	a := srv.HTTPAddr(ctx)
	require.NotNil(t, a)
	nd.url = "http://" + a.String() + "/mcp"
	return nd
}

// kill stops the node: its server, then its membership.
func (nd *node) kill(t *testing.T) {
	t.Helper()
	nd.stop()
	select {
	case <-nd.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("node %s did not stop", nd.name)
	}
	require.NoError(t, nd.n.Close())
}

func routeOf(nd *node) string { return "nats-route://" + nd.n.RouteAddr().String() }

// waitMesh waits until every node has a route to each other node and
// knows its subjects.
func waitMesh(t *testing.T, nodes ...*node) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for _, nd := range nodes {
		for nd.n.Routes() < len(nodes)-1 || nd.n.Ready() != nil {
			if time.Now().After(deadline) {
				t.Fatalf("node %s: %d routes, ready: %v", nd.name, nd.n.Routes(), nd.n.Ready())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// Interest travels with the routes: wait until each node forwards to
	// each other one (the owner answers 404 for the unknown session).
	for _, a := range nodes {
		for _, b := range nodes {
			for a != b {
				before := a.n.Stats().ForwardNoOwner
				st, _, _ := post(t, a.url, "", b.name+".probe", `{"jsonrpc":"2.0","id":0,"method":"ping"}`)
				require.Equal(t, http.StatusNotFound, st)
				if a.n.Stats().ForwardNoOwner == before {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("node %s does not reach %s", a.name, b.name)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
}

var httpc = &http.Client{Timeout: 10 * time.Second}

// post sends one JSON-RPC message; it returns the status, the session id
// header and the messages of the answer (JSON or SSE).
func post(t *testing.T, url, version, sid, body string) (int, string, []map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if version != "" {
		req.Header.Set("MCP-Protocol-Version", version)
	}
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	resp, err := httpc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), readMessages(t, resp)
}

func readMessages(t *testing.T, resp *http.Response) []map[string]any {
	t.Helper()
	var out []map[string]any
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for m := range sse(resp.Body) {
			out = append(out, m)
		}
		return out
	}
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if len(b) == 0 {
		return nil
	}
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m), string(b))
	return append(out, m)
}

// sse yields the JSON messages of an SSE body until it ends.
func sse(r io.Reader) <-chan map[string]any {
	ch := make(chan map[string]any, 64)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "data: ") || len(line) == len("data: ") {
				continue
			}
			var m map[string]any
			if json.Unmarshal([]byte(line[len("data: "):]), &m) == nil {
				ch <- m
			}
		}
	}()
	return ch
}

const v = "2025-11-25"

// post2026 sends a 2026-07-28 request, with the tasks extension declared.
func post2026(t *testing.T, url, method, name, params string) (int, []map[string]any) {
	t.Helper()
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},` +
		`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
	body := `{"jsonrpc":"2.0","id":5,"method":"` + method + `","params":{` + meta + `,` + params[1:] + `}`
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	req.Header.Set("Mcp-Name", name)
	resp, err := httpc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	return resp.StatusCode, readMessages(t, resp)
}

// initialize opens a session on nd and completes its initialization.
func initialize(t *testing.T, nd *node, caps string) string {
	t.Helper()
	st, sid, msgs := post(t, nd.url, "", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+v+`","capabilities":`+caps+`,"clientInfo":{"name":"t","version":"1"}}}`)
	require.Equal(t, http.StatusOK, st)
	require.Len(t, msgs, 1)
	require.True(t, strings.HasPrefix(sid, nd.name+"."), sid)
	st, _, _ = post(t, nd.url, v, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	require.Equal(t, http.StatusAccepted, st)
	return sid
}

// call sends a request through nd for session sid and returns its result.
func call(t *testing.T, nd *node, sid, method, params string) map[string]any {
	t.Helper()
	st, _, msgs := post(t, nd.url, v, sid, `{"jsonrpc":"2.0","id":7,"method":"`+method+`","params":`+params+`}`)
	require.Equal(t, http.StatusOK, st, "%s through %s: %v", method, nd.name, msgs)
	require.NotEmpty(t, msgs)
	last := msgs[len(msgs)-1]
	require.Nil(t, last["error"], "%s through %s", method, nd.name)
	res, _ := last["result"].(map[string]any)
	require.NotNil(t, res, "%s: %v", method, last)
	return res
}

// count counts the messages of method on ch: it waits up to 5 s for the
// first, then until none has come for 300 ms (time for a duplicate).
func count(ch <-chan map[string]any, method string) int {
	got := 0
	timeout := time.After(5 * time.Second)
	for {
		select {
		case m := <-ch:
			if m["method"] == method {
				got++
				timeout = time.After(300 * time.Millisecond)
			}
		case <-timeout:
			return got
		}
	}
}

// openStream opens the session's standalone stream (GET) through nd.
func openStream(t *testing.T, ctx context.Context, nd *node, sid string) <-chan map[string]any {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, nd.url, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", v)
	resp, err := (&http.Client{}).Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	ch := sse(resp.Body)
	go func() { <-ctx.Done(); resp.Body.Close() }()
	return ch
}

func TestThreeNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	a := startNode(t, "a", nil)
	b := startNode(t, "b", []string{routeOf(a)})
	c := startNode(t, "c", []string{routeOf(a), routeOf(b)})
	defer func() {
		for _, nd := range []*node{a, c} {
			nd.kill(t)
		}
	}()
	waitMesh(t, a, b, c)

	t.Run("every method through other nodes", func(t *testing.T) {
		sid := initialize(t, a, `{"elicitation":{}}`)
		for _, via := range []*node{b, c} {
			call(t, via, sid, "ping", `{}`)
			require.NotEmpty(t, call(t, via, sid, "tools/list", `{}`)["tools"])
			res := call(t, via, sid, "tools/call", `{"name":"echo","arguments":{"text":"hi"}}`)
			require.Contains(t, fmt.Sprint(res["content"]), "hi")
			require.NotEmpty(t, call(t, via, sid, "resources/list", `{}`))
			require.NotEmpty(t, call(t, via, sid, "resources/templates/list", `{}`)["resourceTemplates"])
			call(t, via, sid, "resources/read", `{"uri":"mem://notes/todo"}`)
			require.NotEmpty(t, call(t, via, sid, "prompts/list", `{}`)["prompts"])
			call(t, via, sid, "completion/complete", `{"ref":{"type":"ref/resource","uri":"mem://notes/{name}"},"argument":{"name":"name","value":"t"}}`)
			call(t, via, sid, "logging/setLevel", `{"level":"info"}`)
			call(t, via, sid, "resources/subscribe", `{"uri":"mem://board/m"}`)
			call(t, via, sid, "resources/unsubscribe", `{"uri":"mem://board/m"}`)
		}
		// A session of b, used through a and c, is b's.
		sidB := initialize(t, b, `{}`)
		call(t, a, sidB, "tools/call", `{"name":"note_write","arguments":{"name":"n1","text":"from a"}}`)
		res := call(t, c, sidB, "resources/read", `{"uri":"mem://notes/n1"}`)
		require.Contains(t, fmt.Sprint(res["contents"]), "from a")
		// DELETE through another node ends it at its owner.
		req, _ := http.NewRequest(http.MethodDelete, c.url, nil)
		req.Header.Set("Mcp-Session-Id", sidB)
		req.Header.Set("MCP-Protocol-Version", v)
		resp, err := httpc.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusNoContent, resp.StatusCode)
		st, _, _ := post(t, a.url, v, sidB, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		require.Equal(t, http.StatusNotFound, st)
	})

	t.Run("elicitation answered through a third node", func(t *testing.T) {
		sid := initialize(t, a, `{"elicitation":{}}`)
		// The call goes through b; its stream carries the server's request.
		req, _ := http.NewRequest(http.MethodPost, b.url, strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"ask","arguments":{}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("MCP-Protocol-Version", v)
		resp, err := httpc.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
		msgs := sse(resp.Body)
		first := <-msgs
		require.Equal(t, "elicitation/create", first["method"], first)
		id, _ := json.Marshal(first["id"])
		// The answer goes through c.
		st, _, _ := post(t, c.url, v, sid, `{"jsonrpc":"2.0","id":`+string(id)+`,"result":{"action":"accept","content":{"name":"ada"}}}`)
		require.Equal(t, http.StatusAccepted, st)
		final := <-msgs
		require.Contains(t, fmt.Sprint(final["result"]), "accept", final)
		require.Contains(t, fmt.Sprint(final["result"]), "ada", final)
	})

	t.Run("resource update on c reaches a and b once", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		const uri = "mem://board/news"
		type sub struct {
			owner *node
			ch    <-chan map[string]any
		}
		var subs []sub
		for _, owner := range []*node{a, b} {
			sid := initialize(t, owner, `{}`)
			via := c
			if owner == b {
				via = a
			}
			call(t, via, sid, "resources/subscribe", `{"uri":"`+uri+`"}`)
			subs = append(subs, sub{owner, openStream(t, ctx, via, sid)})
		}
		time.Sleep(50 * time.Millisecond) // the GETs reach their owners
		c.srv.ResourceUpdated(uri)
		for _, s := range subs {
			require.Equal(t, 1, count(s.ch, "notifications/resources/updated"), "session of %s", s.owner.name)
		}
	})

	t.Run("a stream lost on b resumes through c with Last-Event-ID", func(t *testing.T) {
		sid := initialize(t, a, `{}`)
		const uri = "mem://board/resume"
		call(t, b, sid, "resources/subscribe", `{"uri":"`+uri+`"}`)
		// The standalone stream, through b, until its first notification.
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.url, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("MCP-Protocol-Version", v)
		resp, err := (&http.Client{}).Do(req)
		require.NoError(t, err)
		lastID := ""
		sc := bufio.NewScanner(resp.Body)
		time.Sleep(50 * time.Millisecond)
		a.srv.ResourceUpdated(uri)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "id: ") {
				lastID = line[len("id: "):]
			}
			if strings.Contains(line, "notifications/resources/updated") {
				break
			}
		}
		cancel()
		resp.Body.Close()
		require.NotEmpty(t, lastID)
		// Missed while no stream was open.
		time.Sleep(50 * time.Millisecond)
		a.srv.ResourceUpdated(uri)
		time.Sleep(50 * time.Millisecond)
		ctx, cancel = context.WithCancel(context.Background())
		defer cancel()
		req, _ = http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("MCP-Protocol-Version", v)
		req.Header.Set("Last-Event-ID", lastID)
		resp, err = (&http.Client{}).Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		select {
		case m := <-sse(resp.Body):
			require.Equal(t, "notifications/resources/updated", m["method"], m)
		case <-time.After(5 * time.Second):
			t.Fatal("the missed notification was not replayed")
		}
	})

	t.Run("legacy HTTP+SSE: messages posted to another node", func(t *testing.T) {
		base := strings.TrimSuffix(a.url, "/mcp")
		req, _ := http.NewRequest(http.MethodGet, base+"/sse", nil)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := (&http.Client{}).Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		endpoint := ""
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, "data: /message") {
				endpoint = line[len("data: "):]
				break
			}
		}
		require.True(t, strings.Contains(endpoint, "sessionId=a."), endpoint)
		postTo := func(nd *node, body string) {
			r, err := httpc.Post(strings.TrimSuffix(nd.url, "/mcp")+endpoint, "application/json", strings.NewReader(body))
			require.NoError(t, err)
			r.Body.Close()
			require.Equal(t, http.StatusAccepted, r.StatusCode, "through %s", nd.name)
		}
		postTo(b, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		postTo(c, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		postTo(c, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"legacy"}}}`)
		got := 0
		for sc.Scan() && got < 2 {
			line := sc.Text()
			if strings.HasPrefix(line, "data: {") {
				got++
				if got == 2 {
					require.Contains(t, line, "legacy")
				}
			}
		}
		require.Equal(t, 2, got)
	})

	t.Run("a client gone from b cancels its call on a", func(t *testing.T) {
		sid := initialize(t, a, `{}`)
		req, _ := http.NewRequest(http.MethodPost, b.url, strings.NewReader(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"hang","arguments":{}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("MCP-Protocol-Version", v)
		_, err := (&http.Client{Timeout: 600 * time.Millisecond}).Do(req) // gives up, closing its connection
		require.Error(t, err)
		select {
		case cause := <-a.cancelled:
			require.Error(t, cause)
		case <-time.After(10 * time.Second):
			t.Fatal("the call on a was not cancelled")
		}
		require.Eventually(t, func() bool { return a.n.Stats().Cancelled > 0 }, 5*time.Second, 10*time.Millisecond)
	})

	t.Run("list changes on c, coalesced, reach a and b once", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var streams []<-chan map[string]any
		for _, owner := range []*node{a, b} {
			sid := initialize(t, owner, `{}`)
			streams = append(streams, openStream(t, ctx, c, sid))
		}
		time.Sleep(50 * time.Millisecond) // the GETs reach their owners
		for i := range 3 {
			require.NoError(t, handlers.AddTool(c.srv.Registry(), &mcp.Tool{Name: fmt.Sprintf("extra%d", i)},
				func(context.Context, *handlers.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
					return mcp.TextResult("x"), nil, nil
				}))
		}
		for i, ch := range streams {
			require.Equal(t, 1, count(ch, "notifications/tools/list_changed"), "stream %d", i)
		}
	})

	t.Run("2026-07-28: MRTR retries and tasks on any node", func(t *testing.T) {
		// The input round is answered by a, the retry by b: the state is
		// signed with the key every node shares.
		st, msgs := post2026(t, a.url, "tools/call", "ask", `{"name":"ask","arguments":{}}`)
		require.Equal(t, http.StatusOK, st, msgs)
		res, _ := msgs[len(msgs)-1]["result"].(map[string]any)
		require.Equal(t, "input_required", res["resultType"], res)
		answers := map[string]any{}
		for k := range res["inputRequests"].(map[string]any) {
			answers[k] = map[string]any{"action": "accept", "content": map[string]any{"name": "ada"}}
		}
		retry, _ := json.Marshal(map[string]any{"name": "ask", "arguments": map[string]any{}, "inputResponses": answers, "requestState": res["requestState"]})
		st, msgs = post2026(t, b.url, "tools/call", "ask", string(retry))
		require.Equal(t, http.StatusOK, st, msgs)
		require.Contains(t, fmt.Sprint(msgs[len(msgs)-1]["result"]), "ada")

		// A task made on c is read through a and b: its id names c.
		st, msgs = post2026(t, c.url, "tools/call", "bake", `{"name":"bake","arguments":{}}`)
		require.Equal(t, http.StatusOK, st, msgs)
		res, _ = msgs[len(msgs)-1]["result"].(map[string]any)
		id, _ := res["taskId"].(string)
		require.True(t, strings.HasPrefix(id, "c."), "%v", res)
		for _, via := range []*node{a, b} {
			require.Eventually(t, func() bool {
				st, msgs := post2026(t, via.url, "tasks/get", id, `{"taskId":"`+id+`"}`)
				return st == http.StatusOK && strings.Contains(fmt.Sprint(msgs), "baked by c")
			}, 5*time.Second, 20*time.Millisecond, "tasks/get through %s", via.name)
		}
	})

	t.Run("2026-07-28: a listen stream on a hears an update made on c", func(t *testing.T) {
		const uri = "mem://board/listen"
		meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
		body := `{"jsonrpc":"2.0","id":11,"method":"subscriptions/listen","params":{` + meta + `,"notifications":{"resourceSubscriptions":["` + uri + `"]}}}`
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, a.url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "subscriptions/listen")
		resp, err := (&http.Client{}).Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		msgs := sse(resp.Body)
		ack := <-msgs // the acknowledgement: the stream is registered
		require.NotNil(t, ack)
		sidC := initialize(t, c, `{}`)
		call(t, c, sidC, "tools/call", `{"name":"board_write","arguments":{"name":"listen","text":"news"}}`)
		select {
		case m := <-msgs:
			require.Equal(t, "notifications/resources/updated", m["method"], m)
			require.Contains(t, fmt.Sprint(m["params"]), uri)
		case <-time.After(5 * time.Second):
			t.Fatal("no update on the listen stream")
		}
	})

	t.Run("garbage from NATS is dropped and counted", func(t *testing.T) {
		nc, err := nats.Connect("", nats.InProcessServer(c.n))
		if err != nil {
			t.Skip("no in-process connection:", err)
		}
		defer nc.Close()
		before := a.n.Stats().BadMessages
		for _, subj := range []string{"mcpedge.bus", "mcpedge.reply.a.zz", "mcpedge.reply.a.!!"} {
			require.NoError(t, nc.Publish(subj, []byte{0xff, 0xff, 0xff}))
		}
		msg, err := nc.Request("mcpedge.http.a", []byte("nonsense"), 2*time.Second)
		require.NoError(t, err)
		require.Contains(t, string(msg.Data), "did not parse")
		require.NoError(t, nc.Flush())
		require.Eventually(t, func() bool { return a.n.Stats().BadMessages >= before+2 }, 5*time.Second, 10*time.Millisecond)
		call(t, b, initialize(t, a, `{}`), "ping", `{}`)
	})

	t.Run("a forged or silent owner", func(t *testing.T) {
		st, _, msgs := post(t, b.url, v, "nosuchnode.0123", `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		require.Equal(t, http.StatusNotFound, st, msgs)
		// A subscriber that answers pings and never a request stands for a
		// node whose handler hangs.
		nc, err := nats.Connect("", nats.InProcessServer(c.n))
		require.NoError(t, err)
		defer nc.Close()
		_, err = nc.Subscribe("mcpedge.http.ghost", func(*nats.Msg) {})
		require.NoError(t, err)
		_, err = nc.Subscribe("mcpedge.ping.ghost", func(m *nats.Msg) { _ = m.Respond(nil) })
		require.NoError(t, err)
		require.NoError(t, nc.Flush())
		deadline := time.Now().Add(10 * time.Second)
		for {
			start := time.Now()
			st, _, msgs := post(t, b.url, v, "ghost.0123", `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
			if st == http.StatusNotFound && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond) // the subscriptions have not reached b yet
				continue
			}
			require.Equal(t, http.StatusGatewayTimeout, st, msgs)
			require.Less(t, time.Since(start), 8*time.Second)
			require.Contains(t, fmt.Sprint(msgs), "did not answer")
			break
		}
	})

	t.Run("losing b loses only b's sessions; b rejoins", func(t *testing.T) {
		sidA := initialize(t, a, `{}`)
		sidB := initialize(t, b, `{}`)
		sidC := initialize(t, c, `{}`)
		call(t, c, sidB, "ping", `{}`)
		b.kill(t)
		for _, via := range []*node{a, c} {
			st, _, _ := post(t, via.url, v, sidB, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
			require.Equal(t, http.StatusNotFound, st, "b's session through %s", via.name)
			call(t, via, sidA, "ping", `{}`)
			call(t, via, sidC, "ping", `{}`)
		}
		require.Eventually(t, func() bool { return a.n.Routes() > 0 && a.n.Ready() == nil }, 5*time.Second, 10*time.Millisecond)

		b2 := startNode(t, "b", []string{routeOf(a), routeOf(c)})
		defer b2.kill(t)
		waitMesh(t, a, b2, c)
		sid := initialize(t, b2, `{}`)
		call(t, a, sid, "tools/call", `{"name":"echo","arguments":{"text":"back"}}`)
		call(t, b2, sidA, "ping", `{}`)
		call(t, b2, sidC, "ping", `{}`)
		// The shared board reaches the new node's sessions too.
		call(t, c, sidC, "tools/call", `{"name":"board_write","arguments":{"name":"rejoin","text":"yes"}}`)
		require.Eventually(t, func() bool {
			st, _, msgs := post(t, b2.url, v, sid, `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"mem://board/rejoin"}}`)
			return st == http.StatusOK && strings.Contains(fmt.Sprint(msgs), "yes")
		}, 5*time.Second, 20*time.Millisecond)
	})
}

// TestRouteSecret: a server that does not know the route secret cannot
// join; one that does, can.
func TestRouteSecret(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nodes")
	}
	a := startNode(t, "a", nil)
	defer a.kill(t)
	intruder := startNode(t, "x", []string{routeOf(a)}, func(o *cluster.Options) { o.RouteSecret = "not-the-route-secret-000" })
	defer intruder.kill(t)
	b := startNode(t, "b", []string{routeOf(a)})
	defer b.kill(t)
	require.Eventually(t, func() bool { return b.n.Routes() > 0 }, 10*time.Second, 10*time.Millisecond)
	time.Sleep(300 * time.Millisecond) // the intruder's attempts are refused meanwhile
	require.Zero(t, intruder.n.Routes())
	require.Error(t, intruder.n.Ready())
	// a's routes are b's alone: a request for a session of x finds no one.
	st, _, _ := post(t, a.url, v, "x.0123", `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	require.Equal(t, http.StatusNotFound, st)
}

// TestExternalNATS: nodes joined through an existing NATS server (-cluster)
// forward to each other; when the server goes, each keeps serving its own
// sessions and reports not ready; when it is back, they rejoin by
// themselves.
func TestExternalNATS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS server and nodes")
	}
	port := freePort(t)
	start := func() *server.Server {
		s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, NoSigs: true, NoLog: true})
		require.NoError(t, err)
		go s.Start()
		require.True(t, s.ReadyForConnections(10*time.Second))
		return s
	}
	ns := start()
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	external := func(o *cluster.Options) {
		o.Embed, o.Routes, o.RouteSecret, o.URL = "", nil, "", url
	}
	a := startNode(t, "a", nil, external)
	defer a.kill(t)
	b := startNode(t, "b", nil, external)
	defer b.kill(t)
	require.NoError(t, a.n.Ready())
	sidA := initialize(t, a, `{}`)
	sidB := initialize(t, b, `{}`)
	require.Eventually(t, func() bool {
		st, _, _ := post(t, b.url, v, sidA, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		return st == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond)

	ns.Shutdown()
	ns.WaitForShutdown()
	require.Eventually(t, func() bool { return a.n.Ready() != nil && b.n.Ready() != nil }, 10*time.Second, 10*time.Millisecond)
	call(t, a, sidA, "ping", `{}`) // its own sessions are served
	call(t, b, sidB, "ping", `{}`)
	st, _, msgs := post(t, b.url, v, sidA, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	require.Equal(t, http.StatusServiceUnavailable, st, msgs) // retry later: the session is not lost

	ns = start()
	defer ns.Shutdown()
	require.Eventually(t, func() bool { return a.n.Ready() == nil && b.n.Ready() == nil }, 15*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool {
		st, _, _ := post(t, b.url, v, sidA, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		return st == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond)
	require.Positive(t, a.n.Stats().Reconnects)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

package cluster_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
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

	cancelled chan error    // why each call of the tool "hang" ended
	started   chan struct{} // each call of "hang" as it starts
}

// startNode starts a node routed to routes, serving the demo set and a
// tool that elicits.
func startNode(t *testing.T, name string, routes []string, opts ...func(*cluster.Options)) *node {
	t.Helper()
	return startNodeWith(t, name, routes, nil, opts...)
}

// startNodeWith is startNode with the server's options changed by so.
func startNodeWith(t *testing.T, name string, routes []string, so func(*mcpedge.Options), opts ...func(*cluster.Options)) *node {
	t.Helper()
	co := cluster.Options{Node: name, Embed: "127.0.0.1:0", Routes: routes, ForwardTimeout: 2 * time.Second, RouteSecret: routeSecret,
		Keys: [][]byte{stateKey}, Heartbeat: 100 * time.Millisecond, Link: "127.0.0.1:0"}
	for _, o := range opts {
		o(&co)
	}
	n, err := cluster.Start(context.Background(), co)
	require.NoError(t, err)
	mo := mcpedge.Options{
		EngineOptions: mcpedge.EngineOptions{Name: "cluster-test", StateKeys: [][]byte{stateKey}, ListChangedDelay: 20 * time.Millisecond},
		HTTP:          &mcpedge.HTTPOptions{Addr: "127.0.0.1:0"},
		Cluster:       n,
		DrainTimeout:  time.Second,
	}
	if so != nil {
		so(&mo)
	}
	srv := mcpedge.New(mo)
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
	started := make(chan struct{}, 16)
	require.NoError(t, handlers.AddTool(srv.Registry(), &mcp.Tool{Name: "hang"}, func(ctx context.Context, _ *handlers.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		started <- struct{}{}
		<-ctx.Done()
		cancelled <- context.Cause(ctx)
		return nil, nil, context.Cause(ctx)
	}))
	// say logs at info and answers with the node's name.
	require.NoError(t, handlers.AddTool(srv.Registry(), &mcp.Tool{Name: "say"}, func(ctx context.Context, req *handlers.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		if err := req.Peer.Log("info", "say", "said on "+name); err != nil {
			return nil, nil, err
		}
		return mcp.TextResult("said by " + name), nil, nil
	}))
	// poll reports progress 1, ends its stream (SSE polling), then
	// reports a step every 50 ms up to n before it answers.
	type pollIn struct {
		N int `json:"n"`
	}
	require.NoError(t, handlers.AddTool(srv.Registry(), &mcp.Tool{Name: "poll"}, func(ctx context.Context, req *handlers.CallToolRequest, in pollIn) (*mcp.CallToolResult, any, error) {
		for i := 1; i <= in.N; i++ {
			if err := req.Peer.Progress(float64(i), float64(in.N), "on "+name); err != nil {
				return nil, nil, err
			}
			if i == 1 {
				req.Peer.CloseStream()
			}
			select {
			case <-ctx.Done():
				return nil, nil, context.Cause(ctx)
			case <-time.After(50 * time.Millisecond):
			}
		}
		return mcp.TextResult("polled on " + name), nil, nil
	}))
	ctx, cancel := context.WithCancel(context.Background())
	nd := &node{name: name, n: n, srv: srv, stop: cancel, done: make(chan error, 1), cancelled: cancelled, started: started}
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

// startThree starts nodes a, b and c, routed to each other, and waits
// for their mesh. Stopping them is the caller's: tests kill some of them
// on the way.
func startThree(t *testing.T) (a, b, c *node) {
	t.Helper()
	a = startNode(t, "a", nil)
	b = startNode(t, "b", []string{routeOf(a)})
	c = startNode(t, "c", []string{routeOf(a), routeOf(b)})
	waitMesh(t, a, b, c)
	return a, b, c
}

// waitMesh waits until every node has a route to each other node, knows
// it alive, and reaches its subjects.
func waitMesh(t *testing.T, nodes ...*node) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for _, nd := range nodes {
		for nd.n.Routes() < len(nodes)-1 || nd.n.Ready() != nil || nd.n.LivePeers() < len(nodes)-1 {
			if time.Now().After(deadline) {
				t.Fatalf("node %s: %d routes, %d peers alive, ready: %v", nd.name, nd.n.Routes(), nd.n.LivePeers(), nd.n.Ready())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// Interest travels with the routes: wait until each node forwards to
	// each other one (a legacy message for a session of the other node
	// is forwarded there, which answers 404 for it).
	for _, a := range nodes {
		for _, b := range nodes {
			for a != b {
				before := a.n.Stats().ForwardNoOwner
				r, err := httpc.Post(strings.TrimSuffix(a.url, "/mcp")+"/message?sessionId="+b.name+".probe", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"ping"}`))
				require.NoError(t, err)
				r.Body.Close()
				require.Equal(t, http.StatusNotFound, r.StatusCode)
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

// forwarded sums the requests the nodes forwarded.
func forwarded(nodes ...*node) uint64 {
	var n uint64
	for _, nd := range nodes {
		n += nd.n.Stats().Forwarded
	}
	return n
}

// callSSE posts a request of session sid through nd and returns every
// message of its answer.
func callSSE(t *testing.T, nd *node, sid, body string) []map[string]any {
	t.Helper()
	st, _, msgs := post(t, nd.url, v, sid, body)
	require.Equal(t, http.StatusOK, st, "%s through %s: %v", body, nd.name, msgs)
	return msgs
}

// getStream opens a GET on nd for session sid, resuming after lastID
// when set; it returns the response.
func getStream(t *testing.T, ctx context.Context, nd *node, sid, lastID string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, nd.url, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", v)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := (&http.Client{}).Do(req)
	require.NoError(t, err)
	return resp
}

// event is one SSE event: its id and its message (nil for none).
type event struct {
	id  string
	msg map[string]any
}

// events yields the events of an SSE body until it ends.
func events(r io.Reader) <-chan event {
	ch := make(chan event, 64)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev event
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.id != "" || ev.msg != nil {
					ch <- ev
				}
				ev = event{}
			case strings.HasPrefix(line, "id: "):
				ev.id = line[len("id: "):]
			case strings.HasPrefix(line, "data: ") && len(line) > len("data: "):
				_ = json.Unmarshal([]byte(line[len("data: "):]), &ev.msg)
			}
		}
	}()
	return ch
}

func TestThreeNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	a, b, c := startThree(t)
	defer func() {
		for _, nd := range []*node{a, c} { // b is killed on the way
			nd.kill(t)
		}
	}()
	nodes := []*node{a, b, c}

	t.Run("round-robin: every method through every node", func(t *testing.T) {
		sid := initialize(t, a, `{"elicitation":{}}`)
		rr := 0
		next := func() *node { rr++; return nodes[rr%3] }
		for range 2 { // twice around: every method on every node
			call(t, next(), sid, "ping", `{}`)
			require.NotEmpty(t, call(t, next(), sid, "tools/list", `{}`)["tools"])
			res := call(t, next(), sid, "tools/call", `{"name":"echo","arguments":{"text":"hi"}}`)
			require.Contains(t, fmt.Sprint(res["content"]), "hi")
			require.NotEmpty(t, call(t, next(), sid, "resources/list", `{}`))
			require.NotEmpty(t, call(t, next(), sid, "resources/templates/list", `{}`)["resourceTemplates"])
			call(t, next(), sid, "tools/call", `{"name":"board_write","arguments":{"name":"rr","text":"round"}}`)
			require.Eventually(t, func() bool {
				st, _, msgs := post(t, next().url, v, sid, `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"mem://board/rr"}}`)
				return st == http.StatusOK && strings.Contains(fmt.Sprint(msgs), "round")
			}, 5*time.Second, 20*time.Millisecond)
			require.NotEmpty(t, call(t, next(), sid, "prompts/list", `{}`)["prompts"])
			call(t, next(), sid, "prompts/get", `{"name":"summarize","arguments":{"text":"a b c"}}`)
			call(t, next(), sid, "completion/complete", `{"ref":{"type":"ref/resource","uri":"mem://notes/{name}"},"argument":{"name":"name","value":"t"}}`)
			call(t, next(), sid, "logging/setLevel", `{"level":"info"}`)
			call(t, next(), sid, "resources/subscribe", `{"uri":"mem://board/m"}`)
			call(t, next(), sid, "resources/unsubscribe", `{"uri":"mem://board/m"}`)
			// A task: made at the session's home, read through any node.
			res = call(t, next(), sid, "tools/call", `{"name":"bake","arguments":{},"task":{"ttl":60000}}`)
			task, _ := res["task"].(map[string]any)
			require.NotNil(t, task, "%v", res)
			id, _ := task["taskId"].(string)
			require.True(t, strings.HasPrefix(id, "a."), id)
			for range 3 {
				call(t, next(), sid, "tasks/get", `{"taskId":"`+id+`"}`)
			}
			list := call(t, next(), sid, "tasks/list", `{}`)
			require.Contains(t, fmt.Sprint(list["tasks"]), id)
			res = call(t, next(), sid, "tasks/result", `{"taskId":"`+id+`"}`)
			require.Contains(t, fmt.Sprint(res["content"]), "baked by a")
		}
		// 2026-07-28: stateless, on every node.
		for _, nd := range nodes {
			st, msgs := post2026(t, nd.url, "tools/call", "echo", `{"name":"echo","arguments":{"text":"modern"}}`)
			require.Equal(t, http.StatusOK, st, msgs)
			require.Contains(t, fmt.Sprint(msgs), "modern")
			st, msgs = post2026(t, nd.url, "resources/read", "mem://hello", `{"uri":"mem://hello"}`)
			require.Equal(t, http.StatusOK, st, msgs)
		}
	})

	t.Run("ordinary calls are served where they land", func(t *testing.T) {
		sid := initialize(t, b, `{}`)
		call(t, a, sid, "ping", `{}`) // each node meets the session once
		call(t, c, sid, "ping", `{}`)
		before := forwarded(a, b, c)
		for i := range 30 {
			call(t, nodes[i%3], sid, "tools/call", `{"name":"echo","arguments":{"text":"x"}}`)
			call(t, nodes[i%3], sid, "resources/read", `{"uri":"mem://hello"}`)
		}
		require.Equal(t, before, forwarded(a, b, c), "no call was forwarded")
	})

	t.Run("a node that never saw the session serves it", func(t *testing.T) {
		sid := initialize(t, a, `{}`)
		// c never saw it: it is served there at once, from the record.
		res := call(t, c, sid, "tools/call", `{"name":"say","arguments":{}}`)
		require.Contains(t, fmt.Sprint(res["content"]), "said by c")
	})

	t.Run("logging/setLevel through c reaches the calls on b", func(t *testing.T) {
		sid := initialize(t, a, `{}`)
		call(t, c, sid, "logging/setLevel", `{"level":"error"}`)
		// The record reaches b within moments: from then on its calls
		// log nothing at info.
		require.Eventually(t, func() bool {
			msgs := callSSE(t, b, sid, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"say","arguments":{}}}`)
			return !strings.Contains(fmt.Sprint(msgs), "notifications/message")
		}, 5*time.Second, 20*time.Millisecond)
		call(t, b, sid, "logging/setLevel", `{"level":"debug"}`)
		require.Eventually(t, func() bool {
			msgs := callSSE(t, c, sid, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"say","arguments":{}}}`)
			return strings.Contains(fmt.Sprint(msgs), "said on c")
		}, 5*time.Second, 20*time.Millisecond)
	})

	t.Run("elicitation answered through a third node", func(t *testing.T) {
		sid := initialize(t, a, `{"elicitation":{}}`)
		// The call goes through b, and runs there; its stream carries the
		// server's request.
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
		require.True(t, strings.HasPrefix(string(id), `"b.`), "the id names the node that waits: %s", id)
		// The answer goes through c, which sends it to b: alone, as a
		// direct message (b's engine takes it at once).
		direct := b.n.Stats().ServedDirect
		st, _, _ := post(t, c.url, v, sid, `{"jsonrpc":"2.0","id":`+string(id)+`,"result":{"action":"accept","content":{"name":"ada"}}}`)
		require.Equal(t, http.StatusAccepted, st)
		require.Equal(t, direct+1, b.n.Stats().ServedDirect)
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
		resp := getStream(t, ctx, b, sid, "")
		lastID := ""
		evs := events(resp.Body)
		time.Sleep(50 * time.Millisecond)
		a.srv.ResourceUpdated(uri)
		for ev := range evs {
			lastID = ev.id
			if ev.msg != nil && ev.msg["method"] == "notifications/resources/updated" {
				break
			}
		}
		cancel()
		resp.Body.Close()
		require.True(t, strings.HasPrefix(lastID, a.n.InstanceName()+".0-"), lastID)
		// Missed while no stream was open.
		time.Sleep(50 * time.Millisecond)
		a.srv.ResourceUpdated(uri)
		time.Sleep(50 * time.Millisecond)
		ctx, cancel = context.WithCancel(context.Background())
		defer cancel()
		resp = getStream(t, ctx, c, sid, lastID)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		select {
		case m := <-sse(resp.Body):
			require.Equal(t, "notifications/resources/updated", m["method"], m)
		case <-time.After(5 * time.Second):
			t.Fatal("the missed notification was not replayed")
		}
	})

	t.Run("a request's stream, polled, resumes through other nodes", func(t *testing.T) {
		sid := initialize(t, a, `{}`)
		// The call runs on b; its stream ends after the first step.
		msgs := callSSE(t, b, sid, `{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":"poll","arguments":{"n":3},"_meta":{"progressToken":"p"}}}`)
		require.Len(t, msgs, 1)
		require.Equal(t, "notifications/progress", msgs[0]["method"])
		// Its events name b; resumed through c, the GET goes to b.
		st, _, _ := post(t, c.url, v, sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		require.Equal(t, http.StatusOK, st)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, b.url, strings.NewReader(`{"jsonrpc":"2.0","id":22,"method":"tools/call","params":{"name":"poll","arguments":{"n":3},"_meta":{"progressToken":"q"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("MCP-Protocol-Version", v)
		resp, err := httpc.Do(req)
		require.NoError(t, err)
		lastID := ""
		for ev := range events(resp.Body) {
			lastID = ev.id
		}
		resp.Body.Close()
		require.True(t, strings.HasPrefix(lastID, b.n.InstanceName()+"."), lastID)
		resp = getStream(t, ctx, c, sid, lastID)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var got []map[string]any
		for ev := range events(resp.Body) {
			if ev.msg != nil {
				got = append(got, ev.msg)
			}
		}
		require.NotEmpty(t, got)
		require.Contains(t, fmt.Sprint(got[len(got)-1]["result"]), "polled on b", got)
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

	t.Run("a client gone from b cancels its call there", func(t *testing.T) {
		sid := initialize(t, a, `{}`)
		req, _ := http.NewRequest(http.MethodPost, b.url, strings.NewReader(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"hang","arguments":{}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("MCP-Protocol-Version", v)
		_, err := (&http.Client{Timeout: 600 * time.Millisecond}).Do(req) // gives up, closing its connection
		require.Error(t, err)
		select {
		case cause := <-b.cancelled:
			require.Error(t, cause)
		case <-time.After(10 * time.Second):
			t.Fatal("the call on b was not cancelled")
		}
	})

	t.Run("notifications/cancelled through c cancels the call running on b", func(t *testing.T) {
		sid := initialize(t, a, `{}`)
		for len(b.started) > 0 { // the calls of earlier tests
			<-b.started
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			req, _ := http.NewRequest(http.MethodPost, b.url, strings.NewReader(`{"jsonrpc":"2.0","id":"k-1","method":"tools/call","params":{"name":"hang","arguments":{}}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("MCP-Protocol-Version", v)
			if resp, err := httpc.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		select {
		case <-b.started:
		case <-time.After(10 * time.Second):
			t.Fatal("the call did not start on b")
		}
		st, _, _ := post(t, c.url, v, sid, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"k-1","reason":"changed my mind"}}`)
		require.Equal(t, http.StatusAccepted, st)
		select {
		case cause := <-b.cancelled:
			require.Error(t, cause)
		case <-time.After(10 * time.Second):
			t.Fatal("the call on b was not cancelled")
		}
		<-done
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
		for _, subj := range []string{"mcpedge.bus", "mcpedge.reply.a.zz", "mcpedge.reply.a.!!", "mcpedge.hb", "mcpedge.rec", "mcpedge.ev"} {
			require.NoError(t, nc.Publish(subj, []byte{0xff, 0xff, 0xff}))
		}
		// Unsigned, or signed with another key: dropped all the same.
		require.NoError(t, nc.Publish("mcpedge.rec", append([]byte("D\x05a.xyz"), make([]byte, 32)...)))
		msg, err := nc.Request("mcpedge.http.a", []byte("nonsense"), 2*time.Second)
		require.NoError(t, err)
		require.Contains(t, string(msg.Data), "did not parse")
		require.NoError(t, nc.Flush())
		require.Eventually(t, func() bool { return a.n.Stats().BadMessages >= before+6 }, 5*time.Second, 10*time.Millisecond)
		call(t, b, initialize(t, a, `{}`), "ping", `{}`)
	})

	t.Run("a forged or silent owner", func(t *testing.T) {
		st, _, msgs := post(t, b.url, v, "nosuchnode.0123", `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		require.Equal(t, http.StatusNotFound, st, msgs)
		// A subscriber that answers pings and never a request stands for a
		// node whose handler hangs: a task request sent there gets 504,
		// with the request's id.
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
			st, msgs := post2026(t, b.url, "tasks/get", "ghost.0123", `{"taskId":"ghost.0123"}`)
			if st != http.StatusGatewayTimeout && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond) // the subscriptions have not reached b yet
				continue
			}
			require.Equal(t, http.StatusGatewayTimeout, st, msgs)
			require.Less(t, time.Since(start), 8*time.Second)
			require.Contains(t, fmt.Sprint(msgs), "did not answer")
			require.EqualValues(t, 5, msgs[0]["id"], "the 504 carries the request's id")
			break
		}
	})

	t.Run("an owner that says it is working outlasts ForwardTimeout", func(t *testing.T) {
		// A subscriber standing for a node whose tool takes longer than
		// ForwardTimeout (2 s here): it sends a pending frame every 200 ms
		// for 2.6 s, then the answer. Each pending frame pushes the
		// forward's deadline back, so the answer reaches the client.
		nc, err := nats.Connect("", nats.InProcessServer(c.n))
		require.NoError(t, err)
		defer nc.Close()
		var answering sync.WaitGroup
		_, err = nc.Subscribe("mcpedge.http.slowpoke", func(m *nats.Msg) {
			answering.Add(1)
			go func() {
				defer answering.Done()
				var seq uint64
				for range 13 {
					_ = nc.Publish(m.Reply, binary.AppendUvarint([]byte{'P'}, seq))
					seq++
					time.Sleep(200 * time.Millisecond)
				}
				fr := binary.AppendUvarint([]byte{'R'}, seq)
				fr = binary.AppendUvarint(fr, 200)
				for _, s := range []string{"Content-Type", "application/json"} {
					fr = append(binary.AppendUvarint(fr, uint64(len(s))), s...)
				}
				fr = append(fr, 0)
				fr = append(fr, `{"jsonrpc":"2.0","id":5,"result":{"slow":true}}`...)
				_ = nc.Publish(m.Reply, fr)
			}()
		})
		require.NoError(t, err)
		_, err = nc.Subscribe("mcpedge.ping.slowpoke", func(m *nats.Msg) { _ = m.Respond(nil) })
		require.NoError(t, err)
		require.NoError(t, nc.Flush())
		deadline := time.Now().Add(10 * time.Second)
		for {
			st, msgs := post2026(t, b.url, "tasks/get", "slowpoke.0123", `{"taskId":"slowpoke.0123"}`)
			if (st == http.StatusNotFound || st == http.StatusOK && len(msgs) == 1 && msgs[0]["error"] != nil) && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond) // the subscriptions have not reached b yet: b answers itself
				continue
			}
			require.Equal(t, http.StatusOK, st, msgs)
			require.Len(t, msgs, 1)
			require.Equal(t, map[string]any{"slow": true}, msgs[0]["result"])
			break
		}
		answering.Wait()
	})

	t.Run("DELETE through another node ends the session everywhere", func(t *testing.T) {
		sid := initialize(t, b, `{}`)
		for _, nd := range nodes {
			call(t, nd, sid, "ping", `{}`)
		}
		req, _ := http.NewRequest(http.MethodDelete, c.url, nil)
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("MCP-Protocol-Version", v)
		resp, err := httpc.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusNoContent, resp.StatusCode)
		for _, nd := range nodes {
			require.Eventually(t, func() bool {
				st, _, _ := post(t, nd.url, v, sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
				return st == http.StatusNotFound
			}, 5*time.Second, 20*time.Millisecond, "through %s", nd.name)
		}
	})

	t.Run("losing b: its sessions go on at a and c; b rejoins", func(t *testing.T) {
		sidA := initialize(t, a, `{}`)
		sidB := initialize(t, b, `{}`)
		sidC := initialize(t, c, `{}`)
		const uri = "mem://board/after"
		call(t, c, sidB, "resources/subscribe", `{"uri":"`+uri+`"}`)
		call(t, c, sidB, "logging/setLevel", `{"level":"error"}`)
		// Records reach the other nodes asynchronously: a change answered
		// moments before its home dies may be lost with it. Wait until a
		// and c have it, then kill b.
		for _, via := range []*node{a, c} {
			require.Eventually(t, func() bool {
				msgs := callSSE(t, via, sidB, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"say","arguments":{}}}`)
				return !strings.Contains(fmt.Sprint(msgs), "notifications/message")
			}, 5*time.Second, 20*time.Millisecond, "the level reaches %s", via.name)
		}
		b.kill(t)
		require.Eventually(t, func() bool { return a.n.LivePeers() == 1 && c.n.LivePeers() == 1 }, 5*time.Second, 10*time.Millisecond)
		for _, via := range []*node{a, c} {
			res := call(t, via, sidB, "tools/call", `{"name":"echo","arguments":{"text":"still here"}}`)
			require.Contains(t, fmt.Sprint(res["content"]), "still here", "b's session through %s", via.name)
			call(t, via, sidA, "ping", `{}`)
			call(t, via, sidC, "ping", `{}`)
			// Its level went on with it.
			msgs := callSSE(t, via, sidB, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"say","arguments":{}}}`)
			require.NotContains(t, fmt.Sprint(msgs), "notifications/message")
		}
		// So did its subscription: its standalone stream, wherever it is
		// opened, hears the updates.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ch := openStream(t, ctx, a, sidB)
		time.Sleep(50 * time.Millisecond)
		a.srv.ResourceUpdated(uri)
		require.Equal(t, 1, count(ch, "notifications/resources/updated"))
		require.Positive(t, a.n.Stats().TakenOver+c.n.Stats().TakenOver)

		b2 := startNode(t, "b", []string{routeOf(a), routeOf(c)})
		defer b2.kill(t)
		waitMesh(t, a, b2, c)
		sid := initialize(t, b2, `{}`)
		call(t, a, sid, "tools/call", `{"name":"echo","arguments":{"text":"back"}}`)
		call(t, b2, sidA, "ping", `{}`)
		call(t, b2, sidB, "ping", `{}`)
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
		// Nothing here waits for a loss: heartbeats of the default's
		// period, so that a stall of the busy test machine (300 ms at the
		// tests' 100 ms) does not declare a alive dead, and b take its
		// session over and answer the record change itself.
		o.Heartbeat = time.Second
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
	call(t, b, sidA, "ping", `{}`) // and the others', from their records
	// A change to the record needs the session's home: retry later, the
	// session is not lost.
	st, _, msgs := post(t, b.url, v, sidA, `{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"info"}}`)
	require.Equal(t, http.StatusServiceUnavailable, st, msgs)
	require.EqualValues(t, 1, msgs[0]["id"])

	ns = start()
	defer ns.Shutdown()
	require.Eventually(t, func() bool { return a.n.Ready() == nil && b.n.Ready() == nil }, 15*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool {
		st, _, _ := post(t, b.url, v, sidA, `{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"info"}}`)
		return st == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond)
	require.Positive(t, a.n.Stats().Reconnects)
	// Nobody took the other's sessions over meanwhile: each lost the
	// cluster, not the other node.
	require.Zero(t, a.n.Stats().TakenOver+b.n.Stats().TakenOver)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

package client_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/client"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	mcphttp "github.com/mcpedge/mcpedge/transport/http"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// modernTransports serves srv over TCP and over stdio-like pipes.
func modernTransports(t *testing.T, srv *engine.Server) map[string]client.Transport {
	addr, _ := serveTCP(t, srv)
	return map[string]client.Transport{
		"tcp":   &client.TCPTransport{Addr: addr},
		"stdio": pipeTransport(t, srv),
	}
}

// TestModernDiscoverFirst: the zero-value client sends server/discover
// to a server that speaks 2026-07-28 and stays stateless.
func TestModernDiscoverFirst(t *testing.T) {
	for _, era := range []client.Era{client.EraAuto, client.EraModern} {
		srv := newEngine(t, "demo", engine.Options{})
		for name, tr := range modernTransports(t, srv) {
			t.Run(era.String()+"/"+name, func(t *testing.T) {
				ctx := testCtx(t)
				var logs atomic.Int64
				c := dial(t, tr, client.Options{Era: era, LogLevel: "debug", OnLog: func(*mcp.LoggingMessageParams) { logs.Add(1) }})
				require.True(t, c.Modern())
				assert.Equal(t, mcp.Version20260728, c.ProtocolVersion())
				assert.Nil(t, c.InitializeResult(), "no initialize in 2026-07-28")
				d := c.DiscoverResult()
				require.NotNil(t, d)
				assert.Contains(t, d.SupportedVersions, mcp.Version20260728)
				require.NotNil(t, c.ServerCapabilities())
				assert.NotNil(t, c.ServerCapabilities().Tools)

				require.NoError(t, c.Ping(ctx), "Ping is server/discover")
				tools, err := c.AllTools(ctx)
				require.NoError(t, err)
				assert.NotEmpty(t, tools)
				r, err := c.CallTool(ctx, "echo", map[string]any{"text": "modern"})
				require.NoError(t, err)
				assert.Equal(t, "modern", r.Content[0].Text)
				r, err = c.CallTool(ctx, "echo", map[string]any{"text": "meta"}, client.WithMeta(codec.RawJSON(`{"k":"v"}`)))
				require.NoError(t, err)
				assert.Equal(t, "meta", r.Content[0].Text)

				var steps atomic.Int64
				r, err = c.CallTool(ctx, "count", map[string]any{"n": 3, "delayMs": 1}, client.WithProgress(func(float64, float64, string) { steps.Add(1) }))
				require.NoError(t, err)
				assert.Equal(t, "counted to 3", r.Content[0].Text)
				assert.Equal(t, int64(3), steps.Load())

				require.NoError(t, c.SetLogLevel(ctx, "error"), "a per-request level in 2026-07-28")
				require.Error(t, c.SetLogLevel(ctx, "loud"))
				require.ErrorIs(t, c.Subscribe(ctx, "mem://notes/x", nil), client.ErrRemovedInModern)
				_, err = c.CallRaw(ctx, mcp.MethodLoggingSetLevel, []byte(`{"level":"info"}`))
				var ce *codec.Error
				require.ErrorAs(t, err, &ce)
				assert.Contains(t, ce.Message, "removed")
			})
		}
	}
}

// TestModernFallback: a server of the session revisions refuses
// server/discover; the auto client initializes instead, and a forced
// modern client fails.
func TestModernFallback(t *testing.T) {
	tests := []struct {
		name     string
		discover string // the answer to server/discover; %s is the id
		era      client.Era
		wantInit string // the version initialize asks for; "" none
		wantErr  error
	}{
		{"method not found", `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`, client.EraAuto, mcp.LatestVersion, nil},
		{"not initialized", `{"jsonrpc":"2.0","id":%s,"error":{"code":-32600,"message":"not initialized"}}`, client.EraAuto, mcp.LatestVersion, nil},
		{"-32022 picks a session version", `{"jsonrpc":"2.0","id":%s,"error":{"code":-32022,"message":"unsupported","data":{"supported":["2025-06-18","1999-01-01"],"requested":"2026-07-28"}}}`, client.EraAuto, mcp.Version20250618, nil},
		{"-32602 with supported", `{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"unsupported","data":{"supported":["2025-03-26"]}}}`, client.EraAuto, mcp.Version20250326, nil},
		{"-32022 with nothing mutual", `{"jsonrpc":"2.0","id":%s,"error":{"code":-32022,"message":"unsupported","data":{"supported":["1999-01-01"]}}}`, client.EraAuto, "", client.ErrUnsupportedVersion},
		{"forced modern", `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`, client.EraModern, "", nil},
		{"forced legacy", "", client.EraLegacy, mcp.LatestVersion, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var seen []string
			var initVersion string
			addr := fakeServer(t, func(c net.Conn) {
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					var m codec.Message
					if codec.Decode(sc.Bytes(), &m) != nil {
						return
					}
					mu.Lock()
					seen = append(seen, m.Method)
					mu.Unlock()
					switch m.Method {
					case mcp.MethodServerDiscover:
						fmt.Fprintf(c, tt.discover+"\n", m.ID)
					case mcp.MethodInitialize:
						var p mcp.InitializeParams
						_ = codec.Unmarshal(m.Params, &p)
						mu.Lock()
						initVersion = p.ProtocolVersion
						mu.Unlock()
						fmt.Fprintf(c, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":%q,"capabilities":{"tools":{}},"serverInfo":{"name":"legacy","version":"1"}}}`+"\n", m.ID, p.ProtocolVersion)
					case mcp.MethodToolsList:
						assert.NotContains(t, string(m.Params), mcp.MetaProtocolVersion, "no modern _meta after the fallback")
						fmt.Fprintf(c, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[]}}`+"\n", m.ID)
					}
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			c, err := client.Dial(ctx, &client.TCPTransport{Addr: addr}, client.Options{Era: tt.era})
			if tt.wantInit == "" {
				require.Error(t, err)
				if tt.wantErr != nil {
					require.ErrorIs(t, err, tt.wantErr)
				}
				return
			}
			require.NoError(t, err)
			defer c.Close()
			assert.False(t, c.Modern())
			assert.Equal(t, tt.wantInit, c.ProtocolVersion())
			_, err = c.AllTools(ctx)
			require.NoError(t, err)
			mu.Lock()
			defer mu.Unlock()
			assert.Equal(t, tt.wantInit, initVersion)
			if tt.era == client.EraLegacy {
				assert.NotContains(t, seen, mcp.MethodServerDiscover)
			} else {
				assert.Equal(t, mcp.MethodServerDiscover, seen[0], "discover first")
			}
		})
	}
}

// TestModernVersionRetry: a -32022 that names a 2026 revision the
// client speaks (other than the one it asked for) is retried with it.
func TestModernVersionRetry(t *testing.T) {
	var asked []string
	var mu sync.Mutex
	addr := fakeServer(t, func(c net.Conn) {
		sc := bufio.NewScanner(c)
		for sc.Scan() {
			var m codec.Message
			if codec.Decode(sc.Bytes(), &m) != nil {
				return
			}
			var p struct {
				Meta map[string]any `json:"_meta"`
			}
			_ = codec.Unmarshal(m.Params, &p)
			v, _ := p.Meta[mcp.MetaProtocolVersion].(string)
			mu.Lock()
			asked = append(asked, m.Method+" "+v)
			mu.Unlock()
			mu.Lock()
			first := len(asked) == 1
			mu.Unlock()
			if v != mcp.Version20260728 || first {
				fmt.Fprintf(c, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32022,"message":"unsupported","data":{"supported":["2026-07-28","2025-11-25"],"requested":%q}}}`+"\n", m.ID, v)
				continue
			}
			switch m.Method {
			case mcp.MethodServerDiscover:
				fmt.Fprintf(c, `{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"ttlMs":0,"cacheScope":"public"}}`+"\n", m.ID)
			case mcp.MethodToolsCall:
				fmt.Fprintf(c, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"ok"}]}}`+"\n", m.ID)
			}
		}
	})
	// The server refuses the first request, naming the revision the
	// client asked for: the client asks again.
	c := dial(t, &client.TCPTransport{Addr: addr}, client.Options{ProtocolVersion: "2026-07-28", Era: client.EraModern})
	require.True(t, c.Modern())
	r, err := c.CallTool(testCtx(t), "x", nil)
	require.NoError(t, err)
	assert.Equal(t, "ok", r.Content[0].Text, "a result without resultType is complete")
	mu.Lock()
	assert.Equal(t, []string{"server/discover 2026-07-28", "server/discover 2026-07-28", "tools/call 2026-07-28"}, asked)
	mu.Unlock()
}

// mrtrEngine is a demo engine with tools that ask the client for input.
func mrtrEngine(t *testing.T, calls *atomic.Int64) *engine.Server {
	srv := newEngine(t, "demo", engine.Options{ListChangedDelay: time.Millisecond})
	schema := codec.RawJSON(`{"type":"object","properties":{"name":{"type":"string"}}}`)
	add := func(name string, h handlers.ToolHandler) {
		require.NoError(t, srv.Registry().AddTool(&mcp.Tool{Name: name, InputSchema: codec.RawJSON(`{"type":"object"}`)}, h))
	}
	add("ask", func(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		calls.Add(1)
		res, err := req.Peer.Elicit(ctx, &mcp.ElicitParams{Message: "name?", RequestedSchema: schema})
		if err != nil {
			return nil, err
		}
		return mcp.TextResult(res.Action + " " + string(res.Content)), nil
	})
	add("ask_twice", func(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		calls.Add(1)
		a, err := req.Peer.Elicit(ctx, &mcp.ElicitParams{Message: "first", RequestedSchema: schema})
		if err != nil {
			return nil, err
		}
		s, err := req.Peer.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 5, Messages: []mcp.SamplingMessage{{Role: "user", Content: codec.RawJSON(`{"type":"text","text":"hi"}`)}}})
		if err != nil {
			return nil, err
		}
		b, err := req.Peer.Elicit(ctx, &mcp.ElicitParams{Message: "second", RequestedSchema: schema})
		if err != nil {
			return nil, err
		}
		return mcp.TextResult(string(a.Content) + "|" + s.Model + "|" + string(b.Content)), nil
	})
	add("ask_forever", func(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		calls.Add(1)
		for {
			if _, err := req.Peer.Elicit(ctx, &mcp.ElicitParams{Message: "again", RequestedSchema: schema}); err != nil {
				return nil, err
			}
		}
	})
	return srv
}

// TestModernMRTR: input_required results are fulfilled with the client's
// handlers and the request retried, over as many rounds as it takes.
func TestModernMRTR(t *testing.T) {
	var calls atomic.Int64
	srv := mrtrEngine(t, &calls)
	for name, tr := range modernTransports(t, srv) {
		t.Run(name, func(t *testing.T) {
			var elicits, samples atomic.Int64
			c := dial(t, tr, client.Options{
				OnElicitation: func(_ context.Context, _ *client.ServerRequest, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
					n := elicits.Add(1)
					return &mcp.ElicitResult{Action: "accept", Content: codec.RawJSON(fmt.Sprintf(`{"name":"%s-%d"}`, p.Message, n))}, nil
				},
				OnSampling: func(context.Context, *client.ServerRequest, *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
					samples.Add(1)
					return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: codec.RawJSON(`{"type":"text","text":"x"}`)}, nil
				},
				MaxInputRounds: 4,
			})
			require.True(t, c.Modern())
			ctx := testCtx(t)
			tests := []struct {
				tool      string
				want      string
				wantCalls int64
				elicits   int64
				samples   int64
				wantErr   error
			}{
				{"ask", `accept {"name":"name?-1"}`, 2, 1, 0, nil},
				{"ask_twice", `{"name":"first-1"}|m|{"name":"second-2"}`, 4, 2, 1, nil},
				{"ask_forever", "", 5, 4, 0, client.ErrInputRounds},
			}
			for _, tt := range tests {
				calls.Store(0)
				elicits.Store(0)
				samples.Store(0)
				r, err := c.CallTool(ctx, tt.tool, nil)
				if tt.wantErr != nil {
					require.ErrorIs(t, err, tt.wantErr, tt.tool)
				} else {
					require.NoError(t, err, tt.tool)
					assert.Equal(t, tt.want, r.Content[0].Text, tt.tool)
				}
				assert.Equal(t, tt.wantCalls, calls.Load(), "%s: handler runs", tt.tool)
				assert.Equal(t, tt.elicits, elicits.Load(), "%s: elicitations", tt.tool)
				assert.Equal(t, tt.samples, samples.Load(), "%s: samplings", tt.tool)
			}
		})
	}
}

// TestModernMRTRNoHandler: an input request the client has no handler
// for fails the call.
func TestModernMRTRNoHandler(t *testing.T) {
	var calls atomic.Int64
	srv := mrtrEngine(t, &calls)
	addr, _ := serveTCP(t, srv)
	c := dial(t, &client.TCPTransport{Addr: addr}, client.Options{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{Form: codec.RawJSON(`{}`)}},
	})
	_, err := c.CallTool(testCtx(t), "ask", nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "method not found")
}

// TestModernListen: a listen stream delivers a list change to the
// callbacks and to Notifications, and ends with its context.
func TestModernListen(t *testing.T) {
	srv := newEngine(t, "demo", engine.Options{ListChangedDelay: time.Millisecond})
	for name, tr := range modernTransports(t, srv) {
		t.Run(name, func(t *testing.T) {
			changed := make(chan struct{}, 4)
			updated := make(chan string, 4)
			c := dial(t, tr, client.Options{
				OnToolListChanged: func() { changed <- struct{}{} },
				OnResourceUpdated: func(uri string) { updated <- uri },
			})
			ctx := testCtx(t)
			lctx, cancel := context.WithCancel(ctx)
			defer cancel()
			sub, err := c.Listen(lctx, mcp.SubscriptionFilter{ToolsListChanged: true, ResourceSubscriptions: []string{"mem://board/" + name}})
			require.NoError(t, err)
			f := sub.Filter()
			assert.True(t, f.ToolsListChanged)
			assert.Equal(t, []string{"mem://board/" + name}, f.ResourceSubscriptions)

			require.NoError(t, srv.Registry().AddTool(&mcp.Tool{Name: "late_" + name, InputSchema: codec.RawJSON(`{"type":"object"}`)},
				func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
					return mcp.TextResult("late"), nil
				}))
			select {
			case <-changed:
			case <-time.After(5 * time.Second):
				t.Fatal("no tools/list_changed callback")
			}
			select {
			case n := <-sub.Notifications():
				assert.Equal(t, mcp.NotificationToolListChanged, n.Method)
			case <-time.After(5 * time.Second):
				t.Fatal("no notification on the subscription")
			}
			_, err = c.CallTool(ctx, "board_write", map[string]any{"name": name, "text": "x"})
			require.NoError(t, err)
			select {
			case u := <-updated:
				assert.Equal(t, "mem://board/"+name, u)
			case <-time.After(5 * time.Second):
				t.Fatal("no resources/updated")
			}

			cancel()
			select {
			case <-sub.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("the stream did not end with its context")
			}
			assert.NoError(t, sub.Err())
			var rest []string
			for n := range sub.Notifications() { // closed once the stream ended
				rest = append(rest, n.Method)
			}
			assert.Equal(t, []string{mcp.NotificationResourceUpdated}, rest)
			// The client still works.
			_, err = c.CallTool(ctx, "echo", map[string]any{"text": "after"})
			require.NoError(t, err)
		})
	}
}

// TestModernListenLegacy: Listen needs 2026-07-28.
func TestModernListenLegacy(t *testing.T) {
	srv := newEngine(t, "demo", engine.Options{})
	addr, _ := serveTCP(t, srv)
	c := dial(t, &client.TCPTransport{Addr: addr}, client.Options{Era: client.EraLegacy})
	_, err := c.Listen(testCtx(t), mcp.SubscriptionFilter{ToolsListChanged: true})
	require.ErrorIs(t, err, client.ErrModernOnly)
}

// TestModernReconnect: a modern client reconnects without a handshake and
// opens its listen streams again.
func TestModernReconnect(t *testing.T) {
	srv := newEngine(t, "demo", engine.Options{ListChangedDelay: time.Millisecond})
	addr, _ := serveTCP(t, srv)
	var p cutter
	t.Cleanup(p.cut)
	paddr := p.start(t, addr)
	back := make(chan struct{}, 4)
	changed := make(chan struct{}, 4)
	c := dial(t, &client.TCPTransport{Addr: paddr}, client.Options{
		Reconnect:         &client.ReconnectPolicy{MinDelay: 10 * time.Millisecond, MaxDelay: 100 * time.Millisecond},
		OnReconnected:     func() { back <- struct{}{} },
		OnToolListChanged: func() { changed <- struct{}{} },
	})
	require.True(t, c.Modern())
	ctx := testCtx(t)
	sub, err := c.Listen(ctx, mcp.SubscriptionFilter{ToolsListChanged: true})
	require.NoError(t, err)
	defer sub.Close()
	p.cut()
	select {
	case <-back:
	case <-time.After(5 * time.Second):
		t.Fatal("not reconnected")
	}
	require.Eventually(t, func() bool { return p.n.Load() == 2 }, 5*time.Second, time.Millisecond, "a second connection")
	assert.True(t, c.Modern())
	// The stream is reopened on the new connection: a list change made
	// once it is reaches the client.
	deadline := time.After(5 * time.Second)
	for i := 0; ; i++ {
		require.NoError(t, srv.Registry().AddTool(&mcp.Tool{Name: fmt.Sprintf("late%d", i), InputSchema: codec.RawJSON(`{"type":"object"}`)},
			func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.TextResult("late"), nil
			}))
		select {
		case <-changed:
		case <-time.After(50 * time.Millisecond):
			select {
			case <-deadline:
				t.Fatal("no list change after the reconnection: listen not re-issued")
			default:
			}
			continue
		}
		break
	}
	r, err := c.CallTool(ctx, "echo", map[string]any{"text": "back"})
	require.NoError(t, err)
	assert.Equal(t, "back", r.Content[0].Text)
}

// TestModernPool: a pool of modern clients (no session each).
func TestModernPool(t *testing.T) {
	srv := newEngine(t, "demo", engine.Options{})
	addr, _ := serveTCP(t, srv)
	dialer := func(ctx context.Context) (*client.Client, error) {
		return client.Dial(ctx, &client.TCPTransport{Addr: addr}, client.Options{Era: client.EraModern})
	}
	p, err := client.NewPool(testCtx(t), dialer, client.PoolOptions{Size: 3, HealthInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	defer p.Close()
	var wg sync.WaitGroup
	var failures atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				err := p.Do(testCtx(t), func(ctx context.Context, c *client.Client) error {
					if !c.Modern() {
						return fmt.Errorf("not modern")
					}
					_, err := c.CallTool(ctx, "echo", map[string]any{"text": "p"})
					return err
				})
				if err != nil {
					failures.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	assert.Zero(t, failures.Load())
	time.Sleep(60 * time.Millisecond) // health pings (server/discover) pass
	assert.Equal(t, 3, p.Healthy())
}

// modernHTTPFake is a server of the 2026-07-28 HTTP binding: it checks the
// standard headers and answers from reply.
type modernHTTPFake struct {
	t     *testing.T
	mu    sync.Mutex
	heads []http.Header
	reply func(m *codec.Message, w http.ResponseWriter)
}

func (f *modernHTTPFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var m codec.Message
	if codec.Decode(body, &m) != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.heads = append(f.heads, r.Header.Clone())
	f.mu.Unlock()
	if m.Kind != codec.KindRequest {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	f.reply(&m, w)
}

func jsonAnswer(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// TestModernHTTPHeaders: the POSTs of 2026-07-28 carry MCP-Protocol-Version,
// Mcp-Method, Mcp-Name and the tools' Mcp-Param-*; tools with invalid
// x-mcp-header annotations are left out of tools/list.
func TestModernHTTPHeaders(t *testing.T) {
	f := &modernHTTPFake{t: t}
	tools := `[
	{"name":"sql","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"n":{"type":"integer","x-mcp-header":"N"},"flag":{"type":"boolean","x-mcp-header":"Flag"},"deep":{"type":"object","properties":{"k":{"type":"string","x-mcp-header":"Deep"}}}}}},
	{"name":"bad_number","inputSchema":{"type":"object","properties":{"x":{"type":"number","x-mcp-header":"X"}}}},
	{"name":"bad_dup","inputSchema":{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"A"},"b":{"type":"string","x-mcp-header":"a"}}}},
	{"name":"bad_items","inputSchema":{"type":"object","properties":{"l":{"type":"array","items":{"type":"string","x-mcp-header":"L"}}}}},
	{"name":"bad_token","inputSchema":{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"a b"}}}},
	{"name":"héllo","inputSchema":{"type":"object"}}
	]`
	f.reply = func(m *codec.Message, w http.ResponseWriter) {
		switch m.Method {
		case mcp.MethodServerDiscover:
			jsonAnswer(w, 200, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"ttlMs":0,"cacheScope":"public"}}`, m.ID))
		case mcp.MethodToolsList:
			jsonAnswer(w, 200, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","tools":%s}}`, m.ID, tools))
		case mcp.MethodToolsCall:
			jsonAnswer(w, 200, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","content":[]}}`, m.ID))
		default:
			jsonAnswer(w, 404, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`, m.ID))
		}
	}
	ts := httptest.NewServer(f)
	defer ts.Close()
	c := dial(t, &client.HTTPTransport{URL: ts.URL}, client.Options{})
	require.True(t, c.Modern())
	ctx := testCtx(t)
	list, err := c.AllTools(ctx)
	require.NoError(t, err)
	var names []string
	for _, tl := range list {
		names = append(names, tl.Name)
	}
	assert.Equal(t, []string{"sql", "héllo"}, names)

	_, err = c.CallTool(ctx, "sql", map[string]any{"region": "us-west1", "n": 42, "flag": true, "deep": map[string]any{"k": " padded "}, "query": "x"})
	require.NoError(t, err)
	_, err = c.CallTool(ctx, "héllo", nil)
	require.NoError(t, err)
	_, err = c.CallTool(ctx, "sql", map[string]any{"region": "=?base64?x?="})
	require.NoError(t, err)
	err = c.Ping(ctx)
	require.NoError(t, err)

	f.mu.Lock()
	defer f.mu.Unlock()
	b64 := func(s string) string { return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?=" }
	for _, h := range f.heads {
		assert.Equal(t, mcp.Version20260728, h.Get("Mcp-Protocol-Version"))
		assert.Empty(t, h.Get("Mcp-Session-Id"))
		assert.NotEmpty(t, h.Get("Mcp-Method"))
	}
	require.Len(t, f.heads, 6)
	assert.Equal(t, "server/discover", f.heads[0].Get("Mcp-Method"))
	assert.Equal(t, "tools/list", f.heads[1].Get("Mcp-Method"))
	h := f.heads[2]
	assert.Equal(t, "tools/call", h.Get("Mcp-Method"))
	assert.Equal(t, "sql", h.Get("Mcp-Name"))
	assert.Equal(t, "us-west1", h.Get("Mcp-Param-Region"))
	assert.Equal(t, "42", h.Get("Mcp-Param-N"))
	assert.Equal(t, "true", h.Get("Mcp-Param-Flag"))
	assert.Equal(t, b64(" padded "), h.Get("Mcp-Param-Deep"))
	assert.Equal(t, b64("héllo"), f.heads[3].Get("Mcp-Name"))
	assert.Empty(t, f.heads[3].Get("Mcp-Param-Region"))
	assert.Equal(t, b64("=?base64?x?="), f.heads[4].Get("Mcp-Param-Region"))
	assert.Empty(t, f.heads[4].Get("Mcp-Param-N"), "absent arguments, no header")
	assert.Equal(t, "server/discover", f.heads[5].Get("Mcp-Method"), "Ping")
}

// TestModernHTTPFallback: HTTP answers to server/discover that mean an
// older server fall back to initialize; a -32022 body does not.
func TestModernHTTPFallback(t *testing.T) {
	tests := []struct {
		name      string
		status    int
		body      string
		wantInit  bool
		wantError bool
	}{
		{"400 without body", 400, "", true, false},
		{"404", 404, "not found", true, false},
		{"405", 405, "", true, false},
		{"400 with a session error", 400, `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: No valid session ID provided"}}`, true, false},
		{"400 with -32022", 400, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32022,"message":"unsupported","data":{"supported":["2025-11-25"]}}}`, true, false},
		{"500", 500, "", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var inits atomic.Int64
			f := &modernHTTPFake{t: t}
			f.reply = func(m *codec.Message, w http.ResponseWriter) {
				switch m.Method {
				case mcp.MethodServerDiscover:
					body := tt.body
					if strings.Contains(body, "%s") {
						body = fmt.Sprintf(body, m.ID)
					}
					jsonAnswer(w, tt.status, body)
				case mcp.MethodInitialize:
					inits.Add(1)
					w.Header().Set("Mcp-Session-Id", "s1")
					jsonAnswer(w, 200, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, initResult))
				default:
					jsonAnswer(w, 200, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID))
				}
			}
			ts := httptest.NewServer(f)
			defer ts.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			c, err := client.Dial(ctx, &client.HTTPTransport{URL: ts.URL, NoStandaloneStream: true}, client.Options{})
			if tt.wantError {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			defer c.Close()
			assert.False(t, c.Modern())
			assert.Equal(t, int64(1), inits.Load())
			require.NoError(t, c.Ping(ctx))
			f.mu.Lock()
			defer f.mu.Unlock()
			last := f.heads[len(f.heads)-1]
			assert.Equal(t, "s1", last.Get("Mcp-Session-Id"))
			assert.Equal(t, mcp.LatestVersion, last.Get("Mcp-Protocol-Version"))
			assert.Empty(t, last.Get("Mcp-Method"), "no 2026 headers on a session")
		})
	}
}

// TestModernHTTPEngine: the auto client against the engine's Streamable
// HTTP endpoint works in whichever era the endpoint serves (sessions
// only until its 2026-07-28 binding lands: then it falls back).
func TestModernHTTPEngine(t *testing.T) {
	srv := newEngine(t, "demo", engine.Options{})
	base, _ := serveHTTP(t, srv, mcphttp.Options{})
	c := dial(t, &client.HTTPTransport{URL: base + "/mcp"}, client.Options{})
	if !c.Modern() {
		require.NotNil(t, c.InitializeResult(), "fell back to initialize")
	}
	r, err := c.CallTool(testCtx(t), "echo", map[string]any{"text": "x"})
	require.NoError(t, err)
	assert.Equal(t, "x", r.Content[0].Text)
}

// TestModernHTTPHeaderMismatch: a -32020 answer to tools/call makes the
// client list the tools again and retry with the headers they name.
func TestModernHTTPHeaderMismatch(t *testing.T) {
	var lists, calls atomic.Int64
	f := &modernHTTPFake{t: t}
	f.reply = func(m *codec.Message, w http.ResponseWriter) {
		switch m.Method {
		case mcp.MethodServerDiscover:
			jsonAnswer(w, 200, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"ttlMs":0,"cacheScope":"public"}}`, m.ID))
		case mcp.MethodToolsList:
			lists.Add(1)
			jsonAnswer(w, 200, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"sql","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}}]}}`, m.ID))
		case mcp.MethodToolsCall:
			calls.Add(1)
			f.mu.Lock()
			region := f.heads[len(f.heads)-1].Get("Mcp-Param-Region")
			f.mu.Unlock()
			if region != "eu" {
				jsonAnswer(w, 400, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32020,"message":"Header mismatch"}}`, m.ID))
				return
			}
			jsonAnswer(w, 200, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"ok"}]}}`, m.ID))
		}
	}
	ts := httptest.NewServer(f)
	defer ts.Close()
	c := dial(t, &client.HTTPTransport{URL: ts.URL}, client.Options{Era: client.EraModern})
	r, err := c.CallTool(testCtx(t), "sql", map[string]any{"region": "eu"})
	require.NoError(t, err)
	assert.Equal(t, "ok", r.Content[0].Text)
	assert.Equal(t, int64(1), lists.Load())
	assert.Equal(t, int64(2), calls.Load())
}

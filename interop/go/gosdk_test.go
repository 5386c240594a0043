package interop

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The official Go SDK (github.com/modelcontextprotocol/go-sdk) client.
//
// The era is chosen with ClientSessionOptions.ProtocolVersion: Connect with
// "2025-11-25" sends initialize; with "2026-07-28" (also the SDK's default)
// it sends server/discover and, when that succeeds, carries the version,
// client info and capabilities in every request's _meta. A discover that
// fails makes the SDK fall back to initialize quietly, so the 2026 tests
// check the negotiated version. Subscribe opens a subscriptions/listen
// stream on a 2026 connection and sends resources/subscribe on a 2025 one;
// input requests (input_required results) are fulfilled by the SDK's
// multi round-trip middleware with the same handlers that serve
// server-to-client requests in a 2025 session.

func TestGoSDK_Stdio_2025(t *testing.T) { goSDKSuite(t, overStdio, v2025) }
func TestGoSDK_HTTP_2025(t *testing.T)  { goSDKSuite(t, overHTTP, v2025) }
func TestGoSDK_Stdio_2026(t *testing.T) { goSDKSuite(t, overStdio, v2026) }

// TestGoSDK_HTTP_2026 needs mcpedge's Streamable HTTP transport to serve
// 2026-07-28 (MCP-Protocol-Version: 2026-07-28 with per-request _meta).
func TestGoSDK_HTTP_2026(t *testing.T) { goSDKSuite(t, overHTTP, v2026) }

// goSDKHandlers counts the client handlers the server made the SDK call,
// and the server-to-client requests that reached the client: the SDK's
// multi round-trip middleware calls the handlers directly, so an input
// request of a 2026 input_required result is counted in elicited or
// sampled but not in s2c.
type goSDKHandlers struct {
	elicited, sampled atomic.Int32
	s2c               atomic.Int32 // elicitation/create and sampling/createMessage requests received
	updated           chan string
}

// countRequests is receiving middleware that counts the server's
// elicitation/create and sampling/createMessage requests.
func (h *goSDKHandlers) countRequests(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "elicitation/create" || method == "sampling/createMessage" {
			h.s2c.Add(1)
		}
		return next(ctx, method, req)
	}
}

// checkPath checks how the input reached the client handler: in a 2025
// session as a server-to-client request, in 2026 as an input request of an
// input_required result (MRTR), which the SDK fulfils and retries.
func (h *goSDKHandlers) checkPath(t *testing.T, era string) {
	t.Helper()
	switch n := h.s2c.Load(); {
	case era == v2025 && n < 1:
		t.Errorf("no server-to-client request reached the client in a 2025 session")
	case era == v2026 && n > 0:
		t.Errorf("%d server-to-client requests reached the client at 2026-07-28; want input_required results only", n)
	}
}

func (h *goSDKHandlers) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			h.elicited.Add(1)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": elicitUsername, "email": elicitEmail}}, nil
		},
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			h.sampled.Add(1)
			return &mcp.CreateMessageResult{Content: &mcp.TextContent{Text: sampledText}, Model: "interop-model", Role: "assistant"}, nil
		},
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			select {
			case h.updated <- req.Params.URI:
			default:
			}
		},
	}
}

// goSDKConnect connects a go-sdk client to a server with the handler set hs
// in era, and checks that era was negotiated.
func goSDKConnect(ctx context.Context, t *testing.T, ep *endpoints, hs, era string) (*mcp.ClientSession, *goSDKHandlers) {
	t.Helper()
	h := &goSDKHandlers{updated: make(chan string, 16)}
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpedge-interop-gosdk", Version: "1.0.0"}, h.options())
	client.AddReceivingMiddleware(h.countRequests)
	var tr mcp.Transport
	switch ep.tr {
	case overStdio:
		tr = &mcp.CommandTransport{Command: stdioCmd(t, hs), TerminateDuration: 2 * time.Second}
	case overHTTP:
		tr = &mcp.StreamableClientTransport{Endpoint: ep.urls[hs], MaxRetries: 1}
	}
	cs, err := client.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: era})
	if err != nil {
		t.Fatalf("Connect (%s, %s): %v", ep.tr, era, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	got := cs.InitializeResult()
	if got == nil {
		t.Fatal("no InitializeResult after Connect")
	}
	if got.ProtocolVersion != era {
		if era == v2026 {
			t.Fatalf("negotiated %q, want %q: server/discover failed and the SDK fell back to initialize (over %s)%s", got.ProtocolVersion, era, ep.tr, ep.discoverProbe(hs))
		}
		t.Fatalf("negotiated %q, want %q", got.ProtocolVersion, era)
	}
	return cs, h
}

func goSDKText(t *testing.T, content []mcp.Content) string {
	t.Helper()
	if len(content) == 0 {
		t.Fatal("no content")
	}
	tc, ok := content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content[0] is %T, want *mcp.TextContent", content[0])
	}
	return tc.Text
}

func goSDKSuite(t *testing.T, tr conn, era string) {
	ep := newEndpoints(t, tr)

	t.Run("connect", func(t *testing.T) {
		ctx := ctxFor(t)
		cs, _ := goSDKConnect(ctx, t, ep, setConformance, era)
		res := cs.InitializeResult()
		if res.ServerInfo == nil || res.ServerInfo.Name != serverInfoName {
			t.Errorf("serverInfo = %+v, want name %q", res.ServerInfo, serverInfoName)
		}
		if res.Capabilities == nil || res.Capabilities.Tools == nil || res.Capabilities.Resources == nil || res.Capabilities.Prompts == nil {
			t.Errorf("capabilities = %+v, want tools, resources and prompts", res.Capabilities)
		}
	})

	t.Run("tools", func(t *testing.T) {
		ctx := ctxFor(t)
		cs, _ := goSDKConnect(ctx, t, ep, setConformance, era)
		var names []string
		for tool, err := range cs.Tools(ctx, nil) {
			if err != nil {
				t.Fatalf("tools/list: %v", err)
			}
			names = append(names, tool.Name)
		}
		for _, want := range []string{"test_simple_text", "test_elicitation", "test_sampling"} {
			if !slices.Contains(names, want) {
				t.Errorf("tools/list lacks %s: %v", want, names)
			}
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_simple_text", Arguments: map[string]any{}})
		if err != nil {
			t.Fatalf("tools/call: %v", err)
		}
		if res.IsError || goSDKText(t, res.Content) != simpleText {
			t.Errorf("tools/call test_simple_text = %+v", res)
		}
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_error_handling", Arguments: map[string]any{}})
		if err != nil {
			t.Fatalf("tools/call test_error_handling: %v", err)
		}
		if !res.IsError {
			t.Errorf("tools/call test_error_handling: isError false")
		}
	})

	t.Run("resources", func(t *testing.T) {
		ctx := ctxFor(t)
		cs, _ := goSDKConnect(ctx, t, ep, setConformance, era)
		var uris []string
		for r, err := range cs.Resources(ctx, nil) {
			if err != nil {
				t.Fatalf("resources/list: %v", err)
			}
			uris = append(uris, r.URI)
		}
		if !slices.Contains(uris, staticTextURI) {
			t.Errorf("resources/list lacks %s: %v", staticTextURI, uris)
		}
		var templates []string
		for rt, err := range cs.ResourceTemplates(ctx, nil) {
			if err != nil {
				t.Fatalf("resources/templates/list: %v", err)
			}
			templates = append(templates, rt.URITemplate)
		}
		if !slices.Contains(templates, "test://template/{id}/data") {
			t.Errorf("resources/templates/list = %v", templates)
		}
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: staticTextURI})
		if err != nil {
			t.Fatalf("resources/read: %v", err)
		}
		if len(res.Contents) != 1 || res.Contents[0].Text != staticText {
			t.Errorf("resources/read %s = %+v", staticTextURI, res.Contents)
		}
		res, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://template/42/data"})
		if err != nil {
			t.Fatalf("resources/read template: %v", err)
		}
		if len(res.Contents) != 1 || res.Contents[0].Text != `{"id":"42","templateTest":true,"data":"Data for ID: 42"}` {
			t.Errorf("resources/read template = %+v", res.Contents)
		}
	})

	t.Run("prompts", func(t *testing.T) {
		ctx := ctxFor(t)
		cs, _ := goSDKConnect(ctx, t, ep, setConformance, era)
		var names []string
		for p, err := range cs.Prompts(ctx, nil) {
			if err != nil {
				t.Fatalf("prompts/list: %v", err)
			}
			names = append(names, p.Name)
		}
		if !slices.Contains(names, "test_prompt_with_arguments") {
			t.Errorf("prompts/list lacks test_prompt_with_arguments: %v", names)
		}
		res, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "test_prompt_with_arguments", Arguments: map[string]string{"arg1": "a", "arg2": "b"}})
		if err != nil {
			t.Fatalf("prompts/get: %v", err)
		}
		if len(res.Messages) != 1 {
			t.Fatalf("prompts/get: %d messages", len(res.Messages))
		}
		if got := goSDKText(t, []mcp.Content{res.Messages[0].Content}); got != "Prompt with arguments: arg1='a', arg2='b'" {
			t.Errorf("prompts/get = %q", got)
		}
	})

	t.Run("subscription", func(t *testing.T) {
		ctx := ctxFor(t)
		cs, h := goSDKConnect(ctx, t, ep, setDemo, era)
		name := boardName(t)
		uri := "mem://board/" + name
		write := func(text string) error {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "board_write", Arguments: map[string]any{"name": name, "text": text}})
			if err == nil && res.IsError {
				t.Fatalf("board_write: %s", goSDKText(t, res.Content))
			}
			return err
		}
		if err := write("first"); err != nil {
			t.Fatalf("board_write: %v", err)
		}
		// 2025: resources/subscribe; 2026: a subscriptions/listen stream
		// naming the URI, opened in the background.
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatalf("Subscribe: %v", err)
		}
		notified := make(chan struct{})
		go func() {
			for {
				select {
				case got := <-h.updated:
					if got == uri {
						close(notified)
						return
					}
				case <-ctx.Done():
					return
				}
			}
		}()
		untilNotified(ctx, t, notified, func() error { return write("second") })
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			t.Fatalf("resources/read %s: %v", uri, err)
		}
		if len(res.Contents) != 1 || res.Contents[0].Text != "second" {
			t.Errorf("resources/read %s = %+v", uri, res.Contents)
		}
		if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
			t.Errorf("Unsubscribe: %v", err)
		}
	})

	// In a 2025 session the server sends elicitation/create and
	// sampling/createMessage to the client mid-call; in 2026 the call
	// answers input_required and the SDK retries it with the input (MRTR).
	elicit := "elicitation"
	if era == v2026 {
		elicit = "mrtr_elicitation"
	}
	t.Run(elicit, func(t *testing.T) {
		ctx := ctxFor(t)
		cs, h := goSDKConnect(ctx, t, ep, setConformance, era)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_elicitation", Arguments: map[string]any{"message": "Who are you?"}})
		if err != nil {
			t.Fatalf("tools/call test_elicitation: %v", err)
		}
		if n := h.elicited.Load(); n < 1 {
			t.Errorf("the elicitation handler was not called")
		}
		h.checkPath(t, era)
		if got := goSDKText(t, res.Content); res.IsError || !wantElicited(got) {
			t.Errorf("tools/call test_elicitation = %q (isError %v)", got, res.IsError)
		}
	})

	sample := "sampling"
	if era == v2026 {
		sample = "mrtr_sampling"
	}
	t.Run(sample, func(t *testing.T) {
		ctx := ctxFor(t)
		cs, h := goSDKConnect(ctx, t, ep, setConformance, era)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_sampling", Arguments: map[string]any{"prompt": "Say something"}})
		if err != nil {
			t.Fatalf("tools/call test_sampling: %v", err)
		}
		if n := h.sampled.Load(); n < 1 {
			t.Errorf("the sampling handler was not called")
		}
		h.checkPath(t, era)
		if got := goSDKText(t, res.Content); res.IsError || got != "LLM response: "+sampledText {
			t.Errorf("tools/call test_sampling = %q (isError %v)", got, res.IsError)
		}
	})
}

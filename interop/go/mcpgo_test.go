package interop

import (
	"context"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// The mcp-go client (github.com/mark3labs/mcp-go).
//
// The era is chosen with client.WithProtocolVersion: "2025-11-25" keeps
// Initialize on the initialize handshake; "2026-07-28" (also the library's
// default) makes Initialize probe server/discover and, when that succeeds,
// speak the stateless core, with _meta on every request. A failed probe
// falls back to initialize quietly, so the 2026 tests check the negotiated
// version. Over HTTP, notifications outside a request (resources/updated)
// arrive in a 2025 session on the standalone GET stream, which mcp-go opens
// only with transport.WithContinuousListening; that option also rules out
// 2026 (the library then stays on initialize), so the 2026 tests leave it
// off and open a subscriptions/listen stream with Client.ListenAsync.
// input_required results are fulfilled by the library's multi round-trip
// loop with the handlers that serve server-to-client requests in a 2025
// session.

func TestMCPGo_Stdio_2025(t *testing.T) { mcpGoSuite(t, overStdio, v2025) }
func TestMCPGo_HTTP_2025(t *testing.T)  { mcpGoSuite(t, overHTTP, v2025) }
func TestMCPGo_Stdio_2026(t *testing.T) { mcpGoSuite(t, overStdio, v2026) }

// TestMCPGo_HTTP_2026 needs mcpedge's Streamable HTTP transport to serve
// 2026-07-28 (MCP-Protocol-Version: 2026-07-28 with per-request _meta).
func TestMCPGo_HTTP_2026(t *testing.T) { mcpGoSuite(t, overHTTP, v2026) }

// mcpGoHandlers answers the server's input requests and counts them.
type mcpGoHandlers struct {
	elicited, sampled atomic.Int32
	updated           chan string
}

func (h *mcpGoHandlers) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	h.elicited.Add(1)
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
		Action:  mcp.ElicitationResponseActionAccept,
		Content: map[string]any{"username": elicitUsername, "email": elicitEmail},
	}}, nil
}

func (h *mcpGoHandlers) CreateMessage(_ context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	h.sampled.Add(1)
	return &mcp.CreateMessageResult{
		SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant, Content: mcp.NewTextContent(sampledText)},
		Model:           "interop-model",
	}, nil
}

// mcpGoConnect starts an mcp-go client on a server with the handler set hs,
// initializes it in era and checks that era was negotiated.
func mcpGoConnect(ctx context.Context, t *testing.T, ep *endpoints, hs, era string) (*client.Client, *mcp.InitializeResult, *mcpGoHandlers) {
	t.Helper()
	h := &mcpGoHandlers{updated: make(chan string, 16)}
	var tr transport.Interface
	switch ep.tr {
	case overStdio:
		tr = transport.NewStdioWithOptions(mcpedgeBin, nil, stdioArgs(hs), transport.WithCommandStderrWriter(testWriter{t, "mcpedge"}))
	case overHTTP:
		opts := []transport.StreamableHTTPCOption{transport.WithHTTPLogger(slog.New(slog.NewTextHandler(testWriter{t, "mcp-go"}, nil)))}
		if era == v2025 {
			opts = append(opts, transport.WithContinuousListening())
		}
		var err error
		tr, err = transport.NewStreamableHTTP(ep.urls[hs], opts...)
		if err != nil {
			t.Fatalf("NewStreamableHTTP: %v", err)
		}
	}
	c := client.NewClient(tr,
		client.WithProtocolVersion(era),
		client.WithElicitationHandler(h),
		client.WithSamplingHandler(h),
	)
	if err := c.Start(ctx); err != nil {
		t.Fatalf("Start (%s): %v", ep.tr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method != string(mcp.MethodNotificationResourceUpdated) {
			return
		}
		uri, _ := n.Params.AdditionalFields["uri"].(string)
		select {
		case h.updated <- uri:
		default:
		}
	})
	res, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ClientInfo: mcp.Implementation{Name: "mcpedge-interop-mcpgo", Version: "1.0.0"},
	}})
	if err != nil {
		t.Fatalf("Initialize (%s, %s): %v", ep.tr, era, err)
	}
	if res.ProtocolVersion != era || c.ProtocolVersion() != era {
		if era == v2026 {
			t.Fatalf("negotiated %q, want %q: server/discover failed and mcp-go fell back to initialize (over %s)%s", res.ProtocolVersion, era, ep.tr, ep.discoverProbe(hs))
		}
		t.Fatalf("negotiated %q, want %q", res.ProtocolVersion, era)
	}
	return c, res, h
}

func mcpGoText(t *testing.T, content []mcp.Content) string {
	t.Helper()
	if len(content) == 0 {
		t.Fatal("no content")
	}
	tc, ok := mcp.AsTextContent(content[0])
	if !ok {
		t.Fatalf("content[0] is %T, want text", content[0])
	}
	return tc.Text
}

func mcpGoCall(ctx context.Context, t *testing.T, c *client.Client, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	return res
}

func mcpGoSuite(t *testing.T, tr conn, era string) {
	ep := newEndpoints(t, tr)

	t.Run("connect", func(t *testing.T) {
		ctx := ctxFor(t)
		c, res, _ := mcpGoConnect(ctx, t, ep, setConformance, era)
		if res.ServerInfo.Name != serverInfoName {
			t.Errorf("serverInfo = %+v, want name %q", res.ServerInfo, serverInfoName)
		}
		caps := c.GetServerCapabilities()
		if caps.Tools == nil || caps.Resources == nil || caps.Prompts == nil {
			t.Errorf("capabilities = %+v, want tools, resources and prompts", caps)
		}
		if era == v2026 {
			// server/discover again, explicitly, on the stateless connection.
			d, err := c.Discover(ctx, mcp.DiscoverRequest{})
			if err != nil {
				t.Fatalf("server/discover: %v", err)
			}
			if !slices.Contains(d.SupportedVersions, v2026) || !slices.Contains(d.SupportedVersions, v2025) {
				t.Errorf("server/discover supportedVersions = %v", d.SupportedVersions)
			}
		}
	})

	t.Run("tools", func(t *testing.T) {
		ctx := ctxFor(t)
		c, _, _ := mcpGoConnect(ctx, t, ep, setConformance, era)
		list, err := c.ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		var names []string
		for _, tool := range list.Tools {
			names = append(names, tool.Name)
		}
		for _, want := range []string{"test_simple_text", "test_elicitation", "test_sampling"} {
			if !slices.Contains(names, want) {
				t.Errorf("tools/list lacks %s: %v", want, names)
			}
		}
		res := mcpGoCall(ctx, t, c, "test_simple_text", map[string]any{})
		if res.IsError || mcpGoText(t, res.Content) != simpleText {
			t.Errorf("tools/call test_simple_text = %+v", res)
		}
		if res := mcpGoCall(ctx, t, c, "test_error_handling", map[string]any{}); !res.IsError {
			t.Errorf("tools/call test_error_handling: isError false")
		}
	})

	t.Run("resources", func(t *testing.T) {
		ctx := ctxFor(t)
		c, _, _ := mcpGoConnect(ctx, t, ep, setConformance, era)
		list, err := c.ListResources(ctx, mcp.ListResourcesRequest{})
		if err != nil {
			t.Fatalf("resources/list: %v", err)
		}
		var uris []string
		for _, r := range list.Resources {
			uris = append(uris, r.URI)
		}
		if !slices.Contains(uris, staticTextURI) {
			t.Errorf("resources/list lacks %s: %v", staticTextURI, uris)
		}
		tl, err := c.ListResourceTemplates(ctx, mcp.ListResourceTemplatesRequest{})
		if err != nil {
			t.Fatalf("resources/templates/list: %v", err)
		}
		if len(tl.ResourceTemplates) == 0 {
			t.Errorf("resources/templates/list: none")
		}
		read := func(uri string) string {
			req := mcp.ReadResourceRequest{}
			req.Params.URI = uri
			res, err := c.ReadResource(ctx, req)
			if err != nil {
				t.Fatalf("resources/read %s: %v", uri, err)
			}
			if len(res.Contents) != 1 {
				t.Fatalf("resources/read %s: %d contents", uri, len(res.Contents))
			}
			tc, ok := mcp.AsTextResourceContents(res.Contents[0])
			if !ok {
				t.Fatalf("resources/read %s: %T, want text", uri, res.Contents[0])
			}
			return tc.Text
		}
		if got := read(staticTextURI); got != staticText {
			t.Errorf("resources/read %s = %q", staticTextURI, got)
		}
		if got := read("test://template/42/data"); got != `{"id":"42","templateTest":true,"data":"Data for ID: 42"}` {
			t.Errorf("resources/read template = %q", got)
		}
	})

	t.Run("prompts", func(t *testing.T) {
		ctx := ctxFor(t)
		c, _, _ := mcpGoConnect(ctx, t, ep, setConformance, era)
		list, err := c.ListPrompts(ctx, mcp.ListPromptsRequest{})
		if err != nil {
			t.Fatalf("prompts/list: %v", err)
		}
		var names []string
		for _, p := range list.Prompts {
			names = append(names, p.Name)
		}
		if !slices.Contains(names, "test_prompt_with_arguments") {
			t.Errorf("prompts/list lacks test_prompt_with_arguments: %v", names)
		}
		req := mcp.GetPromptRequest{}
		req.Params.Name = "test_prompt_with_arguments"
		req.Params.Arguments = map[string]string{"arg1": "a", "arg2": "b"}
		res, err := c.GetPrompt(ctx, req)
		if err != nil {
			t.Fatalf("prompts/get: %v", err)
		}
		if len(res.Messages) != 1 {
			t.Fatalf("prompts/get: %d messages", len(res.Messages))
		}
		if got := mcpGoText(t, []mcp.Content{res.Messages[0].Content}); got != "Prompt with arguments: arg1='a', arg2='b'" {
			t.Errorf("prompts/get = %q", got)
		}
	})

	t.Run("subscription", func(t *testing.T) {
		ctx := ctxFor(t)
		c, _, h := mcpGoConnect(ctx, t, ep, setDemo, era)
		name := boardName(t)
		uri := "mem://board/" + name
		write := func(text string) error {
			req := mcp.CallToolRequest{}
			req.Params.Name = "board_write"
			req.Params.Arguments = map[string]any{"name": name, "text": text}
			res, err := c.CallTool(ctx, req)
			if err == nil && res.IsError {
				t.Fatalf("board_write: %s", mcpGoText(t, res.Content))
			}
			return err
		}
		if err := write("first"); err != nil {
			t.Fatalf("board_write: %v", err)
		}
		sub := mcp.SubscribeRequest{}
		sub.Params.URI = uri
		// 2025: resources/subscribe. 2026: Subscribe only records the URI
		// in the filter of the next subscriptions/listen, which
		// ListenAsync opens.
		if err := c.Subscribe(ctx, sub); err != nil {
			t.Fatalf("Subscribe: %v", err)
		}
		if era == v2026 {
			filter := c.PendingSubscriptionFilter()
			if !slices.Contains(filter.ResourceSubscriptions, uri) {
				t.Fatalf("pending filter %+v lacks %s", filter, uri)
			}
			listenErr := make(chan error, 1)
			stop, err := c.ListenAsync(ctx, filter, func(err error) { listenErr <- err })
			if err != nil {
				t.Fatalf("ListenAsync: %v", err)
			}
			defer stop()
			defer func() {
				select {
				case err := <-listenErr:
					t.Errorf("subscriptions/listen: %v", err)
				default:
				}
			}()
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
		req := mcp.ReadResourceRequest{}
		req.Params.URI = uri
		res, err := c.ReadResource(ctx, req)
		if err != nil {
			t.Fatalf("resources/read %s: %v", uri, err)
		}
		if tc, ok := mcp.AsTextResourceContents(res.Contents[0]); !ok || tc.Text != "second" {
			t.Errorf("resources/read %s = %+v", uri, res.Contents)
		}
		if era == v2025 {
			unsub := mcp.UnsubscribeRequest{}
			unsub.Params.URI = uri
			if err := c.Unsubscribe(ctx, unsub); err != nil {
				t.Errorf("Unsubscribe: %v", err)
			}
		}
	})

	// In a 2025 session the server sends elicitation/create and
	// sampling/createMessage to the client mid-call; in 2026 the call
	// answers input_required and mcp-go retries it with the input (MRTR).
	elicit := "elicitation"
	if era == v2026 {
		elicit = "mrtr_elicitation"
	}
	t.Run(elicit, func(t *testing.T) {
		ctx := ctxFor(t)
		c, _, h := mcpGoConnect(ctx, t, ep, setConformance, era)
		res := mcpGoCall(ctx, t, c, "test_elicitation", map[string]any{"message": "Who are you?"})
		if h.elicited.Load() < 1 {
			t.Errorf("the elicitation handler was not called")
		}
		if got := mcpGoText(t, res.Content); res.IsError || !wantElicited(got) {
			t.Errorf("tools/call test_elicitation = %q (isError %v)", got, res.IsError)
		}
	})

	sample := "sampling"
	if era == v2026 {
		sample = "mrtr_sampling"
	}
	t.Run(sample, func(t *testing.T) {
		ctx := ctxFor(t)
		c, _, h := mcpGoConnect(ctx, t, ep, setConformance, era)
		res := mcpGoCall(ctx, t, c, "test_sampling", map[string]any{"prompt": "Say something"})
		if h.sampled.Load() < 1 {
			t.Errorf("the sampling handler was not called")
		}
		if got := mcpGoText(t, res.Content); res.IsError || got != "LLM response: "+sampledText {
			t.Errorf("tools/call test_sampling = %q (isError %v)", got, res.IsError)
		}
	})
}

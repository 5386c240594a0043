// Command conformance-client is the client under test for the client mode
// of the official MCP conformance suite (@modelcontextprotocol/conformance):
//
//	conformance client --command "conformance-client" --scenario NAME
//
// The suite starts a mock server, then runs this command with the server's
// URL as the last argument and the scenario's name in
// MCP_CONFORMANCE_SCENARIO (and, for some scenarios, a JSON object of
// extra settings in MCP_CONFORMANCE_CONTEXT). The client connects over
// Streamable HTTP with the mcpedge client library, does what the scenario
// expects, and exits 0 on success, 1 on failure.
//
// MCP_CONFORMANCE_PROTOCOL_VERSION picks the lifecycle: 2026-07-28 runs
// the stateless one (server/discover, _meta on every request, the HTTP
// standard and custom headers, input rounds): the client lists the tools
// and calls those the context names (toolCalls) or else each one, then
// reads the first resource and gets the first prompt the server offers.
// Anything else (the suite's default is 2025-11-25) runs initialize.
//
// The auth/ scenarios take their credentials from the context: client_id
// and client_secret, private_key_pem and signing_algorithm (client
// credentials with private_key_jwt), and idp_* (enterprise-managed
// authorization: the ID token to exchange at the IdP for an ID-JAG).
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/mcpedge/mcpedge/client"
	"github.com/mcpedge/mcpedge/client/oauth"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
)

// clientMetadataURL is the Client ID Metadata Document URL the suite's
// authorization servers expect (auth/basic-cimd).
const clientMetadataURL = "https://conformance-test.local/client-metadata.json"

// scenarioTools names the tool each scenario has the client call (after
// listing the tools); the arguments are in toolArgs.
var scenarioTools = map[string]string{
	"tools_call":                          "add_numbers",
	"elicitation-sep1034-client-defaults": "test_client_elicitation_defaults",
	"sse-retry":                           "test_reconnection",
}

// toolArgs are the arguments of the scenario tools that take some.
var toolArgs = map[string]any{
	"add_numbers": map[string]any{"a": 5, "b": 3},
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "conformance-client:", err)
		os.Exit(1)
	}
}

// scenarioContext is MCP_CONFORMANCE_CONTEXT.
type scenarioContext struct {
	ClientID     string     `json:"client_id"`
	ClientSecret string     `json:"client_secret"`
	ToolCalls    []toolCall `json:"toolCalls"`
	// private_key_jwt (auth/client-credentials-jwt).
	PrivateKeyPEM    string `json:"private_key_pem"`
	SigningAlgorithm string `json:"signing_algorithm"`
	// Enterprise-managed authorization (auth/cross-app-access-complete-flow,
	// 0.2.0's auth/enterprise-managed-authorization).
	IdPClientID      string `json:"idp_client_id"`
	IdPClientSecret  string `json:"idp_client_secret"`
	IdPIDToken       string `json:"idp_id_token"`
	IdPIssuer        string `json:"idp_issuer"`
	IdPTokenEndpoint string `json:"idp_token_endpoint"`
}

// toolCall is one call a scenario's context asks for.
type toolCall struct {
	Name      string        `json:"name"`
	Arguments codec.RawJSON `json:"arguments"`
}

func run() error {
	if len(os.Args) < 2 {
		return errors.New("usage: conformance-client SERVER_URL (scenario in MCP_CONFORMANCE_SCENARIO)")
	}
	serverURL := os.Args[len(os.Args)-1]
	scenario := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	var sc scenarioContext
	if raw := os.Getenv("MCP_CONFORMANCE_CONTEXT"); raw != "" {
		if err := codec.Unmarshal([]byte(raw), &sc); err != nil {
			return fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
		}
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()

	tr := &client.HTTPTransport{URL: serverURL, Logger: log}
	opts := client.Options{
		ClientInfo: mcp.Implementation{Name: "mcpedge-conformance-client", Version: client.Version},
		Logger:     log,
		// Elicitation: accept with the defaults the form declares
		// (SEP-1034).
		OnElicitation: func(_ context.Context, _ *client.ServerRequest, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			d, err := client.ElicitationDefaults(p.RequestedSchema)
			if err != nil {
				return nil, err
			}
			content, err := codec.Marshal(d)
			if err != nil {
				return nil, err
			}
			return &mcp.ElicitResult{Action: "accept", Content: content}, nil
		},
		OnSampling: func(_ context.Context, _ *client.ServerRequest, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "conformance-client", StopReason: "endTurn",
				Content: codec.RawJSON(`{"type":"text","text":"This is a response from the conformance client"}`)}, nil
		},
	}
	if strings.HasPrefix(scenario, "auth/") {
		cfg := oauth.Config{
			ClientID:          sc.ClientID,
			ClientSecret:      sc.ClientSecret,
			ClientMetadataURL: clientMetadataURL,
			ClientName:        "mcpedge-conformance-client",
			RedirectURL:       "http://localhost:3000/callback",
		}
		if strings.Contains(scenario, "client-credentials") {
			cfg.GrantType = oauth.GrantClientCredentials
		}
		if sc.PrivateKeyPEM != "" {
			k, err := oauth.ParseSigningKey([]byte(sc.PrivateKeyPEM), sc.SigningAlgorithm)
			if err != nil {
				return err
			}
			cfg.SigningKey = k
		}
		if sc.IdPIDToken != "" {
			cfg.GrantType = oauth.GrantJWTBearer
			cfg.IdentityProvider = &oauth.IdentityProvider{
				Issuer:        sc.IdPIssuer,
				TokenEndpoint: sc.IdPTokenEndpoint,
				ClientID:      sc.IdPClientID,
				ClientSecret:  sc.IdPClientSecret,
				IDToken:       sc.IdPIDToken,
			}
		}
		a, err := oauth.New(serverURL, cfg)
		if err != nil {
			return err
		}
		tr.Auth = a
	}

	opts.Era = client.EraLegacy
	if v := os.Getenv("MCP_CONFORMANCE_PROTOCOL_VERSION"); mcp.StatelessVersion(v) {
		opts.Era = client.EraModern
		opts.ProtocolVersion = v
	}

	c, err := client.Dial(ctx, tr, opts)
	if err != nil {
		return err
	}
	defer c.Close()
	if c.Modern() {
		return runStateless(ctx, c, sc, log)
	}

	tools, err := c.AllTools(ctx)
	if err != nil {
		return err
	}
	has := func(name string) bool {
		for _, t := range tools {
			if t.Name == name {
				return true
			}
		}
		return false
	}
	var call string
	switch {
	case scenarioTools[scenario] != "":
		call = scenarioTools[scenario]
	case strings.HasPrefix(scenario, "auth/") && has("test-tool"):
		call = "test-tool"
	}
	if call == "" {
		return nil
	}
	args := toolArgs[call]
	if args == nil {
		args = map[string]any{}
	}
	r, err := c.CallTool(ctx, call, args)
	if err != nil {
		return fmt.Errorf("%s: %w", call, err)
	}
	if r.IsError {
		return fmt.Errorf("%s: the tool failed: %+v", call, r.Content)
	}
	log.Info("tool called", "tool", call, "content", len(r.Content))
	return nil
}

// runStateless is a scenario of 2026-07-28: list and call the tools, read a
// resource, get a prompt.
func runStateless(ctx context.Context, c *client.Client, sc scenarioContext, log *slog.Logger) error {
	tools, err := c.AllTools(ctx)
	if err != nil {
		return err
	}
	calls := sc.ToolCalls
	if len(calls) == 0 {
		for _, t := range tools {
			calls = append(calls, toolCall{Name: t.Name})
		}
	}
	for _, tc := range calls {
		args := tc.Arguments
		if len(args) == 0 {
			args = codec.RawJSON(`{}`)
		}
		r, err := c.CallTool(ctx, tc.Name, args)
		if err != nil {
			return fmt.Errorf("%s: %w", tc.Name, err)
		}
		log.Info("tool called", "tool", tc.Name, "isError", r.IsError, "content", len(r.Content))
	}
	caps := c.ServerCapabilities()
	if caps != nil && caps.Resources != nil {
		rs, err := c.AllResources(ctx)
		if err != nil {
			return err
		}
		if len(rs) > 0 {
			if _, err := c.ReadResource(ctx, rs[0].URI); err != nil {
				return err
			}
		}
	}
	if caps != nil && caps.Prompts != nil {
		ps, err := c.AllPrompts(ctx)
		if err != nil {
			return err
		}
		if len(ps) > 0 {
			if _, err := c.GetPrompt(ctx, ps[0].Name, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

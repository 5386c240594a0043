package builtin_test

import (
	"context"
	"testing"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/handlers/builtin"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/require"
)

// The tasks fixtures are listed as the suites expect: a description, an
// object input schema, no output schema, and their task support.
func TestConformanceTaskFixtures(t *testing.T) {
	r := handlers.NewRegistry(handlers.Options{})
	require.NoError(t, builtin.Install("conformance", r, builtin.Env{}))
	for name, support := range map[string]string{
		"greet": "", "slow_compute": mcp.TaskOptional, "failing_job": mcp.TaskRequired,
		"protocol_error_job": mcp.TaskOptional, "confirm_delete": mcp.TaskOptional,
		"multi_input": mcp.TaskOptional, "test_tool_with_task": mcp.TaskRequired,
	} {
		tool, ok := r.Tool(name)
		require.True(t, ok, name)
		require.NotEmpty(t, tool.Description, name)
		var schema struct {
			Type string `json:"type"`
		}
		require.NoError(t, codec.Unmarshal(tool.InputSchema, &schema), name)
		require.Equal(t, "object", schema.Type, name)
		require.Empty(t, tool.OutputSchema, name)
		got := ""
		if tool.Execution != nil {
			got = tool.Execution.TaskSupport
		}
		require.Equal(t, support, got, name)
	}
	res, err := r.CallTool(context.Background(), &handlers.CallToolRequest{Peer: &peer{}, Params: &mcp.CallToolParams{Name: "greet", Arguments: codec.RawJSON(`{"name":"World"}`)}})
	require.NoError(t, err)
	require.Equal(t, "Hello, World!", res.Content[0].Text)
	res, err = r.CallTool(context.Background(), &handlers.CallToolRequest{Peer: &peer{}, Params: &mcp.CallToolParams{Name: "slow_compute", Arguments: codec.RawJSON(`{"seconds":0,"label":"l"}`)}})
	require.NoError(t, err)
	require.NotEmpty(t, res.Content)
}

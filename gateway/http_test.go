package gateway_test

import (
	"context"
	"testing"

	"github.com/mcpedge/mcpedge"
	"github.com/mcpedge/mcpedge/client"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/gateway"
	"github.com/mcpedge/mcpedge/handlers/builtin"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// httpUpstream serves the conformance handlers over Streamable HTTP (and
// the legacy endpoints) on 127.0.0.1, and returns its base URL.
func httpUpstream(t *testing.T) string { return httpUpstreamWith(t, "conformance") }

// httpUpstreamWith serves the handler set over Streamable HTTP, offering
// only versions when some are given.
func httpUpstreamWith(t *testing.T, set string, versions ...string) string {
	t.Helper()
	srv := mcpedge.New(mcpedge.Options{EngineOptions: mcpedge.EngineOptions{MaxInflight: -1, Versions: versions}, HTTP: &mcpedge.HTTPOptions{Addr: "127.0.0.1:0"}})
	require.NoError(t, builtin.Install(set, srv.Registry(), builtin.Env{ResourceUpdated: srv.ResourceUpdated, Publish: srv.Engine().Bus().Publish, Subscribe: srv.Engine().Bus().Subscribe}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	a := srv.HTTPAddr(ctx)
	require.NotNil(t, a)
	t.Cleanup(func() { cancel(); <-done })
	return "http://" + a.String()
}

// TestHTTPUpstream: an upstream over Streamable HTTP, and one that
// speaks only the legacy HTTP+SSE transport, in both eras (over the
// legacy transport a 2026-07-28 client is translated).
func TestHTTPUpstream(t *testing.T) {
	base := httpUpstream(t)
	for _, tt := range []struct {
		name, path string
	}{{"streamable", "/mcp"}, {"legacy", "/sse"}} {
		t.Run(tt.name, func(t *testing.T) {
			u := gateway.Upstream{Name: "h", Transport: gateway.HTTP, URL: base + tt.path, Headers: map[string]string{"X-Upstream-Key": "k"}}
			f := startFront(t, gateway.Options{Upstreams: []gateway.Upstream{u}})
			c := f.dial(t, client.Options{
				OnElicitation: func(context.Context, *client.ServerRequest, *mcp.ElicitParams) (*mcp.ElicitResult, error) {
					return &mcp.ElicitResult{Action: "accept", Content: codec.RawJSON(`{"username":"ada","email":"a@b"}`)}, nil
				},
			})
			ctx := testCtx(t)
			r, err := c.CallTool(ctx, "test_simple_text", map[string]any{})
			require.NoError(t, err)
			assert.Equal(t, "This is a simple text response for testing.", text(t, r))
			r, err = c.CallTool(ctx, "test_elicitation", map[string]any{"message": "who?"})
			require.NoError(t, err)
			assert.Contains(t, text(t, r), "ada", "relayed from the POST's event stream")
			var steps int
			_, err = c.CallTool(ctx, "test_tool_with_progress", map[string]any{}, client.WithProgress(func(float64, float64, string) { steps++ }))
			require.NoError(t, err)
			assert.Equal(t, 3, steps)
			rr, err := c.ReadResource(ctx, "test://static-text")
			require.NoError(t, err)
			assert.NotEmpty(t, rr.Contents)

			m, err := client.Dial(ctx, &client.TCPTransport{Addr: f.addr}, client.Options{Era: client.EraModern})
			require.NoError(t, err)
			defer m.Close()
			// The legacy transport speaks the session revisions: a
			// 2026-07-28 client's calls are translated (down.go).
			r, err = m.CallTool(ctx, "test_simple_text", map[string]any{})
			require.NoError(t, err)
			assert.Equal(t, "This is a simple text response for testing.", text(t, r))
			r, err = m.CallTool(ctx, "test_x_mcp_header", map[string]any{"region": "eu-west"})
			require.NoError(t, err, "the Mcp-Param-Region header set upstream")
			assert.False(t, r.IsError)
		})
	}
}

package client_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/client"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/mcp"
	mcphttp "github.com/mcpedge/mcpedge/transport/http"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServerIdentity: ServerInfo, ServerCapabilities, ProtocolVersion and
// Instructions answer the same in both eras, on every transport, with the
// default Options (2026-07-28 with mcpedge) and with EraLegacy (a session
// revision); InitializeResult and DiscoverResult are each one era's.
func TestServerIdentity(t *testing.T) {
	srv := newEngine(t, "bench", engine.Options{Name: "identity", Version: "7.1", Instructions: "call echo"})
	tcpAddr, _ := serveTCP(t, srv)
	httpBase, _ := serveHTTP(t, srv, mcphttp.Options{})
	transports := []struct {
		name string
		tr   func() client.Transport
	}{
		{"tcp", func() client.Transport { return &client.TCPTransport{Addr: tcpAddr} }},
		{"http", func() client.Transport { return &client.HTTPTransport{URL: httpBase + "/mcp"} }},
		{"stdio", func() client.Transport { return pipeTransport(t, srv) }},
	}
	for _, tt := range transports {
		for _, era := range []struct {
			name    string
			opts    client.Options
			version string
		}{
			{"default options", client.Options{}, mcp.Version20260728},
			{"session era", client.Options{Era: client.EraLegacy}, mcp.LatestVersion},
		} {
			t.Run(tt.name+"/"+era.name, func(t *testing.T) {
				c := client.New(tt.tr(), era.opts)
				t.Cleanup(func() { c.Close() })
				assert.Zero(t, c.ServerInfo(), "nothing before Connect")
				assert.Nil(t, c.ServerCapabilities())
				assert.Empty(t, c.ProtocolVersion())
				require.NoError(t, c.Connect(testCtx(t)))

				assert.Equal(t, "identity", c.ServerInfo().Name)
				assert.Equal(t, "7.1", c.ServerInfo().Version)
				assert.Equal(t, era.version, c.ProtocolVersion())
				assert.Equal(t, "call echo", c.Instructions())
				require.NotNil(t, c.ServerCapabilities())
				assert.NotNil(t, c.ServerCapabilities().Tools)
				if era.version == mcp.Version20260728 {
					assert.True(t, c.Modern())
					assert.Nil(t, c.InitializeResult(), "era-specific: no initialize in 2026-07-28")
					assert.NotNil(t, c.DiscoverResult())
				} else {
					assert.False(t, c.Modern())
					assert.Nil(t, c.DiscoverResult(), "era-specific: no server/discover in a session")
					require.NotNil(t, c.InitializeResult())
					assert.Equal(t, "identity", c.InitializeResult().ServerInfo.Name)
				}
			})
		}
	}
}

// TestServerIdentityFallback: with the default Options, a server of the
// session revisions (it refuses server/discover) is initialized, and the
// same accessors answer from initialize.
func TestServerIdentityFallback(t *testing.T) {
	addr := fakeServer(t, func(c net.Conn) {
		sc := bufio.NewScanner(c)
		for sc.Scan() {
			var m codec.Message
			if codec.Decode(sc.Bytes(), &m) != nil {
				return
			}
			switch m.Method {
			case mcp.MethodServerDiscover:
				fmt.Fprintf(c, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`+"\n", m.ID)
			case mcp.MethodInitialize:
				fmt.Fprintf(c, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":%q,"capabilities":{"tools":{}},"serverInfo":{"name":"older","version":"1"},"instructions":"be kind"}}`+"\n", m.ID, mcp.Version20250618)
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, &client.TCPTransport{Addr: addr}, client.Options{})
	require.NoError(t, err)
	defer c.Close()
	assert.False(t, c.Modern())
	assert.Equal(t, "older", c.ServerInfo().Name)
	assert.Equal(t, mcp.Version20250618, c.ProtocolVersion())
	assert.Equal(t, "be kind", c.Instructions())
	require.NotNil(t, c.ServerCapabilities())
	assert.NotNil(t, c.ServerCapabilities().Tools)
}

// TestServerIdentityWithoutMeta: a 2026-07-28 server whose discover
// result names no serverInfo (a SHOULD) leaves ServerInfo zero rather
// than failing, and a malformed one is ignored the same way.
func TestServerIdentityWithoutMeta(t *testing.T) {
	for name, meta := range map[string]string{
		"none":      ``,
		"malformed": `,"_meta":{"io.modelcontextprotocol/serverInfo":"not an object"}`,
		"present":   `,"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"meta","version":"2"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			addr := fakeServer(t, func(c net.Conn) {
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					var m codec.Message
					if codec.Decode(sc.Bytes(), &m) != nil {
						return
					}
					if m.Method == mcp.MethodServerDiscover {
						fmt.Fprintf(c, `{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","supportedVersions":[%q],"capabilities":{},"ttlMs":0,"cacheScope":"public"%s}}`+"\n", m.ID, mcp.Version20260728, meta)
					}
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := client.Dial(ctx, &client.TCPTransport{Addr: addr}, client.Options{})
			require.NoError(t, err)
			defer c.Close()
			require.True(t, c.Modern())
			want := ""
			if name == "present" {
				want = "meta"
			}
			assert.Equal(t, want, c.ServerInfo().Name)
		})
	}
}

package client_test

import (
	"crypto/tls"
	"testing"

	"github.com/mcpedge/mcpedge/client"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/internal/testcert"
	"github.com/mcpedge/mcpedge/internal/testserver"
	"github.com/mcpedge/mcpedge/transport/tcp"
	"github.com/mcpedge/mcpedge/transport/tlsconf"
	"github.com/stretchr/testify/require"
)

// TestTCPTLS: the TCP transport speaks TLS to a TCP server serving it
// (tcps://), in both eras, and presents its certificate to one that
// requires client certificates (mutual TLS); a certificate of another CA,
// or none, is refused, and so is a server the client does not trust.
func TestTCPTLS(t *testing.T) {
	ca, clients, other := testcert.NewCA(t, "ca"), testcert.NewCA(t, "clients"), testcert.NewCA(t, "other")
	p := ca.Server(t, "server")
	cfg, err := tlsconf.Files{Cert: p.CertFile, Key: p.KeyFile, ClientCA: clients.File}.Load()
	require.NoError(t, err)
	srv := newEngine(t, "bench", engine.Options{})
	addr, _ := testserver.TCP(t, srv, tcp.Options{Loops: 2, TLS: tlsconf.New(cfg)})
	good, bad := clients.Client(t, "good"), other.Client(t, "bad")

	for _, era := range []client.Era{client.EraAuto, client.EraLegacy} {
		tr := &client.TCPTransport{Addr: addr, TLS: &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{good.TLS}}}
		c := dial(t, tr, client.Options{Era: era})
		res, err := c.CallTool(testCtx(t), "echo", map[string]any{"text": "over tls"})
		require.NoError(t, err)
		require.Equal(t, "over tls", res.Content[0].Text)
	}
	for name, tr := range map[string]*client.TCPTransport{
		"other CA":         {Addr: addr, TLS: &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{bad.TLS}}},
		"no certificate":   {Addr: addr, TLS: &tls.Config{RootCAs: ca.Pool()}},
		"untrusted server": {Addr: addr, TLS: &tls.Config{RootCAs: other.Pool(), Certificates: []tls.Certificate{good.TLS}}},
	} {
		t.Run(name, func(t *testing.T) {
			c := client.New(tr, client.Options{})
			t.Cleanup(func() { c.Close() })
			require.Error(t, c.Connect(testCtx(t)))
		})
	}
}

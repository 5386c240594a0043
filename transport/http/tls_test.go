package http

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpedge/mcpedge/internal/testcert"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tlsEnv serves HTTPS on 127.0.0.1 from files.
func tlsEnv(t *testing.T, files TLSFiles) (*env, *TLS) {
	t.Helper()
	cfg, err := files.Load()
	require.NoError(t, err)
	tt := NewTLS(cfg)
	e := newEnv(t, envOpts{loopback: true, opts: Options{TLS: tt}})
	e.base = strings.Replace(e.base, "http://", "https://", 1)
	e.url = e.base + e.srv.opts.Path
	return e, tt
}

// client returns an HTTPS client of e trusting roots, presenting cert
// when given; each has connections of its own.
func (e *env) tlsClient(t *testing.T, roots *x509.CertPool, cert *tls.Certificate, maxVersion uint16) *http.Client {
	cfg := &tls.Config{RootCAs: roots, MaxVersion: maxVersion}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	tr := &http.Transport{
		DialContext:     func(context.Context, string, string) (net.Conn, error) { return e.dial() },
		TLSClientConfig: cfg,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func (e *env) tlsInit(c *http.Client) (*http.Response, error) {
	e.hc = c
	resp, err := e.try(context.Background(), req{body: initBody, headers: map[string]string{"Mcp-Protocol-Version": ""}})
	if err == nil {
		_ = body(e.t, resp)
	}
	return resp, err
}

func TestTLS(t *testing.T) {
	ca := testcert.NewCA(t, "ca1")
	srvCert := ca.Server(t, "server1")
	e, tt := tlsEnv(t, TLSFiles{Cert: srvCert.CertFile, Key: srvCert.KeyFile})

	resp, err := e.tlsInit(e.tlsClient(t, ca.Pool(), nil, 0))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotNil(t, resp.TLS)
	assert.Equal(t, srvCert.Leaf.SerialNumber, resp.TLS.PeerCertificates[0].SerialNumber)
	assert.GreaterOrEqual(t, resp.TLS.Version, uint16(tls.VersionTLS12))

	// TLS 1.1 is refused.
	_, err = e.tlsInit(e.tlsClient(t, ca.Pool(), nil, tls.VersionTLS11))
	require.Error(t, err)
	// Plain HTTP gets no answer.
	e.hc = &http.Client{Transport: &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) { return e.dial() }}}
	plain := e.url
	e.url = strings.Replace(e.url, "https://", "http://", 1)
	if resp, err := e.try(context.Background(), req{body: initBody}); err == nil {
		_ = body(t, resp)
		assert.NotEqual(t, http.StatusOK, resp.StatusCode)
	}
	e.url = plain

	// A reload swaps the certificate: new connections see the new one,
	// from another CA; the old client no longer trusts the server.
	ca2 := testcert.NewCA(t, "ca2")
	cert2 := ca2.Server(t, "server2")
	cfg2, err := TLSFiles{Cert: cert2.CertFile, Key: cert2.KeyFile}.Load()
	require.NoError(t, err)
	tt.Store(cfg2)
	resp, err = e.tlsInit(e.tlsClient(t, ca2.Pool(), nil, 0))
	require.NoError(t, err)
	assert.Equal(t, cert2.Leaf.SerialNumber, resp.TLS.PeerCertificates[0].SerialNumber)
	_, err = e.tlsInit(e.tlsClient(t, ca.Pool(), nil, 0))
	require.Error(t, err, "the old CA does not verify the new certificate")
}

func TestMutualTLS(t *testing.T) {
	ca := testcert.NewCA(t, "srv")
	clientCA := testcert.NewCA(t, "clients")
	other := testcert.NewCA(t, "other")
	srvCert := ca.Server(t, "server")
	good := clientCA.Client(t, "alice")
	bad := other.Client(t, "mallory")
	e, tt := tlsEnv(t, TLSFiles{Cert: srvCert.CertFile, Key: srvCert.KeyFile, ClientCA: clientCA.File})

	resp, err := e.tlsInit(e.tlsClient(t, ca.Pool(), &good.TLS, 0))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)

	_, err = e.tlsInit(e.tlsClient(t, ca.Pool(), nil, 0))
	require.Error(t, err, "no client certificate")
	_, err = e.tlsInit(e.tlsClient(t, ca.Pool(), &bad.TLS, 0))
	require.Error(t, err, "a client certificate of another CA")

	// Reloaded with the other CA as the client CA: mallory gets in, alice
	// no longer.
	cfg, err := TLSFiles{Cert: srvCert.CertFile, Key: srvCert.KeyFile, ClientCA: other.File}.Load()
	require.NoError(t, err)
	tt.Store(cfg)
	resp, err = e.tlsInit(e.tlsClient(t, ca.Pool(), &bad.TLS, 0))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	_, err = e.tlsInit(e.tlsClient(t, ca.Pool(), &good.TLS, 0))
	require.Error(t, err)
}

func TestTLSFilesErrors(t *testing.T) {
	ca := testcert.NewCA(t, "ca")
	p := ca.Server(t, "s")
	_, err := TLSFiles{Cert: p.CertFile}.Load()
	assert.Error(t, err)
	_, err = TLSFiles{Cert: "/nonexistent.pem", Key: p.KeyFile}.Load()
	assert.ErrorContains(t, err, "/nonexistent.pem")
	_, err = TLSFiles{Cert: p.CertFile, Key: p.KeyFile, ClientCA: p.KeyFile}.Load()
	assert.ErrorContains(t, err, "no PEM certificate")
	_, err = TLSFiles{Cert: p.CertFile, Key: p.KeyFile, ClientCA: "/nonexistent-ca.pem"}.Load()
	assert.ErrorContains(t, err, "/nonexistent-ca.pem")
	cfg, err := TLSFiles{Cert: p.CertFile, Key: p.KeyFile}.Load()
	require.NoError(t, err)
	assert.Equal(t, uint16(tls.VersionTLS12), cfg.MinVersion)
	tt := NewTLS(&tls.Config{Certificates: cfg.Certificates})
	assert.Equal(t, uint16(tls.VersionTLS12), tt.Config().MinVersion, "raised to 1.2")
}

// SetAllowed replaces the Host and Origin allow-lists of a running server.
func TestSetAllowed(t *testing.T) {
	e := newEnv(t, envOpts{})
	h := map[string]string{"Host": "api.example", "Mcp-Protocol-Version": ""}
	resp := e.do(t, req{body: initBody, headers: h})
	_ = body(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	e.srv.SetAllowed([]string{"api.example"}, []string{"https://app.example"})
	assert.Equal(t, []string{"api.example"}, e.srv.Options().AllowedHosts)
	resp = e.do(t, req{body: initBody, headers: h})
	_ = body(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	h["Origin"] = "https://app.example"
	resp = e.do(t, req{body: initBody, headers: h})
	_ = body(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	e.srv.SetAllowed(nil, nil)
	resp = e.do(t, req{body: initBody, headers: h})
	_ = body(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
}

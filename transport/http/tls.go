package http

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
)

// TLSFiles name the PEM files of an HTTPS server: the certificate chain
// and its private key, and optionally the CAs that client certificates
// must chain to (mutual TLS).
type TLSFiles struct {
	Cert, Key string
	// ClientCA, when set, makes every client present a certificate that
	// verifies against the CAs in this file; without one the handshake
	// fails.
	ClientCA string
}

// Load reads the files and returns a server configuration: TLS 1.2 or
// later, HTTP/1.1, the certificate, and with ClientCA client
// certificates required and verified. Its errors name the file.
func (f TLSFiles) Load() (*tls.Config, error) {
	if f.Cert == "" || f.Key == "" {
		return nil, errors.New("mcphttp: TLS needs a certificate and a key")
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("mcphttp: TLS certificate %s, key %s: %w", f.Cert, f.Key, err)
	}
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		NextProtos:   []string{"http/1.1"},
	}
	if f.ClientCA != "" {
		pem, err := os.ReadFile(f.ClientCA)
		if err != nil {
			return nil, fmt.Errorf("mcphttp: TLS client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("mcphttp: TLS client CA %s: no PEM certificate", f.ClientCA)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// TLS is the TLS configuration of a server's handshakes, which Store
// replaces while the server runs: a certificate (or client CA) renewed on
// disk is loaded with TLSFiles.Load and stored, and the next handshake
// uses it; connections already open keep theirs. Set it in
// Options.TLS to serve HTTPS. It is safe for concurrent use.
type TLS struct {
	cur atomic.Pointer[tls.Config]
}

// NewTLS returns a TLS serving cfg (see Store).
func NewTLS(cfg *tls.Config) *TLS {
	t := &TLS{}
	t.Store(cfg)
	return t
}

// Store makes cfg the configuration of the next handshakes. A MinVersion
// below TLS 1.2 is raised to it. The caller must not change cfg after.
func (t *TLS) Store(cfg *tls.Config) {
	if cfg.MinVersion < tls.VersionTLS12 {
		cfg = cfg.Clone()
		cfg.MinVersion = tls.VersionTLS12
	}
	t.cur.Store(cfg)
}

// Config returns the configuration in effect.
func (t *TLS) Config() *tls.Config { return t.cur.Load() }

// listenerConfig is the configuration of the TLS listener: each
// handshake gets the configuration in effect when it starts.
func (t *TLS) listenerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return t.cur.Load(), nil
		},
	}
}

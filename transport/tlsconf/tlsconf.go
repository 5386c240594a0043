// Package tlsconf holds the TLS configuration the network transports
// serve: the PEM files of a certificate, its key and the CAs of client
// certificates (Files), and the configuration in effect (Config), which a
// reload replaces while the transports run, so that a certificate renewed
// on disk is served without a restart. Streamable HTTP and raw TCP share
// one Config (-tls-cert, -tls-key, -tls-client-ca; SIGHUP reloads it).
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
)

// Files name the PEM files of a TLS server: the certificate chain and its
// private key, and optionally the CAs that client certificates must chain
// to (mutual TLS).
type Files struct {
	Cert, Key string
	// ClientCA, when set, makes every client present a certificate that
	// verifies against the CAs in this file; without one the handshake
	// fails.
	ClientCA string
}

// Load reads the files and returns a server configuration: TLS 1.2 or
// later, the certificate, and with ClientCA client certificates required
// and verified. Its errors name the file.
func (f Files) Load() (*tls.Config, error) {
	if f.Cert == "" || f.Key == "" {
		return nil, errors.New("tlsconf: TLS needs a certificate and a key")
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: TLS certificate %s, key %s: %w", f.Cert, f.Key, err)
	}
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
	}
	if f.ClientCA != "" {
		pem, err := os.ReadFile(f.ClientCA)
		if err != nil {
			return nil, fmt.Errorf("tlsconf: TLS client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tlsconf: TLS client CA %s: no PEM certificate", f.ClientCA)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// Config is the TLS configuration of a server's handshakes, which Store
// replaces while the server runs: the next handshake uses the new one;
// connections already open keep theirs. It is safe for concurrent use.
type Config struct {
	cur atomic.Pointer[tls.Config]
}

// New returns a Config serving cfg (see Store).
func New(cfg *tls.Config) *Config {
	c := &Config{}
	c.Store(cfg)
	return c
}

// Store makes cfg the configuration of the next handshakes. A MinVersion
// below TLS 1.2 is raised to it. The caller must not change cfg after.
func (c *Config) Store(cfg *tls.Config) {
	if cfg.MinVersion < tls.VersionTLS12 {
		cfg = cfg.Clone()
		cfg.MinVersion = tls.VersionTLS12
	}
	c.cur.Store(cfg)
}

// Config returns the configuration in effect.
func (c *Config) Config() *tls.Config { return c.cur.Load() }

// Listener returns the configuration of a listener: each handshake gets
// the configuration in effect when it starts, offering the application
// protocols nextProtos in ALPN ("http/1.1"; none for raw MCP over TCP).
func (c *Config) Listener(nextProtos ...string) *tls.Config {
	var last atomic.Pointer[[2]*tls.Config] // the stored config and its variant
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cur := c.cur.Load()
			if slices.Equal(cur.NextProtos, nextProtos) {
				return cur, nil
			}
			if v := last.Load(); v != nil && v[0] == cur {
				return v[1], nil
			}
			out := cur.Clone()
			out.NextProtos = nextProtos
			last.Store(&[2]*tls.Config{cur, out})
			return out, nil
		},
	}
}

package http

import (
	"crypto/tls"

	"github.com/mcpedge/mcpedge/transport/tlsconf"
)

// TLSFiles name the PEM files of an HTTPS server (tlsconf.Files): the
// certificate chain and its key, and optionally the CAs of client
// certificates (mutual TLS).
type TLSFiles = tlsconf.Files

// TLS is the TLS configuration of a server's handshakes, which Store
// replaces while the server runs (tlsconf.Config): a certificate (or
// client CA) renewed on disk is loaded with TLSFiles.Load and stored, and
// the next handshake uses it; connections already open keep theirs. Set
// it in Options.TLS to serve HTTPS; the TCP transport may share it.
type TLS = tlsconf.Config

// NewTLS returns a TLS serving cfg (see Store).
func NewTLS(cfg *tls.Config) *TLS { return tlsconf.New(cfg) }

package auth

import (
	"encoding/json"
	"errors"
	"net/url"
	"strings"
)

// WellKnown is the RFC 9728 well-known path; the document of a resource
// with a path is served at WellKnown followed by that path too.
const WellKnown = "/.well-known/oauth-protected-resource"

// metadataURL derives the metadata document's URL from the audience
// (RFC 9728 §3.1), unless the configuration names it.
func metadataURL(cfg Config) (string, error) {
	if cfg.ResourceMetadataURL != "" {
		return cfg.ResourceMetadataURL, nil
	}
	u, err := url.Parse(cfg.Audience)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "", errors.New("auth: the audience must be an absolute URL (the resource URI), or set the resource metadata URL")
	}
	u.Path = WellKnown + strings.TrimSuffix(u.Path, "/")
	u.RawPath, u.RawQuery, u.Fragment = "", "", ""
	return u.String(), nil
}

// metadata encodes the RFC 9728 document.
func metadata(cfg Config) []byte {
	doc := struct {
		Resource               string   `json:"resource"`
		AuthorizationServers   []string `json:"authorization_servers,omitempty"`
		ScopesSupported        []string `json:"scopes_supported,omitempty"`
		BearerMethodsSupported []string `json:"bearer_methods_supported"`
		SigningAlgs            []string `json:"resource_signing_alg_values_supported,omitempty"`
		ResourceName           string   `json:"resource_name,omitempty"`
	}{
		Resource:               cfg.Audience,
		AuthorizationServers:   cfg.AuthorizationServers,
		ScopesSupported:        cfg.ScopesSupported,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "mcpedge",
	}
	b, _ := json.Marshal(doc)
	return b
}

// Challenge returns the WWW-Authenticate value answering err (RFC 6750
// §3, RFC 9728 §5.1): the error, its description and scope when it has
// them, and the metadata URL. Nothing of the presented token is in it.
func (v *Verifier) Challenge(err *Error) string {
	st := v.st.Load()
	var b strings.Builder
	b.WriteString("Bearer ")
	if err.Code != "" {
		b.WriteString(`error="` + quote(err.Code) + `", `)
		if err.Description != "" {
			b.WriteString(`error_description="` + quote(err.Description) + `", `)
		}
	}
	scope := err.Scope
	if err.Code == "" {
		scope = st.cfg.Scopes
	}
	if len(scope) > 0 {
		b.WriteString(`scope="` + quote(strings.Join(scope, " ")) + `", `)
	}
	b.WriteString(`resource_metadata="` + quote(st.prm) + `"`)
	return b.String()
}

// quote drops what cannot appear in a quoted-string as we write it.
func quote(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '"' || r == '\\' || r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
}

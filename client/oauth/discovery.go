package oauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/mcpedge/mcpedge/codec"
)

// ResourceMetadata is OAuth 2.0 Protected Resource Metadata (RFC 9728).
type ResourceMetadata struct {
	Resource             string   `json:"resource"`
	AuthorizationServers []string `json:"authorization_servers"`
	ScopesSupported      []string `json:"scopes_supported,omitempty"`
}

// ServerMetadata is OAuth 2.0 Authorization Server Metadata (RFC 8414),
// or the same fields of an OpenID Connect discovery document.
type ServerMetadata struct {
	Issuer                            string   `json:"issuer"`
	AuthorizationEndpoint             string   `json:"authorization_endpoint"`
	TokenEndpoint                     string   `json:"token_endpoint"`
	RegistrationEndpoint              string   `json:"registration_endpoint,omitempty"`
	ScopesSupported                   []string `json:"scopes_supported,omitempty"`
	GrantTypesSupported               []string `json:"grant_types_supported,omitempty"`
	CodeChallengeMethodsSupported     []string `json:"code_challenge_methods_supported,omitempty"`
	TokenEndpointAuthMethodsSupported []string `json:"token_endpoint_auth_methods_supported,omitempty"`
	ClientIDMetadataDocumentSupported bool     `json:"client_id_metadata_document_supported,omitempty"`
}

// Discovery errors.
var (
	ErrNoMetadata       = errors.New("oauth: no authorization server metadata found")
	ErrResourceMismatch = errors.New("oauth: protected resource metadata names another resource")
)

// Challenge is the content of a WWW-Authenticate Bearer challenge.
type Challenge struct {
	Error            string
	ErrorDescription string
	Scope            string
	ResourceMetadata string
}

// ParseChallenge reads the Bearer challenge of a WWW-Authenticate value
// (RFC 6750 §3, RFC 9728 §5.1). Other schemes are ignored.
func ParseChallenge(h string) (Challenge, bool) {
	var c Challenge
	i := indexFold(h, "bearer")
	if i < 0 {
		return c, false
	}
	s := h[i+len("bearer"):]
	for {
		s = strings.TrimLeft(s, " \t,")
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return c, true
		}
		key := strings.ToLower(strings.TrimSpace(s[:eq]))
		if strings.ContainsAny(key, " \t") {
			return c, true // the next scheme
		}
		s = strings.TrimLeft(s[eq+1:], " \t")
		var val string
		if strings.HasPrefix(s, `"`) {
			var b strings.Builder
			j := 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) {
					j++
				}
				b.WriteByte(s[j])
			}
			val = b.String()
			s = s[min(j+1, len(s)):]
		} else {
			end := strings.IndexAny(s, ", \t")
			if end < 0 {
				end = len(s)
			}
			val, s = s[:end], s[end:]
		}
		switch key {
		case "error":
			c.Error = val
		case "error_description":
			c.ErrorDescription = val
		case "scope":
			c.Scope = val
		case "resource_metadata":
			c.ResourceMetadata = val
		}
	}
}

func indexFold(s, sub string) int {
	return strings.Index(strings.ToLower(s), sub)
}

// getJSON fetches a JSON document; found is false for a 4xx answer.
func (a *Authorizer) getJSON(ctx context.Context, u string, v any) (found bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := a.hc.Do(req)
	if err != nil {
		return false, fmt.Errorf("oauth: GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 4 {
		return false, nil
	}
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("oauth: GET %s: status %d", u, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return false, fmt.Errorf("oauth: GET %s: %w", u, err)
	}
	if err := codec.Unmarshal(body, v); err != nil {
		return false, fmt.Errorf("oauth: GET %s: %w", u, err)
	}
	return true, nil
}

// resourceMetadata finds the protected resource metadata: at the URL the
// challenge names, else at the path-based well-known URL, else at the
// root one (RFC 9728 §3). It returns nil when the server publishes none
// (a 2025-03-26 server).
func (a *Authorizer) resourceMetadata(ctx context.Context, fromChallenge string) (*ResourceMetadata, error) {
	var candidates []string
	if fromChallenge != "" {
		candidates = append(candidates, fromChallenge)
	}
	u := a.server
	if p := strings.TrimSuffix(u.Path, "/"); p != "" {
		candidates = append(candidates, origin(u)+"/.well-known/oauth-protected-resource"+p)
	}
	candidates = append(candidates, origin(u)+"/.well-known/oauth-protected-resource")
	for _, c := range candidates {
		var m ResourceMetadata
		found, err := a.getJSON(ctx, c, &m)
		if err != nil {
			return nil, err
		}
		if !found {
			continue
		}
		if m.Resource != "" && !a.resourceAllowed(m.Resource) {
			return nil, fmt.Errorf("%w: %q for server %q", ErrResourceMismatch, m.Resource, a.server.String())
		}
		return &m, nil
	}
	return nil, nil
}

// resourceAllowed reports whether the metadata's resource covers the MCP
// server's URL: same origin, and a path that is a prefix of the server's.
func (a *Authorizer) resourceAllowed(resource string) bool {
	r, err := url.Parse(resource)
	if err != nil {
		return false
	}
	if !strings.EqualFold(r.Scheme, a.server.Scheme) || !strings.EqualFold(r.Host, a.server.Host) {
		return false
	}
	rp := strings.TrimSuffix(r.Path, "/")
	sp := strings.TrimSuffix(a.server.Path, "/")
	return rp == "" || sp == rp || strings.HasPrefix(sp, rp+"/")
}

// serverMetadata finds the authorization server's metadata for issuer,
// trying RFC 8414 and OpenID Connect discovery URLs in the order the MCP
// spec gives.
func (a *Authorizer) serverMetadata(ctx context.Context, issuer string) (*ServerMetadata, error) {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil, fmt.Errorf("oauth: issuer %q: %w", issuer, err)
	}
	o, p := origin(u), strings.TrimSuffix(u.Path, "/")
	var candidates []string
	if p != "" {
		candidates = []string{
			o + "/.well-known/oauth-authorization-server" + p,
			o + "/.well-known/openid-configuration" + p,
			o + p + "/.well-known/openid-configuration",
		}
	} else {
		candidates = []string{
			o + "/.well-known/oauth-authorization-server",
			o + "/.well-known/openid-configuration",
		}
	}
	for _, c := range candidates {
		var m ServerMetadata
		found, err := a.getJSON(ctx, c, &m)
		if err != nil {
			return nil, err
		}
		if found && (m.AuthorizationEndpoint != "" || m.TokenEndpoint != "") {
			return &m, nil
		}
	}
	return nil, fmt.Errorf("%w for %s", ErrNoMetadata, issuer)
}

func origin(u *url.URL) string { return u.Scheme + "://" + u.Host }

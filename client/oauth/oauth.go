// Package oauth is the OAuth 2.1 side of MCP authorization (revision
// 2025-11-25) for the client's HTTP transports: an Authorizer that answers
// a 401 or 403 challenge by discovering the protected resource metadata
// (RFC 9728, from the WWW-Authenticate header or the well-known URLs),
// then the authorization server (RFC 8414 or OpenID Connect discovery,
// falling back to the 2025-03-26 default endpoints), registering the
// client when it has no id (Client ID Metadata Document, else Dynamic
// Client Registration, RFC 7591), and running the authorization-code flow
// with PKCE S256 and the resource parameter (RFC 8707). Tokens are
// refreshed when they expire.
//
// Without a user, the client credentials grant (the OAuth client
// credentials extension) authenticates the client with a secret or a
// signed JWT (private_key_jwt, RFC 7523, with a SigningKey), and
// enterprise-managed authorization (the extension of that name, SEP-990)
// trades the user's identity assertion for an ID-JAG at the enterprise
// IdP (RFC 8693) and the ID-JAG for an access token (RFC 7523 JWT bearer
// grant), with an IdentityProvider.
//
// The user's part of the flow, visiting the authorization URL, is a
// Browser: HeadlessBrowser follows redirects with HTTP GETs, which is what
// automated authorization servers (and the conformance suite) need.
package oauth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpedge/mcpedge/codec"
)

// Grant types.
const (
	GrantAuthorizationCode = "authorization_code"
	GrantClientCredentials = "client_credentials"
)

// Config configures an Authorizer. The zero value registers the client
// dynamically and runs the authorization-code flow with a HeadlessBrowser.
type Config struct {
	// ClientID and ClientSecret are pre-registered credentials; without
	// ClientID the client uses ClientMetadataURL or registers itself.
	ClientID, ClientSecret string
	// ClientMetadataURL is an https URL serving the client's metadata
	// document, used as client_id when the server supports them.
	ClientMetadataURL string
	// ClientName is sent when registering; empty means "mcpedge-client".
	ClientName string
	// RedirectURL receives the authorization code; empty means
	// http://127.0.0.1/callback.
	RedirectURL string
	// Scopes are requested when neither the challenge nor the resource
	// metadata names any.
	Scopes []string
	// GrantType is GrantAuthorizationCode (the default, or
	// GrantJWTBearer when IdentityProvider is set),
	// GrantClientCredentials (machine to machine, with ClientID and
	// ClientSecret or SigningKey) or GrantJWTBearer (enterprise-managed
	// authorization, with IdentityProvider, ClientID and ClientSecret).
	GrantType string
	// SigningKey, with ClientID, authenticates the client at the token
	// endpoint with private_key_jwt (RFC 7523 §2.2) instead of a secret.
	SigningKey *SigningKey
	// IdentityProvider is the enterprise IdP that issues ID-JAGs for
	// GrantJWTBearer.
	IdentityProvider *IdentityProvider
	// Browser visits the authorization URL; nil means a HeadlessBrowser.
	Browser Browser
	// HTTPClient talks to the metadata, registration and token endpoints;
	// nil means http.DefaultClient.
	HTTPClient *http.Client
	// Token, if set, is used until it expires.
	Token *Token
}

// Token is an access token and what came with it.
type Token struct {
	AccessToken  string
	TokenType    string
	RefreshToken string
	// Expiry is zero when the server gave no lifetime.
	Expiry time.Time
	Scope  string
}

func (t *Token) expired() bool {
	return !t.Expiry.IsZero() && time.Now().Add(10*time.Second).After(t.Expiry)
}

// Browser performs the user's part of the authorization-code flow.
type Browser interface {
	// Authorize has the user visit authURL and returns the URL the
	// authorization server redirected to, under redirectURL, which holds
	// the code and state (or an error).
	Authorize(ctx context.Context, authURL, redirectURL string) (*url.URL, error)
}

// Errors.
var (
	ErrNoClient         = errors.New("oauth: no client id: no pre-registration, metadata document or registration endpoint")
	ErrAuthorization    = errors.New("oauth: authorization failed")
	ErrTokenRequest     = errors.New("oauth: token request failed")
	ErrStateMismatch    = errors.New("oauth: state mismatch in the authorization response")
	ErrNeedsInteraction = errors.New("oauth: the authorization server wants a user interaction")
)

// Authorizer obtains and renews tokens for one MCP server. It implements
// client.Authorizer; it is safe for concurrent use (one flow runs at a
// time; concurrent challenges wait for it and reuse its token).
type Authorizer struct {
	cfg    Config
	server *url.URL
	hc     *http.Client

	mu     sync.Mutex
	tok    *Token
	scopes []string
	prm    *ResourceMetadata
	as     *ServerMetadata
	legacy bool // the server publishes no resource metadata (2025-03-26)
	reg    registration
}

type registration struct {
	id, secret, method string
}

// New returns an Authorizer for the MCP server at serverURL (the URL the
// HTTP transport posts to).
func New(serverURL string, cfg Config) (*Authorizer, error) {
	u, err := url.Parse(serverURL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("oauth: bad server URL %q", serverURL)
	}
	u.Fragment = ""
	if cfg.RedirectURL == "" {
		cfg.RedirectURL = "http://127.0.0.1/callback"
	}
	if cfg.ClientName == "" {
		cfg.ClientName = "mcpedge-client"
	}
	if cfg.GrantType == "" {
		cfg.GrantType = GrantAuthorizationCode
		if cfg.IdentityProvider != nil {
			cfg.GrantType = GrantJWTBearer
		}
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	if cfg.Browser == nil {
		cfg.Browser = &HeadlessBrowser{Client: hc}
	}
	a := &Authorizer{cfg: cfg, server: u, hc: hc, tok: cfg.Token}
	if cfg.ClientID != "" {
		a.reg = registration{id: cfg.ClientID, secret: cfg.ClientSecret}
	}
	return a, nil
}

// Token returns the current token, or nil.
func (a *Authorizer) Token() *Token {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.tok
}

// Authorization implements client.Authorizer: the bearer token, refreshed
// first if it expired and can be.
func (a *Authorizer) Authorization(ctx context.Context) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.tok == nil {
		return "", nil
	}
	if a.tok.expired() && a.tok.RefreshToken != "" && a.as != nil {
		if err := a.refreshLocked(ctx); err != nil {
			a.tok = nil
			return "", nil // the server's challenge starts a new flow
		}
	}
	return "Bearer " + a.tok.AccessToken, nil
}

// Challenge implements client.Authorizer: it answers a 401 (refreshing the
// token, or running the flow) or a 403 insufficient_scope (running the
// flow again with the scopes asked for).
func (a *Authorizer) Challenge(ctx context.Context, resp *http.Response) error {
	ch, _ := ParseChallenge(resp.Header.Get("WWW-Authenticate"))
	sent := strings.TrimPrefix(resp.Request.Header.Get("Authorization"), "Bearer ")
	a.mu.Lock()
	defer a.mu.Unlock()
	if resp.StatusCode == http.StatusUnauthorized && a.tok != nil && a.tok.AccessToken != sent {
		return nil // another request already renewed the token
	}
	if resp.StatusCode == http.StatusUnauthorized && a.tok != nil && a.tok.AccessToken == sent && a.tok.RefreshToken != "" && a.as != nil {
		if err := a.refreshLocked(ctx); err == nil {
			return nil
		}
	}
	var scopes []string
	if ch.Scope != "" {
		scopes = strings.Fields(ch.Scope)
	}
	if resp.StatusCode == http.StatusForbidden {
		for _, s := range a.scopes {
			if !slices.Contains(scopes, s) {
				scopes = append(scopes, s)
			}
		}
	}
	return a.authorizeLocked(ctx, ch.ResourceMetadata, scopes)
}

// discoverLocked finds the resource and authorization server metadata.
func (a *Authorizer) discoverLocked(ctx context.Context, prmURL string) error {
	if a.as != nil && (prmURL == "" || a.prm != nil) {
		return nil
	}
	prm, err := a.resourceMetadata(ctx, prmURL)
	if err != nil {
		return err
	}
	issuer := origin(a.server)
	if prm != nil && len(prm.AuthorizationServers) > 0 {
		issuer = prm.AuthorizationServers[0]
	}
	as, err := a.serverMetadata(ctx, issuer)
	if err != nil {
		if prm != nil {
			return err
		}
		// 2025-03-26 without metadata: the default endpoints at the
		// server's origin.
		o := origin(a.server)
		as = &ServerMetadata{Issuer: o, AuthorizationEndpoint: o + "/authorize", TokenEndpoint: o + "/token", RegistrationEndpoint: o + "/register"}
	}
	a.prm, a.as, a.legacy = prm, as, prm == nil
	return nil
}

// resource is the RFC 8707 resource indicator: the resource metadata's,
// else the server's canonical URL.
func (a *Authorizer) resource() string {
	if a.prm != nil && a.prm.Resource != "" {
		return a.prm.Resource
	}
	u := *a.server
	u.RawQuery = ""
	return u.String()
}

// chooseScopes picks the scopes: the challenge's, else the resource
// metadata's, else the configured ones; offline_access is added when the
// server offers it and the client can refresh.
func (a *Authorizer) chooseScopes(fromChallenge []string) []string {
	scopes := fromChallenge
	if len(scopes) == 0 && a.prm != nil {
		scopes = a.prm.ScopesSupported
	}
	if len(scopes) == 0 {
		scopes = a.cfg.Scopes
	}
	if len(scopes) > 0 && a.cfg.GrantType == GrantAuthorizationCode &&
		slices.Contains(a.as.ScopesSupported, "offline_access") && !slices.Contains(scopes, "offline_access") {
		scopes = append(slices.Clip(scopes), "offline_access")
	}
	return scopes
}

func (a *Authorizer) authorizeLocked(ctx context.Context, prmURL string, challengeScopes []string) error {
	if err := a.discoverLocked(ctx, prmURL); err != nil {
		return err
	}
	scopes := a.chooseScopes(challengeScopes)
	switch a.cfg.GrantType {
	case GrantClientCredentials:
		return a.clientCredentialsLocked(ctx, scopes)
	case GrantJWTBearer:
		if a.reg.id == "" {
			return ErrNoClient
		}
		return a.jwtBearerLocked(ctx, scopes)
	}
	if err := a.registerLocked(ctx); err != nil {
		return err
	}
	verifier := randomString(32)
	sum := sha256.Sum256([]byte(verifier))
	state := randomString(16)
	q := url.Values{
		"response_type":         {"code"},
		"client_id":             {a.reg.id},
		"redirect_uri":          {a.cfg.RedirectURL},
		"code_challenge":        {base64.RawURLEncoding.EncodeToString(sum[:])},
		"code_challenge_method": {"S256"},
		"state":                 {state},
		"resource":              {a.resource()},
	}
	if len(scopes) > 0 {
		q.Set("scope", strings.Join(scopes, " "))
	}
	authURL := a.as.AuthorizationEndpoint
	if strings.Contains(authURL, "?") {
		authURL += "&" + q.Encode()
	} else {
		authURL += "?" + q.Encode()
	}
	back, err := a.cfg.Browser.Authorize(ctx, authURL, a.cfg.RedirectURL)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrAuthorization, err)
	}
	bq := back.Query()
	if e := bq.Get("error"); e != "" {
		return fmt.Errorf("%w: %s: %s", ErrAuthorization, e, bq.Get("error_description"))
	}
	if bq.Get("state") != state {
		return ErrStateMismatch
	}
	code := bq.Get("code")
	if code == "" {
		return fmt.Errorf("%w: no code in the redirect", ErrAuthorization)
	}
	form := url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {code},
		"redirect_uri":  {a.cfg.RedirectURL},
		"code_verifier": {verifier},
		"resource":      {a.resource()},
	}
	if err := a.tokenRequestLocked(ctx, form); err != nil {
		return err
	}
	a.scopes = scopes
	return nil
}

func (a *Authorizer) clientCredentialsLocked(ctx context.Context, scopes []string) error {
	if a.reg.id == "" {
		return ErrNoClient
	}
	form := url.Values{"grant_type": {GrantClientCredentials}, "resource": {a.resource()}}
	if len(scopes) > 0 {
		form.Set("scope", strings.Join(scopes, " "))
	}
	if err := a.tokenRequestLocked(ctx, form); err != nil {
		return err
	}
	a.scopes = scopes
	return nil
}

func (a *Authorizer) refreshLocked(ctx context.Context) error {
	form := url.Values{
		"grant_type":    {"refresh_token"},
		"refresh_token": {a.tok.RefreshToken},
		"resource":      {a.resource()},
	}
	return a.tokenRequestLocked(ctx, form)
}

// registerLocked gives the client an id: pre-registered, a metadata
// document URL, or dynamic registration.
func (a *Authorizer) registerLocked(ctx context.Context) error {
	if a.reg.id != "" {
		return nil
	}
	if a.as.ClientIDMetadataDocumentSupported && a.cfg.ClientMetadataURL != "" {
		a.reg = registration{id: a.cfg.ClientMetadataURL, method: "none"}
		return nil
	}
	if a.as.RegistrationEndpoint == "" {
		return ErrNoClient
	}
	body, err := codec.Marshal(map[string]any{
		"client_name":    a.cfg.ClientName,
		"redirect_uris":  []string{a.cfg.RedirectURL},
		"grant_types":    []string{"authorization_code", "refresh_token"},
		"response_types": []string{"code"},
	})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.as.RegistrationEndpoint, strings.NewReader(string(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := a.hc.Do(req)
	if err != nil {
		return fmt.Errorf("oauth: registration: %w", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("oauth: registration: status %d: %s", resp.StatusCode, raw)
	}
	var r struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
		AuthMethod   string `json:"token_endpoint_auth_method"`
	}
	if err := codec.Unmarshal(raw, &r); err != nil || r.ClientID == "" {
		return fmt.Errorf("oauth: registration: bad answer: %s", raw)
	}
	a.reg = registration{id: r.ClientID, secret: r.ClientSecret, method: r.AuthMethod}
	return nil
}

// authMethod is how the client authenticates at the token endpoint.
func (a *Authorizer) authMethod() string {
	if a.reg.method != "" {
		return a.reg.method
	}
	if a.cfg.SigningKey != nil && a.reg.id == a.cfg.ClientID {
		return "private_key_jwt"
	}
	if a.reg.secret == "" {
		return "none"
	}
	sup := a.as.TokenEndpointAuthMethodsSupported
	if len(sup) == 0 || slices.Contains(sup, "client_secret_basic") {
		return "client_secret_basic"
	}
	if slices.Contains(sup, "client_secret_post") {
		return "client_secret_post"
	}
	return "client_secret_basic"
}

// tokenRequestLocked posts form to the token endpoint, authenticating the
// client, and stores the token.
func (a *Authorizer) tokenRequestLocked(ctx context.Context, form url.Values) error {
	method := a.authMethod()
	var basicID, basicSecret string
	switch method {
	case "client_secret_post":
		form.Set("client_id", a.reg.id)
		form.Set("client_secret", a.reg.secret)
	case "client_secret_basic":
		basicID, basicSecret = a.reg.id, a.reg.secret
	case "private_key_jwt":
		assertion, err := a.cfg.SigningKey.clientAssertion(a.reg.id, a.assertionAudience())
		if err != nil {
			return err
		}
		form.Set("client_id", a.reg.id)
		form.Set("client_assertion_type", ClientAssertionJWT)
		form.Set("client_assertion", assertion)
	default:
		form.Set("client_id", a.reg.id)
	}
	r, err := a.postToken(ctx, a.as.TokenEndpoint, form, basicID, basicSecret)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrTokenRequest, err)
	}
	t := &Token{AccessToken: r.AccessToken, TokenType: r.TokenType, RefreshToken: r.RefreshToken, Scope: r.Scope}
	if s := strings.Trim(string(r.ExpiresIn), `"`); s != "" && s != "null" {
		if n, err := strconv.ParseFloat(s, 64); err == nil && n > 0 {
			t.Expiry = time.Now().Add(time.Duration(n * float64(time.Second)))
		}
	}
	if t.RefreshToken == "" && a.tok != nil && form.Get("grant_type") == "refresh_token" {
		t.RefreshToken = a.tok.RefreshToken
	}
	a.tok = t
	return nil
}

// tokenResponse is a token endpoint's answer (RFC 6749 §5.1, RFC 8693
// §2.2.1).
type tokenResponse struct {
	AccessToken     string        `json:"access_token"`
	TokenType       string        `json:"token_type"`
	IssuedTokenType string        `json:"issued_token_type"`
	RefreshToken    string        `json:"refresh_token"`
	ExpiresIn       codec.RawJSON `json:"expires_in"`
	Scope           string        `json:"scope"`
}

// postToken posts form to a token endpoint, with HTTP Basic client
// authentication when basicID is set, and reads a token response.
func (a *Authorizer) postToken(ctx context.Context, endpoint string, form url.Values, basicID, basicSecret string) (*tokenResponse, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if basicID != "" {
		req.SetBasicAuth(url.QueryEscape(basicID), url.QueryEscape(basicSecret))
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, raw)
	}
	var r tokenResponse
	if err := codec.Unmarshal(raw, &r); err != nil || r.AccessToken == "" {
		return nil, fmt.Errorf("bad answer: %s", raw)
	}
	return &r, nil
}

func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// HeadlessBrowser "visits" the authorization URL with HTTP GETs, following
// redirects until one points under the redirect URL. It serves
// authorization servers that grant without a user interaction.
type HeadlessBrowser struct {
	// Client sends the GETs (its redirect policy is not used); nil means
	// http.DefaultClient's transport.
	Client *http.Client
}

// Authorize implements Browser.
func (b *HeadlessBrowser) Authorize(ctx context.Context, authURL, redirectURL string) (*url.URL, error) {
	hc := http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if b.Client != nil {
		hc.Transport = b.Client.Transport
		hc.Jar = b.Client.Jar
	}
	redirect, err := url.Parse(redirectURL)
	if err != nil {
		return nil, err
	}
	next := authURL
	for range 10 {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, next, nil)
		if err != nil {
			return nil, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		resp.Body.Close()
		loc := resp.Header.Get("Location")
		if resp.StatusCode/100 != 3 || loc == "" {
			return nil, fmt.Errorf("%w (status %d at %s)", ErrNeedsInteraction, resp.StatusCode, next)
		}
		u, err := req.URL.Parse(loc)
		if err != nil {
			return nil, err
		}
		if u.Scheme == redirect.Scheme && u.Host == redirect.Host && u.Path == redirect.Path {
			return u, nil
		}
		next = u.String()
	}
	return nil, fmt.Errorf("%w: too many redirects", ErrAuthorization)
}

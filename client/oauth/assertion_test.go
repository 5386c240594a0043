package oauth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func pemOf(t *testing.T, typ string, der []byte) []byte {
	t.Helper()
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func pkcs8(t *testing.T, key any) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return pemOf(t, "PRIVATE KEY", der)
}

func TestParseSigningKey(t *testing.T) {
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	ec384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	require.NoError(t, err)
	rs, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	sec1, err := x509.MarshalECPrivateKey(ec)
	require.NoError(t, err)

	tests := []struct {
		name    string
		pem     []byte
		alg     string
		wantAlg string
		wantErr bool
	}{
		{"pkcs8 P-256", pkcs8(t, ec), "ES256", "ES256", false},
		{"pkcs8 P-256 default alg", pkcs8(t, ec), "", "ES256", false},
		{"pkcs8 P-384 default alg", pkcs8(t, ec384), "", "ES384", false},
		{"sec1 P-256", pemOf(t, "EC PRIVATE KEY", sec1), "", "ES256", false},
		{"pkcs1 RSA", pemOf(t, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rs)), "", "RS256", false},
		{"pkcs8 RSA PS256", pkcs8(t, rs), "PS256", "PS256", false},
		{"pkcs8 Ed25519", pkcs8(t, ed), "", "EdDSA", false},
		{"EC key, RSA alg", pkcs8(t, ec), "RS256", "", true},
		{"unknown alg", pkcs8(t, ec), "XX999", "", true},
		{"alg none", pkcs8(t, ec), "none", "", true},
		{"not PEM", []byte("nope"), "", "", true},
		{"bad DER", pemOf(t, "PRIVATE KEY", []byte{1, 2, 3}), "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := ParseSigningKey(tt.pem, tt.alg)
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			m, err := k.method()
			require.NoError(t, err)
			assert.Equal(t, tt.wantAlg, m.Alg())
			s, err := k.clientAssertion("c", []string{"https://as.example"})
			require.NoError(t, err)
			_, err = jwt.Parse(s, func(*jwt.Token) (any, error) { return k.Key.Public(), nil }, jwt.WithValidMethods([]string{tt.wantAlg}))
			require.NoError(t, err)
		})
	}
}

// verifyAssertion checks a private_key_jwt assertion as an authorization
// server does (RFC 7523 §3) and returns its claims.
func verifyAssertion(t *testing.T, s string, pub crypto.PublicKey, clientID, audience string) jwt.RegisteredClaims {
	t.Helper()
	var c jwt.RegisteredClaims
	_, err := jwt.ParseWithClaims(s, &c, func(*jwt.Token) (any, error) { return pub, nil },
		jwt.WithValidMethods([]string{"ES256"}), jwt.WithAudience(audience), jwt.WithIssuer(clientID),
		jwt.WithSubject(clientID), jwt.WithExpirationRequired(), jwt.WithIssuedAt())
	require.NoError(t, err)
	return c
}

func TestClientCredentialsPrivateKeyJWT(t *testing.T) {
	w := newWorld(t)
	w.prmScopes = []string{"svc"}
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	key, err := ParseSigningKey(pkcs8(t, ec), "ES256")
	require.NoError(t, err)
	key.KeyID = "k1"
	a, err := New(w.rs.URL+"/mcp", Config{GrantType: GrantClientCredentials, ClientID: "m2m", SigningKey: key})
	require.NoError(t, err)
	require.Equal(t, 200, do(t, a, w.rs.URL+"/mcp"))

	w.mu.Lock()
	defer w.mu.Unlock()
	assert.Empty(t, w.authzReqs)
	require.Len(t, w.tokenReqs, 1)
	f := w.tokenReqs[0]
	assert.Equal(t, "client_credentials", f.Get("grant_type"))
	assert.Empty(t, f.Get("basic"), "no secret: no Basic auth")
	assert.Empty(t, f.Get("client_secret"))
	assert.Equal(t, "m2m", f.Get("client_id"))
	assert.Equal(t, ClientAssertionJWT, f.Get("client_assertion_type"))
	assert.Equal(t, "svc", f.Get("scope"))
	assert.Equal(t, w.rs.URL+"/mcp", f.Get("resource"))
	// Either audience an authorization server may check is accepted.
	verifyAssertion(t, f.Get("client_assertion"), &ec.PublicKey, "m2m", w.as.URL+"/tenant")
	c := verifyAssertion(t, f.Get("client_assertion"), &ec.PublicKey, "m2m", w.as.URL+"/tenant/token")
	assert.NotEmpty(t, c.ID, "jti")
	assert.WithinDuration(t, time.Now().Add(5*time.Minute), c.ExpiresAt.Time, time.Minute)
	tok, _, err := jwt.NewParser().ParseUnverified(f.Get("client_assertion"), &jwt.RegisteredClaims{})
	require.NoError(t, err)
	assert.Equal(t, "k1", tok.Header["kid"])
}

// idp is a fake enterprise IdP: OpenID discovery and an RFC 8693 token
// endpoint that trades an ID token for an ID-JAG.
type idp struct {
	srv      *httptest.Server
	key      *ecdsa.PrivateKey
	idToken  string
	badType  bool // answer with another issued_token_type
	mu       sync.Mutex
	requests []url.Values
}

func newIdP(t *testing.T) *idp {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	p := &idp{key: key, idToken: "user-id-token"}
	p.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/openid-configuration":
			writeJSON(rw, 200, map[string]any{"issuer": p.srv.URL, "authorization_endpoint": p.srv.URL + "/authorize", "token_endpoint": p.srv.URL + "/token"})
		case "/token":
			_ = r.ParseForm()
			f := r.PostForm
			if id, secret, ok := r.BasicAuth(); ok {
				f.Set("basic", id+":"+secret)
			}
			p.mu.Lock()
			p.requests = append(p.requests, f)
			p.mu.Unlock()
			if f.Get("grant_type") != GrantTokenExchange || f.Get("subject_token") != p.idToken ||
				f.Get("subject_token_type") != TokenTypeIDToken || f.Get("requested_token_type") != TokenTypeIDJAG {
				writeJSON(rw, 400, map[string]any{"error": "invalid_request"})
				return
			}
			jag := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{
				"iss": p.srv.URL, "sub": "user", "aud": f.Get("audience"), "resource": f.Get("resource"),
				"client_id": "xaa-client", "exp": time.Now().Add(5 * time.Minute).Unix(), "jti": "j1",
			})
			jag.Header["typ"] = "oauth-id-jag+jwt"
			s, err := jag.SignedString(p.key)
			if err != nil {
				writeJSON(rw, 500, map[string]any{"error": "server_error"})
				return
			}
			typ := TokenTypeIDJAG
			if p.badType {
				typ = "urn:ietf:params:oauth:token-type:access_token"
			}
			writeJSON(rw, 200, map[string]any{"access_token": s, "issued_token_type": typ, "token_type": "N_A"})
		default:
			http.NotFound(rw, r)
		}
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func TestEnterpriseManagedAuthorization(t *testing.T) {
	for _, discover := range []bool{false, true} {
		t.Run(map[bool]string{false: "token endpoint", true: "discovered"}[discover], func(t *testing.T) {
			w := newWorld(t)
			w.prmScopes = []string{"chat.read"}
			p := newIdP(t)
			ip := &IdentityProvider{Issuer: p.srv.URL, ClientID: "idp-client", IDToken: p.idToken}
			if !discover {
				ip.TokenEndpoint = p.srv.URL + "/token"
				ip.ClientSecret = "idp-secret"
			}
			a, err := New(w.rs.URL+"/mcp", Config{ClientID: "xaa-client", ClientSecret: "xaa-secret", IdentityProvider: ip})
			require.NoError(t, err)
			require.Equal(t, 200, do(t, a, w.rs.URL+"/mcp"))

			p.mu.Lock()
			require.Len(t, p.requests, 1)
			x := p.requests[0]
			p.mu.Unlock()
			assert.Equal(t, w.as.URL+"/tenant", x.Get("audience"), "the ID-JAG is for the MCP authorization server")
			assert.Equal(t, w.rs.URL+"/mcp", x.Get("resource"))
			assert.Equal(t, "chat.read", x.Get("scope"))
			if discover {
				assert.Equal(t, "idp-client", x.Get("client_id"))
				assert.Empty(t, x.Get("basic"))
			} else {
				assert.Equal(t, "idp-client:idp-secret", x.Get("basic"))
				assert.Empty(t, x.Get("client_id"))
			}

			w.mu.Lock()
			defer w.mu.Unlock()
			assert.Empty(t, w.authzReqs, "no browser")
			assert.Zero(t, w.registered)
			require.Len(t, w.tokenReqs, 1)
			f := w.tokenReqs[0]
			assert.Equal(t, GrantJWTBearer, f.Get("grant_type"))
			assert.Equal(t, "xaa-client:xaa-secret", f.Get("basic"))
			assert.Equal(t, "chat.read", f.Get("scope"))
			var c jwt.MapClaims
			tok, err := jwt.ParseWithClaims(f.Get("assertion"), &c, func(*jwt.Token) (any, error) { return &p.key.PublicKey, nil },
				jwt.WithAudience(w.as.URL+"/tenant"))
			require.NoError(t, err)
			assert.Equal(t, "oauth-id-jag+jwt", tok.Header["typ"])
			assert.Equal(t, w.rs.URL+"/mcp", c["resource"])
		})
	}
}

func TestEnterpriseManagedAuthorizationErrors(t *testing.T) {
	w := newWorld(t)
	w.prmInHeader = false // the challenge below names no metadata: well-known discovery
	p := newIdP(t)
	ctx := context.Background()

	p.badType = true
	a, err := New(w.rs.URL+"/mcp", Config{ClientID: "c", ClientSecret: "s",
		IdentityProvider: &IdentityProvider{TokenEndpoint: p.srv.URL + "/token", IDToken: p.idToken}})
	require.NoError(t, err)
	resp := &http.Response{StatusCode: 401, Header: http.Header{}, Request: &http.Request{Header: http.Header{}}}
	require.ErrorIs(t, a.Challenge(ctx, resp), ErrTokenExchange)
	p.mu.Lock()
	require.Len(t, p.requests, 1)
	assert.Equal(t, w.as.URL+"/tenant", p.requests[0].Get("audience"), "the authorization server was discovered")
	p.mu.Unlock()

	p.badType = false
	a, err = New(w.rs.URL+"/mcp", Config{ClientID: "c", ClientSecret: "s",
		IdentityProvider: &IdentityProvider{TokenEndpoint: p.srv.URL + "/token", IDToken: "someone-else"}})
	require.NoError(t, err)
	require.ErrorIs(t, a.Challenge(ctx, resp), ErrTokenExchange, "the IdP refuses the identity assertion")

	a, err = New(w.rs.URL+"/mcp", Config{IdentityProvider: &IdentityProvider{TokenEndpoint: p.srv.URL + "/token", IDToken: p.idToken}})
	require.NoError(t, err)
	require.ErrorIs(t, a.Challenge(ctx, resp), ErrNoClient, "the JWT bearer grant needs a client id at the authorization server")

	w.mu.Lock()
	defer w.mu.Unlock()
	assert.Empty(t, w.tokenReqs, "no grant reached the authorization server")
}

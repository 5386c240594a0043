package auth_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpedge/mcpedge/auth"
	"github.com/mcpedge/mcpedge/internal/authtest"
)

const (
	aud = "http://127.0.0.1:7401/mcp"
	iss = "https://as.example.com"
)

func newVerifier(t testing.TB, is *authtest.Issuer, mod func(*auth.Config)) *auth.Verifier {
	t.Helper()
	cfg := auth.Config{Audience: aud, Issuer: iss, JWKSURL: is.URL(), Scopes: []string{"mcp"},
		FetchTimeout: 500 * time.Millisecond, UnknownKIDInterval: 2 * time.Second}
	if mod != nil {
		mod(&cfg)
	}
	v, err := auth.New(cfg)
	require.NoError(t, err)
	t.Cleanup(v.Close)
	return v
}

// status returns the HTTP status err maps to (200 for nil) and its code.
func status(err error) (int, string) {
	if err == nil {
		return 200, ""
	}
	var e *auth.Error
	if !errors.As(err, &e) {
		return 0, err.Error()
	}
	return e.Status, e.Code
}

func TestJWT(t *testing.T) {
	is := authtest.NewIssuer()
	defer is.Server.Close()
	v := newVerifier(t, is, nil)
	now := time.Now()
	with := func(k string, val any) authtest.Claims {
		c := authtest.Good(aud, iss, "mcp files:read")
		if val == nil {
			delete(c, k)
		} else {
			c[k] = val
		}
		return c
	}
	none := func() string {
		h := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT","kid":"rsa1"}`))
		b, _ := json.Marshal(authtest.Good(aud, iss, "mcp"))
		return h + "." + base64.RawURLEncoding.EncodeToString(b) + "."
	}
	hmacConfusion := func() string {
		tk := jwt.NewWithClaims(jwt.SigningMethodHS256, authtest.Good(aud, iss, "mcp"))
		tk.Header["kid"] = "rsa1"
		s, _ := tk.SignedString(authtest.RSAPublicDER())
		return s
	}
	for _, tc := range []struct {
		name   string
		token  string
		status int
		desc   string
	}{
		{"rsa", authtest.Sign("rsa1", "RS256", authtest.Good(aud, iss, "mcp files:read")), 200, ""},
		{"rsa-ps256", authtest.Sign("rsa1", "PS256", authtest.Good(aud, iss, "mcp")), 200, ""},
		{"ec", authtest.Sign("ec1", "ES256", authtest.Good(aud, iss, "mcp")), 200, ""},
		{"aud-list", authtest.Sign("rsa1", "RS256", with("aud", []string{"other", aud})), 200, ""},
		{"expired-in-skew", authtest.Sign("rsa1", "RS256", with("exp", now.Add(-10*time.Second).Unix())), 200, ""},
		{"expired", authtest.Sign("rsa1", "RS256", with("exp", now.Add(-2*time.Minute).Unix())), 401, "token expired"},
		{"no-exp", authtest.Sign("rsa1", "RS256", with("exp", nil)), 401, "required claim"},
		{"nbf-future", authtest.Sign("rsa1", "RS256", with("nbf", now.Add(2*time.Minute).Unix())), 401, "not valid yet"},
		{"nbf-in-skew", authtest.Sign("rsa1", "RS256", with("nbf", now.Add(10*time.Second).Unix())), 200, ""},
		{"wrong-aud", authtest.Sign("rsa1", "RS256", with("aud", "http://other/mcp")), 401, "not issued for this resource"},
		{"no-aud", authtest.Sign("rsa1", "RS256", with("aud", nil)), 401, "required claim"},
		{"wrong-iss", authtest.Sign("rsa1", "RS256", with("iss", "https://evil")), 401, "unexpected issuer"},
		{"missing-scope", authtest.Sign("rsa1", "RS256", with("scope", "files:read")), 403, "requires mcp"},
		{"alg-none", none(), 401, ""},
		{"hs256-with-public-key", hmacConfusion(), 401, ""},
		{"ec-key-rs-alg", authtest.Sign("rsa1", "RS256", authtest.Good(aud, iss, "mcp"))[:0] + resign("ec1", "RS256"), 401, ""},
		{"bad-signature", authtest.Sign("rsa1", "RS256", authtest.Good(aud, iss, "mcp")) + "A", 401, ""},
		{"garbage", "a.b.c", 401, "malformed"},
		{"too-long", strings.Repeat("a", auth.MaxTokenLen+1), 401, "too long"},
		{"empty", "", 401, "authorization required"},
		{"unknown-kid", authtest.Sign("rsa2", "RS256", authtest.Good(aud, iss, "mcp")), 401, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info, err := v.Verify(context.Background(), tc.token)
			st, _ := status(err)
			assert.Equal(t, tc.status, st, "%v", err)
			if tc.desc != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.desc)
			}
			if err != nil && tc.token != "" {
				assert.NotContains(t, err.Error(), tc.token)
			}
			if tc.status == 200 {
				require.NotNil(t, info)
				assert.Equal(t, "alice", info.Subject)
				assert.Equal(t, "app", info.ClientID)
				assert.True(t, info.HasScope("mcp"))
				assert.Empty(t, info.Token, "the raw token is kept only when asked")
			}
		})
	}
}

// resign makes a token whose kid names the EC key but whose alg is RS256:
// algorithm confusion between key types.
func resign(kid, alg string) string {
	t := jwt.NewWithClaims(jwt.GetSigningMethod(alg), authtest.Good(aud, iss, "mcp"))
	t.Header["kid"] = kid
	s, _ := t.SignedString(authtest.Key("rsa1"))
	return s
}

func TestRotationAndUnknownKID(t *testing.T) {
	is := authtest.NewIssuer()
	defer is.Server.Close()
	v := newVerifier(t, is, nil)
	first := is.Fetches.Load()
	require.EqualValues(t, 1, first)

	tok := authtest.Sign("rsa2", "RS256", authtest.Good(aud, iss, "mcp"))
	is.Rotate()
	_, err := v.Verify(context.Background(), tok) // unknown kid: one refetch finds it
	require.NoError(t, err)
	assert.EqualValues(t, 2, is.Fetches.Load())

	// Another unknown kid right after: refused at once, no fetch.
	bogus := jwt.NewWithClaims(jwt.SigningMethodRS256, authtest.Good(aud, iss, "mcp"))
	bogus.Header["kid"] = "nope"
	s, _ := bogus.SignedString(authtest.Key("rsa1"))
	for range 5 {
		start := time.Now()
		_, err = v.Verify(context.Background(), s)
		st, _ := status(err)
		assert.Equal(t, 401, st)
		assert.Less(t, time.Since(start), 200*time.Millisecond)
	}
	assert.EqualValues(t, 2, is.Fetches.Load(), "unknown kids refetch at most once per interval")
}

func TestJWKSDown(t *testing.T) {
	for _, mode := range []string{"fail", "garbage", "slow"} {
		t.Run(mode, func(t *testing.T) {
			is := authtest.NewIssuer()
			defer is.Server.Close()
			v := newVerifier(t, is, func(c *auth.Config) { c.RefreshInterval = 50 * time.Millisecond; c.CacheTTL = -1 })
			good := authtest.Sign("rsa1", "RS256", authtest.Good(aud, iss, "mcp"))
			_, err := v.Verify(context.Background(), good)
			require.NoError(t, err)
			is.SetMode(mode)
			time.Sleep(300 * time.Millisecond) // background refreshes fail
			_, err = v.Verify(context.Background(), good)
			require.NoError(t, err, "cached keys keep working")
			start := time.Now()
			_, err = v.Verify(context.Background(), authtest.Sign("rsa2", "RS256", authtest.Good(aud, iss, "mcp")))
			st, _ := status(err)
			assert.Equal(t, 401, st)
			assert.Less(t, time.Since(start), 2*time.Second, "bounded by the fetch timeout")
		})
	}
	t.Run("unreachable-at-start", func(t *testing.T) {
		is := authtest.NewIssuer()
		is.Server.Close()
		v := newVerifier(t, is, nil)
		_, err := v.Verify(context.Background(), authtest.Sign("rsa1", "RS256", authtest.Good(aud, iss, "mcp")))
		st, _ := status(err)
		assert.Equal(t, 401, st)
	})
}

func TestAlgsPinned(t *testing.T) {
	_, err := auth.New(auth.Config{Audience: aud, JWKSURL: "http://127.0.0.1:1/", Algs: []string{"HS256"}})
	require.Error(t, err)
	_, err = auth.New(auth.Config{Audience: aud, JWKSURL: "http://127.0.0.1:1/", Algs: []string{"none"}})
	require.Error(t, err)
	// Only ES256 allowed: an RS256 token is refused.
	is := authtest.NewIssuer()
	defer is.Server.Close()
	v := newVerifier(t, is, func(c *auth.Config) { c.Algs = []string{"ES256"} })
	_, err = v.Verify(context.Background(), authtest.Sign("rsa1", "RS256", authtest.Good(aud, iss, "mcp")))
	st, _ := status(err)
	assert.Equal(t, 401, st)
	_, err = v.Verify(context.Background(), authtest.Sign("ec1", "ES256", authtest.Good(aud, iss, "mcp")))
	assert.NoError(t, err)
}

func TestKeepToken(t *testing.T) {
	is := authtest.NewIssuer()
	defer is.Server.Close()
	v := newVerifier(t, is, func(c *auth.Config) { c.KeepToken = true })
	tok := authtest.Sign("rsa1", "RS256", authtest.Good(aud, iss, "mcp"))
	info, err := v.Verify(context.Background(), tok)
	require.NoError(t, err)
	assert.Equal(t, tok, info.Token)
}

func TestStaticTokens(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tokens")
	require.NoError(t, os.WriteFile(file, []byte("# comment\nadmin-token\n\nreader-token files:read mcp\n"), 0o600))
	cfg := auth.Config{Audience: aud, TokenFile: file, Scopes: []string{"mcp"}}
	v, err := auth.New(cfg)
	require.NoError(t, err)
	defer v.Close()

	info, err := v.Verify(context.Background(), "admin-token")
	require.NoError(t, err)
	assert.Equal(t, "static:2", info.Subject)
	assert.True(t, info.HasScope("anything"))
	info, err = v.Verify(context.Background(), "reader-token")
	require.NoError(t, err)
	assert.True(t, info.HasScope("files:read"))
	assert.False(t, info.HasScope("files:write"))
	for _, bad := range []string{"admin-toke", "admin-token ", "ADMIN-TOKEN", "x"} {
		_, err = v.Verify(context.Background(), bad)
		st, _ := status(err)
		assert.Equal(t, 401, st, bad)
	}

	// Reload with new file contents: the old token stops working.
	require.NoError(t, os.WriteFile(file, []byte("new-token\n"), 0o600))
	require.NoError(t, v.Reload(cfg))
	_, err = v.Verify(context.Background(), "admin-token")
	assert.Error(t, err)
	_, err = v.Verify(context.Background(), "new-token")
	assert.NoError(t, err)
	require.NoError(t, v.SetTokens([]string{"other"}))
	_, err = v.Verify(context.Background(), "new-token")
	assert.Error(t, err)
	_, err = v.Verify(context.Background(), "other")
	assert.NoError(t, err)

	// A failed reload keeps the old configuration.
	bad := cfg
	bad.TokenFile = filepath.Join(dir, "missing")
	err = v.Reload(bad)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "other")
	_, err = v.Verify(context.Background(), "other")
	assert.NoError(t, err)
}

func TestIntrospection(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		id, secret, ok := r.BasicAuth()
		if !ok || id != "rs" || secret != "s3cret" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		exp := time.Now().Add(time.Hour).Unix()
		switch r.PostForm.Get("token") {
		case "opaque-good":
			_ = json.NewEncoder(w).Encode(map[string]any{"active": true, "scope": "mcp files:read", "sub": "bob", "client_id": "app", "exp": exp, "aud": aud, "iss": iss})
		case "opaque-noscope":
			_ = json.NewEncoder(w).Encode(map[string]any{"active": true, "scope": "files:read", "sub": "bob", "exp": exp})
		case "opaque-otheraud":
			_ = json.NewEncoder(w).Encode(map[string]any{"active": true, "scope": "mcp", "sub": "bob", "exp": exp, "aud": []string{"http://other"}})
		case "opaque-expired":
			_ = json.NewEncoder(w).Encode(map[string]any{"active": true, "scope": "mcp", "sub": "bob", "exp": time.Now().Add(-time.Hour).Unix()})
		default:
			_ = json.NewEncoder(w).Encode(map[string]any{"active": false})
		}
	}))
	defer srv.Close()
	cfg := auth.Config{Audience: aud, Issuer: iss, Scopes: []string{"mcp"}, IntrospectionURL: srv.URL, ClientID: "rs", ClientSecret: "s3cret"}
	v, err := auth.New(cfg)
	require.NoError(t, err)
	defer v.Close()

	info, err := v.Verify(context.Background(), "opaque-good")
	require.NoError(t, err)
	assert.Equal(t, "bob", info.Subject)
	assert.True(t, info.HasScope("files:read"))
	_, err = v.Verify(context.Background(), "opaque-good")
	require.NoError(t, err)
	assert.EqualValues(t, 1, calls.Load(), "cached by token hash")

	for tok, want := range map[string]int{"opaque-noscope": 403, "opaque-otheraud": 401, "opaque-expired": 401, "opaque-revoked": 401} {
		_, err := v.Verify(context.Background(), tok)
		st, _ := status(err)
		assert.Equal(t, want, st, tok)
	}

	// Wrong client secret: the endpoint refuses, so does the verifier.
	cfg.ClientSecret = "wrong"
	require.NoError(t, v.Reload(cfg))
	_, err = v.Verify(context.Background(), "opaque-good")
	st, _ := status(err)
	assert.Equal(t, 401, st)
}

func TestMetadataAndChallenge(t *testing.T) {
	v, err := auth.New(auth.Config{Audience: aud, Issuer: iss, Tokens: []string{"t"}, Scopes: []string{"mcp"}, ScopesSupported: []string{"mcp", "files:read"}})
	require.NoError(t, err)
	defer v.Close()
	assert.Equal(t, "http://127.0.0.1:7401/.well-known/oauth-protected-resource/mcp", v.ResourceMetadataURL())
	var doc map[string]any
	require.NoError(t, json.Unmarshal(v.Metadata(), &doc))
	assert.Equal(t, aud, doc["resource"])
	assert.Equal(t, []any{iss}, doc["authorization_servers"])
	assert.Equal(t, []any{"mcp", "files:read"}, doc["scopes_supported"])
	assert.Equal(t, []any{"header"}, doc["bearer_methods_supported"])

	assert.Equal(t, `Bearer scope="mcp", resource_metadata="http://127.0.0.1:7401/.well-known/oauth-protected-resource/mcp"`, v.Challenge(auth.ErrNoToken))
	_, err = v.Verify(context.Background(), "nope")
	var e *auth.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, `Bearer error="invalid_token", error_description="unknown token", resource_metadata="http://127.0.0.1:7401/.well-known/oauth-protected-resource/mcp"`, v.Challenge(e))
	assert.Equal(t, `Bearer error="insufficient_scope", error_description="insufficient scope: requires files:write", scope="files:write", resource_metadata="http://127.0.0.1:7401/.well-known/oauth-protected-resource/mcp"`,
		v.Challenge(auth.InsufficientScope([]string{"files:write"})))

	_, err = auth.New(auth.Config{Audience: aud})
	assert.Error(t, err, "no way to verify")
	_, err = auth.New(auth.Config{Tokens: []string{"t"}})
	assert.Error(t, err, "no audience")
}

func TestContext(t *testing.T) {
	_, ok := auth.FromContext(context.Background())
	assert.False(t, ok)
	info := &auth.Info{Subject: "s"}
	got, ok := auth.FromContext(auth.NewContext(context.Background(), info))
	assert.True(t, ok)
	assert.Same(t, info, got)
}

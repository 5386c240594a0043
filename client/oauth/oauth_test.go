package oauth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseChallenge(t *testing.T) {
	tests := []struct {
		in   string
		want Challenge
		ok   bool
	}{
		{`Bearer resource_metadata="https://x/.well-known/oauth-protected-resource"`, Challenge{ResourceMetadata: "https://x/.well-known/oauth-protected-resource"}, true},
		{`Bearer error="insufficient_scope", scope="a b", resource_metadata="u", error_description="need \"more\""`,
			Challenge{Error: "insufficient_scope", Scope: "a b", ResourceMetadata: "u", ErrorDescription: `need "more"`}, true},
		{`bearer error=invalid_token, scope=read`, Challenge{Error: "invalid_token", Scope: "read"}, true},
		{`Basic realm="x"`, Challenge{}, false},
		{`Basic realm="x", Bearer scope="s"`, Challenge{Scope: "s"}, true},
		{`Bearer`, Challenge{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := ParseChallenge(tt.in)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

// world is a fake MCP resource server and authorization server.
type world struct {
	t  *testing.T
	rs *httptest.Server // the MCP server, at /mcp
	as *httptest.Server // the authorization server, issuer /tenant

	// Settings.
	prmInHeader   bool
	prmResource   string // overrides the metadata's resource
	prmScopes     []string
	needScopes    map[string][]string // path → scopes a request needs
	cimd          bool
	expiresIn     int
	asScopes      []string
	challengeScop string

	mu         sync.Mutex
	challenge  string // the code_challenge of the last authorization
	authzReqs  []url.Values
	tokenReqs  []url.Values
	registered int
	tokens     map[string][]string // token → scopes
	n          int
}

func newWorld(t *testing.T) *world {
	w := &world{t: t, prmInHeader: true, tokens: map[string][]string{}, expiresIn: 3600}
	w.as = httptest.NewServer(http.HandlerFunc(w.serveAS))
	w.rs = httptest.NewServer(http.HandlerFunc(w.serveRS))
	t.Cleanup(w.as.Close)
	t.Cleanup(w.rs.Close)
	return w
}

func writeJSON(rw http.ResponseWriter, status int, v any) {
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(status)
	_ = json.NewEncoder(rw).Encode(v)
}

func (w *world) serveRS(rw http.ResponseWriter, r *http.Request) {
	prm := w.rs.URL + "/custom/prm.json"
	switch r.URL.Path {
	case "/custom/prm.json", "/.well-known/oauth-protected-resource/mcp":
		if r.URL.Path == "/custom/prm.json" && !w.prmInHeader || r.URL.Path != "/custom/prm.json" && w.prmInHeader {
			http.NotFound(rw, r)
			return
		}
		res := w.rs.URL + "/mcp"
		if w.prmResource != "" {
			res = w.prmResource
		}
		m := map[string]any{"resource": res, "authorization_servers": []string{w.as.URL + "/tenant"}}
		if w.prmScopes != nil {
			m["scopes_supported"] = w.prmScopes
		}
		writeJSON(rw, 200, m)
		return
	case "/mcp":
	default:
		http.NotFound(rw, r)
		return
	}
	hdr := "Bearer"
	if w.prmInHeader {
		hdr += fmt.Sprintf(` resource_metadata="%s"`, prm)
	}
	if w.challengeScop != "" {
		hdr += fmt.Sprintf(`, scope="%s"`, w.challengeScop)
	}
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	w.mu.Lock()
	scopes, ok := w.tokens[tok]
	w.mu.Unlock()
	if !ok {
		rw.Header().Set("WWW-Authenticate", hdr)
		rw.WriteHeader(http.StatusUnauthorized)
		return
	}
	for _, need := range w.needScopes[r.URL.Query().Get("op")] {
		if !contains(scopes, need) {
			rw.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="insufficient_scope", scope="%s"`, strings.Join(w.needScopes[r.URL.Query().Get("op")], " ")))
			rw.WriteHeader(http.StatusForbidden)
			return
		}
	}
	rw.WriteHeader(http.StatusOK)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (w *world) serveAS(rw http.ResponseWriter, r *http.Request) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch r.URL.Path {
	case "/.well-known/oauth-authorization-server/tenant":
		m := map[string]any{
			"issuer":                                w.as.URL + "/tenant",
			"authorization_endpoint":                w.as.URL + "/tenant/authorize",
			"token_endpoint":                        w.as.URL + "/tenant/token",
			"registration_endpoint":                 w.as.URL + "/tenant/register",
			"code_challenge_methods_supported":      []string{"S256"},
			"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "none"},
		}
		if w.cimd {
			m["client_id_metadata_document_supported"] = true
		}
		if w.asScopes != nil {
			m["scopes_supported"] = w.asScopes
		}
		writeJSON(rw, 200, m)
	case "/tenant/register":
		w.registered++
		writeJSON(rw, 201, map[string]any{"client_id": "dyn-client", "client_secret": "dyn-secret"})
	case "/tenant/authorize":
		q := r.URL.Query()
		w.authzReqs = append(w.authzReqs, q)
		w.challenge = q.Get("code_challenge")
		u, _ := url.Parse(q.Get("redirect_uri"))
		back := u.Query()
		back.Set("code", "code-"+q.Get("scope"))
		back.Set("state", q.Get("state"))
		u.RawQuery = back.Encode()
		http.Redirect(rw, r, u.String(), http.StatusFound)
	case "/tenant/token":
		_ = r.ParseForm()
		f := r.PostForm
		if id, secret, ok := r.BasicAuth(); ok {
			f.Set("basic", id+":"+secret)
		}
		w.tokenReqs = append(w.tokenReqs, f)
		var scopes []string
		switch f.Get("grant_type") {
		case "authorization_code":
			sum := sha256.Sum256([]byte(f.Get("code_verifier")))
			if base64.RawURLEncoding.EncodeToString(sum[:]) != w.challenge {
				writeJSON(rw, 400, map[string]any{"error": "invalid_grant", "error_description": "PKCE"})
				return
			}
			scopes = strings.Fields(strings.TrimPrefix(f.Get("code"), "code-"))
		case "refresh_token":
			if !strings.HasPrefix(f.Get("refresh_token"), "refresh-") {
				writeJSON(rw, 400, map[string]any{"error": "invalid_grant"})
				return
			}
		case "client_credentials", GrantJWTBearer:
			scopes = strings.Fields(f.Get("scope"))
		}
		w.n++
		tok := fmt.Sprintf("tok-%d", w.n)
		w.tokens[tok] = scopes
		writeJSON(rw, 200, map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": w.expiresIn, "refresh_token": fmt.Sprintf("refresh-%d", w.n)})
	default:
		http.NotFound(rw, r)
	}
}

// do sends a GET to the resource server as the HTTP transport does: up
// to three challenge rounds.
func do(t *testing.T, a *Authorizer, u string) int {
	ctx := context.Background()
	for range 4 {
		h, err := a.Authorization(ctx)
		require.NoError(t, err)
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		if h != "" {
			req.Header.Set("Authorization", h)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		if resp.StatusCode != 401 && resp.StatusCode != 403 {
			return resp.StatusCode
		}
		if err := a.Challenge(ctx, resp); err != nil {
			t.Logf("challenge: %v", err)
			return resp.StatusCode
		}
	}
	return 0
}

func TestAuthorizationCodeFlow(t *testing.T) {
	for _, inHeader := range []bool{true, false} {
		t.Run(fmt.Sprintf("metadata in header %v", inHeader), func(t *testing.T) {
			w := newWorld(t)
			w.prmInHeader = inHeader
			w.challengeScop = "mcp:read"
			a, err := New(w.rs.URL+"/mcp", Config{})
			require.NoError(t, err)
			require.Equal(t, 200, do(t, a, w.rs.URL+"/mcp"))
			require.Equal(t, 200, do(t, a, w.rs.URL+"/mcp"), "the token is reused")

			w.mu.Lock()
			defer w.mu.Unlock()
			require.Len(t, w.authzReqs, 1)
			q := w.authzReqs[0]
			assert.Equal(t, "S256", q.Get("code_challenge_method"))
			assert.Equal(t, "dyn-client", q.Get("client_id"))
			assert.Equal(t, w.rs.URL+"/mcp", q.Get("resource"))
			assert.Equal(t, "mcp:read", q.Get("scope"))
			assert.Equal(t, 1, w.registered)
			require.Len(t, w.tokenReqs, 1)
			f := w.tokenReqs[0]
			assert.Equal(t, w.rs.URL+"/mcp", f.Get("resource"))
			assert.Equal(t, "dyn-client:dyn-secret", f.Get("basic"), "client_secret_basic")
			assert.Empty(t, f.Get("client_secret"))
		})
	}
}

func TestRefreshWhenExpired(t *testing.T) {
	w := newWorld(t)
	w.expiresIn = 1 // already inside the 10 s safety margin
	a, err := New(w.rs.URL+"/mcp", Config{})
	require.NoError(t, err)
	require.Equal(t, 200, do(t, a, w.rs.URL+"/mcp"))
	first := a.Token().AccessToken
	require.Equal(t, 200, do(t, a, w.rs.URL+"/mcp"))
	assert.NotEqual(t, first, a.Token().AccessToken)
	w.mu.Lock()
	defer w.mu.Unlock()
	assert.Len(t, w.authzReqs, 1, "refreshed, not re-authorized")
	assert.Equal(t, "refresh_token", w.tokenReqs[len(w.tokenReqs)-1].Get("grant_type"))
	assert.Equal(t, w.rs.URL+"/mcp", w.tokenReqs[len(w.tokenReqs)-1].Get("resource"))
}

func TestStepUp(t *testing.T) {
	w := newWorld(t)
	w.challengeScop = "read"
	w.needScopes = map[string][]string{"write": {"read", "write"}}
	a, err := New(w.rs.URL+"/mcp", Config{})
	require.NoError(t, err)
	require.Equal(t, 200, do(t, a, w.rs.URL+"/mcp"))
	require.Equal(t, 200, do(t, a, w.rs.URL+"/mcp?op=write"))
	w.mu.Lock()
	defer w.mu.Unlock()
	require.Len(t, w.authzReqs, 2)
	assert.Equal(t, "read", w.authzReqs[0].Get("scope"))
	assert.ElementsMatch(t, []string{"read", "write"}, strings.Fields(w.authzReqs[1].Get("scope")))
}

func TestScopeSelection(t *testing.T) {
	tests := []struct {
		name      string
		challenge string
		prm, as   []string
		want      string
	}{
		{"challenge first", "a", []string{"b"}, nil, "a"},
		{"then resource metadata", "", []string{"b", "c"}, nil, "b c"},
		{"omitted when undefined", "", nil, nil, ""},
		{"offline_access when offered", "", []string{"b"}, []string{"b", "offline_access"}, "b offline_access"},
		{"no offline_access when not offered", "", []string{"b"}, []string{"b"}, "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			w.challengeScop, w.prmScopes, w.asScopes = tt.challenge, tt.prm, tt.as
			a, err := New(w.rs.URL+"/mcp", Config{})
			require.NoError(t, err)
			require.Equal(t, 200, do(t, a, w.rs.URL+"/mcp"))
			w.mu.Lock()
			defer w.mu.Unlock()
			assert.Equal(t, tt.want, w.authzReqs[0].Get("scope"))
			_, has := w.authzReqs[0]["scope"]
			assert.Equal(t, tt.want != "", has)
		})
	}
}

func TestResourceMismatch(t *testing.T) {
	w := newWorld(t)
	w.prmResource = "https://evil.example.com/mcp"
	a, err := New(w.rs.URL+"/mcp", Config{})
	require.NoError(t, err)
	req, _ := http.NewRequest(http.MethodGet, w.rs.URL+"/mcp", nil)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.ErrorIs(t, a.Challenge(context.Background(), resp), ErrResourceMismatch)
	w.mu.Lock()
	defer w.mu.Unlock()
	assert.Empty(t, w.authzReqs)
}

func TestClientIDMetadataDocument(t *testing.T) {
	w := newWorld(t)
	w.cimd = true
	a, err := New(w.rs.URL+"/mcp", Config{ClientMetadataURL: "https://client.example/meta.json"})
	require.NoError(t, err)
	require.Equal(t, 200, do(t, a, w.rs.URL+"/mcp"))
	w.mu.Lock()
	defer w.mu.Unlock()
	assert.Zero(t, w.registered)
	assert.Equal(t, "https://client.example/meta.json", w.authzReqs[0].Get("client_id"))
	assert.Equal(t, "https://client.example/meta.json", w.tokenReqs[0].Get("client_id"), "public client: id in the body")
}

func TestClientCredentials(t *testing.T) {
	w := newWorld(t)
	w.prmScopes = []string{"svc"}
	a, err := New(w.rs.URL+"/mcp", Config{GrantType: GrantClientCredentials, ClientID: "m2m", ClientSecret: "pw"})
	require.NoError(t, err)
	require.Equal(t, 200, do(t, a, w.rs.URL+"/mcp"))
	w.mu.Lock()
	defer w.mu.Unlock()
	assert.Empty(t, w.authzReqs)
	require.Len(t, w.tokenReqs, 1)
	assert.Equal(t, "client_credentials", w.tokenReqs[0].Get("grant_type"))
	assert.Equal(t, "m2m:pw", w.tokenReqs[0].Get("basic"))
	assert.Equal(t, "svc", w.tokenReqs[0].Get("scope"))
}

func TestHeadlessBrowserNeedsRedirect(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Write([]byte("<form>log in</form>"))
	}))
	defer hs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := (&HeadlessBrowser{}).Authorize(ctx, hs.URL, "http://127.0.0.1/callback")
	require.ErrorIs(t, err, ErrNeedsInteraction)
}

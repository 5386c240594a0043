package client_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/mcpedge/mcpedge/client"
	"github.com/mcpedge/mcpedge/client/oauth"
	"github.com/mcpedge/mcpedge/engine"
	mcphttp "github.com/mcpedge/mcpedge/transport/http"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOAuthHTTP: mcpedge behind a resource server that wants a token; the
// client runs the OAuth flow on the first 401 and carries on.
func TestOAuthHTTP(t *testing.T) {
	srv := newEngine(t, "demo", engine.Options{})
	base, _ := serveHTTP(t, srv, mcphttp.Options{})
	var authorizations atomic.Int64
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/oauth-authorization-server":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"issuer":"http://%[1]s","authorization_endpoint":"http://%[1]s/authorize","token_endpoint":"http://%[1]s/token","code_challenge_methods_supported":["S256"]}`, r.Host)
		case "/authorize":
			authorizations.Add(1)
			u, _ := url.Parse(r.URL.Query().Get("redirect_uri"))
			u.RawQuery = url.Values{"code": {"c"}, "state": {r.URL.Query().Get("state")}}.Encode()
			http.Redirect(w, r, u.String(), http.StatusFound)
		case "/token":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"access_token":"good","token_type":"Bearer","expires_in":3600}`)
		}
	}))
	t.Cleanup(as.Close)
	var rs *httptest.Server
	rs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/oauth-protected-resource/mcp":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"resource":"%s/mcp","authorization_servers":["%s"]}`, rs.URL, as.URL)
		case "/mcp":
			if r.Header.Get("Authorization") != "Bearer good" {
				w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			forward(t, w, r, base+"/mcp")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(rs.Close)

	a, err := oauth.New(rs.URL+"/mcp", oauth.Config{ClientID: "pre"})
	require.NoError(t, err)
	c := dial(t, &client.HTTPTransport{URL: rs.URL + "/mcp", Auth: a}, client.Options{Era: client.EraLegacy})
	exerciseDemo(t, c)
	assert.Equal(t, int64(1), authorizations.Load())
}

// countingAuth hands out tokens the server never accepts.
type countingAuth struct{ challenges atomic.Int64 }

func (a *countingAuth) Authorization(context.Context) (string, error) { return "Bearer nope", nil }
func (a *countingAuth) Challenge(context.Context, *http.Response) error {
	a.challenges.Add(1)
	return nil
}

// TestAuthRetryLimit: a server that keeps refusing gets at most three
// authorization rounds per request, then the call fails.
func TestAuthRetryLimit(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", scope="admin"`)
		w.WriteHeader(http.StatusForbidden)
	}))
	t.Cleanup(hs.Close)
	a := &countingAuth{}
	c := client.New(&client.HTTPTransport{URL: hs.URL, Auth: a}, client.Options{Era: client.EraLegacy})
	err := c.Connect(testCtx(t))
	require.ErrorIs(t, err, client.ErrUnauthorized)
	var he *client.HTTPError
	require.ErrorAs(t, err, &he)
	assert.Equal(t, http.StatusForbidden, he.StatusCode)
	assert.Equal(t, int64(3), a.challenges.Load())
	require.NoError(t, c.Close())
}

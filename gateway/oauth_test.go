package gateway_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge"
	"github.com/mcpedge/mcpedge/auth"
	"github.com/mcpedge/mcpedge/client"
	"github.com/mcpedge/mcpedge/gateway"
	"github.com/mcpedge/mcpedge/internal/authtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeAS is an OAuth authorization server that grants client
// credentials: its metadata, and a token endpoint that issues JWTs of
// authtest's keys to client "gw" with secret "s3cret", for aud.
type fakeAS struct {
	srv *httptest.Server
	aud string

	mu     sync.Mutex
	iss    string   // the tokens' iss
	grants []string // grant_type of each token request
}

func newFakeAS(t *testing.T) *fakeAS {
	as := &fakeAS{}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"issuer":"` + as.srv.URL + `","token_endpoint":"` + as.srv.URL + `/token","grant_types_supported":["client_credentials"],"token_endpoint_auth_methods_supported":["client_secret_basic","client_secret_post"]}`))
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		id, secret, ok := r.BasicAuth()
		if !ok {
			id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
		}
		as.mu.Lock()
		as.grants = append(as.grants, r.PostForm.Get("grant_type"))
		iss := as.iss
		as.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.PostForm.Get("grant_type") != "client_credentials" || id != "gw" || secret != "s3cret" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"invalid_client"}`))
			return
		}
		claims := authtest.Good(as.aud, iss, "mcp")
		claims["sub"] = "gateway-client"
		_, _ = w.Write([]byte(`{"access_token":"` + authtest.Sign("rsa1", "RS256", claims) + `","token_type":"Bearer","expires_in":3600}`))
	})
	as.srv = httptest.NewServer(mux)
	t.Cleanup(as.srv.Close)
	return as
}

// TestHTTPUpstreamOAuth: an upstream that requires a bearer token is
// reached with the gateway's own, got by the client credentials grant
// (once, then reused); the downstream client's token, valid for the
// upstream too, is never passed on. A token the upstream stops taking
// is replaced on its challenge, and the call sent again.
func TestHTTPUpstreamOAuth(t *testing.T) {
	is := authtest.NewIssuer()
	t.Cleanup(is.Server.Close)
	as := newFakeAS(t)
	// The upstream's resource URI names its address: bind it first.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	as.aud = "http://" + addr + "/mcp"
	cfg := func(iss string) auth.Config {
		return auth.Config{Audience: as.aud, Issuer: iss, AuthorizationServers: []string{as.srv.URL}, JWKSURL: is.URL(), Scopes: []string{"mcp"}, FetchTimeout: time.Second}
	}
	as.iss = "iss-0"
	v, err := auth.New(cfg(as.iss))
	require.NoError(t, err)
	t.Cleanup(v.Close)
	up := mcpedge.New(mcpedge.Options{HTTP: &mcpedge.HTTPOptions{Addr: addr}, Auth: v, EngineOptions: mcpedge.EngineOptions{MaxInflight: -1}})
	require.NoError(t, mcpedge.AddTool(up, &mcpedge.Tool{Name: "whoami"},
		func(ctx context.Context, _ *mcpedge.CallToolRequest, _ struct{}) (*mcpedge.CallToolResult, any, error) {
			info, ok := auth.FromContext(ctx)
			if !ok {
				return mcpedge.TextResult("nobody"), nil, nil
			}
			return mcpedge.TextResult(info.Subject), nil, nil
		}, mcpedge.ToolOptions{}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- up.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	require.NotNil(t, up.HTTPAddr(ctx))

	for _, pipeline := range []int{1, 4} {
		t.Run("pipeline="+strconv.Itoa(pipeline), func(t *testing.T) {
			as.mu.Lock()
			as.grants = nil
			as.mu.Unlock()
			u := gateway.Upstream{Name: "sec", Transport: gateway.HTTP, URL: as.aud, Pipeline: pipeline,
				OAuth: &gateway.OAuth{ClientID: "gw", ClientSecret: "s3cret", Scopes: []string{"mcp"}}}
			_, f := startHTTPFront(t, gateway.Options{Upstreams: []gateway.Upstream{u}})
			// The downstream client presents a token the upstream would take.
			alice := authtest.Sign("rsa1", "RS256", authtest.Good(as.aud, as.iss, "mcp"))
			c, err := client.Dial(testCtx(t), &client.HTTPTransport{URL: f, Header: http.Header{"Authorization": {"Bearer " + alice}}}, client.Options{Era: client.EraLegacy})
			require.NoError(t, err)
			defer c.Close()
			for range 5 {
				r, err := c.CallTool(testCtx(t), "whoami", map[string]any{})
				require.NoError(t, err)
				assert.Equal(t, "gateway-client", text(t, r), "the gateway's own token, not the client's (alice)")
			}
			as.mu.Lock()
			assert.Equal(t, []string{"client_credentials"}, as.grants, "one token, reused")
			// The upstream now takes tokens of another issuer only.
			as.iss = "iss-" + strconv.Itoa(pipeline)
			as.mu.Unlock()
			require.NoError(t, v.Reload(cfg(as.iss)))
			r, err := c.CallTool(testCtx(t), "whoami", map[string]any{})
			require.NoError(t, err, "the 401 answered with a new token, the call sent again")
			assert.Equal(t, "gateway-client", text(t, r))
			as.mu.Lock()
			assert.Equal(t, []string{"client_credentials", "client_credentials"}, as.grants)
			as.mu.Unlock()
		})
	}

	t.Run("wrong secret", func(t *testing.T) {
		u := gateway.Upstream{Name: "sec", Transport: gateway.HTTP, URL: as.aud, Timeout: 2 * time.Second,
			OAuth: &gateway.OAuth{ClientID: "gw", ClientSecret: "wrong"}}
		gw, _ := startHTTPFront(t, gateway.Options{Upstreams: []gateway.Upstream{u}, StartTimeout: 3 * time.Second})
		st := gw.Status()[0]
		assert.NotEqual(t, "ready", st.State, "an upstream that refuses the gateway's credentials is down")
		assert.Contains(t, st.LastFailure, "HTTP status 401")
		assert.ErrorContains(t, gw.Ready(), `upstream "sec"`)
	})
}

// startHTTPFront starts a gateway for opts behind an mcpedge serving
// Streamable HTTP on 127.0.0.1, and returns it and its endpoint's URL.
func startHTTPFront(t *testing.T, opts gateway.Options) (*gateway.Gateway, string) {
	t.Helper()
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 20 * time.Second
	}
	gw, err := gateway.New(opts)
	require.NoError(t, err)
	eo := mcpedge.Options{HTTP: &mcpedge.HTTPOptions{Addr: "127.0.0.1:0"}}
	eo.Bus = gw.Bus(nil)
	eo.MaxInflight = -1
	srv := mcpedge.New(eo)
	require.NoError(t, gw.Start(context.Background(), srv.Engine()))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	a := srv.HTTPAddr(ctx)
	require.NotNil(t, a)
	t.Cleanup(func() {
		cancel()
		<-done
		gw.Close()
	})
	return gw, "http://" + a.String() + "/mcp"
}

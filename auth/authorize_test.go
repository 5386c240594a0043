package auth_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpedge/mcpedge/auth"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/internal/authtest"
	"github.com/mcpedge/mcpedge/session"
)

// wait bounds every blocking step of these tests.
const wait = 10 * time.Second

// code is the JSON-RPC code of an Authorize or AuthorizeTool refusal.
func code(t *testing.T, err error) int {
	t.Helper()
	e, ok := err.(*codec.Error)
	require.True(t, ok, "%v is not a *codec.Error", err)
	return e.Code
}

// metaParams are params carrying tok in _meta.
func metaParams(tok string) []byte {
	return []byte(`{"_meta":{"io.mcpedge/token":` + strconv.Quote(tok) + `}}`)
}

// TestAuthorize: the engine's question. A session's caller decides its
// requests; otherwise the request's own token does. Off the worker pool
// (block false) only a static token or the cache decides: a JWT not seen
// before is engine.ErrAuthWouldBlock, verified when asked with block.
func TestAuthorize(t *testing.T) {
	is := authtest.NewIssuer()
	defer is.Server.Close()
	v := newVerifier(t, is, func(c *auth.Config) { c.Tokens = []string{"static-token"} })
	var fails atomic.Int32
	v.OnFailure(func(auth.Failure) { fails.Add(1) })
	ctx := context.Background()
	sess := session.New(ctx, nil)

	_, err := v.Authorize(ctx, sess, "tools/list", nil, false)
	assert.Equal(t, auth.CodeUnauthorized, code(t, err), "no token")
	_, err = v.Authorize(ctx, sess, "tools/list", metaParams("wrong"), false)
	assert.Equal(t, auth.CodeUnauthorized, code(t, err), "an unknown token")
	assert.EqualValues(t, 2, fails.Load(), "each refusal is counted")

	c, err := v.Authorize(ctx, sess, "tools/list", metaParams("static-token"), false)
	require.NoError(t, err, "a static token is decided on the loop")
	assert.Equal(t, "static:1", engine.SubjectOf(c))

	jwt := authtest.Sign("rsa1", "RS256", authtest.Good(aud, iss, "mcp"))
	_, err = v.Authorize(ctx, sess, "tools/list", metaParams(jwt), false)
	require.ErrorIs(t, err, engine.ErrAuthWouldBlock, "a JWT is not verified on the loop")
	c, err = v.Authorize(ctx, sess, "tools/list", metaParams(jwt), true)
	require.NoError(t, err)
	assert.Equal(t, "alice", engine.SubjectOf(c))
	c, err = v.Authorize(ctx, sess, "tools/list", metaParams(jwt), false)
	require.NoError(t, err, "then the cache decides, on the loop")
	assert.Equal(t, "alice", engine.SubjectOf(c))
	assert.Nil(t, sess.Auth(), "a request's own token is not its session's")

	// A session's caller decides, whatever the request carries.
	info, err := v.Verify(ctx, "static-token")
	require.NoError(t, err)
	sess.SetAuth(info)
	c, err = v.Authorize(ctx, sess, "tools/list", metaParams("wrong"), false)
	require.NoError(t, err)
	assert.Same(t, info, c)

	// Tool scopes.
	before := fails.Load()
	assert.NoError(t, v.AuthorizeTool(c, "t", []string{"anything"}), "a static token without scopes grants every scope")
	reader, err := v.Authorize(ctx, session.New(ctx, nil), "tools/call", metaParams(jwt), false)
	require.NoError(t, err)
	err = v.AuthorizeTool(reader, "t", []string{"mcp", "files:write"})
	assert.Equal(t, auth.CodeForbidden, code(t, err))
	assert.Contains(t, string(err.(*codec.Error).Data), `"scope":"files:write"`)
	assert.Equal(t, auth.CodeUnauthorized, code(t, v.AuthorizeTool(nil, "t", []string{"mcp"})))
	assert.Equal(t, before+2, fails.Load(), "scope refusals are counted")
}

// TestAuthorizeAfterReload: a session keeps its caller across a reload
// only while the configuration in force accepts it: a static token
// removed from the token file stops working on the sessions it opened,
// one whose scopes changed has the new ones, and a JWT stays valid while
// the settings that verified it are the same.
func TestAuthorizeAfterReload(t *testing.T) {
	is := authtest.NewIssuer()
	defer is.Server.Close()
	file := filepath.Join(t.TempDir(), "tokens")
	require.NoError(t, os.WriteFile(file, []byte("keep mcp files:write\nremove mcp\n"), 0o600))
	cfg := auth.Config{Audience: aud, Issuer: iss, JWKSURL: is.URL(), TokenFile: file, Scopes: []string{"mcp"}, FetchTimeout: wait}
	v, err := auth.New(cfg)
	require.NoError(t, err)
	defer v.Close()
	ctx := context.Background()
	open := func(tok string, block bool) *session.Session {
		sess := session.New(ctx, nil)
		c, err := v.Authorize(ctx, sess, "initialize", metaParams(tok), block)
		require.NoError(t, err)
		sess.SetAuth(c) // as the engine does for initialize
		return sess
	}
	keep, remove := open("keep", false), open("remove", false)
	jwtSess := open(authtest.Sign("rsa1", "RS256", authtest.Good(aud, iss, "mcp")), true)

	require.NoError(t, os.WriteFile(file, []byte("keep mcp\n"), 0o600))
	require.NoError(t, v.Reload(cfg))
	_, err = v.Authorize(ctx, remove, "tools/list", nil, false)
	assert.Equal(t, auth.CodeUnauthorized, code(t, err), "a static token removed on reload is revoked on its sessions")
	c, err := v.Authorize(ctx, keep, "tools/call", nil, false)
	require.NoError(t, err)
	assert.Equal(t, auth.CodeForbidden, code(t, v.AuthorizeTool(c, "t", []string{"files:write"})), "the scopes are the new line's")
	assert.Same(t, c, keep.Auth(), "the session holds its caller as seen now")
	_, err = v.Authorize(ctx, jwtSess, "tools/list", nil, false)
	assert.NoError(t, err, "a JWT verified under the same settings stays valid")

	require.NoError(t, v.SetTokens(nil))
	_, err = v.Authorize(ctx, keep, "tools/list", nil, false)
	assert.Equal(t, auth.CodeUnauthorized, code(t, err), "SetTokens revokes too")

	other := cfg
	other.Issuer = "https://other.test"
	require.NoError(t, v.Reload(other))
	_, err = v.Authorize(ctx, jwtSess, "tools/list", nil, false)
	assert.Equal(t, auth.CodeUnauthorized, code(t, err), "a JWT verified under other settings is refused")
}

// jwksServer serves body as the key set.
func jwksServer(t *testing.T, body []byte, contentLength bool) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if contentLength {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		}
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestKeySetSizeLimit: a key set over MaxKeySetBytes (1 MiB by default)
// is refused, whether it declares its length or not, and the keys cached
// stay in use; one under it is used.
func TestKeySetSizeLimit(t *testing.T) {
	is := authtest.NewIssuer()
	defer is.Server.Close()
	resp, err := http.Get(is.URL())
	require.NoError(t, err)
	set, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	padded := func(n int) []byte { // the same keys, then padding
		s := strings.TrimSpace(string(set))
		return []byte(s[:len(s)-1] + `,"pad":"` + strings.Repeat("x", n) + `"}`)
	}
	tok := authtest.Sign("rsa1", "RS256", authtest.Good(aud, iss, "mcp"))
	for _, tc := range []struct {
		name     string
		body     []byte
		declared bool
		limit    int64
		ok       bool
	}{
		{"under the default", padded(512 << 10), true, 0, true},
		{"over the default, declared", padded(2 << 20), true, 0, false},
		{"over the default, chunked", padded(2 << 20), false, 0, false},
		{"over a limit of 4 KiB", padded(8 << 10), false, 4 << 10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := jwksServer(t, tc.body, tc.declared)
			v := newVerifier(t, is, func(c *auth.Config) { c.JWKSURL, c.MaxKeySetBytes = url, tc.limit })
			_, err := v.Verify(context.Background(), tok)
			if tc.ok {
				require.NoError(t, err)
			} else {
				st, _ := status(err)
				assert.Equal(t, 401, st, "no key was taken from a set too large")
			}
		})
	}
}

// TestKeysAfterKeyServerRecovers: a key server down when the verifier
// starts is retried in the background after RetryInterval (doubling), not
// after the hour of RefreshInterval, and its keys are used as soon as it
// answers.
func TestKeysAfterKeyServerRecovers(t *testing.T) {
	is := authtest.NewIssuer()
	defer is.Server.Close()
	is.SetMode("fail")
	v := newVerifier(t, is, func(c *auth.Config) {
		c.RetryInterval, c.UnknownKIDInterval = time.Millisecond, time.Hour
	})
	tok := authtest.Sign("rsa1", "RS256", authtest.Good(aud, iss, "mcp"))
	_, err := v.Verify(context.Background(), tok)
	st, _ := status(err)
	require.Equal(t, 401, st, "no keys yet")
	is.SetMode("")
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	require.NoError(t, auth.WaitKeyFetches(ctx, v, 1), "the key server was not retried")
	_, err = v.Verify(context.Background(), tok)
	require.NoError(t, err)
}

// TestUnknownKIDAfterFailedFetch: a fetch for an unknown kid that failed
// is retried for the next such token once RetryInterval has passed, not
// UnknownKIDInterval: a key server that recovers is heard from at once.
// Until then such tokens are refused without a fetch.
func TestUnknownKIDAfterFailedFetch(t *testing.T) {
	is := authtest.NewIssuer()
	defer is.Server.Close()
	v := newVerifier(t, is, func(c *auth.Config) {
		c.RetryInterval, c.UnknownKIDInterval, c.RefreshInterval = time.Minute, time.Hour, time.Hour
	})
	var mu sync.Mutex
	now := time.Now()
	auth.SetKeyClock(v, func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	is.SetMode("fail")
	is.Rotate()
	tok := authtest.Sign("rsa2", "RS256", authtest.Good(aud, iss, "mcp"))
	fetches := is.Fetches.Load()
	_, err := v.Verify(context.Background(), tok)
	st, _ := status(err)
	require.Equal(t, 401, st)
	require.Equal(t, fetches+1, is.Fetches.Load(), "the unknown kid caused a fetch, which failed")

	is.SetMode("")
	_, err = v.Verify(context.Background(), tok)
	st, _ = status(err)
	assert.Equal(t, 401, st, "within the retry wait: refused")
	assert.Equal(t, fetches+1, is.Fetches.Load(), "without a fetch")

	advance(time.Minute)
	_, err = v.Verify(context.Background(), tok)
	require.NoError(t, err, "after the retry wait, not the hour of UnknownKIDInterval, the recovered server is asked")
}

// FuzzAuthorize: whatever the params, Authorize neither panics nor
// accepts a request whose params do not hold the token, and the token a
// request is accepted with is the one MetaToken reads.
func FuzzAuthorize(f *testing.F) {
	for _, s := range []string{
		`{"_meta":{"io.mcpedge/token":"good-token"}}`,
		`{"_meta":{"io.mcpedge/token":"good\u002dtoken"}}`,
		`{"_meta":{"io.mcpedge/token":"bad"}}`,
		`{"_meta":{"io.mcpedge/token":1}}`,
		`{"_meta":null}`,
		`{"_meta":{"io.mcpedge/token":"good-token","io.mcpedge/token":"x"}}`,
		`[`, ``, `{"_meta":{"io.mcpedge/token":"a.b.c"}}`,
	} {
		f.Add([]byte(s))
	}
	v, err := auth.New(auth.Config{Audience: aud, Tokens: []string{"good-token"}})
	require.NoError(f, err)
	f.Cleanup(v.Close)
	f.Fuzz(func(t *testing.T, params []byte) {
		for _, block := range []bool{false, true} {
			c, err := v.Authorize(context.Background(), session.New(context.Background(), nil), "tools/list", params, block)
			if err != nil {
				continue
			}
			assert.Equal(t, "static:1", engine.SubjectOf(c))
			assert.Equal(t, "good-token", auth.MetaToken(params))
		}
	})
}

package cluster_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge"
	"github.com/mcpedge/mcpedge/auth"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// authPost sends one JSON-RPC message of session sid to url with a bearer
// token, and extra headers; it returns the status, the headers and the
// body.
func authPost(t *testing.T, url, sid, token, body string, extra map[string]string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader = strings.NewReader(body)
	if extra["Content-Encoding"] == "gzip" {
		var zb bytes.Buffer
		zw := gzip.NewWriter(&zb)
		_, _ = zw.Write([]byte(body))
		require.NoError(t, zw.Close())
		rd = &zb
	}
	req, err := http.NewRequest(http.MethodPost, url, rd)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("MCP-Protocol-Version", v)
	}
	for k, val := range extra {
		req.Header.Set(k, val)
	}
	resp, err := httpc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, b
}

// TestDirectMessages: a request that the owner's engine answers at once
// reaches its owner as a direct message on their link (tasks/get,
// tasks/list, logging/setLevel), and is answered as the whole request is
// at the owner; one that may not go so goes whole: another subject's (the
// owner refuses it directly, and its whole request gets the 403 it gets
// there), a compressed body. The elicitation answer of TestThreeNodes is
// another.
func TestDirectMessages(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two nodes")
	}
	verifier, err := auth.New(auth.Config{Audience: "http://127.0.0.1/mcp", Tokens: []string{"token-one", "token-two"}})
	require.NoError(t, err)
	t.Cleanup(verifier.Close)
	withAuth := func(o *mcpedge.Options) { o.Auth = verifier }
	a := startNodeWith(t, "a", nil, withAuth)
	defer a.kill(t)
	b := startNodeWith(t, "b", []string{routeOf(a)}, withAuth)
	defer b.kill(t)

	st, h, body := authPost(t, a.url, "", "token-one", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+v+`","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, nil)
	require.Equal(t, http.StatusOK, st, string(body))
	sid := h.Get("Mcp-Session-Id")
	st, _, _ = authPost(t, a.url, sid, "token-one", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
	require.Equal(t, http.StatusAccepted, st)
	st, _, body = authPost(t, a.url, sid, "token-one", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bake","arguments":{},"task":{"ttl":60000}}}`, nil)
	require.Equal(t, http.StatusOK, st, string(body))
	var created struct {
		Result struct {
			Task struct {
				TaskID string `json:"taskId"`
			} `json:"task"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(body, &created), string(body))
	task := created.Result.Task.TaskID
	require.True(t, strings.HasPrefix(task, "a."), task)
	get := `{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"` + task + `"}}`
	// The task done (its status stays), and b knowing a and its link.
	require.Eventually(t, func() bool {
		st, _, body := authPost(t, a.url, sid, "token-one", get, nil)
		return st == http.StatusOK && strings.Contains(string(body), `"completed"`)
	}, 10*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool {
		before := b.n.Stats().ForwardedDirect
		st, _, _ := authPost(t, b.url, sid, "token-one", get, nil)
		return st == http.StatusOK && b.n.Stats().ForwardedDirect > before
	}, 10*time.Second, 20*time.Millisecond)

	for _, tc := range []struct {
		name   string
		token  string
		body   string
		extra  map[string]string
		direct bool // sent as a direct message, and served so
		status int
	}{
		{"tasks/get", "token-one", get, nil, true, http.StatusOK},
		{"tasks/list", "token-one", `{"jsonrpc":"2.0","id":4,"method":"tasks/list"}`, nil, true, http.StatusOK},
		{"logging/setLevel", "token-one", `{"jsonrpc":"2.0","id":5,"method":"logging/setLevel","params":{"level":"warning"}}`, nil, true, http.StatusOK},
		{"another subject", "token-two", get, nil, false, http.StatusForbidden},
		{"a compressed body", "token-one", get, map[string]string{"Content-Encoding": "gzip"}, false, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The reference: the same request at the owner.
			wantSt, _, want := authPost(t, a.url, sid, tc.token, tc.body, tc.extra)
			require.Equal(t, tc.status, wantSt, string(want))
			sent, served, whole := b.n.Stats().ForwardedDirect, a.n.Stats().ServedDirect, a.n.Stats().NotDirect
			st, _, got := authPost(t, b.url, sid, tc.token, tc.body, tc.extra)
			assert.Equal(t, wantSt, st, string(got))
			assert.JSONEq(t, string(want), string(got))
			switch {
			case tc.direct:
				assert.Equal(t, sent+1, b.n.Stats().ForwardedDirect, "sent as a direct message")
				assert.Equal(t, served+1, a.n.Stats().ServedDirect, "served as one")
			case tc.extra != nil:
				assert.Equal(t, sent, b.n.Stats().ForwardedDirect, "not sent as a direct message")
			default:
				assert.Equal(t, sent+1, b.n.Stats().ForwardedDirect, "sent as a direct message")
				assert.Equal(t, whole+1, a.n.Stats().NotDirect, "refused as one, and sent whole")
			}
		})
	}
}

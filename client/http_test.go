package client_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/internal/testserver"

	"github.com/mcpedge/mcpedge/client"
	"github.com/mcpedge/mcpedge/engine"
	mcphttp "github.com/mcpedge/mcpedge/transport/http"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serveHTTP serves srv over Streamable HTTP (and legacy SSE) on loopback
// and returns the base URL.
func serveHTTP(t testing.TB, srv *engine.Server, opts mcphttp.Options) (string, *mcphttp.Server) {
	t.Helper()
	return testserver.HTTP(t, srv, opts)
}

func TestStreamableHTTP(t *testing.T) {
	srv := newEngine(t, "demo", engine.Options{})
	base, hs := serveHTTP(t, srv, mcphttp.Options{})
	c := dial(t, &client.HTTPTransport{URL: base + "/mcp"}, client.Options{Era: client.EraLegacy})
	exerciseDemo(t, c)
	require.Equal(t, 1, hs.Sessions())
	require.NoError(t, c.Close())
	require.Eventually(t, func() bool { return hs.Sessions() == 0 }, 5*time.Second, 10*time.Millisecond, "DELETE ends the session")
}

func TestLegacySSE(t *testing.T) {
	srv := newEngine(t, "demo", engine.Options{})
	base, _ := serveHTTP(t, srv, mcphttp.Options{})
	c := dial(t, &client.SSETransport{URL: base + "/sse"}, client.Options{Era: client.EraLegacy})
	exerciseDemo(t, c)
}

// TestHTTPSessionExpired: a server that forgot the session answers 404;
// the client re-initializes when reconnection is on.
func TestHTTPSessionExpired(t *testing.T) {
	var inits atomic.Int64
	var expire atomic.Bool
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, _ := io.ReadAll(r.Body)
		switch {
		case strings.Contains(string(body), `"initialize"`):
			n := inits.Add(1)
			w.Header().Set("Mcp-Session-Id", fmt.Sprintf("s%d", n))
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"fake","version":"1"}}}`, idOf(body))
		case r.Header.Get("Mcp-Session-Id") == "s1" && expire.Load():
			w.WriteHeader(http.StatusNotFound)
		case strings.Contains(string(body), `"id"`):
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{}}`, idOf(body))
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	t.Cleanup(hs.Close)
	reconnected := make(chan struct{}, 1)
	c := dial(t, &client.HTTPTransport{URL: hs.URL}, client.Options{
		Era:           client.EraLegacy,
		Reconnect:     &client.ReconnectPolicy{MinDelay: time.Millisecond},
		OnReconnected: func() { reconnected <- struct{}{} },
	})
	ctx := testCtx(t)
	require.NoError(t, c.Ping(ctx))
	expire.Store(true)
	require.ErrorIs(t, c.Ping(ctx), client.ErrSessionExpired)
	select {
	case <-reconnected:
	case <-time.After(5 * time.Second):
		t.Fatal("no re-initialization after the session expired")
	}
	require.NoError(t, c.Ping(ctx))
	assert.Equal(t, int64(2), inits.Load())
}

// idOf extracts the id of a JSON-RPC request for fake servers.
func idOf(body []byte) string {
	s := string(body)
	i := strings.Index(s, `"id":`)
	if i < 0 {
		return "null"
	}
	s = s[i+5:]
	j := strings.IndexAny(s, ",}")
	return s[:j]
}

// TestHTTPResumeAfterStreamClose: the POST's SSE stream ends after a
// priming event; the client waits the retry delay, resumes with GET and
// Last-Event-ID, and gets the answer there.
func TestHTTPResumeAfterStreamClose(t *testing.T) {
	var (
		mu        sync.Mutex
		pendingID string
		closedAt  time.Time
		resumedAt time.Time
		lastEvent string
	)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			mu.Lock()
			id, last := pendingID, r.Header.Get("Last-Event-ID")
			if last != "" {
				resumedAt, lastEvent = time.Now(), last
			}
			mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			if last == "" || id == "" {
				w.(http.Flusher).Flush()
				<-r.Context().Done()
				return
			}
			fmt.Fprintf(w, "id: e3\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"resumed\"}]}}\n\n", id)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		body, _ := io.ReadAll(r.Body)
		switch {
		case strings.Contains(string(body), `"initialize"`):
			w.Header().Set("Mcp-Session-Id", "s")
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-03-26","capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"}}}`, idOf(body))
		case strings.Contains(string(body), `"tools/call"`):
			mu.Lock()
			pendingID = idOf(body)
			mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "id: e2\nretry: 300\ndata: \n\n")
			w.(http.Flusher).Flush()
			mu.Lock()
			closedAt = time.Now()
			mu.Unlock()
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	t.Cleanup(hs.Close)
	c := dial(t, &client.HTTPTransport{URL: hs.URL}, client.Options{Era: client.EraLegacy})
	assert.Equal(t, "2025-03-26", c.ProtocolVersion())
	r, err := c.CallTool(testCtx(t), "slow", nil)
	require.NoError(t, err)
	assert.Equal(t, "resumed", r.Content[0].Text)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, "e2", lastEvent)
	wait := resumedAt.Sub(closedAt)
	assert.GreaterOrEqual(t, wait, 250*time.Millisecond, "the retry field is respected")
	assert.Less(t, wait, 2*time.Second)
}

// TestHTTPBearerToken: the token goes on every request.
func TestHTTPBearerToken(t *testing.T) {
	srv := newEngine(t, "demo", engine.Options{})
	base, _ := serveHTTP(t, srv, mcphttp.Options{})
	var bad atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			bad.Add(1)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		forward(t, w, r, base+"/mcp")
	}))
	t.Cleanup(proxy.Close)
	c := dial(t, &client.HTTPTransport{URL: proxy.URL, BearerToken: "s3cret"}, client.Options{Era: client.EraLegacy})
	require.NoError(t, c.Ping(testCtx(t)))
	_, err := c.AllTools(testCtx(t))
	require.NoError(t, err)
	assert.Zero(t, bad.Load())
}

// forward proxies one request to target, streaming the answer.
func forward(t testing.TB, w http.ResponseWriter, r *http.Request, target string) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, target, r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	req.Header.Del("Authorization")
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			w.Write(buf[:n])
			w.(http.Flusher).Flush()
		}
		if err != nil {
			return
		}
	}
}

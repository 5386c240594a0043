package admin_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/mcpedge/mcpedge/admin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// getHost sends GET url with the Host header host.
func getHost(t *testing.T, url, host string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// TestAdminChecksHost: the admin listener, bound to loopback, answers
// only loopback Host values and those allowed, as the MCP listener does:
// a web page whose name resolves to 127.0.0.1 (DNS rebinding) reads
// nothing from it.
func TestAdminChecksHost(t *testing.T) {
	as, err := admin.Listen("127.0.0.1:0", admin.NewMetrics(), new(admin.Readiness), nil)
	require.NoError(t, err)
	go func() { _ = as.Serve() }()
	defer func() { _ = as.Shutdown(context.Background()) }()
	base := "http://" + as.Addr().String()
	_, port, _ := strings.Cut(as.Addr().String(), ":")

	paths := []string{"/metrics", "/healthz", "/readyz", "/debug/pprof/", "/debug/pprof/goroutine?debug=1", "/debug/pprof/cmdline"}
	for _, host := range []string{"rebind.example:" + port, "rebind.example", "127.0.0.1.rebind.example:" + port, "ops.example:" + port} {
		for _, path := range paths {
			code, body := getHost(t, base+path, host)
			assert.Equal(t, http.StatusForbidden, code, "Host %s %s", host, path)
			assert.True(t, strings.HasPrefix(body, "Invalid Host"), "Host %s %s: answered %.60q", host, path, body)
		}
	}
	// Loopback names, and any IP address (no name, no rebinding: a
	// scraper that names the listener by its address).
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "[::1]:" + port, "localhost", "10.1.2.3:" + port, "[2001:db8::1]:" + port} {
		code, _ := getHost(t, base+"/metrics", host)
		assert.Equal(t, http.StatusOK, code, "Host %s", host)
	}

	as.SetAllowedHosts([]string{"ops.example"})
	code, _ := getHost(t, base+"/metrics", "ops.example:"+port)
	assert.Equal(t, http.StatusOK, code)
	code, _ = getHost(t, base+"/metrics", "rebind.example:"+port)
	assert.Equal(t, http.StatusForbidden, code)
}

// TestPprofCmdlineGone: the command line, which holds secrets
// (-auth-client-secret, a -cluster URL's password), is not served.
func TestPprofCmdlineGone(t *testing.T) {
	const secret = "s3cr3t-client-secret-4a5b"
	args := os.Args
	os.Args = append(append([]string(nil), args...), "-auth-client-secret", secret, "-cluster", "nats://u:"+secret+"@127.0.0.1:4222")
	defer func() { os.Args = args }()
	s := serve(t)
	for _, path := range []string{"/debug/pprof/cmdline", "/debug/pprof/cmdline?debug=1", "/debug/pprof/"} {
		code, body := get(t, "http://"+s.admin+path)
		assert.False(t, strings.Contains(body, secret), "%s reveals the secret", path)
		if strings.Contains(path, "cmdline") {
			assert.Equal(t, http.StatusNotFound, code, path)
		} else {
			assert.False(t, strings.Contains(body, "cmdline"), "the index lists cmdline")
		}
	}
}

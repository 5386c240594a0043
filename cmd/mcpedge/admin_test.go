package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAdminFlag(t *testing.T) {
	c, err := parse(nil, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:7402", c.admin.addr.addr)
	assert.False(t, c.admin.addr.set)

	c, err = parse([]string{"-admin", ""}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "", c.admin.addr.addr)
	assert.True(t, c.admin.addr.set)

	t.Setenv("MCPEDGE_ADMIN", "127.0.0.1:9999")
	c, err = parse(nil, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:9999", c.admin.addr.addr)
	assert.True(t, c.admin.addr.set)
}

// TestAdminRefusesMCPPorts: -admin on the address of -tcp or -http is an
// error at start; an -admin that cannot be bound is too.
func TestAdminRefusesMCPPorts(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	a, b := freePort(t), freePort(t)
	_, aPort, _ := net.SplitHostPort(a)
	for _, tc := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"tcp", []string{"-tcp", a, "-http", "", "-admin", a}, "the same address as -tcp"},
		{"http", []string{"-tcp", "", "-http", b, "-admin", b}, "the same address as -http"},
		{"wildcard", []string{"-tcp", ":" + aPort, "-http", "", "-admin", a}, "the same address as -tcp"},
		{"taken", []string{"-tcp", "127.0.0.1:0", "-http", "", "-admin", taken.Addr().String()}, "-admin " + taken.Addr().String() + ": address already in use"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := run(tc.args, strings.NewReader(""), io.Discard, &stderr)
			assert.Equal(t, 2, code, "stderr: %s", stderr.String())
			assert.Contains(t, stderr.String(), tc.stderr)
		})
	}
}

func TestSameAddr(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"127.0.0.1:7402", "127.0.0.1:7402", true},
		{"127.0.0.1:7402", "127.0.0.1:7400", false},
		{":7400", "127.0.0.1:7400", true},
		{"0.0.0.0:7400", "10.0.0.1:7400", true},
		{"localhost:7400", "127.0.0.1:7400", true},
		{"10.0.0.2:7400", "10.0.0.1:7400", false},
		{"127.0.0.1:0", "127.0.0.1:0", false},
	} {
		assert.Equal(t, tc.same, sameAddr(tc.a, tc.b), "%s %s", tc.a, tc.b)
	}
}

// TestAdminHostChecked: the admin listener refuses a Host that is neither
// loopback nor in -allowed-hosts (DNS rebinding), as -http does.
func TestAdminHostChecked(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	adminAddr := freePort(t)
	c := startChild(t, "-tcp= -http=127.0.0.1:0 -admin="+adminAddr+" -allowed-hosts=ops.example")
	_, port, _ := net.SplitHostPort(adminAddr)
	for host, want := range map[string]int{
		"rebind.example:" + port: http.StatusForbidden,
		"ops.example:" + port:    http.StatusOK,
		"127.0.0.1:" + port:      http.StatusOK,
		"localhost:" + port:      http.StatusOK,
	} {
		req, err := http.NewRequest(http.MethodGet, "http://"+adminAddr+"/metrics", nil)
		require.NoError(t, err)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		assert.Equal(t, want, resp.StatusCode, "Host %s", host)
	}
	code, _ := c.stop(syscall.SIGTERM)
	assert.Equal(t, 0, code)
}

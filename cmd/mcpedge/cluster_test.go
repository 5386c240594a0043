package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/gateway"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClusterFlagErrors(t *testing.T) {
	key := writeFile(t, strings.Repeat("ab", 32)+"\n")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"routes alone", []string{"-cluster-routes", "nats-route://127.0.0.1:1"}, "-cluster-routes needs -cluster-embed"},
		{"both", []string{"-cluster-embed", "127.0.0.1:0", "-cluster", "nats://127.0.0.1:4222", "-state-key-file", key}, "exclusive"},
		{"no state key", []string{"-cluster-embed", "127.0.0.1:0"}, "-state-key-file"},
		{"bad node", []string{"-cluster-embed", "127.0.0.1:0", "-node", "a.b", "-state-key-file", key}, "-node"},
		{"stdio", []string{"-cluster-embed", "127.0.0.1:0", "-stdio", "-state-key-file", key}, "-stdio"},
		{"stateless", []string{"-cluster-embed", "127.0.0.1:0", "-stateless", "-state-key-file", key}, "-stateless"},
		{"creds without url", []string{"-cluster-embed", "127.0.0.1:0", "-cluster-creds", "x", "-state-key-file", key}, "for -cluster"},
		{"cert without key", []string{"-cluster", "nats://127.0.0.1:4222", "-cluster-tls-cert", "x", "-state-key-file", key}, "go together"},
		{"bad embed", []string{"-cluster-embed", "nowhere", "-state-key-file", key}, "-cluster-embed"},
		{"secret without embed", []string{"-cluster", "nats://127.0.0.1:4222", "-cluster-secret-file", "x", "-state-key-file", key}, "is for -cluster-embed"},
		{"bad name", []string{"-cluster-embed", "127.0.0.1:0", "-cluster-name", "a.b", "-state-key-file", key}, "-cluster-name"},
		{"link alone", []string{"-cluster-link", "127.0.0.1:7433"}, "-cluster-link needs"},
		{"link wildcard", []string{"-cluster-embed", "127.0.0.1:0", "-cluster-link", ":7433", "-state-key-file", key}, "not a wildcard"},
		{"link unspecified", []string{"-cluster-embed", "127.0.0.1:0", "-cluster-link", "0.0.0.0:7433", "-state-key-file", key}, "not a wildcard"},
		{"link no port", []string{"-cluster-embed", "127.0.0.1:0", "-cluster-link", "127.0.0.1", "-state-key-file", key}, "-cluster-link"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(tc.args, io.Discard)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	c, err := parse([]string{"-cluster-embed", "127.0.0.1:0", "-state-key-file", key, "-http", "127.0.0.1:7411"}, io.Discard)
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(nodeName(c), "-7411"), nodeName(c))
	c, err = parse([]string{"-cluster-embed", "127.0.0.1:0", "-cluster-link", "127.0.0.1:0", "-state-key-file", key}, io.Discard)
	require.NoError(t, err)
	assert.Contains(t, listeners(c), nodeListener{"cluster-link", "127.0.0.1:0", ""}, "its bind is checked with the others'")
}

// TestClusterBadRoutesStart: a node whose routes name itself and a port
// nobody listens on starts, serves, logs both, and reports not ready.
func TestClusterBadRoutesStart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	key := writeFile(t, strings.Repeat("cd", 32)+"\n")
	self := freePort(t)
	dead := freePort(t)
	adminAddr := freePort(t)
	c := startChild(t, "-tcp= -http=127.0.0.1:0 -admin="+adminAddr+" -node=lonely -cluster-embed="+self+
		" -cluster-routes=nats-route://"+self+",nats-route://"+dead+" -state-key-file="+key)
	require.Eventually(t, func() bool {
		l := c.log.String()
		return strings.Contains(l, "names this node itself") && strings.Contains(l, dead)
	}, 10*time.Second, 20*time.Millisecond, c.log.String())
	// Before its listeners are up /readyz says only "not ready"; once they
	// are, it names the cluster check that fails. Wait for that state.
	var status int
	var body []byte
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + adminAddr + "/readyz")
		if err != nil {
			return false
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		status = resp.StatusCode
		return strings.Contains(string(body), "cluster")
	}, 10*time.Second, 20*time.Millisecond)
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.Contains(t, string(body), "no route")
	// It serves what it owns: a session on it works.
	req, _ := http.NewRequest(http.MethodPost, "http://"+c.addr+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.True(t, strings.HasPrefix(resp.Header.Get("Mcp-Session-Id"), "lonely."))
	resp, err = http.Get("http://" + adminAddr + "/metrics")
	require.NoError(t, err)
	var m bytes.Buffer
	_, _ = m.ReadFrom(resp.Body)
	resp.Body.Close()
	assert.Contains(t, m.String(), "mcpedge_cluster_ready 0")
	code, _ := c.stop(syscall.SIGTERM)
	assert.Equal(t, 0, code, c.log.String())
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// TestClusterURLRedacted: the password of a -cluster URL never reaches the
// log, neither where the node says it joined nor anywhere else.
func TestClusterURLRedacted(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary and a NATS server")
	}
	const user, pass = "mcpedge", "hunter2-cluster-pass-7c6d"
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true, NoLog: true, Username: user, Password: pass})
	require.NoError(t, err)
	go ns.Start()
	require.True(t, ns.ReadyForConnections(10*time.Second))
	defer ns.Shutdown()
	key := writeFile(t, strings.Repeat("ef", 32)+"\n")
	url := "nats://" + user + ":" + pass + "@" + ns.Addr().String()
	c := startChild(t, "-tcp= -http=127.0.0.1:0 -admin= -node=r -log-level=debug -cluster="+url+" -state-key-file="+key)
	require.Eventually(t, func() bool { return strings.Contains(c.log.String(), "joined the cluster") }, 10*time.Second, 20*time.Millisecond)
	code, _ := c.stop(syscall.SIGTERM)
	assert.Equal(t, 0, code)
	log := c.log.String()
	assert.NotContains(t, log, pass)
	assert.Contains(t, log, "nats://"+user+":[REDACTED]@"+ns.Addr().String())
}

// TestClusterGatewayPeers: two gateway nodes of a cluster tell each other
// the state of their upstreams; /upstreams and /metrics show what the
// other reports.
func TestClusterGatewayPeers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	key := writeFile(t, strings.Repeat("cd", 32)+"\n")
	file := writeConfig(t, selfTable("x", "conformance"))
	routeA, routeB := freePort(t), freePort(t)
	adminA, adminB := freePort(t), freePort(t)
	common := " -config " + file + " -tcp= -http=127.0.0.1:0 -state-key-file=" + key
	a := startChild(t, "-node=a -admin="+adminA+" -cluster-embed="+routeA+" -cluster-routes=nats-route://"+routeB+common)
	b := startChild(t, "-node=b -admin="+adminB+" -cluster-embed="+routeB+" -cluster-routes=nats-route://"+routeA+common)
	for _, tc := range []struct{ admin, peer string }{{adminA, "b"}, {adminB, "a"}} {
		var st struct {
			Upstreams []gateway.Status
			Peers     map[string]map[string]bool
		}
		require.Eventually(t, func() bool {
			resp, err := http.Get("http://" + tc.admin + "/upstreams")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			return json.NewDecoder(resp.Body).Decode(&st) == nil && st.Peers[tc.peer]["x"]
		}, 20*time.Second, 20*time.Millisecond, "%s learns that %s has x up", tc.admin, tc.peer)
		require.Len(t, st.Upstreams, 1)
		assert.Equal(t, "ready", st.Upstreams[0].State)
		resp, err := http.Get("http://" + tc.admin + "/metrics")
		require.NoError(t, err)
		var m bytes.Buffer
		_, _ = m.ReadFrom(resp.Body)
		resp.Body.Close()
		assert.Contains(t, m.String(), `mcpedge_upstream_peers_up{upstream="x"} 1`)
	}
	for _, c := range []*child{a, b} {
		code, _ := c.stop(syscall.SIGTERM)
		assert.Equal(t, 0, code, c.log.String())
	}
}

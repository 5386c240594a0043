package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// docExample returns the shell block of docs/cluster.md that follows the
// cluster-example marker.
func docExample(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "cluster.md"))
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(doc), "<!-- cluster-example:")
	require.True(t, ok, "docs/cluster.md has no cluster-example marker")
	_, rest, ok = strings.Cut(rest, "```sh\n")
	require.True(t, ok, "no sh block after the marker")
	block, _, ok := strings.Cut(rest, "```")
	require.True(t, ok, "the sh block does not end")
	return block
}

var (
	docListen = regexp.MustCompile(`-(tcp|http|admin|cluster-embed|cluster-link) 127\.0\.0\.1:(\d+)`)
	docPort   = regexp.MustCompile(`127\.0\.0\.1:(\d+)`)
)

// TestClusterDocExample runs docs/cluster.md's cluster example on this
// machine: the three nodes start, each listener on a port of its own,
// they route to each other (every /readyz is 200), and a session opened
// on node a is served through b and c. Each port of the doc is renumbered
// to a free one (one to one, so that ports the doc shares stay shared),
// so that the test does not depend on the doc's ports being free here.
func TestClusterDocExample(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three nodes")
	}
	block := docExample(t)

	// As written, no two listeners share a port.
	owner := map[string]string{}
	for _, m := range docListen.FindAllStringSubmatch(block, -1) {
		require.NotContains(t, owner, m[2], "port %s is both %s and -%s", m[2], owner[m[2]], m[1])
		owner[m[2]] = "-" + m[1]
	}
	require.Len(t, owner, 15, "three nodes, five listeners each")

	ports := map[string]string{}
	taken := map[string]bool{} // freePort may hand a port out twice
	for _, m := range docPort.FindAllStringSubmatch(block, -1) {
		if _, ok := ports[m[1]]; !ok {
			for {
				_, p, _ := net.SplitHostPort(freePort(t))
				if !taken[p] {
					ports[m[1]], taken[p] = p, true
					break
				}
			}
		}
	}
	addr := func(docPort string) string { return "127.0.0.1:" + ports[docPort] }
	script := docPort.ReplaceAllStringFunc(block, func(s string) string { return addr(strings.TrimPrefix(s, "127.0.0.1:")) })

	// "mcpedge" on PATH is this test binary, running the command.
	dir := t.TempDir()
	self, err := os.Executable()
	require.NoError(t, err)
	bin := filepath.Join(dir, "bin")
	require.NoError(t, os.Mkdir(bin, 0o755))
	wrapper := fmt.Sprintf("#!/bin/sh\n%s=argv exec %q \"$@\"\n", childEnv, self)
	require.NoError(t, os.WriteFile(filepath.Join(bin, "mcpedge"), []byte(wrapper), 0o755))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// SIGTERM to the script stops the nodes, and it waits for them to
	// exit; past ctx, the whole group is killed.
	cmd := exec.CommandContext(ctx, "bash", "-e", "-c", script+"\ntrap 'kill -TERM $(jobs -p); wait' TERM\nwait\n")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var log lockedBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	require.NoError(t, cmd.Start())
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
		}
	}
	defer stop()

	for _, admin := range []string{"7412", "7422", "7432"} {
		require.Eventually(t, func() bool {
			resp, err := http.Get("http://" + addr(admin) + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		}, time.Minute, 50*time.Millisecond, "node at admin %s not ready; log:\n%s", admin, log.String())
	}

	post := func(httpPort, session, body string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr(httpPort)+"/mcp", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		resp.Body.Close()
		return resp, string(b)
	}
	resp, _ := post("7411", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"doc","version":"1"}}}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	session := resp.Header.Get("Mcp-Session-Id")
	require.True(t, strings.HasPrefix(session, "a."), "a session of node a: %q", session)
	resp, body := post("7421", session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, "%s\nlog:\n%s", body, log.String())
	for _, node := range []string{"7421", "7431"} {
		resp, body := post(node, session, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
		assert.Equal(t, http.StatusOK, resp.StatusCode, "through %s: %s", node, body)
		assert.Contains(t, body, `"name":"echo"`, "through %s", node)
	}
	stop()
	assert.NotContains(t, log.String(), "mcpedge: -", "no node refused to start")
	assert.Equal(t, 3, strings.Count(log.String(), `msg=stopped exit=0`), "each node drained and exited 0:\n%s", log.String())
}

package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/client"
	"github.com/mcpedge/mcpedge/gateway"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// selfTable is an [upstream.NAME] table running this test binary as an
// mcpedge on stdio with a handler set (TestMain's child mode).
func selfTable(name, set string) string {
	return "[upstream." + name + "]\ncommand = " + strconv.Quote(os.Args[0]) +
		"\nenv = { " + childEnv + " = \"1\", MCPEDGE_TEST_ARGS = \"-stdio -handlers " + set + "\" }\n"
}

// TestUpstreamConfig: -upstream, its environment twin and the config
// file's upstream key, as specs or tables; every error names the flag
// or the key.
func TestUpstreamConfig(t *testing.T) {
	t.Setenv("UPSTREAM_TOKEN", "s3cret")
	hdr := writeFile(t, "# static credentials\nX-Api-Key: k1\n")
	file := writeConfig(t, `
[upstream.docs]
url = "http://127.0.0.1:9/mcp"
prefix = "d."
share = "pool:3"
timeout = "5s"
max-inflight = 10
rate = 2.5
burst = 5
headers = { "X-Static" = "v" }
headers-file = "`+hdr+`"
headers-env = { Authorization = "UPSTREAM_TOKEN" }
[upstream.docs.tools]
allow = ["search*"]
deny = ["search_admin"]
rename = { search = "find" }

[upstream.local]
command = "sh"
args = ["-c", "exec cat"]
env = { A = "1" }
share = "session"
lazy = true
`)
	c, err := parse([]string{"-config", file}, io.Discard)
	require.NoError(t, err)
	ups, err := c.gateway.upstreams.Upstreams()
	require.NoError(t, err)
	require.Len(t, ups, 2)
	d, l := ups[0], ups[1]
	assert.Equal(t, "docs", d.Name)
	assert.Equal(t, gateway.HTTP, d.Transport)
	require.NotNil(t, d.Prefix)
	assert.Equal(t, "d.", *d.Prefix)
	assert.Equal(t, gateway.Share{Pool: 3}, d.Share)
	assert.Equal(t, 5*time.Second, d.Timeout)
	assert.Equal(t, 10, d.MaxInflight)
	assert.Equal(t, 2.5, d.Rate)
	assert.Equal(t, 5, d.Burst)
	assert.Equal(t, map[string]string{"X-Static": "v", "X-Api-Key": "k1", "Authorization": "s3cret"}, d.Headers)
	assert.Equal(t, []string{"search*"}, d.Allow)
	assert.Equal(t, map[string]string{"search": "find"}, d.Rename)
	assert.Equal(t, gateway.Stdio, l.Transport)
	assert.Equal(t, "sh", l.Command)
	assert.Equal(t, []string{"-c", "exec cat"}, l.Args)
	assert.Equal(t, []string{"A=1"}, l.Env)
	assert.True(t, l.Share.Session)
	assert.True(t, l.Lazy)
	assert.False(t, c.handlersSet)

	t.Run("specs", func(t *testing.T) {
		t.Setenv("MCPEDGE_UPSTREAM", "a=stdio:sh -c 'exec cat'\nb=tcp://127.0.0.1:9")
		c, err := parse(nil, io.Discard)
		require.NoError(t, err)
		ups, err := c.gateway.upstreams.Upstreams()
		require.NoError(t, err)
		require.Len(t, ups, 2)
		assert.Equal(t, []string{"-c", "exec cat"}, ups[0].Args)
		assert.Equal(t, gateway.TCP, ups[1].Transport)

		c, err = parse([]string{"-upstream", "x=tcp://127.0.0.1:9", "-upstream", "y=http://127.0.0.1:9/mcp", "-handlers", "demo"}, io.Discard)
		require.NoError(t, err, "flags win over the environment")
		ups, err = c.gateway.upstreams.Upstreams()
		require.NoError(t, err)
		assert.Equal(t, "x", ups[0].Name)
		assert.Equal(t, "y", ups[1].Name)
		assert.True(t, c.handlersSet)

		file := writeConfig(t, "upstream = [\"a=tcp://127.0.0.1:9\", \"b=stdio:sh -c 'a, b'\"]\n")
		t.Setenv("MCPEDGE_UPSTREAM", "")
		os.Unsetenv("MCPEDGE_UPSTREAM")
		c, err = parse([]string{"-config", file}, io.Discard)
		require.NoError(t, err)
		ups, err = c.gateway.upstreams.Upstreams()
		require.NoError(t, err)
		require.Len(t, ups, 2)
		assert.Equal(t, []string{"-c", "a, b"}, ups[1].Args, "an array's items are not split on commas")
	})

	for _, tt := range []struct {
		name, text, want string
	}{
		{"unknown key", "[upstream.x]\ncommand = \"sh\"\nbogus = 1\n", `unknown key "upstream.x.bogus"`},
		{"unknown tools key", "[upstream.x]\ncommand = \"sh\"\n[upstream.x.tools]\nallowed = [\"a\"]\n", `unknown key "upstream.x.tools.allowed"`},
		{"wrong type", "[upstream.x]\ncommand = \"sh\"\nmax-inflight = \"ten\"\n", `key "upstream.x.max-inflight"`},
		{"command and url", "[upstream.x]\ncommand = \"sh\"\nurl = \"http://h/\"\n", `key "upstream.x.url"`},
		{"neither", "[upstream.x]\nprefix = \"p\"\n", `key "upstream.x.command"`},
		{"bad share", "[upstream.x]\ncommand = \"sh\"\nshare = \"all\"\n", `key "upstream.x.share"`},
		{"bad timeout", "[upstream.x]\ncommand = \"sh\"\ntimeout = \"soon\"\n", `key "upstream.x.timeout"`},
		{"negative rate", "[upstream.x]\ncommand = \"sh\"\nrate = -1\n", `key "upstream.x.rate": -1: must be a non-negative number`},
		{"rate not a number", "[upstream.x]\ncommand = \"sh\"\nrate = \"fast\"\n", `key "upstream.x.rate": must be a number`},
		{"unset variable", "[upstream.x]\nurl = \"http://h/\"\nheaders-env = { A = \"NO_SUCH_VARIABLE_HERE\" }\n", `key "upstream.x.headers-env.A"`},
		{"command not found", "[upstream.x]\ncommand = \"/nonexistent/mcp-server\"\n", `upstream "x": command "/nonexistent/mcp-server"`},
		{"bad url", "[upstream.x]\nurl = \"http://\"\n", `upstream "x": url`},
		{"bad name", "upstream = [\"a b=tcp://h:1\"]\n", `upstream "a b"`},
		{"not a spec", "upstream = [\"nothing\"]\n", `upstream "nothing"`},
		{"bad pattern", "[upstream.x]\ncommand = \"sh\"\n[upstream.x.tools]\ndeny = [\"[\"]\n", `tools pattern "["`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse([]string{"-config", writeConfig(t, tt.text)}, io.Discard)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	t.Run("duplicate", func(t *testing.T) {
		_, err := parse([]string{"-upstream", "a=tcp://h:1", "-upstream", "a=tcp://h:2"}, io.Discard)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `upstream "a": configured twice`)
	})
}

// TestGatewayServes: mcpedge with an upstream serves the upstream's
// tools, not the built-in handlers (unless -handlers is given).
func TestGatewayServes(t *testing.T) {
	file := writeConfig(t, selfTable("x", "conformance"))
	s := startStdio(t, "-config", file)
	s.call(1, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)
	m := s.call(2, "tools/list", `{}`)
	assert.Contains(t, string(m.Result), `"test_simple_text"`)
	assert.NotContains(t, string(m.Result), `"echo"`, "the built-in demo set is off")
	m = s.call(3, "tools/call", `{"name":"test_simple_text","arguments":{}}`)
	assert.Equal(t, "This is a simple text response for testing.", toolText(t, m))

	s = startStdio(t, "-config", file, "-handlers", "demo")
	s.call(1, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)
	m = s.call(2, "tools/list", `{}`)
	assert.Contains(t, string(m.Result), `"test_simple_text"`)
	assert.Contains(t, string(m.Result), `"echo"`, "asked for")
}

// TestGatewayCollisionRefused: two upstreams serving the same name is a
// start-up error naming both.
func TestGatewayCollisionRefused(t *testing.T) {
	file := writeConfig(t, selfTable("a", "conformance")+"prefix = \"\"\n"+selfTable("b", "conformance")+"prefix = \"\"\n")
	var stderr lockedBuffer
	code := run([]string{"-stdio", "-config", file}, strings.NewReader(""), io.Discard, &stderr)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr.String(), `upstream "a"`)
	assert.Contains(t, stderr.String(), `upstream "b"`)
}

// TestGatewayReloadRejectsBadConfig: SIGHUP's reload refuses a bad
// upstream configuration whole, naming the key.
func TestGatewayReloadRejectsBadConfig(t *testing.T) {
	e := newReloadEnv(t, selfTable("x", "conformance"))
	e.rewrite(t, selfTable("x", "conformance")+"max-inflight = -1\n")
	err := e.r.reload()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `key "upstream.x.max-inflight"`)
	e.rewrite(t, selfTable("x", "conformance")+"[upstream.y]\ncommand = \"/nonexistent/server\"\n")
	err = e.r.reload()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `upstream "y"`)
}

// TestGatewayAdminAndShutdown: the admin listener shows the upstreams
// (/upstreams, metrics, readiness), and SIGTERM stops the stdio children.
func TestGatewayAdminAndShutdown(t *testing.T) {
	file := writeConfig(t, selfTable("x", "conformance"))
	adminAddr := freePort(t)
	c := startChild(t, "-config "+file+" -tcp 127.0.0.1:0 -http= -admin "+adminAddr+" -log-level info")
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + adminAddr + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	code, body := get("/upstreams")
	require.Equal(t, http.StatusOK, code)
	var st struct{ Upstreams []gateway.Status }
	require.NoError(t, json.Unmarshal([]byte(body), &st), body)
	require.Len(t, st.Upstreams, 1)
	assert.Equal(t, "x", st.Upstreams[0].Name)
	assert.Equal(t, "ready", st.Upstreams[0].State)
	assert.Equal(t, 1, st.Upstreams[0].Children)
	assert.NotZero(t, st.Upstreams[0].Tools)
	_, body = get("/metrics")
	assert.Contains(t, body, `mcpedge_upstream_up{upstream="x"} 1`)
	assert.Contains(t, body, `mcpedge_upstream_children{upstream="x"} 1`)
	code, _ = get("/readyz")
	assert.Equal(t, http.StatusOK, code)

	m := regexp.MustCompile(`upstream stderr.* pid=([0-9]+)`).FindStringSubmatch(c.log.String())
	require.NotNil(t, m, c.log.String())
	pid, _ := strconv.Atoi(m[1])
	require.NoError(t, syscall.Kill(pid, 0), "the child runs")
	exit, _ := c.stop(syscall.SIGTERM)
	assert.Equal(t, 0, exit)
	assert.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "the child stopped with the gateway")
}

// TestGatewayMetricsPassPromlint: with upstreams configured, /metrics
// still passes promtool's checks (promlint; promtool itself where it is
// installed): every mcpedge_upstream_* family has its help text and type
// once, its series together; the per-upstream errors by class and the
// latency histogram are there, and a proxied tool's series names its
// upstream. /status.json lists the upstreams for the status page.
func TestGatewayMetricsPassPromlint(t *testing.T) {
	file := writeConfig(t, selfTable("x", "conformance")+selfTable("y", "bench"))
	adminAddr := freePort(t)
	c := startChild(t, "-config "+file+" -tcp 127.0.0.1:0 -http= -admin "+adminAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, &client.TCPTransport{Addr: c.addr}, client.Options{Era: client.EraLegacy})
	require.NoError(t, err)
	defer cl.Close()
	for range 3 {
		_, err = cl.CallTool(ctx, "x_test_simple_text", map[string]any{})
		require.NoError(t, err)
	}
	_, err = cl.CallTool(ctx, "y_echo", map[string]any{"text": "hi"})
	require.NoError(t, err)

	resp, err := http.Get("http://" + adminAddr + "/metrics")
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	body := string(b)
	problems, err := promlint.New(strings.NewReader(body)).Lint()
	require.NoError(t, err)
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	// Metadata once per family, before its series, which are together.
	seen, done := map[string]bool{}, map[string]bool{}
	cur := ""
	for _, line := range strings.Split(body, "\n") {
		switch {
		case strings.HasPrefix(line, "# HELP mcpedge_upstream_"):
			f := strings.Fields(line)
			assert.Greater(t, len(f), 3, "help text of %s", f[2])
		case strings.HasPrefix(line, "# TYPE "):
			f := strings.Fields(line)
			assert.False(t, seen[f[2]], "second TYPE of %s", f[2])
			seen[f[2]] = true
		case strings.HasPrefix(line, "mcpedge_upstream_"):
			fam := line[:strings.IndexAny(line, "{ ")]
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				if base := strings.TrimSuffix(fam, suf); base != fam && seen[base] {
					fam = base
				}
			}
			require.True(t, seen[fam], "series of %s before its TYPE", fam)
			if fam != cur {
				assert.False(t, done[fam], "series of %s not together", fam)
				if cur != "" {
					done[cur] = true
				}
				cur = fam
			}
		}
	}
	for _, want := range []string{
		`mcpedge_upstream_up{upstream="x"} 1`,
		`mcpedge_upstream_up{upstream="y"} 1`,
		`mcpedge_upstream_calls_total{upstream="x"} 3`,
		`mcpedge_upstream_errors_total{upstream="x",class="timeout"} 0`,
		`mcpedge_upstream_request_duration_seconds_count{upstream="x"} 3`,
		`mcpedge_upstream_request_duration_seconds_bucket{upstream="y",le="+Inf"} 1`,
		`mcpedge_tool_calls_total{tool="x_test_simple_text",upstream="x",outcome="ok"} 3`,
		`mcpedge_tool_calls_total{tool="y_echo",upstream="y",outcome="ok"} 1`,
	} {
		assert.Contains(t, body, want)
	}
	if promtool, err := exec.LookPath("promtool"); err == nil {
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = strings.NewReader(body)
		out, err := cmd.CombinedOutput()
		assert.NoError(t, err, "promtool check metrics:\n%s", out)
	}

	resp, err = http.Get("http://" + adminAddr + "/status.json")
	require.NoError(t, err)
	var st struct {
		Upstreams []struct {
			Name    string `json:"name"`
			Healthy bool   `json:"healthy"`
			State   string `json:"state"`
			Tools   int    `json:"tools"`
		} `json:"upstreams"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	resp.Body.Close()
	require.Len(t, st.Upstreams, 2)
	for i, name := range []string{"x", "y"} {
		assert.Equal(t, name, st.Upstreams[i].Name)
		assert.True(t, st.Upstreams[i].Healthy)
		assert.Equal(t, "ready", st.Upstreams[i].State)
		assert.NotZero(t, st.Upstreams[i].Tools)
	}
}

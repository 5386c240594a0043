package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/mcpedge/mcpedge/admin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// load calls echo over TCP until stop is closed, at most n times.
func load(t *testing.T, addr string, n int, stop <-chan struct{}) *sync.WaitGroup {
	c := dialSession(t, addr)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < n; i++ {
			select {
			case <-stop:
				return
			default:
			}
			c.id++
			c.send(`{"jsonrpc":"2.0","id":` + strconv.Itoa(c.id) + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)
			_ = c.c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.r.ReadString('\n'); err != nil {
				return
			}
		}
	}()
	return &wg
}

// TestStatusJSON: /status.json has the live figures the page shows.
func TestStatusJSON(t *testing.T) {
	s := serve(t)
	c := dialSession(t, s.tcp)
	for range 5 {
		c.tool("echo", `{"text":"hi"}`)
	}
	c.tool("nope", `{}`)
	s.m.SetUpstreams(func() []admin.Upstream {
		return []admin.Upstream{{Name: "files", Healthy: true, State: "connected", Tools: 3}}
	})
	code, body := get(t, "http://"+s.admin+"/status.json")
	require.Equal(t, http.StatusOK, code)
	var st admin.Status
	require.NoError(t, json.Unmarshal([]byte(body), &st), body)
	assert.Equal(t, 1, st.Sessions)
	assert.Equal(t, int64(1), st.Connections["tcp"])
	assert.Positive(t, st.Uptime)
	assert.Len(t, st.Buckets, len(admin.LatencyBuckets))
	calls := map[string]uint64{}
	for _, ts := range st.Tools {
		calls[ts.Tool] = ts.Calls
		assert.Len(t, ts.Latency, len(admin.LatencyBuckets)+1)
	}
	assert.Equal(t, uint64(5), calls["echo"])
	assert.Equal(t, uint64(1), calls["other"])
	assert.Contains(t, calls, "add", "registered tools are listed before their first call")
	var toolsCall uint64
	for _, m := range st.Methods {
		if m.Method == "tools/call" {
			toolsCall = m.Requests
		}
	}
	assert.Equal(t, uint64(6), toolsCall)
	var names []string
	for _, l := range st.Listeners {
		names = append(names, l.Name)
	}
	assert.ElementsMatch(t, []string{"tcp", "http", "admin"}, names)
	require.Len(t, st.Upstreams, 1)
	assert.Equal(t, "files", st.Upstreams[0].Name)
	assert.Nil(t, st.Cluster, "no cluster: none shown")
}

// chromium returns the path of a Chromium, or skips the test.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no Chromium found, and .ci/run installs it: the status page must be loaded in a browser in CI")
	}
	t.Skip("no Chromium found (apt-get install chromium; CI installs it): the status page is not loaded in a browser")
	return ""
}

// TestStatusPageInBrowser loads the status page in headless Chromium while
// a client calls a tool, and checks that it renders the live figures: the
// tool's and the method's rate and p99, sessions, listeners, upstreams and
// their health, the cluster's node and peers.
func TestStatusPageInBrowser(t *testing.T) {
	path := chromium(t)
	s := serve(t)
	s.ready.SetReady(true)
	s.m.SetUpstreams(func() []admin.Upstream {
		return []admin.Upstream{
			{Name: "files", Healthy: true, State: "connected", Tools: 3},
			{Name: "search", Healthy: false, State: "restarting", Detail: "exit status 1", Tools: 2},
		}
	})
	s.m.SetCluster(func() *admin.ClusterStatus {
		return &admin.ClusterStatus{Node: "edge-a", Ready: true, Routes: 1, Configured: 2,
			Peers: []admin.Peer{{Name: "edge-b", Addr: "10.0.0.12:6222", Connections: 4}}}
	})
	stop := make(chan struct{})
	wg := load(t, s.tcp, 200000, stop)
	defer wg.Wait()
	defer close(stop)

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 60*time.Second)
	defer cancelT()

	cell := func(row, col string) string {
		return `((document.querySelector('` + row + ` td.` + col + `') || {}).textContent || "")`
	}
	_, err := chromedp.Run(ctx, chromedp.Navigate("http://"+s.admin+"/?every=250"))
	require.NoError(t, err)
	// A rate needs two polls: wait for the tool's to be a figure.
	rps := cell(`tr[data-tool="echo"]`, "rps")
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`/^[0-9.,]+$/.test(`+rps+`) && parseFloat(`+rps+`.replace(/,/g, "")) > 0`, chromedp.WithPollingTimeout(30*time.Second)))
	require.NoError(t, err)
	row := func(sel string) map[string]string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`(() => { const o = {}; for (const td of document.querySelector('`+sel+`').querySelectorAll('td[class]')) o[td.className] = td.textContent; return o; })()`))
		require.NoError(t, err)
		return v
	}
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.TextContent(sel))
		require.NoError(t, err)
		return v
	}
	tool, method := row(`tr[data-tool="echo"]`), row(`tr[data-method="tools/call"]`)
	sessions, state, listeners := text("#sessions"), text("#state"), text("#listeners")
	upstreams, cluster, peers := text("#upstreams"), text("#cluster"), text("#peers")
	title, err := chromedp.Run(ctx, chromedp.Title())
	require.NoError(t, err)
	assert.Equal(t, "mcpedge status", title)
	calls, err := strconv.Atoi(strings.ReplaceAll(tool["calls"], ",", ""))
	require.NoError(t, err, tool)
	assert.Positive(t, calls)
	assert.Regexp(t, `^[0-9.]+ (µs|ms|s)$`, tool["p99"], "the tool's p99")
	assert.Regexp(t, `^[0-9.,]+$`, method["rps"], "the method's rate")
	assert.Regexp(t, `^[0-9.]+ (µs|ms|s)$`, method["p99"], "the method's p99")
	assert.Equal(t, "1", sessions, "the load's session")
	assert.Equal(t, "ready", state)
	for _, want := range []string{"tcp", s.tcp, "http", s.http, "admin", s.admin} {
		assert.Contains(t, listeners, want)
	}
	for _, want := range []string{"files", "connected", "search", "restarting", "exit status 1"} {
		assert.Contains(t, upstreams, want)
	}
	assert.Contains(t, cluster, "edge-a")
	assert.Contains(t, cluster, "routed to 1 of 2 peers")
	assert.Contains(t, peers, "edge-b")
	assert.Contains(t, peers, "10.0.0.12:6222")
}

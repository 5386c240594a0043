package admin_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge"
	"github.com/mcpedge/mcpedge/admin"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers/builtin"
	"github.com/mcpedge/mcpedge/session"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// served is an mcpedge server over TCP and HTTP with metrics, and its admin
// listener.
type served struct {
	srv              *mcpedge.Server
	m                *admin.Metrics
	ready            *admin.Readiness
	tcp, http, admin string
}

func serve(t *testing.T) *served {
	t.Helper()
	m := admin.NewMetrics()
	opts := mcpedge.Options{
		EngineOptions: mcpedge.EngineOptions{Observer: m, Bus: m.Bus(session.NewLocalBus())},
		TCP:           &mcpedge.TCPOptions{Addr: "127.0.0.1:0", Loops: 1},
		HTTP:          &mcpedge.HTTPOptions{Addr: "127.0.0.1:0"},
	}
	srv := mcpedge.New(opts)
	require.NoError(t, builtin.Install("bench", srv.Registry(), builtin.Env{ResourceUpdated: srv.ResourceUpdated}))
	ready := new(admin.Readiness)
	as, err := admin.Listen("127.0.0.1:0", m, ready, nil)
	require.NoError(t, err)
	m.Attach(srv)
	go func() { _ = as.Serve() }()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = as.Shutdown(context.Background())
	})
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	return &served{srv: srv, m: m, ready: ready,
		tcp: srv.TCPAddr(wctx).String(), http: srv.HTTPAddr(wctx).String(), admin: as.Addr().String()}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// scrape reads /metrics and parses the Prometheus text format: every
// sample line's series (name and labels, as written) to its value.
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	code, body := get(t, "http://"+addr+"/metrics")
	require.Equal(t, http.StatusOK, code)
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		require.Positive(t, i, "sample line %q", line)
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, "sample line %q", line)
		series := line[:i]
		if j := strings.IndexByte(series, '{'); j >= 0 {
			require.True(t, strings.HasSuffix(series, "}"), "labels of %q", line)
		}
		_, dup := out[series]
		require.False(t, dup, "series %q twice", series)
		out[series] = v
	}
	return out
}

// tcpTraffic runs a session over TCP: initialize, 3 pings, an echo call,
// and a method nobody serves.
func tcpTraffic(t *testing.T, addr string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	r := bufio.NewReader(c)
	call := func(line string) string {
		_, err := io.WriteString(c, line+"\n")
		require.NoError(t, err)
		if !strings.Contains(line, `"id"`) {
			return ""
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		ans, err := r.ReadString('\n')
		require.NoError(t, err)
		return ans
	}
	assert.Contains(t, call(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`), `"result"`)
	call(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for i := range 3 {
		assert.Contains(t, call(`{"jsonrpc":"2.0","id":`+strconv.Itoa(10+i)+`,"method":"ping"}`), `"result"`)
	}
	assert.Contains(t, call(`{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`), `hi`)
	assert.Contains(t, call(`{"jsonrpc":"2.0","id":21,"method":"no/such/method"}`), `-32601`)
}

// httpTraffic runs a session over Streamable HTTP: initialize and a ping.
func httpTraffic(t *testing.T, addr string) {
	t.Helper()
	post := func(sid, body string) (*http.Response, string) {
		req, err := http.NewRequest("POST", "http://"+addr+"/mcp", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, string(b)
	}
	resp, body := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	sid := resp.Header.Get("Mcp-Session-Id")
	require.NotEmpty(t, sid)
	post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	_, body = post(sid, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	assert.Contains(t, body, `"result"`)
	_, body = post(sid, `{"jsonrpc":"2.0","id":3,"method":"no/such/method"}`)
	assert.Contains(t, body, `-32601`)
}

func TestMetricsAfterTraffic(t *testing.T) {
	s := serve(t)
	tcpTraffic(t, s.tcp)
	httpTraffic(t, s.http)
	s.srv.ResourceUpdated("bench://nothing") // a bus message

	var got map[string]float64
	// The TCP connection's close is counted by its event loop: wait for it.
	require.Eventually(t, func() bool {
		got = scrape(t, s.admin)
		return got[`mcpedge_connections_closed_total{transport="tcp",reason="closed"}`] == 1
	}, 5*time.Second, 10*time.Millisecond)

	assert.Equal(t, 3.0, got[`mcpedge_requests_total{transport="tcp",method="ping"}`])
	assert.Equal(t, 1.0, got[`mcpedge_requests_total{transport="tcp",method="initialize"}`])
	assert.Equal(t, 1.0, got[`mcpedge_requests_total{transport="tcp",method="tools/call"}`])
	assert.Equal(t, 1.0, got[`mcpedge_requests_total{transport="tcp",method="other"}`], "unknown methods are other")
	assert.Equal(t, 1.0, got[`mcpedge_request_errors_total{transport="tcp",code="-32601"}`])
	assert.Equal(t, 1.0, got[`mcpedge_requests_total{transport="http",method="ping"}`])
	assert.Equal(t, 1.0, got[`mcpedge_requests_total{transport="http",method="initialize"}`])
	// Requests served on the worker pool (here: the unknown methods) are
	// all timed; answers given at once, one in 16 (engine.Observer).
	for _, tr := range []string{"tcp", "http"} {
		for _, le := range append([]float64{}, admin.LatencyBuckets...) {
			assert.Contains(t, got, `mcpedge_request_duration_seconds_bucket{transport="`+tr+`",method="other",le="`+strconv.FormatFloat(le, 'g', -1, 64)+`"}`)
		}
		assert.Equal(t, 1.0, got[`mcpedge_request_duration_seconds_bucket{transport="`+tr+`",method="other",le="+Inf"}`])
		assert.Equal(t, 1.0, got[`mcpedge_request_duration_seconds_count{transport="`+tr+`",method="other"}`])
		assert.Contains(t, got, `mcpedge_request_duration_seconds_sum{transport="`+tr+`",method="other"}`)
	}
	assert.LessOrEqual(t, got[`mcpedge_request_duration_seconds_count{transport="tcp",method="ping"}`], 3.0)
	assert.Equal(t, 1.0, got[`mcpedge_connections_accepted_total{transport="tcp"}`])
	assert.Equal(t, 0.0, got[`mcpedge_connections_open{transport="tcp"}`])
	assert.GreaterOrEqual(t, got[`mcpedge_connections_accepted_total{transport="http"}`], 1.0)
	assert.Greater(t, got[`mcpedge_received_bytes_total{transport="tcp"}`], 300.0)
	assert.Greater(t, got[`mcpedge_sent_bytes_total{transport="tcp"}`], 300.0)
	assert.Greater(t, got[`mcpedge_received_bytes_total{transport="http"}`], 100.0)
	assert.Equal(t, 1.0, got[`mcpedge_sessions_closed_total{transport="tcp",reason="closed"}`])
	assert.Equal(t, 1.0, got[`mcpedge_sessions_live`], "the HTTP session")
	assert.GreaterOrEqual(t, got[`mcpedge_bus_published_total`], 1.0)
	for _, series := range []string{
		`mcpedge_requests_in_flight`, `mcpedge_workers_busy`, `mcpedge_workers_queued`,
		`mcpedge_event_store_bytes`, `mcpedge_panics_total`, `mcpedge_auth_failures_total{reason="missing"}`,
		`go_goroutines`, `process_cpu_seconds_total`,
	} {
		assert.Contains(t, got, series)
	}

	s.m.AuthFailed("invalid")
	s.m.AuthFailed("insufficient_scope")
	s.m.AuthFailed("insufficient_scope")
	s.m.AuthFailed("made-up")
	(*admin.Metrics)(nil).AuthFailed("invalid") // nil-safe
	got = scrape(t, s.admin)
	assert.Equal(t, 0.0, got[`mcpedge_auth_failures_total{reason="missing"}`])
	assert.Equal(t, 1.0, got[`mcpedge_auth_failures_total{reason="invalid"}`])
	assert.Equal(t, 2.0, got[`mcpedge_auth_failures_total{reason="insufficient_scope"}`])
	assert.Equal(t, 1.0, got[`mcpedge_auth_failures_total{reason="other"}`], "reasons are bounded")
}

func TestHealthAndReadiness(t *testing.T) {
	s := serve(t)
	base := "http://" + s.admin
	code, _ := get(t, base+"/healthz")
	assert.Equal(t, http.StatusOK, code)
	code, body := get(t, base+"/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code, "not ready before SetReady")
	assert.Equal(t, "not ready\n", body)
	s.ready.SetReady(true)
	code, _ = get(t, base+"/readyz")
	assert.Equal(t, http.StatusOK, code)
	s.ready.SetDraining(true)
	code, body = get(t, base+"/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "draining\n", body)
	assert.True(t, s.ready.Draining())
	code, _ = get(t, base+"/healthz")
	assert.Equal(t, http.StatusOK, code, "healthy while draining")
}

func TestPprofOnAdminOnly(t *testing.T) {
	s := serve(t)
	code, body := get(t, "http://"+s.admin+"/debug/pprof/")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "goroutine")
	code, body = get(t, "http://"+s.admin+"/debug/pprof/goroutine?debug=1")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "goroutine profile")
	code, _ = get(t, "http://"+s.admin+"/debug/pprof/heap")
	assert.Equal(t, http.StatusOK, code)
	code, _ = get(t, "http://"+s.admin+"/debug/pprof/profile?seconds=1")
	assert.Equal(t, http.StatusOK, code)
	code, _ = get(t, "http://"+s.admin+"/debug/pprof/nosuch")
	assert.Equal(t, http.StatusNotFound, code)

	// Not on the MCP port, nor on http.DefaultServeMux.
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/metrics"} {
		code, body = get(t, "http://"+s.http+path)
		assert.NotEqual(t, http.StatusOK, code, path)
		assert.NotContains(t, body, "goroutine", path)
	}
	_, pattern := http.DefaultServeMux.Handler(&http.Request{Method: "GET", URL: mustURL(t, "http://x/debug/pprof/")})
	assert.Empty(t, pattern, "nothing registered on http.DefaultServeMux")
}

func TestReason(t *testing.T) {
	assert.Equal(t, "closed", admin.Reason(nil))
	assert.Equal(t, "other", admin.Reason(io.ErrUnexpectedEOF))
	assert.Equal(t, "closed", admin.Reason(session.ErrClosed))
}

func TestSetsAreSeparate(t *testing.T) {
	a, b := admin.NewMetrics(), admin.NewMetrics()
	a.AuthFailed("missing")
	var wa, wb bytes.Buffer
	a.Set().WritePrometheus(&wa)
	b.Set().WritePrometheus(&wb)
	assert.Contains(t, wa.String(), `mcpedge_auth_failures_total{reason="missing"} 1`)
	assert.Contains(t, wb.String(), `mcpedge_auth_failures_total{reason="missing"} 0`)
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	require.NoError(t, err)
	return u
}

// TestMethodLabelsFromTable: the method label's values are the engine's
// method table, each method counted under its own name, and any other
// method under "other".
func TestMethodLabelsFromTable(t *testing.T) {
	m := admin.NewMetrics()
	sess := session.New(context.Background(), nil)
	sess.Transport = "tcp"
	want := map[string]float64{"other": 2}
	for i := range engine.NumMethods {
		name := engine.MethodLabel(i)
		require.NotEqual(t, "other", name)
		m.RequestDone(sess, name, 0, -1)
		want[name]++
	}
	m.RequestDone(sess, "x/unknown", 0, -1)
	m.RequestDone(sess, "tools/cal", 0, -1)
	var b bytes.Buffer
	m.WritePrometheus(&b)
	got := map[string]float64{}
	for _, line := range strings.Split(b.String(), "\n") {
		const prefix = `mcpedge_requests_total{transport="tcp",method="`
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			name, n, _ := strings.Cut(rest, `"} `)
			v, err := strconv.ParseFloat(n, 64)
			require.NoError(t, err, line)
			got[name] = v
		}
	}
	assert.Equal(t, want, got)
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/internal/testcert"
	"github.com/mcpedge/mcpedge/internal/testserver"
	"github.com/mcpedge/mcpedge/loadtest"
	"github.com/mcpedge/mcpedge/transport/tcp"
	"github.com/mcpedge/mcpedge/transport/tlsconf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func serve(t *testing.T) string {
	t.Helper()
	addr, _ := testserver.TCP(t, testserver.Engine(t, "bench", engine.Options{}), tcp.Options{Loops: 1})
	return "tcp://" + addr
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-nope"},
		{"udp://x:1"},
		{"-mode", "other", "tcp://127.0.0.1:1"},
		{"-mix", "nope", "tcp://127.0.0.1:1"},
		{"-client", "-strategy", "nope", "tcp://127.0.0.1:1"},
		{"-protocol", "2099-01-01", "tcp://127.0.0.1:1"},
		{"-protocol", "2026-07-28", "-client", "tcp://127.0.0.1:1"},
		{"-protocol", "2026-07-28", "-mix", "echo,ping", "tcp://127.0.0.1:1"},
		{"-protocol", "2026-07-28", "-mode", "sessions", "tcp://127.0.0.1:1"},
		{"-bearer", "x", "tcp://127.0.0.1:1"},
		{"-bearer", "x", "-mode", "sessions", "http://127.0.0.1:1/mcp"},
		{"-bearer", "x", "-bearer-file", "f", "http://127.0.0.1:1/mcp"},
		{"tcp://127.0.0.1:1", "http://127.0.0.1:2/mcp"},
		{"tcp://127.0.0.1:1,http://127.0.0.1:2/mcp"},
		{"stdio:a", "stdio:b"},
		{"-client", "tcp://127.0.0.1:1,tcp://127.0.0.1:2"},
		{"-pids", "1,x", "tcp://127.0.0.1:1"},
		{"-pids", "0", "tcp://127.0.0.1:1"},
		{"-mode", "chaos", "-rss-budget-mib", "64", "tcp://127.0.0.1:1"},
		{"-mode", "chaos", "-good", "udp://x:1", "tcp://127.0.0.1:1"},
	} {
		var out, errb bytes.Buffer
		assert.Equal(t, 2, run(context.Background(), args, &out, &errb, false), "%v: %s", args, errb.String())
	}
	var out, errb bytes.Buffer
	assert.Equal(t, 0, run(context.Background(), []string{"-h"}, &out, &errb, false))
}

func TestRunWritesReports(t *testing.T) {
	target := serve(t)
	dir := t.TempDir()
	jsonPath, htmlPath := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.html")
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"-n", "300", "-warmup", "0", "-c", "2", "-mix", "echo=2,add=1,ping=1",
		"-json", jsonPath, "-html", htmlPath, "-max-error-rate", "0.001", target}, &out, &errb, false)
	require.Equal(t, 0, code, "%s%s", out.String(), errb.String())
	assert.Contains(t, out.String(), "throughput")
	assert.Contains(t, out.String(), "thresholds passed")

	data, err := os.ReadFile(jsonPath)
	require.NoError(t, err)
	var res loadtest.Result
	require.NoError(t, json.Unmarshal(data, &res))
	assert.Equal(t, loadtest.SchemaVersion, res.Schema)
	assert.Equal(t, int64(300), res.OK)
	require.NotNil(t, res.Latency)
	assert.Positive(t, res.Latency.P99)

	html, err := os.ReadFile(htmlPath)
	require.NoError(t, err)
	assert.Contains(t, string(html), "Latency by percentile")
}

func TestJSONToStdout(t *testing.T) {
	target := serve(t)
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"-n", "50", "-warmup", "0", "-json", "-", target}, &out, &errb, true)
	require.Equal(t, 0, code, errb.String())
	var res loadtest.Result
	require.NoError(t, json.Unmarshal(out.Bytes(), &res), out.String())
	assert.Equal(t, int64(50), res.OK)
}

func TestThresholdsFail(t *testing.T) {
	target := serve(t)
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"-n", "50", "-warmup", "0", "-max-p99", "1ns", target}, &out, &errb, false)
	assert.Equal(t, 1, code)
	assert.Contains(t, out.String(), "FAIL")
	assert.Contains(t, out.String(), "-max-p99")
}

func TestProgressOnTerminal(t *testing.T) {
	target := serve(t)
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"-duration", "700ms", "-warmup", "0", target}, &out, &errb, true)
	require.Equal(t, 0, code, errb.String())
	// The bar draws with carriage returns; the summary follows it.
	assert.Contains(t, out.String(), "\r")
	assert.Contains(t, out.String(), "throughput")

	out.Reset()
	code = run(context.Background(), []string{"-duration", "300ms", "-warmup", "0", target}, &out, &errb, false)
	require.Equal(t, 0, code)
	assert.False(t, strings.Contains(out.String(), "\r"), "no bar when stdout is not a terminal")
}

func TestDeadServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	var out, errb bytes.Buffer
	assert.Equal(t, 1, run(context.Background(), []string{"-n", "1", "-timeout", "1s", "tcp://" + addr}, &out, &errb, false))
	assert.Contains(t, errb.String(), "connect")
}

func serveDemo(t *testing.T) string {
	t.Helper()
	addr, _ := testserver.TCP(t, testserver.Engine(t, "demo", engine.Options{MaxMessage: 64 << 10}), tcp.Options{Loops: 1, MaxOutbound: 256 << 10})
	return "tcp://" + addr
}

func TestSoakMode(t *testing.T) {
	target := serveDemo(t)
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"-mode", "soak", "-c", "20", "-every", "200ms", "-duration", "1s",
		"-sample-every", "300ms", "-pid", strconv.Itoa(os.Getpid()), "-json", "-", target}, &out, &errb, false)
	require.Equal(t, 0, code, errb.String())
	var res loadtest.Result
	require.NoError(t, json.Unmarshal(out.Bytes(), &res), out.String())
	assert.Equal(t, "soak", res.Mode)
	require.NotNil(t, res.Soak)
	assert.Equal(t, 20, res.Soak.Opened)
	assert.Positive(t, res.Requests)
	require.NotNil(t, res.Soak.End)
	assert.Positive(t, res.Soak.End.FDs)
}

func TestChaosMode(t *testing.T) {
	target := serveDemo(t)
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"-mode", "chaos", "-hostile", "garbage=1,oversized=1,flood=1,hog=1,churn=1", "-duration", "1s",
		"-expect-max-message", "65536", "-flood-calls", "200", "-flood-args", `{"n":3,"delayMs":20}`, "-hog-sessions", "3", "-hog-calls", "5", "-fail-unexpected", "-c", "2", "-rate", "50", target}, &out, &errb, false)
	require.Equal(t, 0, code, "%s%s", out.String(), errb.String())
	for _, want := range []string{"chaos mode", "well-behaved", "garbage", "parse_error", "flood answers", "hog answers: result=", "all_served", "alive after the run"} {
		assert.Contains(t, out.String(), want)
	}
	assert.NotContains(t, out.String(), "half_sent", "kinds not asked are not listed")

	out.Reset()
	code = run(context.Background(), []string{"-mode", "chaos", "-hostile", "churn=1", "-duration", "500ms", "-json", "-", target}, &out, &errb, false)
	require.Equal(t, 0, code, errb.String())
	var res loadtest.Result
	require.NoError(t, json.Unmarshal(out.Bytes(), &res), out.String())
	assert.Equal(t, "chaos", res.Mode)
	require.NotNil(t, res.Chaos)
	assert.True(t, res.Chaos.ServerAlive)
	assert.Positive(t, res.OK, "the well-behaved clients' figures are at the top")
	var churn loadtest.ChaosKindResult
	for _, h := range res.Chaos.Hostile {
		if h.Kind == loadtest.ChaosChurn {
			churn = h
		}
	}
	assert.Positive(t, churn.AsExpected)

	var errOut bytes.Buffer
	assert.Equal(t, 2, run(context.Background(), []string{"-mode", "chaos", "-hostile", "nope=1", target}, &out, &errOut, false))
	assert.Contains(t, errOut.String(), "nope")
}

// TestChaosPerKind: -per-kind gives the well-behaved clients' figures
// beside each kind, and -pid the server's memory against -rss-budget-mib;
// a budget of 1 MiB is passed, and -fail-unexpected says so.
func TestChaosPerKind(t *testing.T) {
	target := serveDemo(t)
	var out, errb bytes.Buffer
	args := []string{"-mode", "chaos", "-per-kind", "-hostile", "garbage=1,sub_flood=1,task_hoard=1", "-duration", "500ms",
		"-c", "2", "-rate", "50", "-pid", strconv.Itoa(os.Getpid()), "-rss-budget-mib", "1", "-rss-settle", "2s", "-fail-unexpected"}
	code := run(context.Background(), append(args, target), &out, &errb, false)
	assert.Equal(t, 1, code, "the budget of 1 MiB is passed: %s%s", out.String(), errb.String())
	for _, want := range []string{"one kind at a time", "(none)", "garbage", "sub_flood", "OVER its budget of 1.0 MiB", "skipped: no tool with task support"} {
		assert.Contains(t, out.String(), want)
	}

	out.Reset()
	code = run(context.Background(), append(args[:len(args)-5], "-json", "-", target), &out, &errb, false)
	require.Equal(t, 0, code, errb.String())
	var res loadtest.Result
	require.NoError(t, json.Unmarshal(out.Bytes(), &res), out.String())
	require.NotNil(t, res.Chaos)
	require.Len(t, res.Chaos.Phases, 3, "none, garbage, sub_flood")
	var sum int64
	for i, p := range res.Chaos.Phases {
		assert.Equal(t, []loadtest.ChaosKind{"", loadtest.ChaosGarbage, loadtest.ChaosSubFlood}[i], p.Kind)
		assert.Positive(t, p.Requests, p.Kind)
		assert.Zero(t, p.Errors, p.Kind)
		require.NotNil(t, p.Latency, p.Kind)
		assert.Positive(t, p.RSSPeakBytes, p.Kind)
		sum += p.Requests
	}
	assert.Equal(t, sum, res.Requests, "the well-behaved clients' figures add up every phase")
	require.NotNil(t, res.Chaos.RSS)
	assert.Positive(t, res.Chaos.RSS.BaselineBytes)
	assert.GreaterOrEqual(t, res.Chaos.RSS.PeakBytes, res.Chaos.RSS.BaselineBytes/2)
	assert.Positive(t, res.Chaos.RSS.Samples)
	assert.True(t, res.Chaos.RSS.WithinBudget, "no budget")
}

func TestRunStateless(t *testing.T) {
	target := serve(t)
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"-n", "400", "-warmup", "0", "-c", "2", "-inflight", "4", "-protocol", "2026-07-28",
		"-mix", "echo=2,add=1,tools/list=1", "-json", "-", "-max-error-rate", "0", target}, &out, &errb, false)
	require.Equal(t, 0, code, "%s%s", out.String(), errb.String())
	var res loadtest.Result
	require.NoError(t, json.Unmarshal(out.Bytes(), &res))
	assert.Equal(t, "2026-07-28", res.Protocol)
	assert.Equal(t, int64(400), res.OK)
	assert.Zero(t, res.Errors)
}

func TestBearerTokens(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tokens")
	require.NoError(t, os.WriteFile(file, []byte("one\n\n  two  \r\nthree"), 0o600))
	got, err := bearerTokens(&options{bearerFile: file})
	require.NoError(t, err)
	assert.Equal(t, []string{"one", "two", "three"}, got)
	got, err = bearerTokens(&options{bearer: "solo"})
	require.NoError(t, err)
	assert.Equal(t, []string{"solo"}, got)
	got, err = bearerTokens(&options{})
	require.NoError(t, err)
	assert.Nil(t, got)
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte("\n \n"), 0o600))
	for _, o := range []*options{{bearer: "a", bearerFile: file}, {bearerFile: empty}, {bearerFile: filepath.Join(dir, "none")}} {
		_, err := bearerTokens(o)
		assert.Error(t, err)
	}
}

// TestBearerFileRoundRobin: mcpload -bearer-file sends the file's tokens
// in turn, one a request, to a server that checks them.
func TestBearerFileRoundRobin(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		var msg codec.Message
		body, _ := io.ReadAll(r.Body)
		if codec.Decode(body, &msg) != nil || msg.Kind == codec.KindNotification {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Mcp-Session-Id", "s1")
		switch msg.Method {
		case "initialize":
			_, _ = w.Write(codec.AppendResult(nil, msg.ID, []byte(`{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"fake","version":"0"}}`)))
		default:
			var p struct {
				Arguments struct {
					Text string `json:"text"`
				} `json:"arguments"`
			}
			_ = codec.Unmarshal(msg.Params, &p)
			_, _ = w.Write(codec.AppendResult(nil, msg.ID, []byte(`{"content":[{"type":"text","text":`+strconv.Quote(p.Arguments.Text)+`}]}`)))
		}
	}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "tokens")
	require.NoError(t, os.WriteFile(file, []byte("t1\nt2\nt3\nt4\n"), 0o600))
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"-q", "-n", "10", "-warmup", "0", "-bearer-file", file, srv.URL + "/mcp"}, &out, &errb, false)
	require.Equal(t, 0, code, "%s%s", out.String(), errb.String())
	mu.Lock()
	defer mu.Unlock()
	require.GreaterOrEqual(t, len(seen), 12)
	for i, a := range seen {
		assert.Equal(t, "Bearer t"+strconv.Itoa(i%4+1), a, "request %d", i)
	}
}

// TestSeveralTargets: two targets, as arguments or as one list, share the
// connections, and the report names both; -pids sums the processes.
func TestSeveralTargets(t *testing.T) {
	a, b := serve(t), serve(t)
	for _, targets := range [][]string{{a, b}, {a + "," + b}} {
		var out, errb bytes.Buffer
		pids := strconv.Itoa(os.Getpid()) + "," + strconv.Itoa(os.Getppid())
		args := append([]string{"-q", "-n", "200", "-warmup", "0", "-c", "4", "-pids", pids, "-json", "-"}, targets...)
		code := run(context.Background(), args, &out, &errb, false)
		require.Equal(t, 0, code, "%s%s", out.String(), errb.String())
		var res loadtest.Result
		require.NoError(t, json.Unmarshal(out.Bytes(), &res))
		assert.Equal(t, a+","+b, res.Target)
		assert.Zero(t, res.Errors)
		require.Len(t, res.Targets, 2)
		assert.Equal(t, loadtest.TargetResult{Target: a, Connections: 2}, res.Targets[0])
		assert.Equal(t, loadtest.TargetResult{Target: b, Connections: 2}, res.Targets[1])
		require.NotNil(t, res.Server)
		assert.Equal(t, []int{os.Getpid(), os.Getppid()}, res.Server.PIDs)
	}
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"-q", "-n", "50", "-warmup", "0", "-c", "2", a, b}, &out, &errb, false)
	require.Equal(t, 0, code, "%s%s", out.String(), errb.String())
	assert.Contains(t, out.String(), "target     "+a+","+b)
	assert.Contains(t, out.String(), "connections")
}

// TestTCPS: mcpload speaks TLS to a TCP server serving it (tcps://), on
// its pipelined path and through the client pool, with a client
// certificate for mutual TLS; a server certificate it does not trust, or
// no client certificate where one is required, fails the run.
func TestTCPS(t *testing.T) {
	ca, clients := testcert.NewCA(t, "ca"), testcert.NewCA(t, "clients")
	p, cp := ca.Server(t, "server"), clients.Client(t, "mcpload")
	cfg, err := tlsconf.Files{Cert: p.CertFile, Key: p.KeyFile, ClientCA: clients.File}.Load()
	require.NoError(t, err)
	addr, _ := testserver.TCP(t, testserver.Engine(t, "bench", engine.Options{}), tcp.Options{Loops: 1, TLS: tlsconf.New(cfg)})
	target := "tcps://" + addr
	tlsArgs := []string{"-tls-ca", ca.File, "-tls-cert", cp.CertFile, "-tls-key", cp.KeyFile}
	for _, extra := range [][]string{{"-inflight", "8"}, {"-client"}} {
		var out, errb bytes.Buffer
		args := append(append(append([]string{"-n", "200", "-warmup", "0", "-c", "2", "-json", "-"}, tlsArgs...), extra...), target)
		require.Equal(t, 0, run(context.Background(), args, &out, &errb, true), "%v: %s", extra, errb.String())
		var res loadtest.Result
		require.NoError(t, json.Unmarshal(out.Bytes(), &res), out.String())
		assert.Equal(t, int64(200), res.OK)
		assert.Equal(t, target, res.Target)
	}
	for name, args := range map[string][]string{
		"untrusted server": {"-tls-cert", cp.CertFile, "-tls-key", cp.KeyFile},
		"no certificate":   {"-tls-ca", ca.File},
	} {
		t.Run(name, func(t *testing.T) {
			var out, errb bytes.Buffer
			args := append(append([]string{"-n", "10", "-warmup", "0", "-timeout", "2s"}, args...), target)
			assert.NotEqual(t, 0, run(context.Background(), args, &out, &errb, true))
		})
	}
	var out, errb bytes.Buffer
	assert.Equal(t, 2, run(context.Background(), []string{"-tls-ca", ca.File, "tcp://" + addr}, &out, &errb, false), "TLS flags without a tcps target")
}

package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/internal/testcert"
	mcphttp "github.com/mcpedge/mcpedge/transport/http"
	"github.com/mcpedge/mcpedge/transport/netlimit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reloadEnv is a server built from a config file, not serving, and its
// reloader.
type reloadEnv struct {
	file  string
	level *slog.LevelVar
	srv   *mcpedge.Server
	tls   *mcphttp.TLS
	r     *reloader
	log   *lockedBuffer
}

func newReloadEnv(t *testing.T, text string, args ...string) *reloadEnv {
	t.Helper()
	e := &reloadEnv{file: writeConfig(t, text), level: new(slog.LevelVar), log: new(lockedBuffer)}
	args = append([]string{"-config", e.file}, args...)
	c, err := parse(args, io.Discard)
	require.NoError(t, err)
	l, err := parseLevel(c.logLevel)
	require.NoError(t, err)
	e.level.Set(l)
	if c.tlsCert != "" {
		cfg, err := tlsFiles(c).Load()
		require.NoError(t, err)
		e.tls = mcphttp.NewTLS(cfg)
	}
	e.srv = mcpedge.New(mcpedge.Options{
		EngineOptions: mcpedge.EngineOptions{MaxInflight: orNone(c.maxInflight), Rate: c.rate},
		HTTP:          &mcpedge.HTTPOptions{Addr: "127.0.0.1:0", AllowedHosts: splitList(c.allowHosts), TLS: e.tls},
	})
	t.Cleanup(func() { _ = e.srv.Shutdown(context.Background()) })
	e.r, err = newReloader(args, c, slog.New(slog.NewTextHandler(e.log, nil)), e.level, e.srv, e.tls)
	require.NoError(t, err)
	return e
}

func (e *reloadEnv) rewrite(t *testing.T, text string) {
	t.Helper()
	require.NoError(t, os.WriteFile(e.file, []byte(text), 0o600))
}

// A reload applies a changed log level, limits and allow-lists, and logs
// what needs a restart.
func TestReloadApplies(t *testing.T) {
	e := newReloadEnv(t, "log-level = \"info\"\nmax-inflight = 8\n")
	require.Equal(t, 8, e.srv.Engine().Limits().MaxInflight)

	e.rewrite(t, "log-level = \"debug\"\nmax-inflight = 9\nrate = 5.5\nallowed-hosts = [\"api.example\"]\nloops = 3\n")
	require.NoError(t, e.r.reload())
	assert.Equal(t, slog.LevelDebug, e.level.Level())
	l := e.srv.Engine().Limits()
	assert.Equal(t, 9, l.MaxInflight)
	assert.Equal(t, 5.5, l.Rate)
	assert.Equal(t, []string{"api.example"}, e.srv.HTTPServer().Options().AllowedHosts)
	log := e.log.String()
	assert.Contains(t, log, "configuration reloaded")
	assert.Contains(t, log, `max-inflight: \"8\" → \"9\"`)
	assert.Contains(t, log, "need a restart")
	assert.Contains(t, log, `loops:`)

	// 0 is "none" for the flag; the engine's -1.
	e.rewrite(t, "max-inflight = 0\nmax-subscriptions = 0\n")
	require.NoError(t, e.r.reload())
	assert.Equal(t, -1, e.srv.Engine().Limits().MaxInflight)
	assert.Equal(t, -1, e.srv.Engine().Limits().MaxSubscriptions)
	e.rewrite(t, "max-subscriptions = 7\n")
	require.NoError(t, e.r.reload())
	assert.Equal(t, 7, e.srv.Engine().Limits().MaxSubscriptions)
	assert.Equal(t, engine.DefaultQueuePerClient, e.srv.Engine().Limits().QueuePerClient)

	// The fair scheduler's queues, -rate-subject and [tool.NAME] limits.
	e.rewrite(t, "queue-per-client = 3\nqueue-total = 50\nrate-subject = 20\nrate-subject-burst = 40\n[tool.echo]\nrate = 7\nmax-inflight = 2\n")
	require.NoError(t, e.r.reload())
	l = e.srv.Engine().Limits()
	assert.Equal(t, [2]int{3, 50}, [2]int{l.QueuePerClient, l.QueueTotal})
	assert.Equal(t, 20.0, l.RateSubject)
	assert.Equal(t, 40, l.RateSubjectBurst)
	assert.Equal(t, map[string]engine.ToolLimits{"echo": {Rate: 7, Burst: 7, MaxInflight: 2}}, e.srv.Engine().ToolLimits())
	e.rewrite(t, "queue-per-client = 0\n")
	require.NoError(t, e.r.reload())
	assert.Equal(t, -1, e.srv.Engine().Limits().QueuePerClient, "0 is none for the flag; the engine's -1")
	assert.Nil(t, e.srv.Engine().ToolLimits(), "the tables removed, no tool limits")
	assert.Equal(t, slog.LevelInfo, e.level.Level(), "a key removed from the file is back to its default")
}

// The command line still wins at a reload.
func TestReloadKeepsFlagPrecedence(t *testing.T) {
	e := newReloadEnv(t, "max-inflight = 8\n", "-max-inflight", "4")
	require.Equal(t, 4, e.srv.Engine().Limits().MaxInflight)
	e.rewrite(t, "max-inflight = 9\nlog-level = \"warn\"\n")
	require.NoError(t, e.r.reload())
	assert.Equal(t, 4, e.srv.Engine().Limits().MaxInflight)
	assert.Equal(t, slog.LevelWarn, e.level.Level())
}

// A bad file is rejected whole: nothing of it is applied.
func TestReloadRejectsBadFileWhole(t *testing.T) {
	e := newReloadEnv(t, "max-inflight = 8\n")
	for _, tc := range []struct{ text, want string }{
		{"log-level = \"debug\"\nmax-inflight = 9\nmax-inflite = 3\n", `unknown key "max-inflite"`},
		{"log-level = \"debug\"\nmax-inflight = 9\nloops = -1\n", "-loops"},
		{"log-level = \"debug\"\nmax-inflight = \"nine\"\n", `key "max-inflight"`},
		{"log-level = \"loud\"\nmax-inflight = 9\n", "-log-level"},
		{"log-level = \"debug\"\nmax-inflight = 9\n[table]\n", `key "table"`},
		{"log-level = \"debug\"\nmax-inflight = 9\ntls-cert = \"x.pem\"\n", "-tls-cert and -tls-key"},
	} {
		e.rewrite(t, tc.text)
		err := e.r.reload()
		require.Error(t, err, tc.text)
		assert.Contains(t, err.Error(), tc.want)
		assert.Equal(t, slog.LevelInfo, e.level.Level(), tc.text)
		assert.Equal(t, 8, e.srv.Engine().Limits().MaxInflight, tc.text)
	}
}

// The TLS certificate is read again at each reload; a certificate that
// does not load rejects the reload whole.
func TestReloadTLS(t *testing.T) {
	ca := testcert.NewCA(t, "ca")
	p1 := ca.Server(t, "one")
	p2 := ca.Server(t, "two")
	e := newReloadEnv(t, "tls-cert = \""+p1.CertFile+"\"\ntls-key = \""+p1.KeyFile+"\"\n")
	serial := func() string { return e.tls.Config().Certificates[0].Leaf.SerialNumber.String() }
	require.Equal(t, p1.Leaf.SerialNumber.String(), serial())

	// The same file names, new contents (a renewal).
	copyFile(t, p2.CertFile, p1.CertFile)
	copyFile(t, p2.KeyFile, p1.KeyFile)
	require.NoError(t, e.r.reload())
	assert.Equal(t, p2.Leaf.SerialNumber.String(), serial())

	// A missing key: rejected, the level not applied either.
	e.rewrite(t, "log-level = \"debug\"\ntls-cert = \""+p1.CertFile+"\"\ntls-key = \"/nonexistent-key.pem\"\n")
	err := e.r.reload()
	require.ErrorContains(t, err, "/nonexistent-key.pem")
	assert.Equal(t, slog.LevelInfo, e.level.Level())
	assert.Equal(t, p2.Leaf.SerialNumber.String(), serial())
}

// The reload hook list takes other parts' hooks, two-phase.
func TestReloadHooks(t *testing.T) {
	e := newReloadEnv(t, "max-inflight = 8\n")
	var applied []string
	e.r.hooks = append(e.r.hooks, reloadHook{name: "test", keys: []string{"state-ttl"}, prepare: func(c *config) (func(), error) {
		if c.stateTTL == time.Hour {
			return nil, assert.AnError
		}
		return func() { applied = append(applied, c.stateTTL.String()) }, nil
	}})
	e.rewrite(t, "state-ttl = \"2h\"\n")
	require.NoError(t, e.r.reload())
	assert.Equal(t, []string{"2h0m0s"}, applied)
	assert.NotContains(t, e.log.String(), "need a restart")
	e.rewrite(t, "state-ttl = \"1h\"\nmax-inflight = 3\n")
	require.ErrorIs(t, e.r.reload(), assert.AnError)
	assert.Equal(t, 64, e.srv.Engine().Limits().MaxInflight, "nothing applied")
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, b, 0o600))
}

// The process: SIGHUP reloads instead of ending it, and HTTPS serves with
// the reloaded certificate.
func TestSIGHUPReloadsTLS(t *testing.T) {
	ca := testcert.NewCA(t, "ca")
	p1 := ca.Server(t, "one")
	p2 := ca.Server(t, "two")
	dir := t.TempDir()
	cert, key := dir+"/cert.pem", dir+"/key.pem"
	copyFile(t, p1.CertFile, cert)
	copyFile(t, p1.KeyFile, key)
	file := writeConfig(t, "tls-cert = \""+cert+"\"\ntls-key = \""+key+"\"\nmax-inflight = 8\n")

	c := startChild(t, "-tcp= -http 127.0.0.1:0 -config "+file)
	log, addr := c.log, c.addr
	assert.Contains(t, log.String(), "url=https://")

	get := func() string {
		t.Helper()
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: wait}).Get("https://" + addr + "/mcp")
		require.NoError(t, err, "log:\n%s", log.String())
		resp.Body.Close()
		return resp.TLS.PeerCertificates[0].SerialNumber.String()
	}
	require.Equal(t, p1.Leaf.SerialNumber.String(), get())

	copyFile(t, p2.CertFile, cert)
	copyFile(t, p2.KeyFile, key)
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool { return strings.Contains(log.String(), "configuration reloaded") }, wait, 5*time.Millisecond,
		"no reload in the log:\n%s", log.String())
	require.Equal(t, p2.Leaf.SerialNumber.String(), get())

	code, _ := c.stop(syscall.SIGTERM)
	require.Zero(t, code, "log:\n%s", log.String())
}

// The same over TCP (issue 23): -tls-cert serves TLS on the TCP port too
// (tcps://), and SIGHUP reloads its certificate with HTTP's.
func TestSIGHUPReloadsTCPTLS(t *testing.T) {
	ca := testcert.NewCA(t, "ca")
	p1 := ca.Server(t, "one")
	p2 := ca.Server(t, "two")
	dir := t.TempDir()
	cert, key := dir+"/cert.pem", dir+"/key.pem"
	copyFile(t, p1.CertFile, cert)
	copyFile(t, p1.KeyFile, key)
	c := startChild(t, "-http= -tcp 127.0.0.1:0 -tls-cert "+cert+" -tls-key "+key)
	log, addr := c.log, c.addr
	assert.Contains(t, log.String(), "url=tcps://")
	serial := func() string {
		t.Helper()
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: wait}, "tcp", addr, &tls.Config{RootCAs: ca.Pool()})
		require.NoError(t, err, "log:\n%s", log.String())
		defer conn.Close()
		_, err = io.WriteString(conn, `{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n")
		require.NoError(t, err)
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(wait)))
		line, err := bufio.NewReader(conn).ReadString('\n')
		require.NoError(t, err)
		assert.Contains(t, line, `"id":1`)
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	require.Equal(t, p1.Leaf.SerialNumber.String(), serial())
	copyFile(t, p2.CertFile, cert)
	copyFile(t, p2.KeyFile, key)
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool { return strings.Contains(log.String(), "configuration reloaded") }, wait, 5*time.Millisecond,
		"no reload in the log:\n%s", log.String())
	require.Equal(t, p2.Leaf.SerialNumber.String(), serial())
	code, _ := c.stop(syscall.SIGTERM)
	require.Zero(t, code, "log:\n%s", log.String())
}

// A reload swaps the static tokens of a running verifier; a reload that
// turns authorization off is refused whole.
func TestReloadAuthTokens(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	require.NoError(t, os.WriteFile(tokens, []byte("first-token-0123456789\n"), 0o600))
	e := newReloadEnv(t, "auth-token-file = \""+tokens+"\"\nauth-audience = \"http://127.0.0.1/mcp\"\n")
	c, err := parse([]string{"-config", e.file}, io.Discard)
	require.NoError(t, err)
	logger := slog.New(slog.NewTextHandler(e.log, nil))
	v, err := c.auth.newVerifier(c.http, c.httpPath, logger)
	require.NoError(t, err)
	t.Cleanup(v.Close)
	e.r.hooks = append(e.r.hooks, authReloadHook(v, handlers.NewRegistry(handlers.Options{}), logger))
	ctx := context.Background()
	_, err = v.Verify(ctx, "first-token-0123456789")
	require.NoError(t, err)

	require.NoError(t, os.WriteFile(tokens, []byte("second-token-0123456789\n"), 0o600))
	require.NoError(t, e.r.reload())
	_, err = v.Verify(ctx, "second-token-0123456789")
	require.NoError(t, err, "the new token is accepted after the reload")
	_, err = v.Verify(ctx, "first-token-0123456789")
	require.Error(t, err, "the old token is refused after the reload")

	e.rewrite(t, "auth-audience = \"http://127.0.0.1/mcp\"\n")
	require.Error(t, e.r.reload(), "turning authorization off needs a restart")
	_, err = v.Verify(ctx, "second-token-0123456789")
	require.NoError(t, err, "a refused reload keeps the verifier")
}

// -max-buffered and -max-outbound-total reach the budgets the transports
// share at a reload; 0 is "none".
func TestReloadBudgets(t *testing.T) {
	e := newReloadEnv(t, "max-buffered = \"64MiB\"\nmax-outbound-total = \"128MiB\"\n")
	buffered, outbound := netlimit.NewBudget(64<<20), netlimit.NewBudget(128<<20)
	e.r.hooks = append(e.r.hooks, budgetReloadHook(buffered, outbound))
	e.rewrite(t, "max-buffered = \"32MiB\"\nmax-outbound-total = 0\n")
	require.NoError(t, e.r.reload())
	assert.Equal(t, int64(32<<20), buffered.Limit())
	assert.Equal(t, int64(-1), outbound.Limit())
	assert.NotContains(t, e.log.String(), "need a restart")
}

// TestReloadLogsOneLine: each reload logs one line, after it is applied,
// saying what changed: flags applied, a certificate renewed though no flag
// changed, nothing at all, or what needs a restart (at warning level).
func TestReloadLogsOneLine(t *testing.T) {
	ca := testcert.NewCA(t, "ca")
	p1, p2 := ca.Server(t, "one"), ca.Server(t, "two")
	dir := t.TempDir()
	cert, key := dir+"/cert.pem", dir+"/key.pem"
	copyFile(t, p1.CertFile, cert)
	copyFile(t, p1.KeyFile, key)
	conf := "tls-cert = \"" + cert + "\"\ntls-key = \"" + key + "\"\n"
	e := newReloadEnv(t, conf+"max-inflight = 8\n")
	seen := 0
	lines := func() []string {
		t.Helper()
		all := e.log.String()
		out := strings.Split(strings.TrimSpace(all[seen:]), "\n")
		seen = len(all)
		return out
	}

	require.NoError(t, e.r.reload())
	assert.Equal(t, []string{"level=INFO msg=\"SIGHUP: configuration reloaded: nothing changed\""}, trimTime(lines()))

	e.rewrite(t, conf+"max-inflight = 9\n")
	require.NoError(t, e.r.reload())
	got := lines()
	require.Len(t, got, 1)
	assert.Contains(t, got[0], `msg="SIGHUP: configuration reloaded" applied="max-inflight: \"8\" → \"9\""`)

	copyFile(t, p2.CertFile, cert) // renewed: same flags, new files
	copyFile(t, p2.KeyFile, key)
	require.NoError(t, e.r.reload())
	got = lines()
	require.Len(t, got, 1)
	assert.Contains(t, got[0], "renewed=\"TLS certificate: serial "+p1.Leaf.SerialNumber.Text(16)+" → "+p2.Leaf.SerialNumber.Text(16)+"\"")
	assert.NotContains(t, got[0], "applied=")

	e.rewrite(t, conf+"max-inflight = 9\nloops = 3\n")
	require.NoError(t, e.r.reload())
	got = lines()
	require.Len(t, got, 1)
	assert.Contains(t, got[0], "level=WARN")
	assert.Contains(t, got[0], `restart="loops:`)

	e.r.onHUP() // rejected: one error line, nothing applied
	e.rewrite(t, conf+"max-inflight = \"nine\"\n")
	lines()
	e.r.onHUP()
	got = lines()
	require.Len(t, got, 1)
	assert.Contains(t, got[0], `level=ERROR msg="SIGHUP: configuration reload rejected`)
	assert.Equal(t, 9, e.srv.Engine().Limits().MaxInflight)
}

// trimTime drops the time= attribute of text log lines.
func trimTime(lines []string) []string {
	for i, l := range lines {
		if _, rest, ok := strings.Cut(l, " "); ok && strings.HasPrefix(l, "time=") {
			lines[i] = rest
		}
	}
	return lines
}

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/admin"
	"github.com/mcpedge/mcpedge/auth"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRedactURLCredentials: whatever a layer logs, in an attribute, an
// error or the message itself, a URL's password (or token in its user
// part) is masked, and the rest of the URL kept.
func TestRedactURLCredentials(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLogger(&buf, "text", slog.LevelDebug)
	require.NoError(t, err)
	log.Info("nats: connecting to nats-route://mcpedge:pa55-route@10.0.0.2:6222",
		"url", "nats://u:pa55-url@nats-1:4222,nats://u:pa55-url2@nats-2:4222",
		"jwks", "https://svc:pa55-jwks@keys.example/.well-known/jwks.json",
		"token_url", "nats://pa55-token@nats-1:4222",
		"err", errors.New(`dial "nats://u:pa55-err@nats-1:4222": refused`),
	)
	out := buf.String()
	for _, s := range []string{"pa55-route", "pa55-url", "pa55-url2", "pa55-jwks", "pa55-token", "pa55-err"} {
		assert.NotContains(t, out, s)
	}
	assert.Contains(t, out, "nats://u:[REDACTED]@nats-1:4222,nats://u:[REDACTED]@nats-2:4222")
	assert.Contains(t, out, "https://svc:[REDACTED]@keys.example/.well-known/jwks.json")
}

// TestReloadHidesSecretValues: a reload that changes -auth-client-secret
// says so, without either value.
func TestReloadHidesSecretValues(t *testing.T) {
	e := newReloadEnv(t, "auth-client-secret = \"old-s3cret-value\"\n")
	e.rewrite(t, "auth-client-secret = \"new-s3cret-value\"\n")
	require.NoError(t, e.r.reload())
	log := e.log.String()
	assert.Contains(t, log, "auth-client-secret: changed")
	assert.NotContains(t, log, "s3cret-value")
}

// TestLogValuesOneShape: durations are strings and addresses host:port in
// both formats (JSON would write nanoseconds and a *net.TCPAddr object).
func TestLogValuesOneShape(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			log, err := newLogger(&buf, format, slog.LevelInfo)
			require.NoError(t, err)
			log.Info("x", "timeout", 30*time.Second, "remote", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4242},
				slog.Group("g", "idle", 1500*time.Millisecond))
			out := buf.String()
			if format == "json" {
				var m map[string]any
				require.NoError(t, json.Unmarshal(buf.Bytes(), &m), out)
				assert.Equal(t, "30s", m["timeout"])
				assert.Equal(t, "127.0.0.1:4242", m["remote"])
				assert.Equal(t, map[string]any{"idle": "1.5s"}, m["g"])
				return
			}
			assert.Contains(t, out, "timeout=30s")
			assert.Contains(t, out, "remote=127.0.0.1:4242")
			assert.Contains(t, out, "g.idle=1.5s")
		})
	}
}

// TestAuthFailuresLoggedAndCounted: every refusal is counted by reason;
// its lines are at info, rate-limited per client address, and never hold
// the token.
func TestAuthFailuresLoggedAndCounted(t *testing.T) {
	var buf lockedBuffer
	log, err := newLogger(&buf, "json", slog.LevelInfo)
	require.NoError(t, err)
	m := admin.NewMetrics()
	hook := authFailures(log, m)
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	for range 50 {
		hook(auth.Failure{Reason: auth.ReasonInvalid, Source: a, Err: &auth.Error{Code: "invalid_token", Description: "token expired"}})
	}
	hook(auth.Failure{Reason: auth.ReasonMissing, Source: b, Err: auth.ErrNoToken})
	hook(auth.Failure{Reason: auth.ReasonInsufficientScope, Err: auth.InsufficientScope([]string{"admin"})})
	authFailures(log, nil)(auth.Failure{Reason: auth.ReasonMissing, Source: b, Err: auth.ErrNoToken}) // no admin listener: logged only

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	perSource := map[string]int{}
	for _, l := range lines {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &rec), l)
		assert.Equal(t, "INFO", rec["level"])
		assert.Equal(t, "auth: request refused", rec["msg"])
		src, _ := rec["source"].(string)
		perSource[src]++
	}
	assert.Equal(t, 5, perSource["192.0.2.1"], "a flood from one address is rate-limited")
	assert.Equal(t, 2, perSource["192.0.2.2"], "another address is not held back by it")
	assert.Equal(t, 1, perSource[""], "no address known: logged without one")
	assert.Contains(t, buf.String(), `"why":"token expired"`)

	var w bytes.Buffer
	m.WritePrometheus(&w)
	for _, want := range []string{
		`mcpedge_auth_failures_total{reason="invalid"} 50`,
		`mcpedge_auth_failures_total{reason="missing"} 1`,
		`mcpedge_auth_failures_total{reason="insufficient_scope"} 1`,
	} {
		assert.Contains(t, w.String(), want)
	}
}

package main

import (
	"bytes"
	"errors"
	"log/slog"
	"testing"

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

package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAuthFlags(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	secret := filepath.Join(dir, "secret")
	require.NoError(t, os.WriteFile(tokens, []byte("t1\n"), 0o600))
	require.NoError(t, os.WriteFile(secret, []byte("s3cret\n"), 0o600))
	c, err := parse([]string{"-http", "0.0.0.0:8080", "-http-path", "/x", "-auth-token-file", tokens,
		"-auth-scopes", "a,b", "-auth-issuer", "https://as", "-auth-client-secret-file", secret}, os.Stderr)
	require.NoError(t, err)
	cfg, err := c.auth.config(c.http, c.httpPath, nil)
	require.NoError(t, err)
	assert.Equal(t, "http://localhost:8080/x", cfg.Audience)
	assert.Equal(t, []string{"a", "b"}, cfg.Scopes)
	assert.Equal(t, "s3cret", cfg.ClientSecret)
	v, err := c.auth.newVerifier(c.http, c.httpPath, nil)
	require.NoError(t, err)
	defer v.Close()
	assert.Equal(t, "http://localhost:8080/.well-known/oauth-protected-resource/x", v.ResourceMetadataURL())

	c, err = parse([]string{"-stdio", "-auth-token-file", tokens, "-http", ""}, os.Stderr)
	require.NoError(t, err)
	_, err = c.auth.newVerifier(c.http, c.httpPath, nil)
	assert.Error(t, err, "no audience to derive without -http")

	c, err = parse(nil, os.Stderr)
	require.NoError(t, err)
	v, err = c.auth.newVerifier(c.http, c.httpPath, nil)
	assert.NoError(t, err)
	assert.Nil(t, v, "off by default")
}

package auth_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/mcpedge/mcpedge/auth"
	"github.com/mcpedge/mcpedge/internal/authtest"
)

// BenchmarkVerify measures the CPU of verifying one bearer token: a JWT
// verified in full each time (what a new token costs: signature, claims),
// the same JWT again (the verified-token cache, keyed by SHA-256), and a
// static token among 100.
func BenchmarkVerify(b *testing.B) {
	is := authtest.NewIssuer()
	defer is.Server.Close()
	ctx := context.Background()
	for _, bc := range []struct {
		name, kid, alg string
		cache          bool
	}{
		{"RS256/uncached", "rsa1", "RS256", false},
		{"ES256/uncached", "ec1", "ES256", false},
		{"RS256/cached", "rsa1", "RS256", true},
		{"ES256/cached", "ec1", "ES256", true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			v := newVerifier(b, is, func(c *auth.Config) {
				if !bc.cache {
					c.CacheTTL = -1
				}
			})
			tok := authtest.Sign(bc.kid, bc.alg, authtest.Good(aud, iss, "mcp files:read"))
			if _, err := v.Verify(ctx, tok); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := v.Verify(ctx, tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("static/100", func(b *testing.B) {
		lines := make([]string, 100)
		for i := range lines {
			lines[i] = "token-" + strconv.Itoa(i)
		}
		v, err := auth.New(auth.Config{Audience: aud, Tokens: lines})
		if err != nil {
			b.Fatal(err)
		}
		defer v.Close()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := v.Verify(ctx, "token-99"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

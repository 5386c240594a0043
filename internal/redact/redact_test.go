package redact

import (
	"strings"
	"testing"
)

func TestURLs(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"nats://nats-1:4222", "nats://nats-1:4222"},
		{"nats://user:hunter2@nats-1:4222", "nats://user:[REDACTED]@nats-1:4222"},
		{"nats://s3cr3t-token@nats-1:4222", "nats://[REDACTED]@nats-1:4222"},
		{"nats://a:p1@h1:4222,nats://b:p2@h2:4222", "nats://a:[REDACTED]@h1:4222,nats://b:[REDACTED]@h2:4222"},
		{"nats://a:p1@h1:4222, nats://h2:4222", "nats://a:[REDACTED]@h1:4222, nats://h2:4222"},
		{"https://u:p@keys.example/jwks?x=a@b", "https://u:[REDACTED]@keys.example/jwks?x=a@b"},
		{"https://keys.example/a@b", "https://keys.example/a@b"},
		{"nats-route://mcpedge:p@ss:w@rd@10.0.0.2:6222", "nats-route://mcpedge:[REDACTED]@10.0.0.2:6222"},
		{`connect to "nats://u:p@h:1" failed`, `connect to "nats://u:[REDACTED]@h:1" failed`},
		{"nats: Connecting to route nats-route://x:y@[::1]:6222 now", "nats: Connecting to route nats-route://x:[REDACTED]@[::1]:6222 now"},
		{"mailto:someone@example.com", "mailto:someone@example.com"},
		{"://@", "://[REDACTED]@"},
	} {
		if got := URLs(tc.in); got != tc.want {
			t.Errorf("URLs(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := HasCredentials(tc.in); got != (tc.in != tc.want) {
			t.Errorf("HasCredentials(%q) = %v", tc.in, got)
		}
	}
}

func TestURLsNoAllocWithoutCredentials(t *testing.T) {
	s := "cluster: node started url=nats://nats-1:4222,nats://nats-2:4222"
	if n := testing.AllocsPerRun(100, func() { _ = URLs(s) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

// FuzzURLs: no input panics; what comes out holds no credentials any more,
// and nothing but credentials is changed.
func FuzzURLs(f *testing.F) {
	for _, s := range []string{"nats://u:p@h:1", "a://b@c,d://e:f@g/h", "x://", "://@", "s://a@b@c/@d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := URLs(s)
		if HasCredentials(s) {
			if out == s && !strings.Contains(s, Mask) {
				t.Fatalf("URLs(%q) changed nothing", s)
			}
		} else if out != s {
			t.Fatalf("URLs(%q) = %q without credentials", s, out)
		}
		if again := URLs(out); again != out {
			t.Fatalf("not idempotent: %q → %q → %q", s, out, again)
		}
	})
}

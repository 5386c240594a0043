package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"regexp"
	"strings"
	"time"

	"github.com/mcpedge/mcpedge/admin"
	"github.com/mcpedge/mcpedge/auth"
	"github.com/mcpedge/mcpedge/internal/lograte"
	"github.com/mcpedge/mcpedge/internal/redact"
)

// newLogger returns the process's logger: -log-format text or json, at
// -log-level, with secrets redacted and values written the same way in
// both formats (redactAttr): durations as strings ("30s"), addresses as
// host:port.
func newLogger(w io.Writer, format string, lv slog.Leveler) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: lv, ReplaceAttr: redactAttr}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("-log-format: unknown format %q (text, json)", format)
}

// secretKey matches the names of attributes whose values are secrets.
var secretKey = regexp.MustCompile(`(?i)(authorization|token|secret|password|passwd|api[-_]?key|cookie|credential|bearer)`)

// secretValue matches secrets inside a value: an Authorization header's
// value, a Bearer or Basic scheme's credentials, and key=value or
// "key":"value" pairs whose key names a secret (access_token, api_key...).
var secretValue = regexp.MustCompile(`(?i)(authorization"?\s*[:=]\s*"?)[^\r\n"]+|((?:bearer|basic)\s+)[A-Za-z0-9._~+/=-]+|((?:token|secret|password|passwd|api[-_]?key)"?\s*[:=]\s*"?)[^"\s&,;}]+`)

const redacted = redact.Mask

// redactAttr is the handlers' ReplaceAttr: an attribute named like a secret
// has its value replaced, and secrets inside string values (a header
// line, a query string, JSON params, the credentials of a URL) are
// masked. Nothing that looks like a token reaches the log, whichever layer
// logged it: the message itself is masked too, since the embedded NATS
// server and the HTTP servers' error logs put everything in it.
//
// It also writes values one way whichever the format: a duration as its
// string ("30s", where JSON would write integer nanoseconds), and a
// net.Addr as host:port (a *net.TCPAddr would be an object in JSON).
func redactAttr(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey || a.Key == slog.LevelKey {
		return a
	}
	if secretKey.MatchString(a.Key) && a.Key != slog.MessageKey {
		return slog.String(a.Key, redacted)
	}
	switch a.Value.Kind() {
	case slog.KindDuration:
		return slog.String(a.Key, a.Value.Duration().String())
	case slog.KindAny:
		if addr, ok := a.Value.Any().(net.Addr); ok && addr != nil {
			return slog.String(a.Key, addr.String())
		}
	}
	switch a.Value.Kind() {
	case slog.KindString:
		if v := a.Value.String(); maybeSecret(v) {
			return slog.String(a.Key, maskSecrets(v))
		}
	case slog.KindAny:
		if err, ok := a.Value.Any().(error); ok {
			if v := err.Error(); maybeSecret(v) {
				return slog.String(a.Key, maskSecrets(v))
			}
		} else if st, ok := a.Value.Any().(fmt.Stringer); ok {
			if v := st.String(); maybeSecret(v) {
				return slog.String(a.Key, maskSecrets(v))
			}
		}
	}
	return a
}

// maybeSecret is a cheap pre-check before the regular expression.
func maybeSecret(v string) bool {
	if redact.HasCredentials(v) {
		return true
	}
	l := strings.ToLower(v)
	for _, w := range []string{"bearer", "basic", "token", "secret", "password", "passwd", "authorization", "key"} {
		if strings.Contains(l, w) {
			return true
		}
	}
	return false
}

// maskSecrets masks the credentials of URLs (internal/redact, the helper
// every layer uses where it logs a URL), then every secret secretValue
// finds.
func maskSecrets(v string) string {
	v = redact.URLs(v)
	return secretValue.ReplaceAllStringFunc(v, func(m string) string {
		sub := secretValue.FindStringSubmatch(m)
		return sub[1] + sub[2] + sub[3] + redacted
	})
}

// authFailures is the verifier's failure hook (auth.Verifier.OnFailure):
// each refusal is counted by reason (mcpedge_auth_failures_total, when
// the admin listener is on: m may be nil) and logged at info, at most a
// few lines at once and one a second per client address, each saying how
// many were suppressed before it, and at most ten a second in all, so that
// clients with many addresses (IPv6) do not flood the log either. The
// token is never in the line: the refusal's description says why, not
// what.
func authFailures(log *slog.Logger, m *admin.Metrics) func(auth.Failure) {
	perSource := lograte.New(5, 0, 0)
	all := lograte.New(20, 100*time.Millisecond, 1)
	return func(f auth.Failure) {
		m.AuthFailed(f.Reason)
		if !log.Enabled(context.Background(), slog.LevelInfo) {
			return
		}
		ok, suppressed := perSource.Allow(f.Source)
		if !ok {
			return
		}
		if ok, _ := all.Allow(netip.Addr{}); !ok {
			return // counted all the same
		}
		args := []any{"reason", f.Reason}
		if f.Source.IsValid() {
			args = append(args, "source", f.Source.String())
		}
		if f.Err != nil && f.Err.Description != "" {
			args = append(args, "why", f.Err.Description)
		}
		if suppressed > 0 {
			args = append(args, "suppressed", suppressed)
		}
		log.Info("auth: request refused", args...)
	}
}

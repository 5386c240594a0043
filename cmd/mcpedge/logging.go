package main

import (
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"

	"github.com/mcpedge/mcpedge/internal/redact"
)

// newLogger returns the process's logger: -log-format text or json, at
// -log-level, with secrets redacted (redactAttr).
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
func redactAttr(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey || a.Key == slog.LevelKey {
		return a
	}
	if secretKey.MatchString(a.Key) && a.Key != slog.MessageKey {
		return slog.String(a.Key, redacted)
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

// Package redact hides the credentials that URLs carry, so that no
// password or token reaches a log line: the one helper every layer uses
// where it logs a URL (cluster URLs and routes, key-set and introspection
// URLs, upstream servers), and that the process's log handler applies to
// every string it writes.
package redact

import "strings"

// Mask is what a hidden credential reads as.
const Mask = "[REDACTED]"

// URLs returns s with the credentials of every URL in it hidden: the
// password of "scheme://user:password@host" ("scheme://user:[REDACTED]@host"),
// and the whole user part when it has no password, since NATS and others
// take a token there ("nats://[REDACTED]@host"). s may be one URL, a
// comma-separated list, or any text; everything else is kept. It returns
// s itself, without allocating, when s holds no credentials.
func URLs(s string) string {
	if !HasCredentials(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + len(Mask))
	rest := s
	for {
		i := strings.Index(rest, "://")
		if i < 0 {
			break
		}
		start := i + 3
		end := authorityEnd(rest, start)
		at := strings.LastIndexByte(rest[start:end], '@')
		if at < 0 {
			b.WriteString(rest[:end])
			rest = rest[end:]
			continue
		}
		at += start
		b.WriteString(rest[:start])
		if c := strings.IndexByte(rest[start:at], ':'); c >= 0 {
			b.WriteString(rest[start : start+c+1])
		}
		b.WriteString(Mask)
		b.WriteString(rest[at:end])
		rest = rest[end:]
	}
	b.WriteString(rest)
	return b.String()
}

// HasCredentials reports, cheaply, whether s may hold a URL with
// credentials: a "://" followed, within the URL's authority, by '@'.
func HasCredentials(s string) bool {
	for {
		i := strings.Index(s, "://")
		if i < 0 {
			return false
		}
		start := i + 3
		end := authorityEnd(s, start)
		if strings.IndexByte(s[start:end], '@') >= 0 {
			return true
		}
		s = s[end:]
	}
}

// authorityEnd returns the index in s where the authority that starts at
// start ends: at the path, query or fragment, or at a character no URL
// holds unescaped (a space, a quote, a comma between URLs of a list).
func authorityEnd(s string, start int) int {
	for j := start; j < len(s); j++ {
		switch c := s[j]; c {
		case '/', '?', '#', ',', ' ', '\t', '\r', '\n', '"', '\'', '<', '>', '\\', '`', '{', '}', '|', '^', ';':
			return j
		}
	}
	return len(s)
}

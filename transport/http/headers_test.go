package http

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestAccepts(t *testing.T) {
	tests := []struct {
		h         string
		json, sse bool
	}{
		{"", true, true},
		{"application/json, text/event-stream", true, true},
		{"text/event-stream, application/json", true, true},
		{"Application/JSON;q=0.9 , TEXT/EVENT-STREAM", true, true},
		{"*/*", true, true},
		{"application/*, text/*", true, true},
		{"application/json", true, false},
		{"text/event-stream", false, true},
		{"application/json, text/event-stream;q=0", true, false},
		{"application/json;q=0.0, text/event-stream", false, true},
		{"application/json;q=0.5, text/event-stream;q=0.001", true, true},
		{"text/html", false, false},
	}
	for _, tt := range tests {
		json, sse := accepts([]byte(tt.h))
		assert.Equal(t, tt.json, json, "json for %q", tt.h)
		assert.Equal(t, tt.sse, sse, "sse for %q", tt.h)
	}
}

func TestPickEncoding(t *testing.T) {
	tests := []struct {
		h    string
		want encoding
	}{
		{"", encIdentity},
		{"gzip", encGzip},
		{"GZIP", encGzip},
		{"gzip, deflate", encGzip},
		{"gzip, zstd", encZstd},
		{"zstd;q=0, gzip", encGzip},
		{"gzip;q=0", encIdentity},
		{"br", encIdentity},
		{"*", encGzip},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, pickEncoding([]byte(tt.h)), tt.h)
	}
}

func TestEventIDs(t *testing.T) {
	for _, c := range []struct {
		inst     string
		sid, seq uint64
	}{{"", 0, 0}, {"", 1, 2}, {"", 18446744073709551615, 7}, {"node-a_1.k3j9", 3, 17}} {
		id := appendEventIDAs(nil, []byte(c.inst), c.sid, c.seq)
		inst, sid, seq, ok := parseEventID(id)
		assert.True(t, ok, string(id))
		assert.Equal(t, c.inst, string(inst))
		assert.Equal(t, c.sid, sid)
		assert.Equal(t, c.seq, seq)
	}
	for _, bad := range []string{"", "-", "1-", "-1", "1--1", "a-1", "1-1-1", "+1-1", "1 -1", "99999999999999999999999-1", "18446744073709551616-1",
		".1-1", "a.1-1", "a..b.1-1", "a.B.1-1", "a\n.b.1-1", "a.b\r.1-1", "a b.c.1-1", ".b.1-1"} {
		_, _, _, ok := parseEventID([]byte(bad))
		assert.False(t, ok, bad)
	}
}

func TestHostNames(t *testing.T) {
	tests := []struct {
		host, name string
		loopback   bool
	}{
		{"localhost", "localhost", true},
		{"LOCALHOST:7401", "LOCALHOST", true},
		{"localhost.:80", "localhost.", true},
		{"127.0.0.1:7401", "127.0.0.1", true},
		{"127.8.9.10", "127.8.9.10", true},
		{"[::1]:7401", "::1", true},
		{"[::1]", "::1", true},
		{"[fe80::1%25eth0]:80", "fe80::1%25eth0", false},
		{"10.0.0.1:80", "10.0.0.1", false},
		{"evil.example.com", "evil.example.com", false},
		{"localhost.evil.com", "localhost.evil.com", false},
		{"127.0.0.1.nip.io", "127.0.0.1.nip.io", false},
		{"", "", false},
	}
	for _, tt := range tests {
		n := hostname([]byte(tt.host))
		assert.Equal(t, tt.name, string(n), tt.host)
		assert.Equal(t, tt.loopback, isLoopbackName(n), tt.host)
	}
	assert.True(t, loopbackAddr("127.0.0.1:0"))
	assert.True(t, loopbackAddr("localhost:7401"))
	assert.True(t, loopbackAddr("[::1]:7401"))
	assert.False(t, loopbackAddr(":7401"))
	assert.False(t, loopbackAddr("0.0.0.0:7401"))
}

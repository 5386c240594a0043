package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "mcpedge.toml")
	require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
	return p
}

// TestConfigPrecedence: a flag given wins over its environment twin,
// which wins over the config file, which wins over the default.
func TestConfigPrecedence(t *testing.T) {
	file := writeConfig(t, "max-inflight = 10\nrate = 2.5\nhttp-path = \"/file\"\n")
	for _, tc := range []struct {
		name string
		args []string
		env  string // MCPEDGE_MAX_INFLIGHT
		want int
	}{
		{"default", nil, "", 64},
		{"file", []string{"-config", file}, "", 10},
		{"env over file", []string{"-config", file}, "20", 20},
		{"flag over env", []string{"-config", file, "-max-inflight", "30"}, "20", 30},
		{"flag over file", []string{"-config", file, "-max-inflight=30"}, "", 30},
		{"env without file", nil, "20", 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("MCPEDGE_MAX_INFLIGHT", tc.env)
			}
			c, err := parse(tc.args, io.Discard)
			require.NoError(t, err)
			assert.Equal(t, tc.want, c.maxInflight)
			if len(tc.args) > 0 {
				assert.Equal(t, 2.5, c.rate)
				assert.Equal(t, "/file", c.httpPath)
			}
		})
	}
	t.Run("MCPEDGE_CONFIG", func(t *testing.T) {
		t.Setenv("MCPEDGE_CONFIG", file)
		c, err := parse(nil, io.Discard)
		require.NoError(t, err)
		assert.Equal(t, 10, c.maxInflight)
		assert.Equal(t, file, c.configFile)
	})
}

func TestConfigFileTypes(t *testing.T) {
	file := writeConfig(t, `
http = "127.0.0.1:9999"
stateless = true
allowed-hosts = ["a.example", "b.example"]
session-idle = "5m"
max-message = "1MiB"
max-outbound = 65536
max-buffered = "2 GiB"
event-store-bytes = "64KiB"
log-level = "debug"
`)
	c, err := parse([]string{"-config", file}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:9999", c.http)
	assert.True(t, c.stateless)
	assert.Equal(t, "a.example,b.example", c.allowHosts)
	assert.Equal(t, 1<<20, c.maxMessage)
	assert.Equal(t, 65536, c.maxOutbound)
	assert.Equal(t, int64(2<<30), c.maxBuffered)
	assert.Equal(t, 64<<10, c.eventStore)
	assert.Equal(t, "debug", c.logLevel)
}

// TestConfigRefused: an unknown key, a bad value or a bad file is refused
// at start with an error naming the key.
func TestConfigRefused(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"max-inflite = 3", `unknown key "max-inflite"`},
		{"config = \"x\"", `unknown key "config"`},
		{"max-inflight = \"many\"", `key "max-inflight": invalid value "many"`},
		{"session-idle = 30", `key "session-idle": invalid value "30"`},
		{"max-message = \"1XB\"", `key "max-message"`},
		{"[http]\naddr = \"x\"", `key "http": a table`},
		{"allowed-hosts = [1, 2]", `key "allowed-hosts"`},
		{"max-inflight = ", `mcpedge.toml`},
		{"loops = -1", `-loops -1: must be positive`},
		{"max-conns = -1", `-max-conns -1: must not be negative`},
		{"drain = 5", `key "drain": invalid value "5": a duration needs a unit: add one, e.g. 5s`},
		{"max-inflite = 3", `unknown key "max-inflite"; did you mean max-inflight?`},
		{"version = true", `unknown key "version" (-version is for the command line)`},
		{"http-path = \"mcp\"", `-http-path: "mcp" must start with /`},
	} {
		_, err := parse([]string{"-config", writeConfig(t, tc.text)}, io.Discard)
		if assert.Error(t, err, tc.text) {
			assert.Contains(t, err.Error(), tc.want, tc.text)
		}
	}
	_, err := parse([]string{"-config", filepath.Join(t.TempDir(), "none.toml")}, io.Discard)
	assert.ErrorContains(t, err, "none.toml")
}

func TestValidateFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-http-path", "mcp"}, "-http-path"},
		{[]string{"-loops", "-1"}, "-loops"},
		{[]string{"-page-size", "-1"}, "-page-size"},
		{[]string{"-workers", "-3"}, "-workers"},
		{[]string{"-max-inflight", "-3"}, "-max-inflight"},
		{[]string{"-max-subscriptions", "-1"}, "-max-subscriptions"},
		{[]string{"-max-sessions-per-ip", "-2"}, "-max-sessions-per-ip"},
		{[]string{"-rate", "-1"}, "-rate"},
		{[]string{"-drain", "-1s"}, "-drain"},
		{[]string{"-max-message", "-1"}, "max-message"},
		{[]string{"-max-message", "0"}, "-max-message"},
		{[]string{"-log-level", "loud"}, "-log-level"},
		{[]string{"-framing", "xml"}, "-framing"},
		{[]string{"-handlers", "nope"}, "-handlers"},
		{[]string{"-tls-cert", "a.pem"}, "-tls-key"},
		{[]string{"-tls-client-ca", "ca.pem"}, "-tls-client-ca"},
		{[]string{"-trusted-proxies", "10.0.0.0/33"}, "-trusted-proxies"},
		{[]string{"-trusted-proxies", "lb.example"}, "-trusted-proxies"},
		{[]string{"-cors-origins", "*,https://app.example"}, "-cors-origins"},
		{[]string{"-cors-origins", "app.example"}, "-cors-origins"},
		{[]string{"-cors-origins", "https://app.example/mcp"}, "-cors-origins"},
	} {
		_, err := parse(tc.args, io.Discard)
		if assert.Error(t, err, tc.args) {
			assert.Contains(t, err.Error(), tc.want, tc.args)
		}
	}
}

// TestEdgeFlags: -trusted-proxies, -cors-origins and -tcp-tls accept
// what they document.
func TestEdgeFlags(t *testing.T) {
	c, err := parse([]string{"-trusted-proxies", "10.0.0.0/8, 192.0.2.7,fd00::/8", "-cors-origins", "https://app.example/,http://localhost:6274", "-tcp-tls=false"}, io.Discard)
	require.NoError(t, err)
	assert.False(t, c.tcpTLS)
	c, err = parse([]string{"-cors-origins", "*"}, io.Discard)
	require.NoError(t, err)
	assert.True(t, c.tcpTLS, "TCP follows -tls-cert by default")
}

func TestSizeFlag(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "1048576": 1 << 20, "4MiB": 4 << 20, "64KiB": 64 << 10, "64 kib": 64 << 10,
		"1GB": 1e9, "2KB": 2000, "3MB": 3e6, "1GiB": 1 << 30, "1.5MiB": 3 << 19, "10B": 10, "8k": 8 << 10,
	} {
		got, err := parseSize(in)
		if assert.NoError(t, err, in) {
			assert.Equal(t, want, got, in)
		}
	}
	for _, in := range []string{"", "MiB", "-1", "-1KiB", "1XB", "lots", "1e30GiB", "9223372036854775807KiB"} {
		_, err := parseSize(in)
		assert.Error(t, err, in)
	}
	var n int
	v := newSize(&n, 4<<20)
	assert.Equal(t, "4MiB", v.String())
	require.NoError(t, v.Set("1000"))
	assert.Equal(t, "1000", v.String())

	c, err := parse([]string{"-max-message", "1MiB", "-max-outbound=64KiB", "-max-buffered", "1GB", "-event-store-bytes", "2MiB"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 1<<20, c.maxMessage)
	assert.Equal(t, 64<<10, c.maxOutbound)
	assert.Equal(t, int64(1e9), c.maxBuffered)
	assert.Equal(t, 2<<20, c.eventStore)
}

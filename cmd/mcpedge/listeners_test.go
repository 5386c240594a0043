package main

import (
	"bytes"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/mcpedge/mcpedge/admin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestListenerTaken: a node refuses to start (exit 2, one line naming the
// flag, the address and the fix) when a listener it was asked for cannot
// bind, given or default, and when two of its listeners name one port.
func TestListenerTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	busy := taken.Addr().String()
	free := freePort(t)
	key := writeFile(t, strings.Repeat("ab", 32)+"\n")

	// The admin listener's default port: held here, or already someone
	// else's; taken either way.
	if l, err := net.Listen("tcp", admin.DefaultAddr); err == nil {
		defer l.Close()
	} else {
		require.True(t, errors.Is(err, syscall.EADDRINUSE), "%v", err)
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"tcp", []string{"-tcp", busy, "-http", "", "-admin", ""},
			"-tcp " + busy + ": address already in use: give this node a port of its own (-tcp 127.0.0.1:PORT) or turn it off (-tcp=)"},
		{"http", []string{"-tcp", "", "-http", busy, "-admin", ""},
			"-http " + busy + ": address already in use"},
		{"admin given", []string{"-tcp", "127.0.0.1:0", "-http", "", "-admin", busy},
			"-admin " + busy + ": address already in use"},
		{"admin default", []string{"-tcp", "127.0.0.1:0", "-http", ""},
			"-admin 127.0.0.1:7402 (its default): address already in use: another mcpedge on this host? give this node a port of its own (-admin 127.0.0.1:PORT) or turn it off (-admin=)"},
		{"cluster route port", []string{"-tcp", "", "-http", "127.0.0.1:0", "-admin", "", "-cluster-embed", busy, "-state-key-file", key},
			"-cluster-embed " + busy + ": address already in use: give this node a port of its own (-cluster-embed 127.0.0.1:PORT)\n"},
		{"two listeners on one port", []string{"-tcp", free, "-http", free, "-admin", ""},
			"-http " + free + ": the same address as -tcp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tc.args, strings.NewReader(""), &stdout, &stderr)
			assert.Equal(t, 2, code, "stderr: %s", stderr.String())
			assert.Contains(t, stderr.String(), "mcpedge: "+tc.want)
			assert.Equal(t, 1, strings.Count(stderr.String(), "\n"), "one line, nothing served: %s", stderr.String())
		})
	}
}

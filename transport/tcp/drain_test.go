package tcp_test

import (
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/transport/tcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBadInputWarningsRateLimited: a flood of malformed frames from one
// address yields a handful of warnings, not one per connection.
func TestBadInputWarningsRateLimited(t *testing.T) {
	lb := &logBuffer{}
	log := slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s := start(t, engine.Options{Logger: log, MaxMessage: 64}, tcp.Options{Framer: nil})
	const flood = 40
	for range flood {
		nc, err := net.Dial("tcp", s.addr)
		require.NoError(t, err)
		require.NoError(t, nc.SetDeadline(time.Now().Add(wait)))
		_, err = io.WriteString(nc, strings.Repeat("x", 200)+"\n") // over MaxMessage
		require.NoError(t, err)
		_, _ = io.ReadAll(nc) // the error, then the close
		nc.Close()
	}
	require.Eventually(t, func() bool { return s.tcp.Conns() == 0 }, wait, time.Millisecond)
	n := strings.Count(lb.String(), "closing connection")
	assert.Positive(t, n, "bad input is warned about")
	assert.LessOrEqual(t, n, 10, "warnings not rate-limited:\n%s", lb.String())
}

// TestStopAcceptingAndCloseIdle: after StopAccepting no connection is
// accepted; CloseIdle closes the idle connection, not the busy one.
func TestStopAcceptingAndCloseIdle(t *testing.T) {
	s := start(t, engine.Options{}, tcp.Options{Loops: 1})
	busy, idle := dial(t, s.addr), dial(t, s.addr)
	busy.init(t)
	idle.init(t)
	require.NoError(t, busy.write(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"slow","arguments":{}}}`))
	<-s.started

	s.tcp.StopAccepting()
	_, err := net.DialTimeout("tcp", s.addr, time.Second)
	require.Error(t, err, "accepted after StopAccepting")

	assert.Equal(t, 1, s.tcp.IdleConns())
	s.tcp.CloseIdle(-1)
	_, err = idle.read()
	require.ErrorIs(t, err, io.EOF)

	close(s.release)
	m, err := busy.read()
	require.NoError(t, err)
	assert.Equal(t, "9", string(m.ID))
}

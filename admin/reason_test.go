package admin_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/admin"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/session"
	mcphttp "github.com/mcpedge/mcpedge/transport/http"
	"github.com/mcpedge/mcpedge/transport/netlimit"
	"github.com/mcpedge/mcpedge/transport/stdio"
	"github.com/mcpedge/mcpedge/transport/tcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCloseReasonLabels: every cause a transport, the engine or a session
// closes a connection or a session with maps to its label, as the
// transports give it (wrapped as they wrap it). admin imports no
// transport: it reads the cause's codec.CloseReason. A cause without one
// would be "other" and fail here.
func TestCloseReasonLabels(t *testing.T) {
	tests := []struct {
		cause error
		label string
	}{
		// TCP: the connection's reason (conn.reason, the ConnObserver's),
		// and the session's, wrapped by OnClose.
		{tcp.ErrSlowConsumer, "slow_consumer"},
		{tcp.ErrTooLarge, "too_large"},
		{tcp.ErrFraming, "framing"},
		{tcp.ErrReadTimeout, "read_timeout"},
		{tcp.ErrIdleTimeout, "idle_timeout"},
		{tcp.ErrBufferBudget, "buffer_budget"},
		{tcp.ErrOutboundBudget, "outbound_budget"},
		{tcp.ErrPanic, "panic"},
		{tcp.ErrDraining, "draining"},
		{tcp.ErrTooManyConns, "max_conns"},
		{tcp.ErrProxyHeader, "proxy_header"},
		{tcp.ErrNotTLS, "tls"},
		{fmt.Errorf("%w: x509: unknown authority", tcp.ErrTLSHandshake), "tls"},
		{fmt.Errorf("tcp: connection closed: %w", tcp.ErrIdleTimeout), "idle_timeout"},
		{fmt.Errorf("tcp: connection closed: %w", session.ErrClosed), "closed"},
		{fmt.Errorf("tcp: connection closed: %w", io.EOF), "closed"},
		// Streamable HTTP and legacy SSE: connections, streams, sessions.
		{mcphttp.ErrSlowConsumer, "slow_consumer"},
		{mcphttp.ErrBufferBudget, "buffer_budget"},
		{mcphttp.ErrOutboundBudget, "outbound_budget"},
		{mcphttp.ErrClientGone, "client_gone"},
		{mcphttp.ErrSessionIdle, "session_idle"},
		{mcphttp.ErrInitTimeout, "init_timeout"},
		{mcphttp.ErrEvicted, "evicted"},
		{mcphttp.ErrDeleted, "deleted"},
		{mcphttp.ErrServerClosed, "server_closed"},
		{mcphttp.ErrStreamEnded, "stream_ended"},
		{mcphttp.ErrDraining, "draining"},
		{mcphttp.ErrProxyHeader, "proxy_header"},
		{fmt.Errorf("%w: %w", mcphttp.ErrStreamEnded, mcphttp.ErrSlowConsumer), "slow_consumer"},
		{fmt.Errorf("%w: %w", mcphttp.ErrStreamEnded, mcphttp.ErrOutboundBudget), "outbound_budget"},
		{session.ErrNotInitialized, "not_initialized"},
		// stdio: the session's cause, wrapped by Serve.
		{fmt.Errorf("stdio: %w", stdio.ErrTooLarge), "too_large"},
		{fmt.Errorf("stdio: %w", stdio.ErrFraming), "framing"},
		{fmt.Errorf("stdio: %w", stdio.ErrReadTimeout), "read_timeout"},
		{fmt.Errorf("stdio: %w", stdio.ErrFlushTimeout), "flush_timeout"},
		{fmt.Errorf("stdio: %w", session.ErrSlowConsumer), "slow_consumer"},
		{fmt.Errorf("stdio: %w", io.EOF), "closed"},
		{fmt.Errorf("stdio: write: %w", syscall.EPIPE), "reset"},
		// Connections refused at accept (netlimit), by every transport.
		{netlimit.ErrTooManyConns, "max_conns"},
		{fmt.Errorf("%w (%s)", netlimit.ErrTooManyConnsPerIP, "127.0.0.2"), "max_conns_per_ip"},
		{netlimit.ErrBufferBudget, "buffer_budget"},
		{netlimit.ErrOutboundBudget, "outbound_budget"},
		// The engine's and the session's own.
		{engine.ErrPanic, "panic"},
		{engine.ErrKeepAlive, "keepalive"},
		{engine.ErrShuttingDown, "shutdown"},
		{session.ErrClosed, "closed"},
		{session.ErrSlowConsumer, "slow_consumer"},
		// What the sockets say.
		{nil, "closed"},
		{&net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, "reset"},
		{&net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, "timeout"},
		{net.ErrClosed, "closed"},
		{io.ErrUnexpectedEOF, "other"},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		name := "nil"
		if tt.cause != nil {
			name = tt.cause.Error()
		}
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tt.label, admin.Reason(tt.cause))
		})
		seen[tt.label] = true
	}
	// Every label a reason has is one a transport, the engine or a
	// session gives (ReasonOther is "other"; "stateless", an unexported
	// cause's, is TestStatelessExchangeReason's).
	seen["stateless"] = true
	for r := range codec.CloseReason(codec.NumCloseReasons) {
		assert.True(t, seen[r.String()], "no cause in this table has the reason %q", r)
	}
}

// TestStatelessExchangeReason: the session of a 2026-07-28 POST ends with
// its request, counted under its own reason.
func TestStatelessExchangeReason(t *testing.T) {
	s := serve(t)
	body := `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},` +
		`"io.modelcontextprotocol/clientCapabilities":{}}}}`
	req, err := http.NewRequest("POST", "http://"+s.http+"/mcp", strings.NewReader(body))
	require.NoError(t, err)
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	require.Eventually(t, func() bool {
		return scrape(t, s.admin)[`mcpedge_sessions_closed_total{transport="http",reason="stateless"}`] == 1
	}, 5*time.Second, 10*time.Millisecond)
}

package http

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readHead reads a response's status line and headers as raw text.
func readHead(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	var sb strings.Builder
	for {
		line, err := r.ReadString('\n')
		require.NoError(t, err, "so far: %q", sb.String())
		sb.WriteString(line)
		if line == "\r\n" {
			return sb.String()
		}
	}
}

// expectRequest writes the head of a request that asks for 100 Continue.
func expectRequest(t *testing.T, c net.Conn, method, path string, length int, headers ...string) {
	t.Helper()
	head := method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
		"Accept: application/json, text/event-stream\r\nExpect: 100-continue\r\nContent-Length: " + strconv.Itoa(length) + "\r\n"
	for _, h := range headers {
		head += h + "\r\n"
	}
	_, err := io.WriteString(c, head+"\r\n")
	require.NoError(t, err)
}

// TestExpectContinueRefusedBeforeBody: a request that will be refused is
// refused on its headers, with its real status and no 100 Continue that
// would make the client send the body first.
func TestExpectContinueRefusedBeforeBody(t *testing.T) {
	e := newEnv(t, envOpts{loopback: true})
	sid := e.initialize()
	max := e.srv.max
	for _, tc := range []struct {
		name         string
		method, path string
		length       int
		headers      []string
		status       string
		msg          string
	}{
		{"body too large", "POST", "/mcp", max + 1, []string{"Mcp-Session-Id: " + sid}, "413", "Request Entity Too Large"},
		{"body too large, no session", "POST", "/mcp", 1 << 30, nil, "413", "Request Entity Too Large"},
		{"unknown session", "POST", "/mcp", 10, []string{"Mcp-Session-Id: 0123456789abcdef0123456789abcdef"}, "404", "Session not found"},
		{"unknown path", "POST", "/nope", 10, nil, "404", "Not Found"},
		{"bad origin", "POST", "/mcp", 10, []string{"Origin: https://evil.example"}, "403", "Invalid Origin"},
		{"method", "PUT", "/mcp", 10, nil, "405", "Method Not Allowed"},
		{"content type", "POST", "/mcp", 10, []string{"Content-Type: text/plain"}, "415", "Unsupported Media Type"},
		{"protocol version", "POST", "/mcp", 10, []string{"Mcp-Protocol-Version: 1999-01-01"}, "400", "MCP-Protocol-Version"},
		{"legacy unknown session", "POST", "/message?sessionId=nope", 10, nil, "404", "Session not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := e.dial()
			require.NoError(t, err)
			defer c.Close()
			require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
			expectRequest(t, c, tc.method, tc.path, tc.length, tc.headers...) // a later Content-Type wins
			r := bufio.NewReader(c)
			head := readHead(t, r)
			require.True(t, strings.HasPrefix(head, "HTTP/1.1 "+tc.status+" "), "got %q", head)
			assert.NotContains(t, head, "100 Continue")
			n, err := strconv.Atoi(headerValue(head, "Content-Length"))
			require.NoError(t, err, head)
			b := make([]byte, n)
			_, err = io.ReadFull(r, b)
			require.NoError(t, err)
			_, msg, _ := rpcError(t, string(b))
			assert.Contains(t, msg, tc.msg)
			// The connection ends there: the client may send the body anyway.
			_, err = r.ReadByte()
			assert.ErrorIs(t, err, io.EOF)
		})
	}
}

// TestExpectContinueBodySentAnyway: a client that does not wait for 100
// Continue and sends its oversized body still reads the 413.
func TestExpectContinueBodySentAnyway(t *testing.T) {
	e := newEnv(t, envOpts{loopback: true})
	c, err := e.dial()
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
	expectRequest(t, c, "POST", "/mcp", e.srv.max+1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		chunk := make([]byte, 64<<10)
		for sent := 0; sent <= e.srv.max; sent += len(chunk) {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	}()
	head := readHead(t, bufio.NewReader(c))
	assert.True(t, strings.HasPrefix(head, "HTTP/1.1 413 "), "got %q", head)
	c.Close()
	<-done
}

// TestExpectContinueAccepted: a good request gets 100 Continue, then its
// answer once the body is sent.
func TestExpectContinueAccepted(t *testing.T) {
	e := newEnv(t, envOpts{loopback: true})
	sid := e.initialize()
	c, err := e.dial()
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
	r := bufio.NewReader(c)
	for i, body := range []string{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, `{"jsonrpc":"2.0","id":2,"method":"ping"}`} {
		expectRequest(t, c, "POST", "/mcp", len(body), "Mcp-Session-Id: "+sid)
		head := readHead(t, r)
		require.Equal(t, "HTTP/1.1 100 Continue\r\n\r\n", head)
		_, err = io.WriteString(c, body)
		require.NoError(t, err)
		status, _, b := rawResponse(t, r)
		assert.Equal(t, "200 OK", status)
		assert.JSONEq(t, `{"jsonrpc":"2.0","id":`+strconv.Itoa(i+1)+`,"result":{}}`, b)
	}
	// initialize, with no session yet, passes the header checks too.
	c2, err := e.dial()
	require.NoError(t, err)
	defer c2.Close()
	require.NoError(t, c2.SetDeadline(time.Now().Add(5*time.Second)))
	r2 := bufio.NewReader(c2)
	expectRequest(t, c2, "POST", "/mcp", len(initBody))
	require.Equal(t, "HTTP/1.1 100 Continue\r\n\r\n", readHead(t, r2))
	_, err = io.WriteString(c2, initBody)
	require.NoError(t, err)
	status, hdr, _ := rawResponse(t, r2)
	assert.Equal(t, "200 OK", status)
	assert.NotEmpty(t, hdr.Get("Mcp-Session-Id"))

	// A 2026-07-28 POST is stateless: a session id it carries, unknown
	// here, is ignored.
	c3, err := e.dial()
	require.NoError(t, err)
	defer c3.Close()
	require.NoError(t, c3.SetDeadline(time.Now().Add(5*time.Second)))
	r3 := bufio.NewReader(c3)
	mb := statelessBody(3, "tools/list", "")
	expectRequest(t, c3, "POST", "/mcp", len(mb), "Mcp-Session-Id: 0123456789abcdef0123456789abcdef",
		"Mcp-Protocol-Version: 2026-07-28", "Mcp-Method: tools/list")
	require.Equal(t, "HTTP/1.1 100 Continue\r\n\r\n", readHead(t, r3))
	_, err = io.WriteString(c3, mb)
	require.NoError(t, err)
	status, hdr, b := rawResponse(t, r3)
	assert.Equal(t, "200 OK", status, b)
	assert.Empty(t, hdr.Get("Mcp-Session-Id"))
	assert.Contains(t, b, `"resultType":"complete"`)
}

// headerValue finds a header in a raw response head.
func headerValue(head, name string) string {
	for _, line := range strings.Split(head, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, name) {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

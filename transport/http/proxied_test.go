package http

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/session"
	"github.com/mcpedge/mcpedge/transport/netlimit"
	"github.com/mcpedge/mcpedge/transport/proxied"
	"github.com/pires/go-proxyproto"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func trusted(t *testing.T, list ...string) *proxied.Trusted {
	t.Helper()
	tr, err := proxied.Parse(list)
	require.NoError(t, err)
	return tr
}

// remoteOf returns the client address the engine holds for session sid.
func (e *env) remoteOf(sid string) netip.Addr {
	var a netip.Addr
	e.eng.Sessions().Range(func(s *session.Session) bool {
		if s.ID() == sid {
			a = s.Remote()
			return false
		}
		return true
	})
	return a
}

// TestForwardedHeaders: from a trusted proxy, X-Forwarded-For and
// Forwarded name the client, which the per-address session limit counts
// and the session holds; from any other peer they are ignored (a forged
// header gains nothing).
func TestForwardedHeaders(t *testing.T) {
	for _, tc := range []struct {
		name    string
		trusted string
		hdr     string
		values  [3]string // three initializes; the third repeats the first's client
		want    [3]int
		remote  string // of the first session
	}{
		{"xff trusted", "127.0.0.0/8", "X-Forwarded-For", [3]string{"198.51.100.1", "203.0.113.9, 198.51.100.2", "198.51.100.1"}, [3]int{200, 200, 429}, "198.51.100.1"},
		{"forwarded trusted", "127.0.0.1", "Forwarded", [3]string{"for=198.51.100.1", `for="[2001:db8::2]:80"`, "for=198.51.100.1;proto=https"}, [3]int{200, 200, 429}, "198.51.100.1"},
		{"xff forged", "10.0.0.0/8", "X-Forwarded-For", [3]string{"198.51.100.1", "198.51.100.2", "198.51.100.3"}, [3]int{200, 429, 429}, "127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOpts{loopback: true, opts: Options{MaxSessionsPerIP: 1, TrustedProxies: trusted(t, tc.trusted)}})
			var first string
			for i, v := range tc.values {
				resp := e.do(t, req{body: initBody, headers: map[string]string{"Mcp-Protocol-Version": "", tc.hdr: v}})
				b := body(t, resp)
				require.Equal(t, tc.want[i], resp.StatusCode, "initialize %d: %s", i, b)
				if i == 0 {
					first = resp.Header.Get("Mcp-Session-Id")
				}
			}
			assert.Equal(t, netip.MustParseAddr(tc.remote), e.remoteOf(first))
		})
	}
}

func proxyV1(client string) string {
	return fmt.Sprintf("PROXY TCP4 %s 127.0.0.1 4711 7401\r\n", client)
}

func proxyV2(t *testing.T, client string) string {
	h := proxyproto.HeaderProxyFromAddrs(2, net.TCPAddrFromAddrPort(netip.MustParseAddrPort(client)), &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7401})
	b, err := h.Format()
	require.NoError(t, err)
	return string(b)
}

// rawInit sends head and an initialize on a new connection and returns
// the response, or the read error of a connection the server closed.
func (e *env) rawInit(t *testing.T, head string) (*http.Response, string, net.Conn, error) {
	t.Helper()
	c, err := e.dial()
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	msg := fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s", len(initBody), initBody)
	// The header and the request in one write: what follows the header
	// in the same read is the request's.
	_, err = io.WriteString(c, head+msg)
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	var b string
	if err == nil {
		b = body(t, resp)
	}
	return resp, b, c, err
}

// TestProxyProtocolHTTP: a trusted peer's PROXY header (v1 and v2) names
// the client of the connection: the per-address connection limit counts
// it (the proxy's own address is not limited), the session holds it; a
// header without a client (v1 UNKNOWN) leaves the proxy's; a PROXY
// header from an untrusted peer, or a malformed one, is answered 400
// and ends the connection.
func TestProxyProtocolHTTP(t *testing.T) {
	newServer := func(t *testing.T, list string) *env {
		conns := netlimit.New(0, 1)
		tr := trusted(t, list)
		conns.SetTrusted(tr)
		return newEnv(t, envOpts{loopback: true, opts: Options{Conns: conns, TrustedProxies: tr}})
	}
	t.Run("trusted", func(t *testing.T) {
		e := newServer(t, "127.0.0.0/8")
		for i, tc := range []struct {
			head   string
			status int
			remote string
		}{
			{proxyV1("198.51.100.1"), 200, "198.51.100.1"},
			{proxyV2(t, "[2001:db8::7]:4711"), 200, "2001:db8::7"},
			{proxyV1("198.51.100.1"), 503, ""}, // a second connection of 198.51.100.1
			{"PROXY UNKNOWN\r\n", 200, "127.0.0.1"},
			{"", 200, "127.0.0.1"}, // the proxy's own connection, no header
		} {
			resp, _, _, err := e.rawInit(t, tc.head)
			require.NoError(t, err, "connection %d", i)
			require.Equal(t, tc.status, resp.StatusCode, "connection %d", i)
			if tc.status == 200 {
				assert.Equal(t, netip.MustParseAddr(tc.remote), e.remoteOf(resp.Header.Get("Mcp-Session-Id")), "connection %d", i)
			}
		}
	})
	for _, tc := range []struct{ name, list, head string }{
		{"untrusted v1", "10.0.0.0/8", proxyV1("198.51.100.1")},
		{"untrusted v2", "10.0.0.0/8", "\r\n\r\n\x00\r\nQUIT\n\x21\x11\x00\x0c\xc6\x33\x64\x01\x7f\x00\x00\x01\x12\x67\x1c\xe9"},
		{"malformed", "127.0.0.0/8", "PROXY TCP4 198.51.100 127.0.0.1 1 2\r\n"},
		{"v1 without end", "127.0.0.0/8", "PROXY TCP4 " + string(make([]byte, 120))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newServer(t, tc.list)
			resp, b, c, err := e.rawInit(t, tc.head)
			require.NoError(t, err)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode)
			assert.Contains(t, b, "PROXY header refused")
			assert.True(t, resp.Close)
			_, err = c.Read(make([]byte, 1))
			assert.ErrorIs(t, err, io.EOF, "the connection ends")
			assert.Equal(t, 0, e.srv.Sessions())
		})
	}
}

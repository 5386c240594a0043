package http

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rpcError decodes a JSON-RPC error body.
func rpcError(t *testing.T, b string) (code int, msg string, id json.RawMessage) {
	t.Helper()
	var m struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(b), &m), b)
	require.Equal(t, "2.0", m.JSONRPC, b)
	return m.Error.Code, m.Error.Message, m.ID
}

func TestStatuses(t *testing.T) {
	for _, loopback := range []bool{false, true} {
		t.Run(map[bool]string{false: "inmemory", true: "loopback"}[loopback], func(t *testing.T) {
			e := newEnv(t, envOpts{loopback: loopback})
			sid := e.initialize()
			tests := []struct {
				name   string
				r      req
				status int
				code   int    // JSON-RPC error code, 0 for none
				msg    string // substring of the error message
			}{
				{"notification is 202", req{sid: sid, body: `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`}, 202, 0, ""},
				{"response is 202", req{sid: sid, body: `{"jsonrpc":"2.0","id":99,"result":{}}`}, 202, 0, ""},
				{"error response is 202", req{sid: sid, body: `{"jsonrpc":"2.0","id":98,"error":{"code":1,"message":"x"}}`}, 202, 0, ""},
				{"request is 200", req{sid: sid, body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`}, 200, 0, ""},
				{"Accept in reverse order", req{sid: sid, body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`, headers: map[string]string{"Accept": "text/event-stream, application/json"}}, 200, 0, ""},
				{"Accept */*", req{sid: sid, body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`, headers: map[string]string{"Accept": "*/*"}}, 200, 0, ""},
				{"Accept without SSE", req{sid: sid, body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`, headers: map[string]string{"Accept": "application/json"}}, 406, codeTransport, "Not Acceptable"},
				{"SSE refused with q=0", req{sid: sid, body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`, headers: map[string]string{"Accept": "application/json, text/event-stream;q=0"}}, 406, codeTransport, "Not Acceptable"},
				{"no session id", req{body: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`}, 400, codeTransport, "Mcp-Session-Id"},
				{"no session id on a notification", req{body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`}, 400, codeTransport, "Mcp-Session-Id"},
				{"unknown session", req{sid: "00000000000000000000000000000000", body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`}, 404, codeSessionNotFound, "Session not found"},
				{"version absent", req{sid: sid, body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`, headers: map[string]string{"Mcp-Protocol-Version": ""}}, 200, 0, ""},
				{"other supported version", req{sid: sid, body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`, headers: map[string]string{"Mcp-Protocol-Version": "2025-03-26"}}, 200, 0, ""},
				{"unsupported version", req{sid: sid, body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`, headers: map[string]string{"Mcp-Protocol-Version": "1999-01-01"}}, 400, codeTransport, "MCP-Protocol-Version"},
				{"wrong content type", req{sid: sid, body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`, headers: map[string]string{"Content-Type": "text/plain"}}, 415, codeTransport, "Content-Type"},
				{"content type with charset", req{sid: sid, body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`, headers: map[string]string{"Content-Type": "Application/JSON; charset=utf-8"}}, 200, 0, ""},
				{"unknown content encoding", req{sid: sid, body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`, headers: map[string]string{"Content-Encoding": "br"}}, 415, codeTransport, "Content-Encoding"},
				{"torn JSON", req{sid: sid, body: `{"jsonrpc":"2.0","id":1,"meth`}, 400, -32700, "parse error"},
				{"two messages", req{sid: sid, body: `{"jsonrpc":"2.0","id":1,"method":"ping"}{"jsonrpc":"2.0","id":2,"method":"ping"}`}, 400, -32700, "parse error"},
				{"batch", req{sid: sid, body: `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`}, 400, -32600, "invalid request"},
				{"empty body", req{sid: sid}, 400, -32700, "parse error"},
				{"not JSON-RPC", req{sid: sid, body: `{"jsonrpc":"1.0","id":7,"method":"ping"}`}, 400, -32600, "invalid request"},
				{"PUT", req{method: http.MethodPut, sid: sid, body: `{}`}, 405, codeTransport, "Method Not Allowed"},
				{"HEAD", req{method: http.MethodHead, sid: sid}, 405, 0, ""},
				{"GET without SSE", req{method: http.MethodGet, sid: sid, headers: map[string]string{"Accept": "application/json"}}, 406, codeTransport, "Not Acceptable"},
				{"GET without session", req{method: http.MethodGet}, 400, codeTransport, "Mcp-Session-Id"},
				{"GET unknown session", req{method: http.MethodGet, sid: "nope"}, 404, codeSessionNotFound, "Session not found"},
				{"DELETE without session", req{method: http.MethodDelete}, 400, codeTransport, "Mcp-Session-Id"},
				{"DELETE unknown session", req{method: http.MethodDelete, sid: "nope"}, 404, codeSessionNotFound, "Session not found"},
				{"unknown path", req{path: "/other", sid: sid, body: `{}`}, 404, codeTransport, "Not Found"},
				{"Host not loopback", req{sid: sid, body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`, headers: map[string]string{"Host": "evil.example.com"}}, 403, codeTransport, "Invalid Host: evil.example.com"},
				{"Origin not loopback", req{sid: sid, body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`, headers: map[string]string{"Origin": "http://evil.example.com"}}, 403, codeTransport, "Invalid Origin: http://evil.example.com"},
				{"Origin loopback", req{sid: sid, body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`, headers: map[string]string{"Origin": "http://localhost:3000"}}, 200, 0, ""},
				{"Host localhost", req{sid: sid, body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`, headers: map[string]string{"Host": "localhost:7401"}}, 200, 0, ""},
				{"Host [::1]", req{sid: sid, body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`, headers: map[string]string{"Host": "[::1]:7401"}}, 200, 0, ""},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					resp := e.do(t, tt.r)
					b := body(t, resp)
					require.Equal(t, tt.status, resp.StatusCode, b)
					switch {
					case tt.status == 202:
						assert.Empty(t, b)
					case tt.code != 0:
						assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
						code, msg, id := rpcError(t, b)
						assert.Equal(t, tt.code, code, b)
						assert.Contains(t, msg, tt.msg)
						if tt.status != 400 || tt.code != -32600 {
							assert.Equal(t, "null", string(id), "transport errors carry no id")
						}
					}
					if tt.status == 405 {
						assert.Equal(t, "GET, POST, DELETE", resp.Header.Get("Allow"))
					}
				})
			}
		})
	}
}

func TestDNSRebindingBody(t *testing.T) {
	// The conformance suite's exact check: Host and Origin both foreign.
	e := newEnv(t, envOpts{})
	resp := e.do(t, req{body: initBody, headers: map[string]string{"Host": "evil.example.com", "Origin": "http://evil.example.com"}})
	b := body(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.JSONEq(t, `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Invalid Host: evil.example.com"},"id":null}`, b)
	assert.Empty(t, resp.Header.Get("Mcp-Session-Id"))
	assert.Zero(t, e.srv.Sessions())
}

func TestAllowLists(t *testing.T) {
	tests := []struct {
		name         string
		addr         string
		hosts, origs []string
		host, origin string
		ok           bool
	}{
		{"loopback bind, allowed host", "127.0.0.1:7401", []string{"mcp.example.com"}, nil, "mcp.example.com:7401", "", true},
		{"loopback bind, allowed host:port", "127.0.0.1:7401", []string{"mcp.example.com:443"}, nil, "mcp.example.com:443", "", true},
		{"loopback bind, wrong port", "127.0.0.1:7401", []string{"mcp.example.com:443"}, nil, "mcp.example.com:80", "", false},
		{"loopback bind, allowed origin", "127.0.0.1:7401", nil, []string{"https://app.example.com"}, "127.0.0.1", "https://APP.example.com", true},
		{"loopback bind, null origin", "127.0.0.1:7401", nil, nil, "127.0.0.1", "null", false},
		{"any host", "127.0.0.1:7401", []string{"*"}, nil, "evil.example.com", "", true},
		{"public bind, no lists", "0.0.0.0:7401", nil, nil, "mcp.example.com", "https://app.example.com", true},
		{"public bind, host list", "0.0.0.0:7401", []string{"mcp.example.com"}, nil, "evil.example.com", "", false},
		{"public bind, origin list", "0.0.0.0:7401", nil, []string{"https://app.example.com"}, "mcp.example.com", "https://evil.example.com", false},
		{"public bind, loopback host still passes", "0.0.0.0:7401", []string{"mcp.example.com"}, nil, "localhost:7401", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envOpts{opts: Options{Addr: tt.addr, AllowedHosts: tt.hosts, AllowedOrigins: tt.origs}})
			h := map[string]string{"Host": tt.host}
			if tt.origin != "" {
				h["Origin"] = tt.origin
			}
			resp := e.do(t, req{body: initBody, headers: h})
			b := body(t, resp)
			if tt.ok {
				assert.Equal(t, http.StatusOK, resp.StatusCode, b)
			} else {
				assert.Equal(t, http.StatusForbidden, resp.StatusCode, b)
			}
		})
	}
}

func TestInitialize(t *testing.T) {
	e := newEnv(t, envOpts{})
	t.Run("ids are distinct and random", func(t *testing.T) {
		seen := map[string]bool{}
		for i := 0; i < 50; i++ {
			sid := e.initialize()
			require.False(t, seen[sid])
			seen[sid] = true
		}
	})
	t.Run("a failed initialize leaves no session", func(t *testing.T) {
		before := e.srv.Sessions()
		resp := e.do(t, req{body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`})
		b := body(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode, b)
		assert.Empty(t, resp.Header.Get("Mcp-Session-Id"))
		assert.Contains(t, b, `"error"`)
		assert.Equal(t, before, e.srv.Sessions())
	})
	t.Run("initialize on a session is refused", func(t *testing.T) {
		sid := e.initialize()
		resp := e.do(t, req{sid: sid, body: initBody})
		b := body(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Contains(t, b, "already initialized")
		assert.Empty(t, resp.Header.Get("Mcp-Session-Id"))
	})
}

func TestJSONAndSSEReplies(t *testing.T) {
	e := newEnv(t, envOpts{})
	sid := e.initialize()

	t.Run("a handler that only answers gets JSON", func(t *testing.T) {
		resp := e.do(t, req{sid: sid, body: `{"jsonrpc":"2.0","id":"a\"b","method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`})
		b := body(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		assert.JSONEq(t, `{"jsonrpc":"2.0","id":"a\"b","result":{"content":[{"type":"text","text":"hi"}]}}`, b)
	})
	t.Run("a tool run on a goroutine that only answers gets JSON", func(t *testing.T) {
		resp := e.do(t, req{sid: sid, body: callBody(2, "count", `{"n":1}`)})
		b := body(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode, b)
		// count reports progress: with a progress token it streams.
		assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
		resp = e.do(t, req{sid: sid, body: `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"count","arguments":{"n":2}}}`})
		b = body(t, resp)
		assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		assert.JSONEq(t, `{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"counted to 2"}]}}`, b)
	})
	t.Run("progress streams before the result", func(t *testing.T) {
		resp := e.do(t, req{sid: sid, body: callBody(7, "count", `{"n":3,"delayMs":10}`)})
		require.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
		assert.Equal(t, "no-cache", resp.Header.Get("Cache-Control"))
		evs := newSSE(resp.Body).events(t)
		resp.Body.Close()
		require.Len(t, evs, 5, "priming, 3 progress, result")
		assert.True(t, evs[0].HasRetry)
		assert.Equal(t, int(e.srv.opts.Retry.Milliseconds()), evs[0].Retry)
		assert.Empty(t, evs[0].Data)
		assert.NotEmpty(t, evs[0].ID)
		ids := map[string]bool{evs[0].ID: true}
		for i, ev := range evs[1:4] {
			assert.Contains(t, ev.Data, `"method":"notifications/progress"`)
			assert.Contains(t, ev.Data, fmt.Sprintf(`"progress":%d`, i+1))
			assert.False(t, ids[ev.ID], "event ids are unique")
			ids[ev.ID] = true
		}
		assert.JSONEq(t, `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"counted to 3"}]}}`, evs[4].Data)
		_, sid0, _, ok := parseEventID([]byte(evs[0].ID))
		require.True(t, ok)
		for _, ev := range evs[1:] {
			_, s, _, ok := parseEventID([]byte(ev.ID))
			require.True(t, ok)
			assert.Equal(t, sid0, s, "every event id names the stream")
		}
	})
	t.Run("server-to-client requests go on the request's stream", func(t *testing.T) {
		resp := e.do(t, req{sid: sid, body: `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"sample","arguments":{}}}`})
		require.Equal(t, http.StatusOK, resp.StatusCode)
		s := newSSE(resp.Body)
		defer resp.Body.Close()
		_, err := s.next() // priming
		require.NoError(t, err)
		ev, err := s.next()
		require.NoError(t, err)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		require.NoError(t, json.Unmarshal([]byte(ev.Data), &m))
		require.Equal(t, "sampling/createMessage", m.Method)
		answer := e.do(t, req{sid: sid, body: `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"role":"assistant","content":{"type":"text","text":"yo"},"model":"m"}}`})
		require.Equal(t, http.StatusAccepted, answer.StatusCode, body(t, answer))
		ev, err = s.next()
		require.NoError(t, err)
		assert.Contains(t, ev.Data, `sampled: {\"type\":\"text\",\"text\":\"yo\"}`)
		_, err = s.next()
		assert.ErrorIs(t, err, io.EOF, "the stream ends after the result")
	})
}

func TestConcurrentPOSTsOnOneSession(t *testing.T) {
	e := newEnv(t, envOpts{loopback: true})
	sid := e.initialize()
	const n = 16
	var wg sync.WaitGroup
	results := make([]string, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			var r req
			switch i % 3 {
			case 0:
				r = req{sid: sid, body: callBody(1000+i, "count", `{"n":2,"delayMs":30}`)}
			case 1:
				r = req{sid: sid, body: fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, 1000+i)}
			default:
				r = req{sid: sid, body: fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"t%d"}}}`, 1000+i, i)}
			}
			resp, err := e.try(context.Background(), r)
			if !assert.NoError(t, err) {
				return
			}
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			results[i] = body(t, resp)
		}(i)
	}
	wg.Wait()
	for i, b := range results {
		assert.Contains(t, b, fmt.Sprintf(`"id":%d,"result"`, 1000+i), "each POST gets its own answer")
		if i%3 == 2 {
			assert.Contains(t, b, fmt.Sprintf(`"text":"t%d"`, i))
		}
	}
}

// rawPOST writes a POST on a raw connection, for tests that hang up.
func rawPOST(t *testing.T, e *env, sid, b string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := e.dial()
	require.NoError(t, err)
	_, err = fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Session-Id: %s\r\nContent-Length: %d\r\n\r\n%s", sid, len(b), b)
	require.NoError(t, err)
	return c, bufio.NewReader(c)
}

func TestClientDisconnectCancelsHandler(t *testing.T) {
	tests := []struct {
		name     string
		loopback bool
		progress bool
	}{
		{"waiting for a JSON answer", true, false},
		{"streaming", true, true},
		{"streaming, in memory (noticed by keep-alive writes)", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envOpts{loopback: tt.loopback, opts: Options{KeepAlive: 20 * time.Millisecond}})
			sid := e.initialize()
			args := `{}`
			if tt.progress {
				args = `{"progress":true}`
			}
			c, br := rawPOST(t, e, sid, callBody(5, "block", args))
			select {
			case <-e.tool.started:
			case <-time.After(5 * time.Second):
				t.Fatal("the tool did not start")
			}
			if tt.progress {
				status, err := br.ReadString('\n')
				require.NoError(t, err)
				require.Contains(t, status, "200")
			} else {
				// Past the point where the connection is watched: the timer is
				// the server's own, on a real socket, with nothing to wait on.
				time.Sleep(3 * watchAfter)
			}
			require.NoError(t, c.Close())
			select {
			case cause := <-e.tool.causes:
				assert.ErrorIs(t, cause, ErrClientGone)
			case <-time.After(5 * time.Second):
				t.Fatal("the handler was not cancelled")
			}
			h := e.srv.lookup([]byte(sid))
			require.NotNil(t, h)
			waitFor(t, 2*time.Second, "the session to be idle", func() bool { return h.sess.InFlight() == 0 && !h.busy() })
		})
	}
}

func TestBodyTooLarge(t *testing.T) {
	for _, loopback := range []bool{false, true} {
		e := newEnv(t, envOpts{loopback: loopback})
		sid := e.initialize()
		c, err := e.dial()
		require.NoError(t, err)
		// The length alone is refused; the body is never sent.
		_, err = fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Session-Id: %s\r\nContent-Length: %d\r\n\r\n", sid, e.srv.max+1)
		require.NoError(t, err)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		b := body(t, resp)
		c.Close()
		require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, b)
		code, msg, _ := rpcError(t, b)
		assert.Equal(t, codeTransport, code)
		assert.Contains(t, msg, "Too Large")
	}
}

func TestTruncatedBody(t *testing.T) {
	e := newEnv(t, envOpts{loopback: true, opts: Options{ReadTimeout: 200 * time.Millisecond}})
	sid := e.initialize()
	for _, hangUp := range []bool{true, false} {
		c, err := e.dial()
		require.NoError(t, err)
		// Content-Length promises more than is sent.
		_, err = fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Session-Id: %s\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\":\"2.0\",", sid)
		require.NoError(t, err)
		if hangUp {
			require.NoError(t, c.(*net.TCPConn).CloseWrite())
		}
		require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
		b, _ := io.ReadAll(c)
		c.Close()
		// Either nothing (the client left) or an error answer; never a
		// JSON-RPC result, and the connection is closed.
		assert.NotContains(t, string(b), `"result"`)
		if !hangUp {
			assert.Contains(t, string(b), "408 Request Timeout")
		}
	}
	// The server is fine.
	resp := e.do(t, req{sid: sid, body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`})
	assert.Equal(t, http.StatusOK, resp.StatusCode, body(t, resp))
}

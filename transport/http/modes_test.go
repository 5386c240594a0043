package http

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStateless(t *testing.T) {
	e := newEnv(t, envOpts{opts: Options{Stateless: true}})
	resp := e.do(t, req{body: initBody})
	b := body(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, b)
	assert.Empty(t, resp.Header.Get("Mcp-Session-Id"), "no session ids")
	assert.Contains(t, b, `"protocolVersion":"2025-11-25"`)

	resp = e.do(t, req{body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`})
	assert.Equal(t, http.StatusAccepted, resp.StatusCode, body(t, resp))

	resp = e.do(t, req{body: `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"st"}}}`})
	b = body(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, b)
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"st"}]}}`, b)

	// A session id, stale or not, is ignored.
	resp = e.do(t, req{sid: "whatever", body: `{"jsonrpc":"2.0","id":3,"method":"ping"}`})
	assert.Equal(t, http.StatusOK, resp.StatusCode, body(t, resp))

	// Streaming works, without resumption: no ids, no priming event.
	resp = e.do(t, req{body: callBody(4, "count", `{"n":2}`)})
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	evs := newSSE(resp.Body).events(t)
	resp.Body.Close()
	require.Len(t, evs, 3)
	for _, ev := range evs {
		assert.Empty(t, ev.ID)
	}
	assert.Contains(t, evs[2].Data, `"id":4,"result"`)

	for _, m := range []string{http.MethodGet, http.MethodDelete} {
		resp = e.do(t, req{method: m})
		b = body(t, resp)
		assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, b)
		assert.Equal(t, "POST", resp.Header.Get("Allow"))
	}
	assert.Zero(t, e.srv.Sessions())
	waitFor(t, time.Second, "stateless sessions to be gone", func() bool { return e.eng.Sessions().Len() == 0 })
}

func gz(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, err := w.Write(b)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return buf.Bytes()
}

func zs(t *testing.T, b []byte) []byte {
	enc, err := zstd.NewWriter(nil)
	require.NoError(t, err)
	defer enc.Close()
	return enc.EncodeAll(b, nil)
}

func unzip(t *testing.T, enc string, b []byte) []byte {
	t.Helper()
	switch enc {
	case "gzip":
		r, err := gzip.NewReader(bytes.NewReader(b))
		require.NoError(t, err)
		out, err := io.ReadAll(r)
		require.NoError(t, err)
		return out
	case "zstd":
		r, err := zstd.NewReader(bytes.NewReader(b))
		require.NoError(t, err)
		defer r.Close()
		out, err := io.ReadAll(r)
		require.NoError(t, err)
		return out
	}
	return b
}

func TestCompression(t *testing.T) {
	e := newEnv(t, envOpts{})
	sid := e.initialize()
	long := strings.Repeat("compressible ", 200)
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + long + `"}}}`
	want := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + long + `"}]}}`

	t.Run("responses", func(t *testing.T) {
		tests := []struct{ accept, enc string }{
			{"gzip", "gzip"},
			{"zstd", "zstd"},
			{"gzip, deflate, br, zstd", "zstd"},
			{"zstd;q=0, gzip", "gzip"},
			{"*", "gzip"},
			{"deflate", ""},
			{"", ""},
		}
		for _, tt := range tests {
			t.Run(tt.accept, func(t *testing.T) {
				resp := e.do(t, req{sid: sid, body: call, headers: map[string]string{"Accept-Encoding": tt.accept}})
				b := body(t, resp)
				require.Equal(t, http.StatusOK, resp.StatusCode)
				assert.Equal(t, tt.enc, resp.Header.Get("Content-Encoding"))
				if tt.enc != "" {
					assert.Less(t, len(b), len(want))
					assert.Equal(t, "Accept-Encoding", resp.Header.Get("Vary"))
				}
				assert.JSONEq(t, want, string(unzip(t, tt.enc, []byte(b))))
			})
		}
	})
	t.Run("small responses stay plain", func(t *testing.T) {
		resp := e.do(t, req{sid: sid, body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`, headers: map[string]string{"Accept-Encoding": "gzip"}})
		b := body(t, resp)
		assert.Empty(t, resp.Header.Get("Content-Encoding"))
		assert.JSONEq(t, `{"jsonrpc":"2.0","id":1,"result":{}}`, b)
	})
	t.Run("streams, flushed per event", func(t *testing.T) {
		for _, enc := range []string{"gzip", "zstd"} {
			t.Run(enc, func(t *testing.T) {
				resp := e.do(t, req{sid: sid, body: callBody(3, "count", `{"n":3,"delayMs":30}`), headers: map[string]string{"Accept-Encoding": enc}})
				require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
				require.Equal(t, enc, resp.Header.Get("Content-Encoding"))
				var r io.Reader
				if enc == "gzip" {
					zr, err := gzip.NewReader(resp.Body)
					require.NoError(t, err)
					r = zr
				} else {
					zr, err := zstd.NewReader(resp.Body)
					require.NoError(t, err)
					defer zr.Close()
					r = zr
				}
				s := newSSE(r)
				start := time.Now()
				prime, err := s.next()
				require.NoError(t, err)
				assert.True(t, prime.HasRetry)
				ev, err := s.next()
				require.NoError(t, err)
				assert.Contains(t, ev.Data, `"progress":1`)
				assert.Less(t, time.Since(start), 80*time.Millisecond, "the first progress arrives before the stream ends")
				rest := s.events(t)
				resp.Body.Close()
				require.Len(t, rest, 3)
				assert.Contains(t, rest[2].Data, `"counted to 3"`)
			})
		}
	})
	t.Run("request bodies", func(t *testing.T) {
		ping := []byte(`{"jsonrpc":"2.0","id":5,"method":"ping"}`)
		tests := []struct {
			enc    string
			body   []byte
			status int
		}{
			{"gzip", gz(t, ping), 200},
			{"x-gzip", gz(t, ping), 200},
			{"zstd", zs(t, ping), 200},
			{"identity", ping, 200},
			{"gzip", []byte("not gzip"), 400},
			{"zstd", []byte("not zstd"), 400},
			{"gzip", gz(t, bytes.Repeat([]byte{' '}, e.srv.max+1)), 413},
			{"zstd", zs(t, bytes.Repeat([]byte{' '}, e.srv.max+1)), 413},
		}
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s %d", tt.enc, tt.status), func(t *testing.T) {
				resp := e.do(t, req{sid: sid, body: string(tt.body), headers: map[string]string{"Content-Encoding": tt.enc}})
				b := body(t, resp)
				require.Equal(t, tt.status, resp.StatusCode, b)
				if tt.status == 200 {
					assert.JSONEq(t, `{"jsonrpc":"2.0","id":5,"result":{}}`, b)
				}
			})
		}
	})
}

func TestLegacySSE(t *testing.T) {
	for _, loopback := range []bool{false, true} {
		t.Run(map[bool]string{false: "inmemory", true: "loopback"}[loopback], func(t *testing.T) {
			// In memory, a client gone is noticed when a keep-alive write fails.
			e := newEnv(t, envOpts{loopback: loopback, opts: Options{KeepAlive: 20 * time.Millisecond}})
			resp := e.do(t, req{method: http.MethodGet, path: "/sse", headers: map[string]string{"Mcp-Protocol-Version": ""}})
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
			defer resp.Body.Close()
			// The endpoint event is a named event: read it raw.
			br := bufio.NewReader(resp.Body)
			line, err := br.ReadString('\n')
			require.NoError(t, err)
			require.Equal(t, "event: endpoint\n", line)
			line, err = br.ReadString('\n')
			require.NoError(t, err)
			endpoint := strings.TrimSpace(strings.TrimPrefix(line, "data: "))
			require.Regexp(t, `^/message\?sessionId=[0-9a-f]{32}$`, endpoint)
			_, err = br.ReadString('\n')
			require.NoError(t, err)
			s := newSSE(br)
			post := func(b string) int {
				r := e.do(t, req{path: endpoint, body: b, headers: map[string]string{"Mcp-Protocol-Version": ""}})
				body(t, r)
				return r.StatusCode
			}
			require.Equal(t, http.StatusAccepted, post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"old","version":"1"}}}`))
			ev, err := s.next()
			require.NoError(t, err)
			assert.Contains(t, ev.Data, `"protocolVersion":"2024-11-05"`)
			require.Equal(t, http.StatusAccepted, post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
			require.Equal(t, http.StatusAccepted, post(callBody(2, "count", `{"n":2}`)))
			for i := 1; i <= 2; i++ {
				ev, err = s.next()
				require.NoError(t, err)
				assert.Contains(t, ev.Data, fmt.Sprintf(`"progress":%d`, i))
			}
			ev, err = s.next()
			require.NoError(t, err)
			assert.JSONEq(t, `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"counted to 2"}]}}`, ev.Data)
			assert.Equal(t, http.StatusBadRequest, post(`{"jsonrpc":`))
			assert.Equal(t, 1, e.srv.Sessions())

			r := e.do(t, req{path: "/message?sessionId=nope", body: `{}`})
			assert.Equal(t, http.StatusNotFound, r.StatusCode, body(t, r))
			r = e.do(t, req{path: "/message", body: `{}`})
			assert.Equal(t, http.StatusBadRequest, r.StatusCode, body(t, r))
			r = e.do(t, req{path: "/message?sessionId=x", body: `{}`, headers: map[string]string{"Content-Type": "text/plain"}})
			assert.Equal(t, http.StatusUnsupportedMediaType, r.StatusCode, body(t, r))
			r = e.do(t, req{method: http.MethodPost, path: "/sse", body: `{}`})
			assert.Equal(t, http.StatusMethodNotAllowed, r.StatusCode, body(t, r))
			r = e.do(t, req{path: endpoint, body: `{}`, headers: map[string]string{"Host": "evil.example.com"}})
			assert.Equal(t, http.StatusForbidden, r.StatusCode, body(t, r))

			// Closing the stream ends the session.
			resp.Body.Close()
			waitFor(t, 5*time.Second, "the legacy session to end", func() bool { return e.srv.Sessions() == 0 })
			assert.Equal(t, http.StatusNotFound, post(`{"jsonrpc":"2.0","id":3,"method":"ping"}`))
		})
	}
	t.Run("disabled", func(t *testing.T) {
		e := newEnv(t, envOpts{opts: Options{NoLegacySSE: true}})
		r := e.do(t, req{method: http.MethodGet, path: "/sse"})
		assert.Equal(t, http.StatusNotFound, r.StatusCode, body(t, r))
	})
}

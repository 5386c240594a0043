package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"
)

// wireHTTP is a fake Streamable HTTP server that keeps every request's
// header lines as they came over the wire and answers each right.
type wireHTTP struct {
	mu      sync.Mutex
	headers [][]string // per request, its header lines in order
	methods []string
}

func startWireHTTP(t *testing.T) (*wireHTTP, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	w := &wireHTTP{}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			wg.Go(func() { w.serve(c) })
		}
	})
	return w, "http://" + ln.Addr().String() + "/mcp"
}

func (w *wireHTTP) serve(c net.Conn) {
	br := bufio.NewReader(c)
	for {
		if _, err := br.ReadString('\n'); err != nil { // the request line
			return
		}
		var lines []string
		n := 0
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				return
			}
			if l == "\r\n" {
				break
			}
			lines = append(lines, l)
			if k, v, ok := strings.Cut(l, ":"); ok && strings.EqualFold(k, "Content-Length") {
				n, _ = strconv.Atoi(strings.TrimSpace(v))
			}
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(br, body); err != nil {
			return
		}
		var msg codec.Message
		_ = codec.Decode(body, &msg)
		w.mu.Lock()
		w.headers = append(w.headers, lines)
		w.methods = append(w.methods, msg.Method)
		w.mu.Unlock()
		var out bytes.Buffer
		if msg.Kind == codec.KindNotification {
			out.WriteString("HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")
		} else {
			ans := fakeAnswer(&msg)
			out.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: s1\r\nContent-Length: " + strconv.Itoa(len(ans)) + "\r\n\r\n")
			out.Write(ans)
		}
		if _, err := c.Write(out.Bytes()); err != nil {
			return
		}
	}
}

// auths returns each request's Authorization header lines, as sent.
func (w *wireHTTP) auths() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, len(w.headers))
	for i, h := range w.headers {
		for _, l := range h {
			if strings.HasPrefix(strings.ToLower(l), "authorization:") {
				out[i] += l
			}
		}
	}
	return out
}

// TestBearerOnTheWire: one token rides every request, the handshake's
// included, as exactly "Authorization: Bearer TOKEN\r\n"; several go in
// turn, one a request.
func TestBearerOnTheWire(t *testing.T) {
	t.Run("one", func(t *testing.T) {
		w, url := startWireHTTP(t)
		target, err := ParseTarget(url)
		require.NoError(t, err)
		res, err := Run(context.Background(), Config{Target: target, Requests: 5, Bearer: []string{"tok-1"}, Timeout: 5 * time.Second})
		require.NoError(t, err)
		require.Zero(t, res.Errors)
		auths := w.auths()
		require.GreaterOrEqual(t, len(auths), 7) // initialize, initialized, 5 calls
		assert.Equal(t, []string{"initialize", "notifications/initialized"}, w.methods[:2])
		for i, a := range auths {
			assert.Equal(t, "Authorization: Bearer tok-1\r\n", a, "request %d", i)
		}
	})
	t.Run("round-robin", func(t *testing.T) {
		w, url := startWireHTTP(t)
		target, err := ParseTarget(url)
		require.NoError(t, err)
		tokens := []string{"a.b.c", "d.e.f", "g.h.i"}
		res, err := Run(context.Background(), Config{Target: target, Requests: 7, Bearer: tokens, Timeout: 5 * time.Second})
		require.NoError(t, err)
		require.Zero(t, res.Errors)
		auths := w.auths()
		require.GreaterOrEqual(t, len(auths), 7)
		for i, a := range auths {
			assert.Equal(t, "Authorization: Bearer "+tokens[i%3]+"\r\n", a, "request %d", i)
		}
	})
	t.Run("none", func(t *testing.T) {
		w, url := startWireHTTP(t)
		target, err := ParseTarget(url)
		require.NoError(t, err)
		_, err = Run(context.Background(), Config{Target: target, Requests: 3, Timeout: 5 * time.Second})
		require.NoError(t, err)
		for i, a := range w.auths() {
			assert.Empty(t, a, "request %d", i)
		}
	})
}

func TestBearerConfig(t *testing.T) {
	tcp, err := ParseTarget("tcp://127.0.0.1:1")
	require.NoError(t, err)
	httpT, err := ParseTarget("http://127.0.0.1:1/mcp")
	require.NoError(t, err)
	for _, c := range []Config{
		{Target: tcp, Bearer: []string{"x"}},
		{Target: httpT, Bearer: []string{"x"}, Client: true},
		{Target: httpT, Bearer: []string{""}},
		{Target: httpT, Bearer: []string{"a b"}},
	} {
		assert.ErrorIs(t, c.defaults(), ErrConfig, "%+v", c.Bearer)
	}
}

// staticDoer answers every request with the same JSON body.
type staticDoer struct{ body []byte }

func (d *staticDoer) DoTimeout(_ *fasthttp.Request, resp *fasthttp.Response, _ time.Duration) error {
	resp.Header.SetContentTypeBytes(hJSON)
	resp.SetBodyRaw(d.body)
	return nil
}

// TestBearerAllocations: a call with a bearer token allocates no more
// than one without.
func TestBearerAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocations differ under the race detector")
	}
	params := []byte(`{"name":"echo","arguments":{"text":"x"}}`)
	allocs := func(bearer []string) float64 {
		d := &staticDoer{}
		s := &httpSession{t: &httpTarget{url: "http://127.0.0.1:1/mcp", client: d, opts: &sessionOpts{timeout: time.Second, maxFrame: 1 << 20, bearer: bearerHeaders(bearer)}}, version: []byte(protocolVersion), sid: []byte("s1")}
		var dst []byte
		return testing.AllocsPerRun(200, func() {
			// The answer's id is the next one.
			d.body = codec.AppendResult(d.body[:0], strconv.AppendUint(nil, s.nextID.Load()+1, 10), []byte(`{"content":[{"type":"text","text":"x"}]}`))
			var err error
			if dst, err = s.Call(context.Background(), "tools/call", params, dst[:0]); err != nil {
				t.Fatal(err)
			}
		})
	}
	base := allocs(nil)
	assert.Equal(t, base, allocs([]string{"tok"}))
	assert.Equal(t, base, allocs([]string{"t1", "t2", "t3"}))
}

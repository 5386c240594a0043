package http

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/handlers/builtin"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp/fasthttputil"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// fasthttp's process-wide Date header updater, and the idle-worker
		// cleaner of each served listener, which notices Shutdown only
		// after its current sleep (MaxIdleWorkerDuration).
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		// The benchmarks' fasthttp client, whose idle-connection cleaner
		// sleeps likewise.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		// ants' default pool, created when the package is loaded.
		goleak.IgnoreAnyFunction("github.com/panjf2000/ants/v2.(*poolCommon).purgeStaleWorkers"),
		goleak.IgnoreAnyFunction("github.com/panjf2000/ants/v2.(*poolCommon).ticktock"),
	)
}

const testVersion = mcp.Version20251125

// env is a server under test with a client for it.
type env struct {
	t    *testing.T
	eng  *engine.Server
	srv  *Server
	ln   net.Listener
	url  string // the MCP endpoint
	base string // scheme and authority
	hc   *http.Client
	dial func() (net.Conn, error)
	tool *testTools
}

// envOpts choose the listener: in-memory (fasthttputil) or loopback TCP.
type envOpts struct {
	loopback bool
	opts     Options
	// eng configures the engine (ClientRequestTimeout defaults to 5 s).
	eng engine.Options
	// sndbuf, when > 0, sets the send buffer of accepted connections (slow
	// consumer tests fill it fast).
	sndbuf int
	// wrap, when set, wraps the listener the server serves.
	wrap func(net.Listener) net.Listener
}

func newEnv(t *testing.T, eo envOpts) *env {
	t.Helper()
	if eo.eng.ClientRequestTimeout == 0 {
		eo.eng.ClientRequestTimeout = 5 * time.Second
	}
	eng := engine.New(eo.eng)
	require.NoError(t, builtin.Install("demo", eng.Registry(), builtin.Env{ResourceUpdated: eng.ResourceUpdated}))
	tools := installTestTools(t, eng.Registry())
	e := &env{t: t, eng: eng, tool: tools}
	if eo.loopback {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		if eo.sndbuf > 0 {
			ln = &sndbufListener{Listener: ln, size: eo.sndbuf}
		}
		e.ln = ln
		e.base = "http://" + ln.Addr().String()
		e.dial = func() (net.Conn, error) { return net.Dial("tcp", ln.Addr().String()) }
	} else {
		ln := fasthttputil.NewInmemoryListener()
		e.ln = ln
		e.base = "http://127.0.0.1:7401"
		e.dial = ln.Dial
	}
	if eo.wrap != nil {
		e.ln = eo.wrap(e.ln)
	}
	e.srv = New(eng, eo.opts)
	e.url = e.base + e.srv.opts.Path
	served := make(chan error, 1)
	go func() { served <- e.srv.Serve(context.Background(), e.ln) }()
	e.hc = &http.Client{Transport: &http.Transport{
		DialContext:         func(context.Context, string, string) (net.Conn, error) { return e.dial() },
		DisableCompression:  true,
		MaxIdleConnsPerHost: 64,
	}}
	t.Cleanup(func() {
		e.hc.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, eng.Shutdown(ctx))
		require.NoError(t, e.srv.Shutdown(ctx))
		require.NoError(t, <-served)
		e.hc.CloseIdleConnections()
	})
	return e
}

type sndbufListener struct {
	net.Listener
	size int
}

func (l *sndbufListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(l.size)
	}
	return c, err
}

// req describes one HTTP request to the server; zero fields take the
// defaults of a well-behaved client.
type req struct {
	method  string // POST
	path    string // the MCP endpoint
	body    string
	sid     string
	headers map[string]string // "" deletes a default header
}

func (e *env) do(t *testing.T, r req) *http.Response {
	t.Helper()
	resp, err := e.try(context.Background(), r)
	require.NoError(t, err)
	return resp
}

func (e *env) try(ctx context.Context, r req) (*http.Response, error) {
	if r.method == "" {
		r.method = http.MethodPost
	}
	u := e.url
	if r.path != "" {
		u = e.base + r.path
	}
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	hr, err := http.NewRequestWithContext(ctx, r.method, u, body)
	if err != nil {
		return nil, err
	}
	def := map[string]string{"Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": testVersion}
	if r.method == http.MethodPost {
		def["Content-Type"] = "application/json"
	}
	if r.method == http.MethodGet {
		def["Accept"] = "text/event-stream"
	}
	if r.sid != "" {
		def["Mcp-Session-Id"] = r.sid
	}
	for k, v := range r.headers {
		def[k] = v
	}
	for k, v := range def {
		if v == "" {
			continue
		}
		if k == "Host" {
			hr.Host = v
			continue
		}
		hr.Header.Set(k, v)
	}
	return e.hc.Do(hr)
}

// body reads and closes resp's body.
func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

const initBody = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{},"elicitation":{}},"clientInfo":{"name":"test","version":"1"}}}`

// initialize opens a session and returns its id.
func (e *env) initialize() string {
	e.t.Helper()
	resp := e.do(e.t, req{body: initBody, headers: map[string]string{"Mcp-Protocol-Version": ""}})
	b := body(e.t, resp)
	require.Equal(e.t, http.StatusOK, resp.StatusCode, b)
	sid := resp.Header.Get("Mcp-Session-Id")
	require.Regexp(e.t, `^[0-9a-f]{32}$`, sid)
	resp = e.do(e.t, req{sid: sid, body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`})
	require.Equal(e.t, http.StatusAccepted, resp.StatusCode, body(e.t, resp))
	return sid
}

func callBody(id int, tool, args string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s,"_meta":{"progressToken":%d}}}`, id, tool, args, id)
}

// sse reads Server-Sent Events from a response body.
type sse struct {
	r    io.Reader
	p    codec.SSEParser
	buf  []byte
	raw  bytes.Buffer // every byte read
	rerr error
}

type sseEvent struct {
	ID, Data string
	Retry    int
	HasRetry bool
}

func newSSE(r io.Reader) *sse { return &sse{r: r} }

// next returns the next block that carries data or a retry field
// (priming events included), or an error at the end of the stream.
func (s *sse) next() (sseEvent, error) {
	for {
		if len(s.buf) > 0 {
			ev, n, ok, err := s.p.Next(s.buf)
			if err != nil {
				return sseEvent{}, err
			}
			if n > 0 {
				out := sseEvent{ID: ev.ID, Data: string(ev.Data), Retry: ev.Retry, HasRetry: ev.HasRetry}
				s.buf = s.buf[n:]
				if ok || ev.HasRetry {
					return out, nil
				}
				continue
			}
		}
		if s.rerr != nil {
			return sseEvent{}, s.rerr
		}
		var chunk [4096]byte
		k, err := s.r.Read(chunk[:])
		s.buf = append(s.buf, chunk[:k]...)
		s.raw.Write(chunk[:k])
		s.rerr = err
	}
}

// events reads the stream to its end.
func (s *sse) events(t *testing.T) []sseEvent {
	t.Helper()
	var out []sseEvent
	for {
		ev, err := s.next()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		out = append(out, ev)
	}
}

// testTools are tools whose behaviour tests observe.
type testTools struct {
	causes  chan error // block: why its context ended
	started chan struct{}
}

type blockIn struct {
	Progress bool `json:"progress,omitempty"`
}

type spamIn struct {
	N    int `json:"n"`
	Size int `json:"size"`
}

type closerIn struct {
	DelayMs int `json:"delayMs"`
}

func installTestTools(t *testing.T, r *handlers.Registry) *testTools {
	tt := &testTools{causes: make(chan error, 16), started: make(chan struct{}, 16)}
	require.NoError(t, handlers.AddTool(r, &mcp.Tool{Name: "block", Description: "Blocks until cancelled; optionally sends progress first."},
		func(ctx context.Context, req *handlers.CallToolRequest, in blockIn) (*mcp.CallToolResult, any, error) {
			if in.Progress {
				if err := req.Peer.Progress(1, 0, "started"); err != nil {
					return nil, nil, err
				}
			}
			tt.started <- struct{}{}
			<-ctx.Done()
			tt.causes <- context.Cause(ctx)
			return nil, nil, context.Cause(ctx)
		}))
	handlers.AddTool(r, &mcp.Tool{Name: "spam", Description: "Sends n progress notifications carrying size bytes each, then answers."},
		func(_ context.Context, req *handlers.CallToolRequest, in spamIn) (*mcp.CallToolResult, any, error) {
			msg := strings.Repeat("x", in.Size)
			for i := 0; i < in.N; i++ {
				if err := req.Peer.Progress(float64(i+1), float64(in.N), msg); err != nil {
					return nil, nil, err
				}
			}
			return mcp.TextResult(fmt.Sprintf("sent %d", in.N)), nil, nil
		})
	require.NoError(t, handlers.AddTool(r, &mcp.Tool{Name: "closer", Description: "Closes its stream (SSE polling), then answers after delayMs."},
		func(_ context.Context, req *handlers.CallToolRequest, in closerIn) (*mcp.CallToolResult, any, error) {
			req.Peer.CloseStream()
			time.Sleep(time.Duration(in.DelayMs) * time.Millisecond) // answering late is this tool's job
			if err := req.Peer.Progress(1, 1, "after close"); err != nil {
				return nil, nil, err
			}
			return mcp.TextResult("reconnected"), nil, nil
		}))
	handlers.AddTool(r, &mcp.Tool{Name: "sample", Description: "Asks the client for a sampling and returns its text."},
		func(ctx context.Context, req *handlers.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			res, err := req.Peer.CreateMessage(ctx, &mcp.CreateMessageParams{
				Messages:  []mcp.SamplingMessage{{Role: "user", Content: codec.RawJSON(`{"type":"text","text":"hi"}`)}},
				MaxTokens: 10,
			})
			if err != nil {
				return nil, nil, err
			}
			return mcp.TextResult("sampled: " + string(res.Content)), nil, nil
		})
	return tt
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond) // poll interval: the conditions change on other goroutines, behind real sockets
	}
}

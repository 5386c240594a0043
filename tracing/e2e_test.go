package tracing_test

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge"
	"github.com/mcpedge/mcpedge/cluster"
	"github.com/mcpedge/mcpedge/gateway"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/tracing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
	collector "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// receiver is an OTLP/HTTP endpoint on loopback that keeps the spans it
// is sent, each with the service.instance.id of its resource.
type receiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []gotSpan
}

type gotSpan struct {
	instance string
	*tracepb.Span
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		var msg collector.ExportTraceServiceRequest
		if err != nil || req.URL.Path != "/v1/traces" || proto.Unmarshal(body, &msg) != nil {
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range msg.GetResourceSpans() {
			var inst string
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.GetKey() == "service.instance.id" {
					inst = kv.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, sp := range ss.GetSpans() {
					r.spans = append(r.spans, gotSpan{instance: inst, Span: sp})
				}
			}
		}
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ := proto.Marshal(&collector.ExportTraceServiceResponse{})
		_, _ = w.Write(b)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// trace returns the spans received of trace tid.
func (r *receiver) trace(tid []byte) []gotSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []gotSpan
	for _, s := range r.spans {
		if string(s.GetTraceId()) == string(tid) {
			out = append(out, s)
		}
	}
	return out
}

func attr(s gotSpan, key string) string {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

// tracer makes a Tracer of instance exporting to r; ratio 0: only
// requests whose trace context says so are traced.
func tracer(t *testing.T, r *receiver, instance string) *tracing.Tracer {
	tr, err := tracing.New(context.Background(), tracing.Options{Endpoint: r.srv.URL, Sample: 0, Instance: instance})
	require.NoError(t, err)
	return tr
}

// serve runs srv until the test ends, and returns its MCP URL.
func serve(t *testing.T, srv *mcpedge.Server) string {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	a := srv.HTTPAddr(ctx)
	require.NotNil(t, a)
	t.Cleanup(func() { cancel(); <-done })
	return "http://" + a.String() + "/mcp"
}

// post sends one message, with headers, and returns the status, the
// session id and the body (a JSON answer, or an SSE stream's data).
func post(t *testing.T, url, body string, hdr map[string]string) (int, string, string) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var b strings.Builder
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				b.WriteString(d)
			}
		}
	} else {
		_, _ = io.Copy(&b, resp.Body)
	}
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), b.String()
}

// TestTraceThroughClusterAndGateway: a tools/call sent to node b for a
// session of node a, which serves the tool from a gateway upstream, is
// one trace: the client's span → b's forward (client) → a's request
// (server) → the upstream's request (server) → the span its handler
// starts, each the parent of the next, with the MCP attributes; the
// client's trace context sent as the traceparent header, and in _meta.
func TestTraceThroughClusterAndGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("two cluster nodes and an upstream")
	}
	rcv := newReceiver(t)
	trU, trA, trB := tracer(t, rcv, "upstream"), tracer(t, rcv, "a"), tracer(t, rcv, "b")

	// The upstream: an echo tool whose handler starts a child span.
	up := mcpedge.New(mcpedge.Options{EngineOptions: mcpedge.EngineOptions{Tracer: trU}, HTTP: &mcpedge.HTTPOptions{Addr: "127.0.0.1:0"}})
	require.NoError(t, handlers.AddTool(up.Registry(), &mcp.Tool{Name: "echo"}, func(ctx context.Context, req *handlers.CallToolRequest, in struct {
		Text string `json:"text"`
	}) (*mcp.CallToolResult, any, error) {
		// The handler's context carries its span when it is traced,
		// none when it is not ("x": the client said not sampled).
		assert.Equal(t, in.Text == "hi", trace.SpanFromContext(ctx).SpanContext().IsValid())
		_, child := trU.Provider().Tracer("test").Start(ctx, "echo lookup")
		child.End()
		return mcp.TextResult("echo: " + in.Text), nil, nil
	}))
	upURL := serve(t, up)

	// Node a owns the session and forwards the tool to the upstream.
	na, err := cluster.Start(context.Background(), cluster.Options{Node: "a", Embed: "127.0.0.1:0", ForwardTimeout: 5 * time.Second, Tracer: trA})
	require.NoError(t, err)
	t.Cleanup(func() { na.Close() })
	gw, err := gateway.New(gateway.Options{Upstreams: []gateway.Upstream{{Name: "up", Transport: gateway.HTTP, URL: upURL}}, StartTimeout: 10 * time.Second})
	require.NoError(t, err)
	opts := mcpedge.Options{EngineOptions: mcpedge.EngineOptions{Tracer: trA, Bus: gw.Bus(na.Bus())}, HTTP: &mcpedge.HTTPOptions{Addr: "127.0.0.1:0"}, Cluster: na, DrainTimeout: time.Second}
	srvA := mcpedge.New(opts)
	require.NoError(t, gw.Start(context.Background(), srvA.Engine()))
	t.Cleanup(gw.Close)
	urlA := serve(t, srvA)

	// Node b, routed to a.
	nb, err := cluster.Start(context.Background(), cluster.Options{Node: "b", Embed: "127.0.0.1:0", Routes: []string{"nats-route://" + na.RouteAddr().String()}, ForwardTimeout: 5 * time.Second, Tracer: trB})
	require.NoError(t, err)
	t.Cleanup(func() { nb.Close() })
	urlB := serve(t, mcpedge.New(mcpedge.Options{EngineOptions: mcpedge.EngineOptions{Tracer: trB}, HTTP: &mcpedge.HTTPOptions{Addr: "127.0.0.1:0"}, Cluster: nb, DrainTimeout: time.Second}))

	// A session on a.
	st, sid, _ := post(t, urlA, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, nil)
	require.Equal(t, http.StatusOK, st)
	require.True(t, strings.HasPrefix(sid, "a."), sid)
	st, _, _ = post(t, urlA, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, map[string]string{"Mcp-Session-Id": sid})
	require.Equal(t, http.StatusAccepted, st)
	// b forwards the session's requests once the routes carry a's
	// subjects: until then it answers 404.
	deadline := time.Now().Add(15 * time.Second)
	for {
		st, _, _ = post(t, urlB, `{"jsonrpc":"2.0","id":0,"method":"ping"}`, map[string]string{"Mcp-Session-Id": sid})
		if st == http.StatusOK {
			break
		}
		require.True(t, time.Now().Before(deadline), "b does not forward to a: %d", st)
		time.Sleep(20 * time.Millisecond)
	}

	for i, tc := range []struct {
		name string
		meta bool // the client's context in _meta, else in the header
	}{{"header", false}, {"meta", true}} {
		t.Run(tc.name, func(t *testing.T) {
			tid := []byte{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, byte(0x30 + i)}
			client := []byte{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, byte(0xb0 + i)}
			tp := "00-" + hex.EncodeToString(tid) + "-" + hex.EncodeToString(client) + "-01"
			params := `{"name":"echo","arguments":{"text":"hi"}}`
			hdr := map[string]string{"Mcp-Session-Id": sid}
			if tc.meta {
				params = `{"name":"echo","arguments":{"text":"hi"},"_meta":{"traceparent":"` + tp + `","tracestate":"vendor=1"}}`
			} else {
				hdr["traceparent"], hdr["tracestate"] = tp, "vendor=1"
			}
			st, _, body := post(t, urlB, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":`+params+`}`, hdr)
			require.Equal(t, http.StatusOK, st, body)
			var ans struct {
				Result mcp.CallToolResult `json:"result"`
			}
			require.NoError(t, json.Unmarshal([]byte(body), &ans), body)
			require.Len(t, ans.Result.Content, 1)
			assert.Equal(t, "echo: hi", ans.Result.Content[0].Text)

			for _, tr := range []*tracing.Tracer{trU, trA, trB} {
				require.NoError(t, tr.Provider().(interface{ ForceFlush(context.Context) error }).ForceFlush(context.Background()))
			}
			spans := rcv.trace(tid)
			byName := map[string]gotSpan{}
			for _, s := range spans {
				byName[s.instance+" "+s.GetName()] = s
			}
			require.Len(t, spans, 4, "one trace of four spans: %v", names(spans))
			fwd, ok := byName["b cluster forward"]
			require.True(t, ok, names(spans))
			srvSpan, ok := byName["a tools/call echo"]
			require.True(t, ok, names(spans))
			upSpan, ok := byName["upstream tools/call echo"]
			require.True(t, ok, names(spans))
			child, ok := byName["upstream echo lookup"]
			require.True(t, ok, names(spans))

			assert.Equal(t, client, fwd.GetParentSpanId(), "b's forward is the client's child")
			assert.Equal(t, tracepb.Span_SPAN_KIND_CLIENT, fwd.GetKind())
			assert.Equal(t, "a", attr(fwd, "mcpedge.cluster.owner"))
			assert.Equal(t, sid, attr(fwd, "mcp.session.id"))

			assert.Equal(t, fwd.GetSpanId(), srvSpan.GetParentSpanId(), "a's span is the forward's child")
			assert.Equal(t, tracepb.Span_SPAN_KIND_SERVER, srvSpan.GetKind())
			assert.Equal(t, "tools/call", attr(srvSpan, "mcp.method.name"))
			assert.Equal(t, "echo", attr(srvSpan, "gen_ai.tool.name"))
			assert.Equal(t, "execute_tool", attr(srvSpan, "gen_ai.operation.name"))
			assert.Equal(t, sid, attr(srvSpan, "mcp.session.id"))
			assert.Equal(t, "2025-11-25", attr(srvSpan, "mcp.protocol.version"))
			assert.Equal(t, "tcp", attr(srvSpan, "network.transport"))
			assert.Equal(t, "http", attr(srvSpan, "network.protocol.name"))
			assert.Equal(t, "vendor=1", srvSpan.GetTraceState())
			assert.Empty(t, attr(srvSpan, "error.type"))

			assert.Equal(t, srvSpan.GetSpanId(), upSpan.GetParentSpanId(), "the upstream's span is a's child")
			assert.Equal(t, "tools/call", attr(upSpan, "mcp.method.name"))
			assert.Equal(t, "echo", attr(upSpan, "gen_ai.tool.name"))
			assert.Equal(t, upSpan.GetSpanId(), child.GetParentSpanId(), "the handler's span is the request's child")
			for _, s := range spans {
				assert.GreaterOrEqual(t, s.GetEndTimeUnixNano(), s.GetStartTimeUnixNano())
			}
			// a's span covers the upstream's.
			assert.LessOrEqual(t, srvSpan.GetStartTimeUnixNano(), upSpan.GetStartTimeUnixNano())
			assert.GreaterOrEqual(t, srvSpan.GetEndTimeUnixNano(), upSpan.GetEndTimeUnixNano())
		})
	}

	// A request whose client says not sampled is not traced anywhere.
	notSampled := "00-" + strings.Repeat("ab", 16) + "-" + strings.Repeat("cd", 8) + "-00"
	st, _, _ = post(t, urlB, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`,
		map[string]string{"Mcp-Session-Id": sid, "traceparent": notSampled})
	require.Equal(t, http.StatusOK, st)
	for _, tr := range []*tracing.Tracer{trU, trA, trB} {
		require.NoError(t, tr.Shutdown(context.Background()))
	}
	tid, _ := hex.DecodeString(strings.Repeat("ab", 16))
	assert.Empty(t, rcv.trace(tid))
	assert.Zero(t, trA.Stats().Dropped)
	assert.Positive(t, trA.Stats().Exported)
}

func names(spans []gotSpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.instance+" "+s.GetName())
	}
	return out
}

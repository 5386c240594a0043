package cluster

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"
)

// TestForwardTrace: a traced forward carries its span's traceparent
// instead of the client's, in the header and in params._meta, the rest
// of the request as it was; the client's is read from _meta first.
func TestForwardTrace(t *testing.T) {
	const client = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	const span = "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01"
	for _, tc := range []struct {
		name, body, header       string
		wantTP, wantTS, wantBody string
	}{
		{"_meta", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"traceparent":"` + client + `","tracestate":"k=v"}}}`, "",
			client, "k=v", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"traceparent":"` + span + `","tracestate":"k=v"}}}`},
		{"_meta over the header", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"traceparent":"` + client + `"}}}`, "00-11111111111111111111111111111111-2222222222222222-01",
			client, "", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"traceparent":"` + span + `"}}}`},
		{"header", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, client,
			client, "h=1", `{"jsonrpc":"2.0","id":1,"method":"ping"}`},
		{"none", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, "",
			"", "h=1", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ctx fasthttp.RequestCtx
			ctx.Request.Header.SetMethod("POST")
			ctx.Request.SetRequestURI("/mcp")
			if tc.header != "" {
				ctx.Request.Header.Set("traceparent", tc.header)
			}
			ctx.Request.Header.Set("tracestate", "h=1")
			ctx.Request.SetBodyString(tc.body)
			tp, ts, at, end := requestTrace(&ctx)
			assert.Equal(t, tc.wantTP, string(tp))
			assert.Equal(t, tc.wantTS, string(ts))
			req, ok := decodeRequest(appendRequest(nil, &ctx, &forwardTrace{parent: span, at: at, end: end}), nil)
			require.True(t, ok)
			assert.Equal(t, tc.wantBody, string(req.body))
			var parents []string
			for _, kv := range req.headers {
				if strings.EqualFold(string(kv[0]), "traceparent") {
					parents = append(parents, string(kv[1]))
				}
			}
			assert.Equal(t, []string{span}, parents)
		})
	}
}

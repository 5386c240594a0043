package gateway

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestTraceParams: the trace context of the downstream request goes into
// the upstream request's params._meta: replacing the client's
// traceparent, added to a _meta without one (with the tracestate), or in
// a _meta of its own.
func TestTraceParams(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	fp := forwardParams{traceParent: tp, traceState: "k=v"}
	for _, tc := range []struct{ name, in, want string }{
		{"no _meta", `{"name":"x"}`, `{"_meta":{"traceparent":"` + tp + `","tracestate":"k=v"},"name":"x"}`},
		{"empty params", `{}`, `{"_meta":{"traceparent":"` + tp + `","tracestate":"k=v"}}`},
		{"_meta without", `{"name":"x","_meta":{"progressToken":1}}`, `{"name":"x","_meta":{"traceparent":"` + tp + `","tracestate":"k=v","progressToken":1}}`},
		{"empty _meta", `{"_meta":{}}`, `{"_meta":{"traceparent":"` + tp + `","tracestate":"k=v"}}`},
		{"client's replaced", `{"_meta":{"traceparent":"00-11111111111111111111111111111111-2222222222222222-01","tracestate":"a=b"}}`, `{"_meta":{"traceparent":"` + tp + `","tracestate":"a=b"}}`},
		{"the same kept", `{"_meta":{"traceparent":"` + tp + `"}}`, `{"_meta":{"traceparent":"` + tp + `"}}`},
		{"not an object", `[1]`, `[1]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(appendParams(nil, []byte(tc.in), &fp))
			assert.Equal(t, tc.want, got)
			if tc.in[0] == '{' {
				assert.True(t, json.Valid([]byte(got)), got)
			}
		})
	}
}

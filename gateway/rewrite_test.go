package gateway

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAppendParams(t *testing.T) {
	tests := []struct {
		name   string
		params string
		fp     forwardParams
		want   string
	}{
		{"unchanged", `{"name":"a","arguments":{}}`, forwardParams{}, `{"name":"a","arguments":{}}`},
		{"name", `{"name":"p_a","arguments":{"name":"p_a"}}`, forwardParams{name: []byte("a")}, `{"name":"a","arguments":{"name":"p_a"}}`},
		{"token", `{"name":"a","_meta":{"progressToken":"tok-1","x":1}}`, forwardParams{token: []byte("65537")}, `{"name":"a","_meta":{"progressToken":65537,"x":1}}`},
		{"no token to replace", `{"name":"a","_meta":{"x":1}}`, forwardParams{token: []byte("65537")}, `{"name":"a","_meta":{"x":1}}`},
		{"ref name", `{"ref":{"type":"ref/prompt","name":"p_x"},"argument":{"name":"a","value":""}}`, forwardParams{refName: []byte("x")}, `{"ref":{"type":"ref/prompt","name":"x"},"argument":{"name":"a","value":""}}`},
		{"state", `{"name":"a","requestState":"~gw3~abc.def"}`, forwardParams{stateless: true}, `{"name":"a","requestState":"abc.def"}`},
		{"state not ours", `{"name":"a","requestState":"abc~gw3~"}`, forwardParams{stateless: true}, `{"name":"a","requestState":"abc~gw3~"}`},
		{"link capability", `{"name":"a","_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}`, forwardParams{linkCap: true},
			`{"name":"a","_meta":{"io.modelcontextprotocol/clientCapabilities":{"experimental":{"io.github.mcpedge/related-request":{}}}}}`},
		{"link capability beside others", `{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"experimental":{"x":{}},"roots":{}}}}`, forwardParams{linkCap: true},
			`{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"experimental":{"io.github.mcpedge/related-request":{},"x":{}},"roots":{}}}}`},
		{"task", `{"name":"a"}`, forwardParams{addTask: true}, `{"task":{},"name":"a"}`},
		{"everything", `{"name":"p_a","requestState":"~gw0~s","_meta":{"progressToken":1}}`, forwardParams{name: []byte("a"), token: []byte("9"), stateless: true},
			`{"name":"a","requestState":"s","_meta":{"progressToken":9}}`},
		{"escaped key: passed as is", `{"na\u006de":"p_a"}`, forwardParams{name: []byte("a")}, `{"na\u006de":"p_a"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(appendParams([]byte("X"), []byte(tt.params), &tt.fp))
			assert.Equal(t, "X"+tt.want, got)
			assert.True(t, json.Valid([]byte(got[1:])), got)
		})
	}
}

func TestStatelessResult(t *testing.T) {
	tests := []struct {
		name, res, want, task string
	}{
		{"identity dropped", `{"content":[],"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up"}}}`, `{"content":[],"resultType":"complete","_meta":{}}`, ""},
		{"identity dropped, others kept", `{"_meta":{"a":1,"io.modelcontextprotocol/serverInfo":{"name":"up"}, "b":2}}`, `{"_meta":{"a":1,"b":2}}`, ""},
		{"identity last", `{"_meta":{"a":1 , "io.modelcontextprotocol/serverInfo":{}}}`, `{"_meta":{"a":1 }}`, ""},
		{"state prefixed", `{"resultType":"input_required","requestState":"abc"}`, `{"resultType":"input_required","requestState":"~gw2~abc"}`, ""},
		{"task noted", `{"resultType":"task","taskId":"t-9","status":"working"}`, `{"resultType":"task","taskId":"t-9","status":"working"}`, "t-9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, task := statelessResult([]byte("HEAD"+tt.res), 4, appendStatePrefix(nil, 2))
			assert.Equal(t, "HEAD"+tt.want, string(out))
			assert.Equal(t, tt.task, string(task))
		})
	}
}

func TestStateConn(t *testing.T) {
	for _, tt := range []struct {
		st       string
		idx, len int
	}{
		{`"~gw0~x"`, 0, 5}, {`"~gw12~x"`, 12, 6}, {`"~gw~x"`, 0, 0}, {`"gw1~x"`, 0, 0}, {`"~gw1"`, 0, 0}, {`"~gw12345~"`, 0, 0},
	} {
		idx, n := stateConn([]byte(tt.st))
		assert.Equal(t, tt.idx, idx, tt.st)
		assert.Equal(t, tt.len, n, tt.st)
	}
}

func TestStripLinks(t *testing.T) {
	assert.Nil(t, stripLinks([]byte(`{"io.github.mcpedge/related-request":{"requestId":1}}`)))
	got := stripLinks([]byte(`{"a":1,"io.modelcontextprotocol/related-task":{"taskId":"x"},"io.github.mcpedge/related-request":{"requestId":1}}`))
	require.NotNil(t, got)
	assert.JSONEq(t, `{"a":1}`, string(got))
}

// TestDownParams: what 2026-07-28 adds to a request is taken out, the
// rest kept as it is, whatever the members' order.
func TestDownParams(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`{"name":"a","arguments":{"x":1},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":7,"io.modelcontextprotocol/clientInfo":{"name":"c"}}}`,
			`{"name":"a","arguments":{"x":1},"_meta":{"progressToken":7}}`},
		{`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/logLevel":"info"},"name":"a","inputResponses":{"k":{}},"requestState":"s","task":{}}`,
			`{"name":"a"}`},
		{` { "name" : "a" , "requestState" : "s" } `, `{"name" : "a"}`},
		{`{}`, `{}`},
	} {
		got, err := downParams([]byte(tt.in))
		if err != nil || string(got) != tt.want {
			t.Errorf("downParams(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{`[1]`, `"x"`, `{"a":}`, `{"a":1`} {
		if _, err := downParams([]byte(bad)); err == nil {
			t.Errorf("downParams(%s): no error", bad)
		}
	}
}

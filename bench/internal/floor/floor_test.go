package floor

import (
	"encoding/json"
	"testing"
)

func TestAnswer(t *testing.T) {
	tests := []struct {
		name, in string
		want     string // the answer, or "" for none
	}{
		{"echo", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a \"q\" \u0001"}}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a \"q\" \u0001"}]}}`},
		{"add", `{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"add","arguments":{"a":0.5,"b":0.25}}}`,
			`{"jsonrpc":"2.0","id":"x","result":{"content":[{"type":"text","text":"0.75"}]}}`},
		{"add ints", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"add","arguments":{"a":2,"b":3}}}`,
			`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"5"}]}}`},
		{"ping", `{"jsonrpc":"2.0","id":3,"method":"ping"}`, `{"jsonrpc":"2.0","id":3,"result":{}}`},
		{"read", `{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"mem://hello"}}`,
			`{"jsonrpc":"2.0","id":4,"result":` + helloRead + `}`},
		{"read unknown", `{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":"mem://x"}}`,
			`{"jsonrpc":"2.0","id":5,"error":{"code":-32002,"message":"resource not found"}}`},
		{"greet", `{"jsonrpc":"2.0","id":6,"method":"prompts/get","params":{"name":"greet","arguments":{"name":"Ada"}}}`,
			`{"jsonrpc":"2.0","id":6,"result":{"description":"A greeting","messages":[{"role":"user","content":{"type":"text","text":"Please greet Ada warmly."}}]}}`},
		{"initialize", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`,
			`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{},"resources":{},"prompts":{}},"serverInfo":{"name":"floor","version":"0"}}}`},
		{"tools/list", `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, `{"jsonrpc":"2.0","id":7,"result":` + toolsList + `}`},
		{"unknown", `{"jsonrpc":"2.0","id":8,"method":"nope"}`, `{"jsonrpc":"2.0","id":8,"error":{"code":-32601,"message":"method not found"}}`},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, ""},
		{"response", `{"jsonrpc":"2.0","id":9,"result":{}}`, ""},
		{"not json", `{"jsonrpc"`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, ok := Answer(nil, []byte(tt.in))
			if tt.want == "" {
				if ok || len(out) > 0 {
					t.Fatalf("answered %s", out)
				}
				return
			}
			if !ok || string(out) != tt.want {
				t.Fatalf("got  %s\nwant %s", out, tt.want)
			}
			if !json.Valid(out) {
				t.Fatalf("not JSON: %s", out)
			}
		})
	}
}

func BenchmarkAnswerEcho(b *testing.B) {
	in := []byte(`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"echo","arguments":{"text":"mcpload abcdefgh 1"}}}`)
	var out []byte
	b.ReportAllocs()
	for b.Loop() {
		out, _ = Answer(out[:0], in)
	}
}

package codec

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecode(t *testing.T) {
	type want struct {
		kind   Kind
		id     string // raw id; "" for none
		method string
		params string // raw params; "" for none
		result string
		error  string
	}
	tests := []struct {
		name string
		in   string
		want want
	}{
		{"request number id", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`,
			want{kind: KindRequest, id: `1`, method: "tools/call", params: `{"name":"echo"}`}},
		{"request string id", `{"jsonrpc":"2.0","id":"abc-1","method":"ping"}`,
			want{kind: KindRequest, id: `"abc-1"`, method: "ping"}},
		{"request empty string id", `{"jsonrpc":"2.0","id":"","method":"ping"}`,
			want{kind: KindRequest, id: `""`, method: "ping"}},
		{"request zero id", `{"jsonrpc":"2.0","id":0,"method":"ping"}`,
			want{kind: KindRequest, id: `0`, method: "ping"}},
		{"negative id", `{"jsonrpc":"2.0","id":-7,"method":"ping"}`,
			want{kind: KindRequest, id: `-7`, method: "ping"}},
		{"float id kept as written", `{"jsonrpc":"2.0","id":1.50,"method":"ping"}`,
			want{kind: KindRequest, id: `1.50`, method: "ping"}},
		{"exponent id kept as written", `{"jsonrpc":"2.0","id":-1.5E+3,"method":"ping"}`,
			want{kind: KindRequest, id: `-1.5E+3`, method: "ping"}},
		{"id beyond int64 kept", `{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}`,
			want{kind: KindRequest, id: `123456789012345678901234567890`, method: "ping"}},
		{"string id escapes kept", `{"jsonrpc":"2.0","id":"a\"b\u0041","method":"ping"}`,
			want{kind: KindRequest, id: `"a\"b\u0041"`, method: "ping"}},
		{"members in any order", `{"params":[1,2],"method":"sum","id":"x","jsonrpc":"2.0"}`,
			want{kind: KindRequest, id: `"x"`, method: "sum", params: `[1,2]`}},
		{"whitespace everywhere", " \r\n\t{ \"jsonrpc\" : \"2.0\" , \"id\" : 2 , \"method\" : \"ping\" } \n",
			want{kind: KindRequest, id: `2`, method: "ping"}},
		{"unknown members ignored", `{"jsonrpc":"2.0","id":3,"method":"ping","extra":{"a":[1]},"_meta":null}`,
			want{kind: KindRequest, id: `3`, method: "ping"}},
		{"params null dropped", `{"jsonrpc":"2.0","id":3,"method":"ping","params":null}`,
			want{kind: KindRequest, id: `3`, method: "ping"}},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			want{kind: KindNotification, method: "notifications/initialized"}},
		{"notification with params", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`,
			want{kind: KindNotification, method: "notifications/progress", params: `{"progress":1}`}},
		{"unicode escapes in method", `{"jsonrpc":"2.0","id":1,"method":"\u0074ools\/call"}`,
			want{kind: KindRequest, id: `1`, method: "tools/call"}},
		{"surrogate pair in method", `{"jsonrpc":"2.0","id":1,"method":"x\ud83d\ude00\u00e9"}`,
			want{kind: KindRequest, id: `1`, method: "x😀é"}},
		{"raw utf-8 in method", `{"jsonrpc":"2.0","id":1,"method":"héllo/世界"}`,
			want{kind: KindRequest, id: `1`, method: "héllo/世界"}},
		{"duplicate id: last wins", `{"jsonrpc":"2.0","id":1,"id":"two","method":"ping"}`,
			want{kind: KindRequest, id: `"two"`, method: "ping"}},
		{"duplicate method: last wins", `{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}`,
			want{kind: KindRequest, id: `1`, method: "b"}},
		{"response", `{"jsonrpc":"2.0","id":3,"result":{"tools":[]}}`,
			want{kind: KindResponse, id: `3`, result: `{"tools":[]}`}},
		{"response null result", `{"jsonrpc":"2.0","id":"r","result":null}`,
			want{kind: KindResponse, id: `"r"`, result: `null`}},
		{"response scalar result", `{"jsonrpc":"2.0","id":4,"result":17}`,
			want{kind: KindResponse, id: `4`, result: `17`}},
		{"error", `{"jsonrpc":"2.0","id":5,"error":{"code":-32601,"message":"Method not found"}}`,
			want{kind: KindError, id: `5`, error: `{"code":-32601,"message":"Method not found"}`}},
		{"error with null id", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`,
			want{kind: KindError, id: `null`, error: `{"code":-32700,"message":"Parse error"}`}},
		{"nesting within limits", `{"jsonrpc":"2.0","id":1,"method":"deep","params":` + strings.Repeat(`[`, 1000) + strings.Repeat(`]`, 1000) + `}`,
			want{kind: KindRequest, id: `1`, method: "deep", params: strings.Repeat(`[`, 1000) + strings.Repeat(`]`, 1000)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := Message{Method: "stale", ID: []byte("99"), Kind: KindError}
			require.NoError(t, Decode([]byte(tt.in), &m))
			assert.Equal(t, tt.want.kind, m.Kind)
			assert.Equal(t, "2.0", m.JSONRPC)
			assert.Equal(t, tt.want.id, string(m.ID))
			assert.Equal(t, tt.want.id == "", m.ID == nil, "ID nil iff absent")
			assert.Equal(t, tt.want.method, m.Method)
			assert.Equal(t, tt.want.params, string(m.Params))
			assert.Equal(t, tt.want.result, string(m.Result))
			assert.Equal(t, tt.want.error, string(m.Error))
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		err  error
		id   string // raw id kept for the error answer; "" for none
	}{
		// Not JSON.
		{"empty", ``, ErrParse, ""},
		{"whitespace", " \n\t", ErrParse, ""},
		{"truncated", `{"jsonrpc":"2.0","id":1,"method":`, ErrParse, ""},
		{"open brace", `{`, ErrParse, ""},
		{"trailing comma", `{"jsonrpc":"2.0","id":1,"method":"a",}`, ErrParse, ""},
		{"single quotes", `{'jsonrpc':'2.0'}`, ErrParse, ""},
		{"bare word", `nul`, ErrParse, ""},
		{"unclosed array", `[1,2`, ErrParse, ""},
		{"leading zero id", `{"jsonrpc":"2.0","id":01,"method":"a"}`, ErrParse, ""},
		{"raw control char in method", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\x01\"}", ErrParse, ""},
		{"trailing garbage", `{"jsonrpc":"2.0","id":1,"method":"a"} x`, ErrParse, ""},
		{"trailing brace", `{"jsonrpc":"2.0","id":1,"method":"a"}}`, ErrParse, ""},
		{"two objects", `{"jsonrpc":"2.0","id":1,"method":"a"}{"jsonrpc":"2.0","id":2,"method":"b"}`, ErrParse, ""},
		{"trailing NUL", "{\"jsonrpc\":\"2.0\",\"method\":\"a\"}\x00", ErrParse, ""},
		{"wrong type then garbage", `{"jsonrpc":"2.0","id":1,"method":5} x`, ErrParse, ""},
		{"wrong type then syntax error", `{"jsonrpc":"2.0","id":1,"method":5,"x":[}`, ErrParse, ""},
		{"nesting too deep", `{"jsonrpc":"2.0","id":1,"method":"a","params":` + strings.Repeat(`[`, 100000) + strings.Repeat(`]`, 100000) + `}`, ErrParse, ""},
		{"deep objects", `{"jsonrpc":"2.0","id":1,"method":"a","params":` + strings.Repeat(`{"a":`, 100000) + `1` + strings.Repeat(`}`, 100000) + `}`, ErrParse, ""},
		{"deep unclosed", `{"jsonrpc":"2.0","id":1,"method":"a","params":` + strings.Repeat(`[`, 1000000), ErrParse, ""},
		{"deep non-object", strings.Repeat(`[`, 100000) + strings.Repeat(`]`, 100000), ErrParse, ""},

		{"invalid escape in id sonic skips", `{"jsonrpc":"2.0","id":"000\00000","method":"\u0020000"}`, ErrParse, ""},

		// JSON, but not a JSON-RPC message.
		{"empty array", `[]`, ErrInvalidRequest, ""},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"a"}]`, ErrInvalidRequest, ""},
		{"number", `5`, ErrInvalidRequest, ""},
		{"string", `"tools/call"`, ErrInvalidRequest, ""},
		{"null", ` null `, ErrInvalidRequest, ""},
		{"true", `true`, ErrInvalidRequest, ""},
		{"empty object", `{}`, ErrInvalidRequest, ""},
		{"request with null id", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, ErrInvalidRequest, "null"},
		{"no method, result or error", `{"jsonrpc":"2.0","id":1}`, ErrInvalidRequest, "1"},
		{"empty method", `{"jsonrpc":"2.0","id":1,"method":""}`, ErrInvalidRequest, "1"},
		{"null method", `{"jsonrpc":"2.0","id":1,"method":null}`, ErrInvalidRequest, "1"},
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":"x","method":"ping"}`, ErrInvalidRequest, `"x"`},
		{"jsonrpc missing", `{"id":7,"method":"ping"}`, ErrInvalidRequest, "7"},
		{"jsonrpc number", `{"jsonrpc":2.0,"id":7,"method":"ping"}`, ErrInvalidRequest, "7"},
		{"jsonrpc number after id", `{"id":7,"jsonrpc":2,"method":"ping"}`, ErrInvalidRequest, "7"},
		{"jsonrpc case", `{"jsonrpc":"2.0","ID":1,"Method":"ping"}`, ErrInvalidRequest, ""},
		{"method number", `{"jsonrpc":"2.0","id":7,"method":5}`, ErrInvalidRequest, "7"},
		{"method number before id", `{"jsonrpc":"2.0","method":5,"id":"q"}`, ErrInvalidRequest, `"q"`},
		{"method object", `{"jsonrpc":"2.0","id":7,"method":{"a":1}}`, ErrInvalidRequest, "7"},
		{"params string", `{"jsonrpc":"2.0","id":8,"method":"a","params":"s"}`, ErrInvalidRequest, "8"},
		{"params number", `{"jsonrpc":"2.0","id":8,"method":"a","params":5}`, ErrInvalidRequest, "8"},
		{"params bool", `{"jsonrpc":"2.0","method":"a","params":true}`, ErrInvalidRequest, ""},
		{"id object", `{"jsonrpc":"2.0","id":{"a":1},"method":"a"}`, ErrInvalidRequest, ""},
		{"id array", `{"jsonrpc":"2.0","id":[1],"method":"a"}`, ErrInvalidRequest, ""},
		{"id bool", `{"jsonrpc":"2.0","id":true,"method":"a"}`, ErrInvalidRequest, ""},
		{"id object and method number", `{"jsonrpc":"2.0","id":{"a":1},"method":5}`, ErrInvalidRequest, ""},
		{"method and result", `{"jsonrpc":"2.0","id":1,"method":"a","result":{}}`, ErrInvalidRequest, "1"},
		{"method and error", `{"jsonrpc":"2.0","id":1,"method":"a","error":{"code":1,"message":""}}`, ErrInvalidRequest, "1"},
		{"result and error", `{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":""}}`, ErrInvalidRequest, "1"},
		{"response without id", `{"jsonrpc":"2.0","result":{}}`, ErrInvalidRequest, ""},
		{"response with null id", `{"jsonrpc":"2.0","id":null,"result":{}}`, ErrInvalidRequest, "null"},
		{"error without id", `{"jsonrpc":"2.0","error":{"code":1,"message":""}}`, ErrInvalidRequest, ""},
		{"error string", `{"jsonrpc":"2.0","id":1,"error":"boom"}`, ErrInvalidRequest, "1"},
		{"error null", `{"jsonrpc":"2.0","id":1,"error":null}`, ErrInvalidRequest, "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := Message{Method: "stale", ID: []byte("99"), Kind: KindRequest}
			err := Decode([]byte(tt.in), &m)
			require.ErrorIs(t, err, tt.err)
			assert.Equal(t, KindInvalid, m.Kind)
			assert.Equal(t, tt.id, string(m.ID))
			if tt.err == ErrParse {
				assert.Equal(t, Message{}, m, "a parse error leaves m zero")
			}
		})
	}
}

func TestIDStatus(t *testing.T) {
	tests := []struct {
		raw  string
		want int
	}{
		{`1`, idOK}, {`-0`, idOK}, {`0.5`, idOK}, {`-12.5e-3`, idOK}, {`1E+9`, idOK}, {`123456789012345678901234567890`, idOK},
		{`""`, idOK}, {`"abc"`, idOK}, {`"\"\\\/\b\f\n\r\t\u00e9\uD83D\uDE00"`, idOK}, {`null`, idOK},
		{`{}`, idWrongType}, {`[1]`, idWrongType}, {`true`, idWrongType}, {`false`, idWrongType},
		{``, idMalformed}, {`01`, idMalformed}, {`-`, idMalformed}, {`1.`, idMalformed}, {`.5`, idMalformed},
		{`1e`, idMalformed}, {`1e+`, idMalformed}, {`+1`, idMalformed}, {`1x`, idMalformed}, {`--1`, idMalformed},
		{`"\0"`, idMalformed}, {`"\x41"`, idMalformed}, {`"\u12"`, idMalformed}, {`"\u12G4"`, idMalformed},
		{`"a\"`, idMalformed}, {`"`, idMalformed}, {`nul`, idMalformed}, {`x`, idMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			assert.Equal(t, tt.want, idStatus([]byte(tt.raw)))
			assert.Equal(t, tt.want == idOK, validID([]byte(tt.raw)))
		})
	}
}

func TestValidEscapes(t *testing.T) {
	tests := []struct {
		raw  string
		want bool
	}{
		{`{"a":"plain"}`, true},
		{`{"a":"\"q\" \\ \/ \b\f\n\r\t \u0041\uffFF"}`, true},
		{`["\\", "\\\\"]`, true},
		{`{"a\u0020b":1}`, true},
		{`{"a":"\0"}`, false},
		{`{"a":"\v"}`, false},
		{`{"a":"\x41"}`, false},
		{`{"a":"\u004"}`, false},
		{`{"a":"\u00zz"}`, false},
		{`"\`, false},
		{`"\u00`, false},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			assert.Equal(t, tt.want, validEscapes([]byte(tt.raw)))
		})
	}
}

func TestDecodeInvalidUTF8Method(t *testing.T) {
	var m Message
	require.NoError(t, Decode([]byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\xffb\"}"), &m))
	assert.Equal(t, "a\uFFFDb", m.Method, "invalid UTF-8 reads as U+FFFD")
}

func TestDecodeAliasesInput(t *testing.T) {
	in := []byte(`{"jsonrpc":"2.0","id":"abc","method":"tools/call","params":{"a":1}}`)
	var m Message
	require.NoError(t, Decode(in, &m))
	within := func(b []byte) bool { return aliases(b, in) }
	assert.True(t, within(m.ID), "ID aliases the input")
	assert.True(t, within(m.Params), "Params aliases the input")
	assert.True(t, within(s2b(m.Method)), "Method aliases the input")
}

// aliases reports whether b is a non-empty sub-slice of buf's memory.
func aliases(b, buf []byte) bool {
	if len(b) == 0 || len(buf) == 0 {
		return false
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return p >= lo && p+uintptr(len(b)) <= lo+uintptr(len(buf))
}

func TestDecodeConcurrent(t *testing.T) {
	msgs := [][]byte{
		benchCall,
		[]byte(`{"jsonrpc":"2.0","id":"x","result":{"ok":true}}`),
		[]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`),
		[]byte(`{"jsonrpc":"2.0","id":3,"method":5}`),
	}
	kinds := []Kind{KindRequest, KindResponse, KindNotification, KindInvalid}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			var m Message
			for i := range 2000 {
				j := (g + i) % len(msgs)
				err := Decode(msgs[j], &m)
				if m.Kind != kinds[j] || (err != nil) != (kinds[j] == KindInvalid) {
					t.Errorf("message %d: kind %v err %v", j, m.Kind, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{
		KindInvalid: "invalid", KindRequest: "request", KindNotification: "notification",
		KindResponse: "response", KindError: "error", Kind(200): "invalid",
	} {
		assert.Equal(t, want, k.String())
	}
}

func TestDecodeAllocs(t *testing.T) {
	msgs := map[string][]byte{
		"tools/call":   benchCall,
		"string id":    []byte(`{"jsonrpc":"2.0","id":"c5f9a2","method":"resources/read","params":{"uri":"file:///a.txt"}}`),
		"notification": []byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":50}}`),
		"response":     []byte(`{"jsonrpc":"2.0","id":42,"result":{"content":[{"type":"text","text":"hi"}]}}`),
		"error":        []byte(`{"jsonrpc":"2.0","id":42,"error":{"code":-32601,"message":"Method not found"}}`),
	}
	for name, msg := range msgs {
		t.Run(name, func(t *testing.T) {
			var m Message
			allocs := testing.AllocsPerRun(200, func() {
				if err := Decode(msg, &m); err != nil {
					t.Fatal(err)
				}
			})
			assert.Zero(t, allocs)
		})
	}
}

// decodeSeeds are realistic messages and known edge cases for FuzzDecode.
var decodeSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	`{"jsonrpc":"2.0","id":"a1","method":"tools/list","params":{"cursor":"abc"}}`,
	`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`,
	`{"jsonrpc":"2.0","id":-1.5e3,"result":{"content":[{"type":"text","text":"x"}],"isError":false}}`,
	`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error","data":{"pos":3}}}`,
	`{"jsonrpc":"2.0","id":7,"error":{"code":1.5,"message":5}}`,
	`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"x","reason":"\u2028"}}`,
	`{"jsonrpc":"2.0","id":"\ud83d\ude00","method":"\u0070ing"}`,
	`{"jsonrpc":"2.0","id":1,"method":5}`,
	`[{"jsonrpc":"2.0","id":1,"method":"a"}]`,
	`{"jsonrpc":"2.0","id":1,"id":2,"method":"a","method":"b"}`,
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\xff\"}",
	`{"jsonrpc":"2.0","id":1,"method":"a"} x`,
	`"x"`,
}

func FuzzDecode(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		orig := bytes.Clone(data)
		var m Message
		err := Decode(data, &m)
		require.Equal(t, orig, data, "Decode must not modify its input")
		if err != nil {
			if err != ErrParse && err != ErrInvalidRequest {
				t.Fatalf("unexpected error %v", err)
			}
			require.Equal(t, KindInvalid, m.Kind)
			if m.ID != nil {
				require.True(t, validID(m.ID), "kept id %q is not an id", m.ID)
				require.Equal(t, ErrInvalidRequest, err)
			}
			return
		}
		var out []byte
		switch m.Kind {
		case KindRequest:
			out = AppendRequest(nil, m.ID, m.Method, m.Params)
		case KindNotification:
			require.Nil(t, m.ID)
			out = AppendNotification(nil, m.Method, m.Params)
		case KindResponse:
			out = AppendResult(nil, m.ID, m.Result)
		case KindError:
			var e Error
			if Unmarshal(m.Error, &e) == nil {
				out = AppendErrorObject(nil, m.ID, &e)
			} else {
				out = append(append(append(append([]byte(`{"jsonrpc":"2.0","id":`), m.ID...), `,"error":`...), m.Error...), '}')
			}
		default:
			t.Fatalf("no error but kind %v", m.Kind)
		}
		var m2 Message
		require.NoError(t, Decode(out, &m2), "re-encoded %q", out)
		require.Equal(t, m.Kind, m2.Kind)
		require.Equal(t, string(m.ID), string(m2.ID))
		require.Equal(t, m.Method, m2.Method)
	})
}

// FuzzFastDecode holds Decode's own scanner to the JSON engine: whenever
// fastDecode decides, Decode's answer (the message and the error) is the
// one the engine gives.
func FuzzFastDecode(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"a","params":null}`,
		`{"jsonrpc":"2.0","id":1,"method":"a","params":[1,2,{"x":[true,false,null]}]}`,
		`{"jsonrpc":"2.0","id":1,"method":"a","params":5}`,
		`{"jsonrpc":"2.0","id":1,"result":null}`,
		`{"jsonrpc":"2.0","id":null,"method":"a"}`,
		`{"jsonrpc":"2.0","id":true,"method":"a"}`,
		`{"jsonrpc":"2.0","id":01,"method":"a"}`,
		`{"jsonrpc":"1.0","id":1,"method":"a"}`,
		`{"jsonrpc":null,"id":1,"method":"a"}`,
		`{"jsonrpc":"2.0","id":1,"method":"a","params":{"a":1.}}`,
		`{"jsonrpc":"2.0","id":1,"method":"a","params":{"a":-}}`,
		` {"jsonrpc":"2.0","id":1,"method":"a"} `,
		`{}`,
		`{"jsonrpc":"2.0","id":1,"method":"a","extra":1}`,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\",\"params\":{\"s\":\"a\tb\"}}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		i := skipWS(data, 0)
		if i >= len(data) || data[i] != '{' {
			return
		}
		var fast Message
		if !fastDecode(data, &fast) {
			return
		}
		fastErr := fast.classify(false)
		var slow Message
		slowErr := engineDecode(data, &slow)
		require.Equal(t, slowErr, fastErr, "%q", data)
		require.Equal(t, slow.Kind, fast.Kind, "%q", data)
		require.Equal(t, string(slow.ID), string(fast.ID), "%q", data)
		require.Equal(t, slow.Method, fast.Method, "%q", data)
		require.Equal(t, slow.JSONRPC, fast.JSONRPC, "%q", data)
		require.Equal(t, string(slow.Params), string(fast.Params), "%q", data)
		require.Equal(t, string(slow.Result), string(fast.Result), "%q", data)
		require.Equal(t, string(slow.Error), string(fast.Error), "%q", data)
	})
}

func TestIsBatch(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{{`[{"jsonrpc":"2.0"}]`, true}, {" \t\r\n[]", true}, {"[", true}, {`{"a":[1]}`, false}, {"", false}, {"   ", false}, {`"["`, false}} {
		if got := IsBatch([]byte(tc.in)); got != tc.want {
			t.Errorf("IsBatch(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

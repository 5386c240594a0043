package codec

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAppendString(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", `""`},
		{"plain", "tools/call", `"tools/call"`},
		{"quote", `say "hi"`, `"say \"hi\""`},
		{"backslash", `C:\dir`, `"C:\\dir"`},
		{"short escapes", "a\nb\rc\td", `"a\nb\rc\td"`},
		{"control chars", "\x00\x01\x08\x0c\x1f", `"\u0000\u0001\u0008\u000c\u001f"`},
		{"DEL kept", "\x7f", "\"\x7f\""},
		{"html kept", "<a&b>", `"<a&b>"`},
		{"slash kept", "a/b", `"a/b"`},
		{"line separators", "a\u2028b\u2029c", `"a\u2028b\u2029c"`},
		{"multi-byte kept", "é世😀", `"é世😀"`},
		{"invalid byte", "a\xffb", `"a\ufffdb"`},
		{"truncated sequence", "a\xe4\xb8", `"a\ufffd\ufffd"`},
		{"encoded surrogate", "\xed\xa0\x80", `"\ufffd\ufffd\ufffd"`},
		{"overlong", "\xc0\xaf", `"\ufffd\ufffd"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AppendString([]byte("prefix:"), tt.in)
			assert.Equal(t, "prefix:"+tt.want, string(got))
			assert.Equal(t, tt.want, string(AppendStringBytes(nil, []byte(tt.in))))
			assertStringRoundTrip(t, tt.in)
		})
	}
}

// assertStringRoundTrip checks that AppendString(s) is JSON for s, with each
// invalid UTF-8 byte read back as U+FFFD, and holds no raw line end.
func assertStringRoundTrip(t *testing.T, s string) {
	t.Helper()
	enc := AppendString(nil, s)
	require.True(t, utf8.Valid(enc), "output %q is not UTF-8", enc)
	require.False(t, bytes.ContainsAny(enc, "\n\r\u2028\u2029"), "output %q holds a line end", enc)
	var got string
	require.NoError(t, Unmarshal(enc, &got), "output %q", enc)
	require.Equal(t, string([]rune(s)), got, "round trip of %q via %q", s, enc)
}

func TestAppendStringEveryByte(t *testing.T) {
	for c := 0; c < 256; c++ {
		assertStringRoundTrip(t, "x"+string([]byte{byte(c)})+"y")
	}
	for _, r := range []rune{0x7ff, 0x800, 0xfffd, 0xffff, 0x10000, 0x10ffff, 0x2027, 0x202a} {
		assertStringRoundTrip(t, "x"+string(r)+"y")
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "hello", "a\"b\\c\n", "\u2028\x00\xff", "é世😀"} {
		f.Add(s)
	}
	f.Fuzz(assertStringRoundTrip)
}

func TestAppendMessages(t *testing.T) {
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{"request", AppendRequest(nil, []byte(`1`), "tools/call", []byte(`{"name":"x"}`)),
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`},
		{"request no params", AppendRequest(nil, []byte(`"a"`), "ping", nil),
			`{"jsonrpc":"2.0","id":"a","method":"ping"}`},
		{"request empty id", AppendRequest(nil, nil, "ping", nil),
			`{"jsonrpc":"2.0","id":null,"method":"ping"}`},
		{"request escaped method", AppendRequest(nil, []byte(`2`), "a\"b", nil),
			`{"jsonrpc":"2.0","id":2,"method":"a\"b"}`},
		{"notification", AppendNotification(nil, "notifications/progress", []byte(`{"progress":1}`)),
			`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`},
		{"notification no params", AppendNotification(nil, "notifications/initialized", nil),
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`},
		{"result", AppendResult(nil, []byte(`-3`), []byte(`{"tools":[]}`)),
			`{"jsonrpc":"2.0","id":-3,"result":{"tools":[]}}`},
		{"empty result", AppendResult(nil, []byte(`"x"`), nil),
			`{"jsonrpc":"2.0","id":"x","result":{}}`},
		{"result start", append(AppendResultStart(nil, []byte(`4`)), `{"a":1}}`...),
			`{"jsonrpc":"2.0","id":4,"result":{"a":1}}`},
		{"error", AppendError(nil, []byte(`5`), CodeMethodNotFound, "Method not found", nil),
			`{"jsonrpc":"2.0","id":5,"error":{"code":-32601,"message":"Method not found"}}`},
		{"error nil id", AppendError(nil, nil, CodeParseError, "Parse error", nil),
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`},
		{"error null id", AppendError(nil, []byte("null"), CodeInvalidRequest, "Invalid Request", nil),
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request"}}`},
		{"error data", AppendError(nil, []byte(`"q"`), CodeInvalidParams, "bad\narg", []byte(`{"field":"x"}`)),
			`{"jsonrpc":"2.0","id":"q","error":{"code":-32602,"message":"bad\narg","data":{"field":"x"}}}`},
		{"error object", AppendErrorObject(nil, []byte(`6`), &Error{Code: CodeResourceNotFound, Message: "nope", Data: RawJSON(`{"uri":"a"}`)}),
			`{"jsonrpc":"2.0","id":6,"error":{"code":-32002,"message":"nope","data":{"uri":"a"}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, string(tt.got))
			var v map[string]any
			require.NoError(t, Unmarshal(tt.got, &v), "output is JSON")
		})
	}
}

func TestAppendRoundTripsThroughDecode(t *testing.T) {
	var m Message
	require.NoError(t, Decode(AppendRequest(nil, []byte(`"r1"`), "tools/call", []byte(`{"a":[1]}`)), &m))
	assert.Equal(t, KindRequest, m.Kind)
	assert.Equal(t, `"r1"`, string(m.ID))
	assert.Equal(t, `{"a":[1]}`, string(m.Params))

	require.NoError(t, Decode(AppendError(nil, nil, CodeParseError, "Parse error", nil), &m))
	assert.Equal(t, KindError, m.Kind)
	assert.Equal(t, "null", string(m.ID))

	require.NoError(t, Decode(AppendNotification(nil, "x\u2028y", nil), &m))
	assert.Equal(t, KindNotification, m.Kind)
	assert.Equal(t, "x\u2028y", m.Method)
}

func TestAppendFloat(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{5, "5"},
		{-5, "-5"},
		{0.75, "0.75"},
		{-120.5, "-120.5"},
		{0, "0"},
		{math.Copysign(0, -1), "-0"},
		{0.1, "0.1"},
		{1.0 / 3, "0.3333333333333333"},
		{123456789.125, "123456789.125"},
		{1e20, "100000000000000000000"},
		{1e21, "1e+21"},
		{-1.5e21, "-1.5e+21"},
		{1e-6, "0.000001"},
		{1e-7, "1e-7"},
		{1.5e-7, "1.5e-7"},
		{-2.5e-9, "-2.5e-9"},
		{1e-10, "1e-10"},
		{1e-100, "1e-100"},
		{1e300, "1e+300"},
		{math.MaxFloat64, "1.7976931348623157e+308"},
		{math.SmallestNonzeroFloat64, "5e-324"},
		{math.NaN(), "null"},
		{math.Inf(1), "null"},
		{math.Inf(-1), "null"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			got := AppendFloat([]byte("x="), tt.in)
			require.Equal(t, "x="+tt.want, string(got))
			if tt.want == "null" {
				return
			}
			back, err := strconv.ParseFloat(tt.want, 64)
			require.NoError(t, err)
			assert.Equal(t, math.Float64bits(tt.in), math.Float64bits(back), "round trip")
			var v float64
			require.NoError(t, Unmarshal([]byte(tt.want), &v), "valid JSON number")
			assert.Equal(t, tt.in, v)
		})
	}
}

func TestAppendInt(t *testing.T) {
	assert.Equal(t, "-9223372036854775808", string(AppendInt(nil, math.MinInt64)))
	assert.Equal(t, "a42", string(AppendInt([]byte("a"), 42)))
}

func TestAppendAllocs(t *testing.T) {
	id := []byte(`42`)
	result := []byte(`{"content":[{"type":"text","text":"hello world"}],"isError":false}`)
	buf := make([]byte, 0, 1024)
	tests := map[string]func(){
		"AppendResult": func() { buf = AppendResult(buf[:0], id, result) },
		"AppendError": func() {
			buf = AppendError(buf[:0], id, CodeInvalidParams, "unknown tool: \"x\"", []byte(`{"a":1}`))
		},
		"AppendString":       func() { buf = AppendString(buf[:0], "escape \"me\"\n\u2028 and \xff") },
		"AppendRequest":      func() { buf = AppendRequest(buf[:0], id, "tools/call", result) },
		"AppendNotification": func() { buf = AppendNotification(buf[:0], "notifications/progress", result) },
		"AppendFloat":        func() { buf = AppendFloat(buf[:0], 1.5e-7) },
	}
	for name, fn := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Zero(t, testing.AllocsPerRun(200, fn))
		})
	}
}

func TestErrors(t *testing.T) {
	e := NewError(CodeInvalidParams, "bad")
	assert.Equal(t, "jsonrpc error -32602: bad", e.Error())

	wrapped := fmt.Errorf("handler: %w", e)
	assert.Same(t, e, AsError(wrapped))

	plain := errors.New("boom")
	got := AsError(plain)
	assert.Equal(t, CodeInternalError, got.Code)
	assert.Equal(t, "boom", got.Message)

	out, err := Marshal(&Error{Code: 1, Message: "m"})
	require.NoError(t, err)
	assert.JSONEq(t, `{"code":1,"message":"m"}`, string(out))

	var back Error
	require.NoError(t, Unmarshal([]byte(`{"code":-32002,"message":"x","data":{"uri":"u"}}`), &back))
	assert.Equal(t, Error{Code: -32002, Message: "x", Data: RawJSON(`{"uri":"u"}`)}, back)
}

func TestRawJSON(t *testing.T) {
	out, err := RawJSON(nil).MarshalJSON()
	require.NoError(t, err)
	assert.Equal(t, "null", string(out))

	in := []byte(`{"a":[1,2]}`)
	var r RawJSON
	require.NoError(t, r.UnmarshalJSON(in))
	in[2] = 'X'
	assert.Equal(t, `{"a":[1,2]}`, string(r), "UnmarshalJSON copies")

	var holder struct {
		V RawJSON `json:"v"`
	}
	src := []byte(`{"v":{"k":"v"}}`)
	require.NoError(t, Unmarshal(src, &holder))
	copy(src, bytes.Repeat([]byte("x"), len(src)))
	assert.Equal(t, `{"k":"v"}`, string(holder.V))
}

func TestBuffer(t *testing.T) {
	b := GetBuffer()
	require.NotNil(t, b)
	assert.Empty(t, b.B)
	b.B = append(b.B, "hello"...)
	PutBuffer(b)
	PutBuffer(nil)

	b2 := GetBuffer()
	assert.Empty(t, b2.B, "pooled buffers come back empty")
	PutBuffer(b2)

	assert.Equal(t, "abc", b2s([]byte("abc")))
}

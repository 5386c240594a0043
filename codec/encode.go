package codec

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// The Append functions encode JSON-RPC messages by appending to dst, in the
// style of strconv.AppendInt: they allocate only when dst must grow, and they
// are safe for concurrent use on distinct dst. id and the raw JSON arguments
// (params, result, data) are copied as they are: callers pass valid JSON (an
// id as Decode returns it, a string with its quotes or a number).

// appendID appends id, or null when id is empty, so that the output is JSON
// even when a caller has no id.
func appendID(dst, id []byte) []byte {
	if len(id) == 0 {
		return append(dst, "null"...)
	}
	return append(dst, id...)
}

// AppendRequest appends {"jsonrpc":"2.0","id":id,"method":method,"params":params}.
// params may be nil to omit it. id must not be empty (it would be written as
// null, which no peer accepts on a request).
func AppendRequest(dst, id []byte, method string, params []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = appendID(dst, id)
	dst = append(dst, `,"method":`...)
	dst = AppendString(dst, method)
	if len(params) > 0 {
		dst = append(dst, `,"params":`...)
		dst = append(dst, params...)
	}
	return append(dst, '}')
}

// AppendNotification appends a notification; params may be nil to omit it.
func AppendNotification(dst []byte, method string, params []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","method":`...)
	dst = AppendString(dst, method)
	if len(params) > 0 {
		dst = append(dst, `,"params":`...)
		dst = append(dst, params...)
	}
	return append(dst, '}')
}

// AppendResult appends a success response. An empty result is written as {};
// an empty id as null.
func AppendResult(dst, id, result []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = appendID(dst, id)
	dst = append(dst, `,"result":`...)
	if len(result) == 0 {
		dst = append(dst, "{}"...)
	} else {
		dst = append(dst, result...)
	}
	return append(dst, '}')
}

// AppendResultStart appends the head of a success response up to the result
// value, for callers that encode the result in place; close it with '}'.
func AppendResultStart(dst, id []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = appendID(dst, id)
	return append(dst, `,"result":`...)
}

// AppendError appends an error response. A nil or empty id is written as
// null, as JSON-RPC requires when the id could not be read. data may be nil.
func AppendError(dst, id []byte, code int, message string, data []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = appendID(dst, id)
	dst = append(dst, `,"error":{"code":`...)
	dst = strconv.AppendInt(dst, int64(code), 10)
	dst = append(dst, `,"message":`...)
	dst = AppendString(dst, message)
	if len(data) > 0 {
		dst = append(dst, `,"data":`...)
		dst = append(dst, data...)
	}
	return append(dst, "}}"...)
}

// AppendErrorObject appends e as an error response to id.
func AppendErrorObject(dst, id []byte, e *Error) []byte {
	return AppendError(dst, id, e.Code, e.Message, e.Data)
}

const hex = "0123456789abcdef"

// safeASCII[c] is true for the ASCII bytes a JSON string holds unescaped.
var safeASCII = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// AppendString appends s as a JSON string, escaping quotes, backslashes,
// control characters, U+2028 and U+2029 (so the output is also a valid
// JavaScript literal) and replacing invalid UTF-8 with U+FFFD. The output
// never holds a raw newline, so it is safe for newline and SSE framing.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if safeASCII[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendStringBytes is AppendString for a byte slice.
func AppendStringBytes(dst, s []byte) []byte {
	return AppendString(dst, b2s(s))
}

// AppendFloat appends f as a JSON number in the shortest form that
// round-trips, spelled as JavaScript spells numbers: plain decimals for
// magnitudes in [1e-6, 1e21) (5, 0.75, -120.5), exponent form outside it
// (1e+21, 1.5e-7). JSON has no NaN or infinity: those are written as null,
// as JSON.stringify does.
func AppendFloat(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	abs := math.Abs(f)
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		dst = strconv.AppendFloat(dst, f, 'e', -1, 64)
		// Drop the exponent's leading zero: 1e-07 becomes 1e-7.
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
		return dst
	}
	return strconv.AppendFloat(dst, f, 'f', -1, 64)
}

// AppendInt appends i in decimal.
func AppendInt(dst []byte, i int64) []byte { return strconv.AppendInt(dst, i, 10) }

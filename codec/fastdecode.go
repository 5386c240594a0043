package codec

import (
	"bytes"
	"unicode/utf8"

	"github.com/mcpedge/mcpedge/internal/bytesconv"
)

// maxFastDepth is the deepest nesting fastDecode checks itself; deeper
// messages go to the JSON engine, whose limit decides.
const maxFastDepth = 256

// fastDecode decodes the common message, an object of the members
// jsonrpc, id, method, params, result and error with no escape anywhere
// and valid UTF-8, with one strict pass of its own: the JSON engine's
// per-call setup cost more than the scan itself in a profile of pipelined
// tools/call (a quarter of the server's CPU). It reports false when it
// cannot decide (an escape, invalid UTF-8, another member, a repeated one,
// jsonrpc or method not a string, invalid JSON, deep nesting); Decode then
// decodes with the JSON engine, which decides as it always did.
// FuzzFastDecode holds the two to the same answer.
func fastDecode(data []byte, m *Message) bool {
	if bytes.IndexByte(data, '\\') >= 0 || !utf8.Valid(data) {
		return false
	}
	i := skipWS(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i = skipWS(data, i+1)
	if i < len(data) && data[i] == '}' {
		return skipWS(data, i+1) == len(data)
	}
	var seen uint8
	for {
		if i >= len(data) || data[i] != '"' {
			return false
		}
		j := scanString(data, i)
		if j < 0 {
			return false
		}
		key := data[i+1 : j-1]
		i = skipWS(data, j)
		if i >= len(data) || data[i] != ':' {
			return false
		}
		i = skipWS(data, i+1)
		k := scanValue(data, i, 0)
		if k < 0 {
			return false
		}
		raw := data[i:k:k]
		var bit uint8
		switch string(key) {
		case "jsonrpc", "method":
			if raw[0] != '"' {
				return false
			}
			s := bytesconv.B2S(raw[1 : len(raw)-1])
			if key[0] == 'j' {
				bit, m.JSONRPC = 1, s
			} else {
				bit, m.Method = 2, s
			}
		case "id":
			bit, m.ID = 4, raw
		case "params":
			bit, m.Params = 8, raw
		case "result":
			bit, m.Result = 16, raw
		case "error":
			bit, m.Error = 32, raw
		default:
			return false
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		i = skipWS(data, k)
		if i >= len(data) {
			return false
		}
		switch data[i] {
		case ',':
			i = skipWS(data, i+1)
		case '}':
			return skipWS(data, i+1) == len(data)
		default:
			return false
		}
	}
}

// scanString returns the index just past the string starting at b[i], or
// -1 if it holds a control character or does not end. b holds no
// backslash.
func scanString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return j + 1
		case c < 0x20:
			return -1
		}
	}
	return -1
}

// scanValue returns the index just past the JSON value starting at b[i],
// checked strictly, or -1 if there is none there. b holds no backslash.
func scanValue(b []byte, i, depth int) int {
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; {
	case c == '"':
		return scanString(b, i)
	case c == '{' || c == '[':
		if depth >= maxFastDepth {
			return -1
		}
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == end {
			return i + 1
		}
		for {
			if c == '{' {
				if i >= len(b) || b[i] != '"' {
					return -1
				}
				if i = scanString(b, i); i < 0 {
					return -1
				}
				i = skipWS(b, i)
				if i >= len(b) || b[i] != ':' {
					return -1
				}
				i = skipWS(b, i+1)
			}
			if i = scanValue(b, i, depth+1); i < 0 {
				return -1
			}
			i = skipWS(b, i)
			if i >= len(b) {
				return -1
			}
			switch b[i] {
			case ',':
				i = skipWS(b, i+1)
			case end:
				return i + 1
			default:
				return -1
			}
		}
	case c == 't':
		return literal(b, i, "true")
	case c == 'f':
		return literal(b, i, "false")
	case c == 'n':
		return literal(b, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		j := i
		for j < len(b) {
			d := b[j]
			if (d >= '0' && d <= '9') || d == '-' || d == '+' || d == '.' || d == 'e' || d == 'E' {
				j++
				continue
			}
			break
		}
		if !ValidNumber(b[i:j]) {
			return -1
		}
		return j
	}
	return -1
}

func literal(b []byte, i int, lit string) int {
	if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
		return i + len(lit)
	}
	return -1
}

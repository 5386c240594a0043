// Package codec holds mcpedge's JSON-RPC 2.0 layer: the message envelope and
// its zero-copy decoder, append-style encoders, the error codes, pooled
// buffers and the framers (newline, Content-Length, SSE); and
// CloseReason, the typed reason of every connection or session that ends,
// which every layer above shares.
//
// Lifetimes: a Message filled by Decode aliases the bytes it was decoded
// from. It is valid only while those bytes are; a transport that hands a
// message to another goroutine copies the frame first (see Frame). The
// aliasing is a cost saving, not a promise: when the bytes hold invalid
// UTF-8 the decoder works on a corrected copy (each invalid byte becomes
// U+FFFD, as encoding/json does), and the Message aliases that copy
// instead. Never compute offsets into the frame from a Message's fields.
package codec

import (
	"bytes"
	"errors"
	"sync"
	"unsafe"

	"github.com/bytedance/sonic"
	"github.com/bytedance/sonic/decoder"
)

// Kind classifies a decoded JSON-RPC message.
type Kind uint8

// The kinds of message. Decode leaves KindInvalid on any error.
const (
	KindInvalid      Kind = iota // not a valid JSON-RPC 2.0 message
	KindRequest                  // method and id
	KindNotification             // method, no id
	KindResponse                 // result and id
	KindError                    // error and id (id may be null)
)

// String returns the kind's lower-case name.
func (k Kind) String() string {
	switch k {
	case KindRequest:
		return "request"
	case KindNotification:
		return "notification"
	case KindResponse:
		return "response"
	case KindError:
		return "error"
	}
	return "invalid"
}

// Message is one JSON-RPC 2.0 message. Decode fills it in place: every field
// aliases the decoded bytes. ID is the raw JSON of the id (a string with its
// quotes, or a number) so that it is echoed with its exact type; it is nil
// when the message has no id, and "null" when the id is null.
type Message struct {
	JSONRPC string                 `json:"jsonrpc"`
	ID      sonic.NoCopyRawMessage `json:"id"`
	Method  string                 `json:"method"`
	Params  sonic.NoCopyRawMessage `json:"params"`
	Result  sonic.NoCopyRawMessage `json:"result"`
	Error   sonic.NoCopyRawMessage `json:"error"`

	Kind Kind `json:"-"`
}

// Reset clears m for reuse. A Message is not safe for concurrent use.
func (m *Message) Reset() { *m = Message{} }

// Sentinel errors. Decode returns ErrParse and ErrInvalidRequest, which
// transports answer with CodeParseError and CodeInvalidRequest; the framers
// and SSEParser return ErrTooLarge (and ErrParse for a bad header) when a
// stream cannot be read further. ErrTooLarge is the one declaration of a
// message over the size limit, in every transport and the client; it
// carries ReasonTooLarge.
var (
	ErrParse          = errors.New("codec: parse error")
	ErrInvalidRequest = errors.New("codec: invalid request")
	ErrTooLarge       = ReasonTooLarge.Err("codec: message too large")
)

var nullJSON = []byte("null")

// Decode parses one JSON-RPC message from data into m without copying: m's
// fields alias data, so m is valid only while data is unchanged. Data with
// invalid UTF-8 is decoded from a corrected copy, which m's fields alias
// instead (see the package doc). It allocates
// nothing for a well-formed message whose jsonrpc and method members hold no
// escape sequence.
// Decode is safe for concurrent use on distinct Messages.
//
// Decode returns ErrParse when data is not JSON (including trailing bytes after
// the object, and nesting deeper than the JSON engine allows) and
// ErrInvalidRequest when it is JSON but not a JSON-RPC 2.0 message: not an
// object (a batch array, a scalar), a jsonrpc member other than "2.0", a
// member of the wrong type, params that are neither object nor array, an id
// that is not a string, number or null, a request with a null id, or a
// message that is neither request, notification, response nor error. On
// ErrInvalidRequest, m.ID holds the message's id when it could be read, so the
// error answer can echo it; on ErrParse, m is zero.
//
// Duplicate members resolve to the last occurrence. Ids are kept as their raw
// JSON text (a string keeps its quotes and escapes, a number its exact
// spelling) so that answers echo them byte for byte.
func Decode(data []byte, m *Message) error {
	*m = Message{}
	i := skipWS(data, 0)
	if i >= len(data) {
		return ErrParse
	}
	if data[i] != '{' {
		// Valid JSON that is not an object (an array batch, a scalar) is an
		// invalid request; anything else is a parse error.
		if validJSON(data) {
			return ErrInvalidRequest
		}
		return ErrParse
	}
	if fastDecode(data, m) {
		return m.classify(false)
	}
	*m = Message{}
	return engineDecode(data, m)
}

// IsBatch reports whether frame is a JSON array (its first byte after
// white space is '['): a JSON-RPC batch, which Decode refuses as a
// message (2025-03-26 sessions alone may send them).
func IsBatch(frame []byte) bool {
	i := skipWS(frame, 0)
	return i < len(frame) && frame[i] == '['
}

// engineDecode is Decode with the JSON engine, for the messages fastDecode
// leaves to it. data starts with an object.
func engineDecode(data []byte, m *Message) error {
	if err := decodeNoCopy(data, m); err != nil {
		return m.decodeFailed(data, err)
	}
	return m.classify(bytes.IndexByte(data, '\\') >= 0)
}

// AppendDecodeError appends the answer to a message that Decode rejected
// with err, m as Decode left it: -32700 for invalid JSON, -32600 echoing
// the id when it could be read for a message that is not JSON-RPC 2.0.
// A notification gets no answer: dst is returned as it is.
func AppendDecodeError(dst []byte, m *Message, err error) []byte {
	if err == ErrParse {
		return AppendError(dst, nil, CodeParseError, "parse error: invalid JSON", nil)
	}
	if m.Kind == KindNotification {
		return dst
	}
	return AppendError(dst, m.ID, CodeInvalidRequest, "invalid request: not a JSON-RPC 2.0 message", nil)
}

// decodeFailed sorts a failed decode into ErrParse or ErrInvalidRequest.
func (m *Message) decodeFailed(data []byte, err error) error {
	switch err.(type) {
	case decoder.SyntaxError, *decoder.SyntaxError:
		// Not JSON: a raw control character in a string, a bad token, a
		// truncated value, trailing bytes, nesting too deep.
		*m = Message{}
		return ErrParse
	}
	if !validJSON(data) {
		*m = Message{}
		return ErrParse
	}
	// JSON of the wrong shape (a member of the wrong type): keep the id, if
	// it could be read, for the error answer.
	id := m.ID
	*m = Message{}
	if validID(id) {
		m.ID = id
	}
	return ErrInvalidRequest
}

// classify sets m.Kind from the decoded members. escaped says whether the
// message holds a backslash.
func (m *Message) classify(escaped bool) error {
	// sonic checks the structure of the raw members but, on its SIMD path,
	// not always their escapes (bytedance/sonic#974): check them so that
	// what is echoed or forwarded is JSON.
	if escaped && (!validEscapes(m.Params) || !validEscapes(m.Result) || !validEscapes(m.Error)) {
		*m = Message{}
		return ErrParse
	}
	hasID := m.ID != nil
	if hasID {
		switch idStatus(m.ID) {
		case idMalformed:
			*m = Message{}
			return ErrParse
		case idWrongType:
			m.ID = nil
			return ErrInvalidRequest
		}
	}
	if m.JSONRPC != "2.0" {
		return ErrInvalidRequest
	}
	switch {
	case m.Method != "":
		if m.Result != nil || m.Error != nil {
			return ErrInvalidRequest
		}
		if len(m.Params) > 0 && m.Params[0] != '{' && m.Params[0] != '[' {
			if !bytes.Equal(m.Params, nullJSON) {
				return ErrInvalidRequest
			}
			m.Params = nil
		}
		if hasID {
			if bytes.Equal(m.ID, nullJSON) {
				return ErrInvalidRequest
			}
			m.Kind = KindRequest
		} else {
			m.Kind = KindNotification
		}
		return nil
	case m.Error != nil:
		if !hasID || m.Result != nil || len(m.Error) == 0 || m.Error[0] != '{' {
			return ErrInvalidRequest
		}
		m.Kind = KindError
		return nil
	case m.Result != nil:
		if !hasID || bytes.Equal(m.ID, nullJSON) {
			return ErrInvalidRequest
		}
		m.Kind = KindResponse
		return nil
	}
	return ErrInvalidRequest
}

const (
	idOK        = iota
	idWrongType // JSON, but not a string, number or null
	idMalformed // not JSON
)

// idStatus reports whether raw, a JSON value as sonic delimited it, is a
// JSON-RPC id: a string, a number or null. It checks strings' escapes and
// numbers' grammar itself, as the id is echoed byte for byte.
func idStatus(raw []byte) int {
	if len(raw) == 0 {
		return idMalformed
	}
	switch c := raw[0]; {
	case c == '"':
		if len(raw) >= 2 && raw[len(raw)-1] == '"' && validEscapes(raw[1:len(raw)-1]) {
			return idOK
		}
	case c == '-' || (c >= '0' && c <= '9'):
		if ValidNumber(raw) {
			return idOK
		}
	case c == 'n':
		if bytes.Equal(raw, nullJSON) {
			return idOK
		}
	case c == '{' || c == '[' || c == 't' || c == 'f':
		return idWrongType
	}
	return idMalformed
}

// validID reports whether raw is a well-formed JSON-RPC id.
func validID(raw []byte) bool { return idStatus(raw) == idOK }

// validEscapes reports whether every backslash escape in raw is one JSON
// allows. raw is JSON whose structure is known to be sound, so a backslash
// can only be inside a string.
func validEscapes(raw []byte) bool {
	for {
		i := bytes.IndexByte(raw, '\\')
		if i < 0 {
			return true
		}
		if i+1 >= len(raw) {
			return false
		}
		switch raw[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			raw = raw[i+2:]
		case 'u':
			if i+6 > len(raw) || !isHex(raw[i+2]) || !isHex(raw[i+3]) || !isHex(raw[i+4]) || !isHex(raw[i+5]) {
				return false
			}
			raw = raw[i+6:]
		default:
			return false
		}
	}
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// ValidNumber reports whether b is exactly a JSON number:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func ValidNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = skipDigits(b, i)
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		j := skipDigits(b, i+1)
		if j == i+1 {
			return false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := skipDigits(b, i)
		if j == i {
			return false
		}
		i = j
	}
	return i == len(b)
}

func skipDigits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

func validJSON(data []byte) bool { return noCopy.Valid(data) }

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// decoders recycles sonic decoders: sonic's Unmarshal copies its input into a
// string and builds a decoder per call, two allocations Decode avoids.
var decoders = sync.Pool{New: func() any { return decoder.NewDecoder("") }}

func decodeNoCopy(data []byte, m *Message) error { return UnmarshalNoCopy(data, m) }

// UnmarshalNoCopy decodes data into v like Unmarshal, but strings and raw
// messages in v alias data, and nothing is allocated beyond what v's own
// fields need. v is valid only while data is: use it for values consumed
// before the buffer is reused (a cursor, a URI looked up at once).
func UnmarshalNoCopy(data []byte, v any) error { return decodePooled(data, v, noCopyOpts) }

// decodePooled decodes with a pooled sonic decoder reading data in place.
func decodePooled(data []byte, v any, opts decoder.Options) error {
	d := decoders.Get().(*decoder.Decoder)
	d.Reset(unsafe.String(unsafe.SliceData(data), len(data)))
	d.SetOptions(opts)
	err := d.Decode(v)
	if err == nil {
		err = d.CheckTrailings()
	}
	d.Reset("")
	decoders.Put(d)
	return err
}

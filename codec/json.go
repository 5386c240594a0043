package codec

import (
	"github.com/bytedance/sonic"
	"github.com/bytedance/sonic/decoder"
)

// api is the one place sonic is configured for mcpedge. Keys are matched
// case-sensitively (JSON-RPC and MCP field names are exact) and decoded
// strings are copied out of the input, so values decoded into handler types
// never alias a transport buffer that will be reused.
//
// api is safe for concurrent use.
var api = sonic.Config{
	CaseSensitive:    true,
	CopyString:       true,
	ValidateString:   true,
	EscapeHTML:       false,
	CompactMarshaler: true,
	UseInt64:         false,
	NoNullSliceOrMap: false,
}.Froze()

// noCopy decodes envelopes in place: strings and raw messages alias the
// input. It is used only by Decode, whose results document that lifetime.
var noCopy = sonic.Config{
	CaseSensitive:  true,
	CopyString:     false,
	ValidateString: true,
}.Froze()

// noCopyOpts are noCopy's options for the pooled decoders of Decode.
const noCopyOpts = decoder.OptionCaseSensitive | decoder.OptionValidateString

// Unmarshal decodes JSON into v with the pinned configuration. Strings in v
// are copies: data may be reused as soon as Unmarshal returns.
// It reads data in place with a pooled decoder, so it allocates only what
// v needs.
func Unmarshal(data []byte, v any) error { return decodePooled(data, v, copyOpts) }

// copyOpts are api's decoding options.
const copyOpts = decoder.OptionCaseSensitive | decoder.OptionValidateString | decoder.OptionCopyString

// Marshal encodes v with the pinned configuration.
func Marshal(v any) ([]byte, error) { return api.Marshal(v) }

// Valid reports whether data is one JSON value, spaces around it aside.
// It is sonic's validator: fast, and lenient about raw control characters
// inside strings, which JSON forbids. A caller that splices data into a
// framed message (a line, an SSE data field) rejects those bytes itself.
func Valid(data []byte) bool { return validJSON(data) }

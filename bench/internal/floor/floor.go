// Package floor answers the bench workload with the least work a correct
// server can do: the envelope and the arguments are read in place with
// sonic, answers are appended to a caller's buffer, and nothing is kept
// between messages (no sessions, no registry, no schema validation). The
// bare fasthttp and gnet servers built on it are the floor the benchmark
// measures mcpedge against.
package floor

import (
	"strconv"
	"sync"
	"unsafe"

	"github.com/bytedance/sonic"
	"github.com/bytedance/sonic/decoder"
)

// envelope is a JSON-RPC message read in place.
type envelope struct {
	ID     sonic.NoCopyRawMessage `json:"id"`
	Method string                 `json:"method"`
	Params sonic.NoCopyRawMessage `json:"params"`
}

type callParams struct {
	Name      string `json:"name"`
	URI       string `json:"uri"`
	Arguments struct {
		Text string  `json:"text"`
		A    float64 `json:"a"`
		B    float64 `json:"b"`
		Name string  `json:"name"`
	} `json:"arguments"`
	ProtocolVersion string `json:"protocolVersion"`
}

var decoders = sync.Pool{New: func() any { return decoder.NewDecoder("") }}

func decode(data []byte, v any) error {
	d := decoders.Get().(*decoder.Decoder)
	d.Reset(unsafe.String(unsafe.SliceData(data), len(data)))
	d.SetOptions(decoder.OptionCaseSensitive)
	err := d.Decode(v)
	d.Reset("")
	decoders.Put(d)
	return err
}

// Pre-encoded results.
const (
	toolsList     = `{"tools":[{"name":"echo","description":"Returns its text argument.","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}},{"name":"add","description":"Adds two numbers.","inputSchema":{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}}]}`
	resourcesList = `{"resources":[{"uri":"mem://hello","name":"hello","mimeType":"text/plain"}]}`
	promptsList   = `{"prompts":[{"name":"greet","description":"Greets someone by name.","arguments":[{"name":"name","description":"Who to greet","required":true}]}]}`
	helloRead     = `{"contents":[{"uri":"mem://hello","mimeType":"text/plain","text":"hello"}]}`
)

// Answer appends the answer to the JSON-RPC message msg to dst. It returns
// dst unchanged and false when msg needs no answer (a notification, a
// response). msg is read in place and not retained. Answer is safe for
// concurrent use.
func Answer(dst, msg []byte) ([]byte, bool) {
	var env envelope
	if err := decode(msg, &env); err != nil {
		return appendError(dst, nil, -32700, "parse error"), true
	}
	if len(env.ID) == 0 {
		return dst, false
	}
	if env.Method == "" {
		return dst, false // a response to us: we send no requests
	}
	var p callParams
	if len(env.Params) > 0 && env.Method != "ping" && env.Method != "tools/list" {
		if err := decode(env.Params, &p); err != nil {
			return appendError(dst, env.ID, -32602, "invalid params"), true
		}
	}
	switch env.Method {
	case "tools/call":
		switch p.Name {
		case "echo":
			dst = appendHead(dst, env.ID)
			dst = append(dst, `{"content":[{"type":"text","text":`...)
			dst = appendString(dst, p.Arguments.Text)
			return append(dst, `}]}}`...), true
		case "add":
			dst = appendHead(dst, env.ID)
			dst = append(dst, `{"content":[{"type":"text","text":"`...)
			dst = strconv.AppendFloat(dst, p.Arguments.A+p.Arguments.B, 'f', -1, 64)
			return append(dst, `"}]}}`...), true
		}
		return appendError(dst, env.ID, -32602, "unknown tool"), true
	case "ping":
		return append(appendHead(dst, env.ID), "{}}"...), true
	case "initialize":
		v := p.ProtocolVersion
		if v == "" {
			v = "2025-11-25"
		}
		dst = appendHead(dst, env.ID)
		dst = append(dst, `{"protocolVersion":`...)
		dst = appendString(dst, v)
		return append(dst, `,"capabilities":{"tools":{},"resources":{},"prompts":{}},"serverInfo":{"name":"floor","version":"0"}}}`...), true
	case "tools/list":
		return appendResult(dst, env.ID, toolsList), true
	case "resources/list":
		return appendResult(dst, env.ID, resourcesList), true
	case "prompts/list":
		return appendResult(dst, env.ID, promptsList), true
	case "resources/read":
		if p.URI != "mem://hello" {
			return appendError(dst, env.ID, -32002, "resource not found"), true
		}
		return appendResult(dst, env.ID, helloRead), true
	case "prompts/get":
		if p.Name != "greet" || p.Arguments.Name == "" {
			return appendError(dst, env.ID, -32602, "unknown prompt or missing name"), true
		}
		dst = appendHead(dst, env.ID)
		dst = append(dst, `{"description":"A greeting","messages":[{"role":"user","content":{"type":"text","text":`...)
		dst = appendString(dst, "Please greet "+p.Arguments.Name+" warmly.")
		return append(dst, `}}]}}`...), true
	}
	return appendError(dst, env.ID, -32601, "method not found"), true
}

func appendHead(dst, id []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	if len(id) == 0 {
		id = []byte("null")
	}
	dst = append(dst, id...)
	return append(dst, `,"result":`...)
}

func appendResult(dst, id []byte, result string) []byte {
	dst = appendHead(dst, id)
	dst = append(dst, result...)
	return append(dst, '}')
}

func appendError(dst, id []byte, code int, msg string) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	if len(id) == 0 {
		id = []byte("null")
	}
	dst = append(dst, id...)
	dst = append(dst, `,"error":{"code":`...)
	dst = strconv.AppendInt(dst, int64(code), 10)
	dst = append(dst, `,"message":`...)
	dst = appendString(dst, msg)
	return append(dst, "}}"...)
}

// appendString appends s as a JSON string, escaping what JSON requires.
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		if c == '"' || c == '\\' {
			dst = append(dst, '\\', c)
		} else {
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

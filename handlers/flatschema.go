package handlers

import (
	"bytes"

	"github.com/mcpedge/mcpedge/codec"
)

// flatSchema is a fast path for the most common tool input schema: an
// object whose properties each have one primitive type (string, number,
// integer, boolean), a required list, and additionalProperties true or
// false; annotations (title, description, default, examples) are allowed.
// It answers only "certainly valid": any doubt (a type mismatch, a missing
// property, an escaped key, a fractional or exponent number for an integer)
// sends the document to the full validator, so error messages and edge
// cases stay the library's. It allocates nothing.
type flatSchema struct {
	names    []string
	kinds    []byte // 's' string, 'n' number, 'i' integer, 'b' boolean
	required uint64 // bit i: names[i] is required
	closed   bool   // additionalProperties: false
}

// newFlatSchema returns the fast path for obj, or nil if obj is not flat.
func newFlatSchema(obj map[string]any) *flatSchema {
	if obj["type"] != "object" {
		return nil
	}
	f := &flatSchema{}
	var props map[string]any
	var required []any
	for k, v := range obj {
		switch k {
		case "type", "$schema", "title", "description", "$comment":
		case "properties":
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			props = m
		case "required":
			r, ok := v.([]any)
			if !ok {
				return nil
			}
			required = r
		case "additionalProperties":
			switch v {
			case true:
			case false:
				f.closed = true
			default:
				return nil
			}
		default:
			return nil
		}
	}
	if len(props) > 64 {
		return nil
	}
	for name, p := range props {
		pm, ok := p.(map[string]any)
		if !ok {
			return nil
		}
		var kind byte
		for k, v := range pm {
			switch k {
			case "title", "description", "default", "examples", "$comment":
			case "type":
				switch v {
				case "string":
					kind = 's'
				case "number":
					kind = 'n'
				case "integer":
					kind = 'i'
				case "boolean":
					kind = 'b'
				default:
					return nil
				}
			default:
				return nil
			}
		}
		if kind == 0 {
			return nil
		}
		f.names = append(f.names, name)
		f.kinds = append(f.kinds, kind)
	}
	for _, r := range required {
		name, ok := r.(string)
		if !ok {
			return nil
		}
		i := f.index([]byte(name))
		if i < 0 {
			return nil // required but undeclared: leave it to the library
		}
		f.required |= 1 << uint(i)
	}
	return f
}

func (f *flatSchema) index(name []byte) int {
	for i, n := range f.names {
		if n == string(name) {
			return i
		}
	}
	return -1
}

// valid reports whether doc, a valid JSON document, certainly satisfies the
// schema. false means "ask the full validator".
func (f *flatSchema) valid(doc []byte) bool {
	i := codec.SkipWS(doc, 0)
	if i >= len(doc) || doc[i] != '{' {
		return false
	}
	i++
	var seen uint64
	for {
		i = codec.SkipWS(doc, i)
		if i >= len(doc) {
			return false
		}
		if doc[i] == '}' {
			break
		}
		if doc[i] == ',' {
			i++
			continue
		}
		if doc[i] != '"' {
			return false
		}
		end := bytes.IndexByte(doc[i+1:], '"')
		if end < 0 {
			return false
		}
		key := doc[i+1 : i+1+end]
		if bytes.IndexByte(key, '\\') >= 0 {
			return false
		}
		i = codec.SkipWS(doc, i+2+end)
		if i >= len(doc) || doc[i] != ':' {
			return false
		}
		i = codec.SkipWS(doc, i+1)
		start := i
		if i = codec.SkipValue(doc, i); i < 0 {
			return false
		}
		k := f.index(key)
		if k < 0 {
			if f.closed {
				return false
			}
			continue
		}
		if !kindMatches(f.kinds[k], doc[start:i]) {
			return false
		}
		seen |= 1 << uint(k)
	}
	return seen&f.required == f.required
}

func kindMatches(kind byte, v []byte) bool {
	switch kind {
	case 's':
		return v[0] == '"'
	case 'b':
		return v[0] == 't' || v[0] == 'f'
	case 'n', 'i':
		if v[0] != '-' && (v[0] < '0' || v[0] > '9') {
			return false
		}
		return kind == 'n' || !bytes.ContainsAny(v, ".eE")
	}
	return false
}

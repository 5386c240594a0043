package handlers

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/internal/bytesconv"
)

// flatDecoder decodes a JSON object into a flat struct (fields of string,
// bool, integer and float kinds) with the allocation-free scanner, without
// the JSON engine's per-call setup: typed tools' arguments are most often
// such a struct, and decoding them with sonic was the largest cost of a
// tools/call after the socket itself. Strings alias the input, as
// codec.UnmarshalNoCopy's do.
//
// It decides only what it can decide exactly as codec.UnmarshalNoCopy
// would: anything else (an escaped string or key, a number that does not
// fit, a value of another JSON type, a control character, invalid UTF-8)
// makes decode report false, and the caller decodes with the JSON engine,
// which gives the same value or the same error it always gave.
type flatDecoder struct {
	keys   []string
	fields []flatField
}

type flatField struct {
	off  uintptr
	kind reflect.Kind
}

// maxFlatFields bounds the fields of a struct decoded by flatDecoder: its
// decode tracks the fields it has seen in a bit set.
const maxFlatFields = 32

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// newFlatDecoder returns the decoder of t, or nil when t is not a flat
// struct it can decode exactly.
func newFlatDecoder(t reflect.Type) *flatDecoder {
	if t.Kind() != reflect.Struct || t.NumField() == 0 || t.NumField() > maxFlatFields || customDecoding(t) {
		return nil
	}
	d := &flatDecoder{}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			return nil
		}
		if !f.IsExported() {
			continue
		}
		name := f.Name
		if tag, ok := f.Tag.Lookup("json"); ok {
			n, opts, _ := strings.Cut(tag, ",")
			if n == "-" && opts == "" {
				continue
			}
			if strings.Contains(","+opts+",", ",string,") {
				return nil
			}
			if n != "" {
				name = n
			}
		}
		switch f.Type.Kind() {
		case reflect.String, reflect.Bool,
			reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
			reflect.Float32, reflect.Float64:
		default:
			return nil
		}
		if customDecoding(f.Type) || containsKey(d.keys, name) {
			return nil
		}
		d.keys = append(d.keys, name)
		d.fields = append(d.fields, flatField{off: f.Offset, kind: f.Type.Kind()})
	}
	if len(d.keys) == 0 {
		return nil
	}
	return d
}

func containsKey(keys []string, k string) bool {
	for _, s := range keys {
		if s == k {
			return true
		}
	}
	return false
}

// customDecoding reports whether values of t decode through methods of
// their own.
func customDecoding(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return t.Implements(jsonUnmarshaler) || p.Implements(jsonUnmarshaler) ||
		t.Implements(textUnmarshaler) || p.Implements(textUnmarshaler)
}

// decode sets the fields of the zeroed struct at p from obj, valid JSON
// (the engine's decoder and the schema validator have seen it). It
// reports false, having possibly set some fields, when it cannot decide:
// the caller zeroes the struct and decodes with the JSON engine.
func (d *flatDecoder) decode(obj []byte, p unsafe.Pointer) bool {
	i := codec.SkipWS(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return false
	}
	var seen uint32
	i = codec.SkipWS(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return true
	}
	for i < len(obj) {
		j := codec.SkipValue(obj, i)
		if j < 0 || obj[i] != '"' {
			return false
		}
		key, err := codec.StringValue(obj[i:j])
		if err != nil {
			return false
		}
		i = codec.SkipWS(obj, j)
		if i >= len(obj) || obj[i] != ':' {
			return false
		}
		i = codec.SkipWS(obj, i+1)
		j = codec.SkipValue(obj, i)
		if j < 0 {
			return false
		}
		if k := d.index(key); k >= 0 {
			if seen&(1<<k) != 0 {
				return false // a repeated key: the engine decides
			}
			seen |= 1 << k
			if !d.set(d.fields[k], obj[i:j], p) {
				return false
			}
		}
		i = codec.SkipWS(obj, j)
		if i >= len(obj) {
			return false
		}
		switch obj[i] {
		case '}':
			return true
		case ',':
			i = codec.SkipWS(obj, i+1)
		default:
			return false
		}
	}
	return false
}

func (d *flatDecoder) index(key []byte) int {
	for k, s := range d.keys {
		if s == string(key) {
			return k
		}
	}
	return -1
}

// set decodes raw into the field f of the struct at p.
func (d *flatDecoder) set(f flatField, raw []byte, p unsafe.Pointer) bool {
	if string(raw) == "null" {
		return true
	}
	at := unsafe.Add(p, f.off)
	switch f.kind {
	case reflect.String:
		s, err := codec.StringValue(raw)
		if err != nil || !plainString(s) {
			return false
		}
		*(*string)(at) = bytesconv.B2S(s)
	case reflect.Bool:
		switch string(raw) {
		case "true":
			*(*bool)(at) = true
		case "false":
			*(*bool)(at) = false
		default:
			return false
		}
	case reflect.Float32, reflect.Float64:
		if !codec.ValidNumber(raw) {
			return false
		}
		bits := 64
		if f.kind == reflect.Float32 {
			bits = 32
		}
		v, err := strconv.ParseFloat(bytesconv.B2S(raw), bits)
		if err != nil {
			return false
		}
		if bits == 32 {
			*(*float32)(at) = float32(v)
		} else {
			*(*float64)(at) = v
		}
	default:
		return jsonInteger(raw) && setInt(at, f.kind, bytesconv.B2S(raw))
	}
	return true
}

// plainString reports whether the content of a JSON string needs no
// check beyond the scanner's: no control character, valid UTF-8.
func plainString(s []byte) bool {
	for _, c := range s {
		if c < 0x20 {
			return false
		}
	}
	return utf8.Valid(s)
}

// jsonInteger reports whether raw is a JSON number without fraction or
// exponent.
func jsonInteger(raw []byte) bool {
	if !codec.ValidNumber(raw) {
		return false
	}
	for _, c := range raw {
		if c == '.' || c == 'e' || c == 'E' {
			return false
		}
	}
	return true
}

func setInt(at unsafe.Pointer, k reflect.Kind, s string) bool {
	switch k {
	case reflect.Int, reflect.Int64:
		bits := 64
		if k == reflect.Int {
			bits = strconv.IntSize
		}
		v, err := strconv.ParseInt(s, 10, bits)
		if err != nil {
			return false
		}
		if k == reflect.Int {
			*(*int)(at) = int(v)
		} else {
			*(*int64)(at) = v
		}
	case reflect.Int8:
		v, err := strconv.ParseInt(s, 10, 8)
		if err != nil {
			return false
		}
		*(*int8)(at) = int8(v)
	case reflect.Int16:
		v, err := strconv.ParseInt(s, 10, 16)
		if err != nil {
			return false
		}
		*(*int16)(at) = int16(v)
	case reflect.Int32:
		v, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return false
		}
		*(*int32)(at) = int32(v)
	case reflect.Uint, reflect.Uint64:
		bits := 64
		if k == reflect.Uint {
			bits = strconv.IntSize
		}
		v, err := strconv.ParseUint(s, 10, bits)
		if err != nil {
			return false
		}
		if k == reflect.Uint {
			*(*uint)(at) = uint(v)
		} else {
			*(*uint64)(at) = v
		}
	case reflect.Uint8:
		v, err := strconv.ParseUint(s, 10, 8)
		if err != nil {
			return false
		}
		*(*uint8)(at) = uint8(v)
	case reflect.Uint16:
		v, err := strconv.ParseUint(s, 10, 16)
		if err != nil {
			return false
		}
		*(*uint16)(at) = uint16(v)
	case reflect.Uint32:
		v, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return false
		}
		*(*uint32)(at) = uint32(v)
	default:
		return false
	}
	return true
}

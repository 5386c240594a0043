package engine

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"

	"github.com/mcpedge/mcpedge/codec"
)

// Invalid params are answered in the project's own words: which field is
// wrong and what was expected, never the JSON library's text (which
// quotes the input) nor any of the client's input.

// paramsError is the -32602 answer to params (what: "tools/call params")
// that did not decode into v, a pointer. It decodes raw again, with
// encoding/json, only to learn which field is wrong: this is the error
// path.
func paramsError(what string, raw []byte, v any) *codec.Error {
	return codec.NewError(codec.CodeInvalidParams, "invalid params: "+describeDecodeError(what, raw, v))
}

// describeDecodeError says what is wrong with raw as a value of v's type.
func describeDecodeError(what string, raw []byte, v any) string {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer {
		return what + " are malformed"
	}
	err := json.Unmarshal(raw, reflect.New(t.Elem()).Interface())
	if se, ok := errors.AsType[*json.SyntaxError](err); ok && se != nil {
		return what + " are not valid JSON"
	}
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok && te != nil {
		want := expected(te.Type)
		if te.Field == "" || len(te.Field) > 128 {
			return what + " must be " + want
		}
		return what + ": " + te.Field + " must be " + want
	}
	return what + " do not have the expected form"
}

// expected names the JSON a Go type is decoded from.
func expected(t reflect.Type) string {
	if t == nil {
		return "a JSON value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a JSON value of another type"
}

// decodeAnswer decodes the client's answer to the input the server asked
// for under key into result.
func decodeAnswer(key string, ans []byte, result any) error {
	if codec.Unmarshal(ans, result) == nil {
		return nil
	}
	return paramsError("inputResponses["+strconv.Quote(key)+"]", ans, result)
}

package handlers

import (
	"errors"
	"fmt"
	"strings"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// schemaLoc is the location a tool's schema is compiled under. Relative
// references resolve against it; the compiler has no loader, so a reference
// to anything outside the document fails at registration.
const schemaLoc = "mem:///schema.json"

// schema is a compiled JSON Schema and its compact JSON text.
type schema struct {
	raw []byte
	sch *jsonschema.Schema
	// anyObject is set when the schema accepts every JSON object and
	// nothing else: validation then only checks the first byte.
	anyObject bool
	// flat, when set, proves common documents valid without decoding them.
	flat *flatSchema
}

// compileSchema compiles a JSON Schema document (draft 2020-12 unless its
// $schema names another). The document must be a JSON object.
func compileSchema(raw []byte) (*schema, error) {
	var doc any
	if err := codec.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("schema is not valid JSON: %w", err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, errors.New("schema is not a JSON object")
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(jsonschema.SchemeURLLoader{})
	if err := c.AddResource(schemaLoc, doc); err != nil {
		return nil, err
	}
	sch, err := c.Compile(schemaLoc)
	if err != nil {
		return nil, err
	}
	return &schema{raw: compactJSON(raw), sch: sch, anyObject: acceptsAnyObject(obj), flat: newFlatSchema(obj)}, nil
}

// acceptsAnyObject reports whether a schema is {"type":"object"} give or take
// annotations.
func acceptsAnyObject(obj map[string]any) bool {
	if obj["type"] != "object" {
		return false
	}
	for k, v := range obj {
		switch k {
		case "type", "$schema", "title", "description", "$comment":
		case "additionalProperties":
			if v != true {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// validate checks a JSON document against the schema.
func (s *schema) validate(doc []byte) error {
	if s.anyObject {
		if i := codec.SkipWS(doc, 0); i < len(doc) && doc[i] == '{' {
			return nil
		}
		return errors.New("at root: want object")
	}
	if s.flat != nil && s.flat.valid(doc) {
		return nil
	}
	var v any
	if err := codec.Unmarshal(doc, &v); err != nil {
		return err
	}
	return s.sch.Validate(v)
}

// english formats validation messages. A message.Printer keeps no state
// between calls, so sharing it is safe.
var english = message.NewPrinter(language.English)

// describe renders a validation failure on one line: each leaf error with
// the JSON pointer of the value it concerns, separated by "; ".
func describe(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	var b strings.Builder
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString("at ")
		if len(e.InstanceLocation) == 0 {
			b.WriteString("root")
		} else {
			b.WriteByte('\'')
			for _, tok := range e.InstanceLocation {
				b.WriteByte('/')
				tok = strings.ReplaceAll(tok, "~", "~0")
				b.WriteString(strings.ReplaceAll(tok, "/", "~1"))
			}
			b.WriteByte('\'')
		}
		b.WriteString(": ")
		b.WriteString(e.ErrorKind.LocalizedString(english))
	}
	walk(ve)
	return b.String()
}

// compactJSON returns a copy of valid JSON without insignificant
// whitespace; nothing else changes. Written lists then never hold a raw
// newline (safe for newline framing) and show a schema's text as given.
func compactJSON(src []byte) []byte {
	dst := make([]byte, 0, len(src))
	inString, escaped := false, false
	for _, c := range src {
		if inString {
			dst = append(dst, c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '"':
			inString = true
		}
		dst = append(dst, c)
	}
	return dst
}

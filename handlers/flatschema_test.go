package handlers

import (
	"testing"

	"github.com/mcpedge/mcpedge/codec"

	"github.com/stretchr/testify/require"
)

const flatTestSchema = `{"type":"object","properties":{"text":{"type":"string","description":"d"},"n":{"type":"integer"},"x":{"type":"number"},"ok":{"type":"boolean"}},"required":["text","n"],"additionalProperties":false}`

func TestFlatSchemaAgreesWithValidator(t *testing.T) {
	s, err := compileSchema([]byte(flatTestSchema))
	require.NoError(t, err)
	require.NotNil(t, s.flat, "schema should take the fast path")
	cases := []struct {
		doc   string
		valid bool
	}{
		{`{"text":"hi","n":3}`, true},
		{` { "text" : "h\"i" , "n" : -3 , "x": 1.5e3, "ok": true } `, true},
		{`{"text":"hi"}`, false},                         // missing required
		{`{"text":1,"n":3}`, false},                      // wrong type
		{`{"text":"hi","n":3.5}`, false},                 // not an integer
		{`{"text":"hi","n":3,"extra":{"a":[1]}}`, false}, // closed
		{`{"text":"hi","n":3,"ok":null}`, false},
		{`[1]`, false},
		{`{"te\u0078t":"hi","n":3}`, true}, // escaped key: full validator decides
		{`{"text":"hi","n":3.0}`, true},    // 3.0 is an integer in 2020-12: full validator decides
	}
	for _, c := range cases {
		t.Run(c.doc, func(t *testing.T) {
			err := s.validate([]byte(c.doc))
			if c.valid {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
			}
		})
	}
}

func TestFlatSchemaNotUsedForRicherSchemas(t *testing.T) {
	for _, raw := range []string{
		`{"type":"object","properties":{"a":{"type":"string","minLength":2}}}`,
		`{"type":"object","properties":{"a":{"$ref":"#/$defs/x"}},"$defs":{"x":{"type":"string"}}}`,
		`{"type":"object","properties":{"a":{"type":["string","null"]}}}`,
		`{"type":"object","required":["missing"]}`,
	} {
		s, err := compileSchema([]byte(raw))
		require.NoError(t, err, raw)
		require.Nil(t, s.flat, raw)
	}
}

// FuzzFlatSchema checks that the fast path never accepts a document the
// full validator rejects.
func FuzzFlatSchema(f *testing.F) {
	s, err := compileSchema([]byte(flatTestSchema))
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{`{"text":"a","n":1}`, `{"text":"a","n":1,"x":2,"ok":false}`, `{"n":1}`, `{"text":"\\"","n":0}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		var v any
		if err := codecUnmarshalForTest(doc, &v); err != nil {
			return // only valid JSON reaches validate
		}
		if s.flat.valid(doc) && s.sch.Validate(v) != nil {
			t.Fatalf("fast path accepted %q, validator rejects it", doc)
		}
	})
}

func BenchmarkValidateFlat(b *testing.B) {
	s, _ := compileSchema([]byte(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`))
	doc := []byte(`{"text":"hello world"}`)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := s.validate(doc); err != nil {
			b.Fatal(err)
		}
	}
}

func codecUnmarshalForTest(doc []byte, v *any) error { return codec.Unmarshal(doc, v) }

func BenchmarkValidateFull(b *testing.B) {
	s, _ := compileSchema([]byte(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`))
	s.flat = nil
	doc := []byte(`{"text":"hello world"}`)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := s.validate(doc); err != nil {
			b.Fatal(err)
		}
	}
}

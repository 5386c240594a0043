package codec

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUnmarshalCopiesAndNoCopyAliases(t *testing.T) {
	type params struct {
		Name string         `json:"name"`
		Args map[string]any `json:"arguments"`
	}
	src := `{"name":"echo","arguments":{"text":"hi"}}`

	in := []byte(src)
	var p params
	require.NoError(t, Unmarshal(in, &p))
	for i := range in {
		in[i] = ' '
	}
	assert.Equal(t, params{Name: "echo", Args: map[string]any{"text": "hi"}}, p, "Unmarshal copies")

	in = []byte(src)
	var q params
	require.NoError(t, UnmarshalNoCopy(in, &q))
	assert.Equal(t, "echo", q.Name)
	assert.True(t, aliases(s2b(q.Name), in), "UnmarshalNoCopy aliases")
}

func TestUnmarshalErrors(t *testing.T) {
	var v struct {
		Name string `json:"name"`
	}
	for _, in := range []string{``, `{"name":"a"} x`, `{"name":`, `{"name":5}`, "{\"name\":\"a\x01\"}"} {
		assert.Error(t, Unmarshal([]byte(in), &v), "Unmarshal(%q)", in)
		assert.Error(t, UnmarshalNoCopy([]byte(in), &v), "UnmarshalNoCopy(%q)", in)
	}
	var w struct {
		Name string `json:"name"`
	}
	require.NoError(t, Unmarshal([]byte(`{"Name":"x","name":"y"}`), &w))
	assert.Equal(t, "y", w.Name, "keys match case-sensitively")
}

func TestValid(t *testing.T) {
	for in, want := range map[string]bool{
		`{"a":[1,"x",null]}`: true, ` "x" `: true, `null`: true,
		``: false, ` `: false, `{"a":1`: false, `"x"}},{"a":1`: false, `{} {}`: false, `"a`: false,
	} {
		if got := Valid([]byte(in)); got != want {
			t.Errorf("Valid(%q) = %v", in, got)
		}
	}
}

package loadtest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseMix(t *testing.T) {
	tests := []struct {
		in      string
		names   []string
		weights []int
		err     bool
	}{
		{in: "echo", names: []string{"echo"}, weights: []int{1}},
		{in: "echo=70, add=10,tools/list=2,ping", names: []string{"echo", "add", "tools/list", "ping"}, weights: []int{70, 10, 2, 1}},
		{in: "", err: true},
		{in: "nope=1", err: true},
		{in: "echo=-1", err: true},
		{in: "echo=x", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			steps, err := ParseMix(tt.in)
			if tt.err {
				require.ErrorIs(t, err, ErrConfig)
				return
			}
			require.NoError(t, err)
			var names []string
			var weights []int
			for _, s := range steps {
				names = append(names, s.Name)
				weights = append(weights, s.Weight)
			}
			assert.Equal(t, tt.names, names)
			assert.Equal(t, tt.weights, weights)
		})
	}
}

func TestParseScenario(t *testing.T) {
	steps, err := ParseScenario([]byte(`[
		{"use":"echo","weight":5},
		{"name":"hash","method":"tools/call","params":{"name":"hash","arguments":{"text":"{{word}}"}},"match":"none"},
		{"name":"custom","method":"tools/call","params":"{\"name\":\"echo\",\"arguments\":{\"text\":\"{{seq}}\"}}","expect":"{{seq}}"}
	]`))
	require.NoError(t, err)
	require.Len(t, steps, 3)
	assert.Equal(t, 5, steps[0].Weight)
	assert.Equal(t, MatchNone, steps[1].Match)
	assert.Equal(t, `{"name":"hash","arguments":{"text":"{{word}}"}}`, steps[1].Params)
	assert.Equal(t, MatchEqual, steps[2].Match)
	assert.Equal(t, `{"name":"echo","arguments":{"text":"{{seq}}"}}`, steps[2].Params)
	_, err = newMix(steps)
	require.NoError(t, err)

	for _, bad := range []string{
		`{}`, `[{"use":"nope"}]`, `[{"method":"x","match":"sometimes"}]`,
	} {
		_, err := ParseScenario([]byte(bad))
		assert.ErrorIs(t, err, ErrConfig, bad)
	}
	for _, bad := range [][]Step{
		{{Name: "a", Method: "ping", Params: `{"x":{{nope}}}`, Weight: 1}},
		{{Name: "a", Method: "ping", Params: `{"x":{{seq`, Weight: 1}},
		{{Name: "a", Method: "ping", Params: `not json {{seq}}`, Weight: 1}},
		{{Name: "a", Method: "ping", Weight: 0}},
		{{Name: "a", Method: "", Weight: 1}},
		{{Name: "a", Method: "ping", Weight: 1}, {Name: "a", Method: "ping", Weight: 1}},
	} {
		_, err := newMix(bad)
		assert.ErrorIs(t, err, ErrConfig, "%+v", bad)
	}
}

func TestTemplates(t *testing.T) {
	parts, err := compile(`{"a":{{a}},"b":{{b}},"s":"{{sum}}","w":"{{word}}","n":{{seq}},"c":{{conn}}}`)
	require.NoError(t, err)
	v := vars{seq: 42, conn: 3, word: [8]byte{'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'}, a: 0.5, b: 0.25}
	assert.Equal(t, `{"a":0.5,"b":0.25,"s":"0.75","w":"abcdefgh","n":42,"c":3}`, string(render(nil, parts, &v)))
	v.a, v.b = 2, 3
	sum, _ := compile("{{sum}}")
	assert.Equal(t, "5", string(render(nil, sum, &v)))

	// Random values are fresh per request and follow the documented shape.
	rng := rand64{s: 7}
	seen := map[string]bool{}
	for i := 0; i < 100; i++ {
		v.fill(&rng, 0, uint64(i))
		seen[string(v.word[:])] = true
		assert.GreaterOrEqual(t, v.a, 0.0)
		assert.Less(t, v.a, 1000.0)
		assert.Equal(t, v.a*4, float64(int(v.a*4)))
	}
	assert.Greater(t, len(seen), 95)
}

func TestMixWeights(t *testing.T) {
	steps, err := ParseMix("echo=3,ping=1")
	require.NoError(t, err)
	m, err := newMix(steps)
	require.NoError(t, err)
	rng := rand64{s: 1}
	var n [2]int
	for i := 0; i < 40000; i++ {
		n[m.pick(&rng)]++
	}
	assert.InDelta(t, 0.75, float64(n[0])/40000, 0.02)
}

func TestVerify(t *testing.T) {
	step := func(name string) *Step {
		st, ok := Builtin(name)
		require.True(t, ok)
		return &st
	}
	tests := []struct {
		name   string
		step   *Step
		result string
		want   string
		kind   ErrorKind
	}{
		{"echo ok", step("echo"), `{"content":[{"type":"text","text":"hi 1"}]}`, "hi 1", KindNone},
		{"echo wrong", step("echo"), `{"content":[{"type":"text","text":"hi 2"}]}`, "hi 1", KindUnexpected},
		{"echo tool error", step("echo"), `{"content":[{"type":"text","text":"hi 1"}],"isError":true}`, "hi 1", KindUnexpected},
		{"echo no content", step("echo"), `{"content":[]}`, "hi 1", KindUnexpected},
		{"echo escaped", step("echo"), `{"content":[{"type":"text","text":"a\"b"}]}`, `a"b`, KindNone},
		{"add", step("add"), `{"content":[{"type":"text","text":"0.75"}]}`, "0.75", KindNone},
		{"read", step("read"), `{"contents":[{"uri":"mem://hello","text":"hello"}]}`, "hello", KindNone},
		{"read none", step("read"), `{"contents":[]}`, "hello", KindUnexpected},
		{"greet", step("greet"), `{"messages":[{"role":"user","content":{"type":"text","text":"Please greet abc warmly."}}]}`, "abc", KindNone},
		{"greet other", step("greet"), `{"messages":[{"role":"user","content":{"type":"text","text":"Please greet xyz."}}]}`, "abc", KindUnexpected},
		{"tools/list", step("tools/list"), `{"tools":[{"name":"add"},{"name":"echo"}]}`, "echo", KindNone},
		{"tools/list missing", step("tools/list"), `{"tools":[{"name":"add"}]}`, "echo", KindUnexpected},
		{"resources/list", step("resources/list"), `{"resources":[{"uri":"mem://hello"}]}`, "mem://hello", KindNone},
		{"prompts/list", step("prompts/list"), `{"prompts":[{"name":"greet"}]}`, "greet", KindNone},
		{"ping", step("ping"), `{}`, "", KindNone},
		{"ping not object", step("ping"), `[]`, "", KindUnexpected},
		{"wrong shape", step("echo"), `{"content":"text"}`, "x", KindUnexpected},
	}
	var vf verifier
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := vf.check(tt.step, []byte(tt.result), []byte(tt.want))
			if tt.kind == KindNone {
				assert.Nil(t, e)
				return
			}
			require.NotNil(t, e)
			assert.Equal(t, tt.kind, e.Kind, e.Error())
		})
	}
}

func TestParseTarget(t *testing.T) {
	tests := []struct {
		in   string
		tr   string
		want string
		err  bool
	}{
		{in: "tcp://127.0.0.1:7400", tr: "tcp", want: "tcp://127.0.0.1:7400"},
		{in: "http://127.0.0.1:7401", tr: "http", want: "http://127.0.0.1:7401/mcp"},
		{in: "http://127.0.0.1:7401/x", tr: "http", want: "http://127.0.0.1:7401/x"},
		{in: "stdio:bin/mcpedge -stdio", tr: "stdio", want: "stdio:bin/mcpedge -stdio"},
		{in: "stdio:", err: true},
		{in: "tcp://nope", err: true},
		{in: "udp://x:1", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseTarget(tt.in)
			if tt.err {
				assert.ErrorIs(t, err, ErrConfig)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.tr, got.Transport)
			assert.Equal(t, tt.want, got.String())
		})
	}
}

func TestKindOf(t *testing.T) {
	assert.Equal(t, KindNone, KindOf(nil))
	assert.Equal(t, KindRPCError, KindOf(&Error{Kind: KindRPCError}))
	assert.Equal(t, KindTimeout, KindOf(ErrTimeout))
	assert.Equal(t, KindClosed, KindOf(ErrClosed))
	for _, k := range Kinds() {
		assert.NotEmpty(t, k.String())
	}
}

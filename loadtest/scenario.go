package loadtest

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/mcpedge/mcpedge/codec"
)

// Match says how a step's answer is checked against its expectation.
type Match uint8

// The ways of checking an answer.
const (
	MatchNone     Match = iota // any result object is right
	MatchEqual                 // the checked text equals the expectation
	MatchContains              // the checked text contains the expectation
)

// Step is one kind of request in a scenario mix. Params and Expect are
// templates, rendered anew for every request with these placeholders:
//
//	{{seq}}   the request's sequence number on its worker
//	{{conn}}  the worker's connection number
//	{{word}}  a random 8-letter word, the same everywhere in one request
//	{{a}}     a random multiple of 0.25 in [0, 1000)
//	{{b}}     another
//	{{sum}}   a+b, in its shortest decimal spelling
//
// The checked text of an answer depends on the method: the first content
// item's text for tools/call (and isError must be false), the first
// contents item's text for resources/read, the first message's text for
// prompts/get, the names (URIs for resources) joined with commas for the
// lists, the raw result otherwise.
type Step struct {
	Name   string
	Weight int
	Method string
	Params string // JSON template; empty: no params
	Expect string // template of the expected checked text
	Match  Match

	params, expect []part
	// plainExpect: every rendering of Expect is plain (verify.go), for
	// the placeholders' values all are.
	plainExpect bool
	// modern: the step is sent in protocol 2026-07-28 (params carry its
	// _meta, the result must be complete).
	modern bool
}

// part is a literal or a placeholder of a compiled template.
type part struct {
	lit string
	ph  placeholder
}

type placeholder uint8

const (
	phNone placeholder = iota
	phSeq
	phConn
	phWord
	phA
	phB
	phSum
)

var placeholders = map[string]placeholder{"seq": phSeq, "conn": phConn, "word": phWord, "a": phA, "b": phB, "sum": phSum}

func compile(tpl string) ([]part, error) {
	var parts []part
	for tpl != "" {
		i := strings.Index(tpl, "{{")
		if i < 0 {
			parts = append(parts, part{lit: tpl})
			break
		}
		if i > 0 {
			parts = append(parts, part{lit: tpl[:i]})
		}
		j := strings.Index(tpl[i:], "}}")
		if j < 0 {
			return nil, fmt.Errorf("%w: unclosed {{ in template %q", ErrConfig, tpl)
		}
		name := strings.TrimSpace(tpl[i+2 : i+j])
		ph, ok := placeholders[name]
		if !ok {
			return nil, fmt.Errorf("%w: unknown placeholder {{%s}} (seq, conn, word, a, b, sum)", ErrConfig, name)
		}
		parts = append(parts, part{ph: ph})
		tpl = tpl[i+j+2:]
	}
	return parts, nil
}

// vars are one request's template values.
type vars struct {
	seq  uint64
	conn int
	word [8]byte
	a, b float64
}

const letters = "abcdefghijklmnopqrstuvwxyz"

func (v *vars) fill(rng *rand64, conn int, seq uint64) {
	v.seq, v.conn = seq, conn
	x := rng.next()
	for i := range v.word {
		v.word[i] = letters[x%26]
		x /= 26
	}
	y := rng.next()
	v.a = float64(y%4000) / 4
	v.b = float64((y>>20)%4000) / 4
}

func render(dst []byte, parts []part, v *vars) []byte {
	for _, p := range parts {
		switch p.ph {
		case phNone:
			dst = append(dst, p.lit...)
		case phSeq:
			dst = strconv.AppendUint(dst, v.seq, 10)
		case phConn:
			dst = strconv.AppendInt(dst, int64(v.conn), 10)
		case phWord:
			dst = append(dst, v.word[:]...)
		case phA:
			dst = codec.AppendFloat(dst, v.a)
		case phB:
			dst = codec.AppendFloat(dst, v.b)
		case phSum:
			dst = codec.AppendFloat(dst, v.a+v.b)
		}
	}
	return dst
}

// Builtin returns the named step of the bench workload: "echo", "add",
// "read" (resources/read mem://hello), "greet" (prompts/get), "tools/list",
// "resources/list", "prompts/list", "ping".
func Builtin(name string) (Step, bool) {
	switch name {
	case "echo":
		return Step{Name: name, Method: "tools/call", Params: `{"name":"echo","arguments":{"text":"mcpload {{word}} {{seq}}"}}`, Expect: "mcpload {{word}} {{seq}}", Match: MatchEqual}, true
	case "add":
		return Step{Name: name, Method: "tools/call", Params: `{"name":"add","arguments":{"a":{{a}},"b":{{b}}}}`, Expect: "{{sum}}", Match: MatchEqual}, true
	case "read":
		return Step{Name: name, Method: "resources/read", Params: `{"uri":"mem://hello"}`, Expect: "hello", Match: MatchEqual}, true
	case "greet":
		return Step{Name: name, Method: "prompts/get", Params: `{"name":"greet","arguments":{"name":"{{word}}"}}`, Expect: "{{word}}", Match: MatchContains}, true
	case "tools/list":
		return Step{Name: name, Method: name, Expect: "echo", Match: MatchContains}, true
	case "resources/list":
		return Step{Name: name, Method: name, Expect: "mem://hello", Match: MatchContains}, true
	case "prompts/list":
		return Step{Name: name, Method: name, Expect: "greet", Match: MatchContains}, true
	case "ping":
		return Step{Name: name, Method: name}, true
	}
	return Step{}, false
}

// BuiltinNames lists the names Builtin knows.
func BuiltinNames() []string {
	return []string{"echo", "add", "read", "greet", "tools/list", "resources/list", "prompts/list", "ping"}
}

// ParseMix parses a mix of built-in steps, "echo=70,add=10,ping=1" (a name
// alone weighs 1).
func ParseMix(s string) ([]Step, error) {
	var steps []Step
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, w, hasW := strings.Cut(item, "=")
		weight := 1
		if hasW {
			n, err := strconv.Atoi(strings.TrimSpace(w))
			if err != nil || n < 0 {
				return nil, fmt.Errorf("%w: mix item %q: weight is not a non-negative integer", ErrConfig, item)
			}
			weight = n
		}
		st, ok := Builtin(strings.TrimSpace(name))
		if !ok {
			return nil, fmt.Errorf("%w: mix item %q: unknown step (have %s)", ErrConfig, item, strings.Join(BuiltinNames(), ", "))
		}
		st.Weight = weight
		steps = append(steps, st)
	}
	if len(steps) == 0 {
		return nil, fmt.Errorf("%w: empty mix", ErrConfig)
	}
	return steps, nil
}

// stepFile is a step as a scenario file spells it.
type stepFile struct {
	Name   string        `json:"name"`
	Weight *int          `json:"weight"`
	Method string        `json:"method"`
	Params codec.RawJSON `json:"params"`
	Expect string        `json:"expect"`
	Match  string        `json:"match"`
	Use    string        `json:"use"`
}

// ParseScenario reads a scenario file: a JSON array of steps, each either
// {"use":"echo","weight":5} for a built-in step or {"name", "weight",
// "method", "params", "expect", "match"} where params is a JSON template
// (an object, or a string holding one) and match is "equal", "contains" or
// "none".
func ParseScenario(data []byte) ([]Step, error) {
	var files []stepFile
	if err := codec.Unmarshal(data, &files); err != nil {
		return nil, fmt.Errorf("%w: scenario: %w", ErrConfig, err)
	}
	steps := make([]Step, 0, len(files))
	for i, f := range files {
		var st Step
		if f.Use != "" {
			b, ok := Builtin(f.Use)
			if !ok {
				return nil, fmt.Errorf("%w: scenario step %d: unknown built-in %q", ErrConfig, i, f.Use)
			}
			st = b
		} else {
			st = Step{Name: f.Name, Method: f.Method, Expect: f.Expect}
			if st.Name == "" {
				st.Name = st.Method
			}
			if p := bytes.TrimSpace(f.Params); len(p) > 0 && !bytes.Equal(p, []byte("null")) {
				if p[0] == '"' {
					if err := codec.Unmarshal(p, &st.Params); err != nil {
						return nil, fmt.Errorf("%w: scenario step %d: params: %w", ErrConfig, i, err)
					}
				} else {
					st.Params = string(p)
				}
			}
			switch f.Match {
			case "", "equal":
				st.Match = MatchEqual
				if st.Expect == "" {
					st.Match = MatchNone
				}
			case "contains":
				st.Match = MatchContains
			case "none":
				st.Match = MatchNone
			default:
				return nil, fmt.Errorf("%w: scenario step %d: match %q (equal, contains, none)", ErrConfig, i, f.Match)
			}
		}
		st.Weight = 1
		if f.Weight != nil {
			st.Weight = *f.Weight
		}
		steps = append(steps, st)
	}
	return steps, nil
}

// mix picks steps by weight.
type mix struct {
	steps []Step
	cum   []uint64 // cumulative weights
	total uint64
}

func newMix(steps []Step) (*mix, error) {
	if len(steps) == 0 {
		return nil, fmt.Errorf("%w: no steps", ErrConfig)
	}
	m := &mix{steps: make([]Step, len(steps))}
	copy(m.steps, steps)
	seen := map[string]bool{}
	for i := range m.steps {
		st := &m.steps[i]
		if st.Method == "" {
			return nil, fmt.Errorf("%w: step %q has no method", ErrConfig, st.Name)
		}
		if st.Weight < 0 {
			return nil, fmt.Errorf("%w: step %q has a negative weight", ErrConfig, st.Name)
		}
		if seen[st.Name] {
			return nil, fmt.Errorf("%w: two steps named %q", ErrConfig, st.Name)
		}
		seen[st.Name] = true
		var err error
		if st.params, err = compile(st.Params); err != nil {
			return nil, err
		}
		if st.expect, err = compile(st.Expect); err != nil {
			return nil, err
		}
		st.plainExpect = true
		for _, p := range st.expect {
			if p.ph == phNone && !plain([]byte(p.lit)) {
				st.plainExpect = false
			}
		}
		if st.Params != "" {
			// A rendering with sample values must be a JSON object.
			var v vars
			v.fill(&rand64{s: 1}, 0, 1)
			var probe map[string]any
			if err := codec.Unmarshal(render(nil, st.params, &v), &probe); err != nil {
				return nil, fmt.Errorf("%w: step %q: params template does not render to a JSON object: %w", ErrConfig, st.Name, err)
			}
		}
		m.total += uint64(st.Weight)
		m.cum = append(m.cum, m.total)
	}
	if m.total == 0 {
		return nil, fmt.Errorf("%w: every step weighs 0", ErrConfig)
	}
	return m, nil
}

func (m *mix) pick(rng *rand64) int {
	if len(m.steps) == 1 {
		return 0
	}
	x := rng.next() % m.total
	return sort.Search(len(m.cum), func(i int) bool { return m.cum[i] > x })
}

// rand64 is a splitmix64 generator, one per worker.
type rand64 struct{ s uint64 }

func (r *rand64) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

package loadtest

import (
	"bytes"
	"strconv"

	"github.com/bytedance/sonic"
	"github.com/mcpedge/mcpedge/codec"
)

// resultView is the part of a result that verification reads, decoded in
// place (its strings alias the answer).
type resultView struct {
	Content  []textView `json:"content"`
	IsError  bool       `json:"isError"`
	Contents []struct {
		URI  string `json:"uri"`
		Text string `json:"text"`
	} `json:"contents"`
	Messages []struct {
		Content textView `json:"content"`
	} `json:"messages"`
	Tools     []named `json:"tools"`
	Prompts   []named `json:"prompts"`
	Resources []struct {
		URI string `json:"uri"`
	} `json:"resources"`
}

type textView struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type named struct {
	Name string `json:"name"`
}

func (v *resultView) reset() {
	v.Content, v.IsError, v.Contents, v.Messages = v.Content[:0], false, v.Contents[:0], v.Messages[:0]
	v.Tools, v.Prompts, v.Resources = v.Tools[:0], v.Prompts[:0], v.Resources[:0]
}

// verifier checks answers; one per worker, not safe for concurrent use.
type verifier struct {
	view resultView
	text []byte
	// shapes learned per step index, for quick.
	shapes []shape
	probes uint64
}

// shape is what a verifier learned of a step's answers from the first one
// that passed check, so that the answers after it can be verified with a
// byte comparison instead of a decode.
//
// For a step whose checked text must equal the expectation, it is the
// result around that text: any result that is prefix, the expectation
// (plain: no byte JSON would escape) and suffix is the learned document
// with the one string changed, so it passes check exactly when the
// learned one with that string did, which learn makes sure of with a
// probe. Otherwise it is the last result that passed and its expectation:
// check depends on nothing else, so an identical pair passes again.
type shape struct {
	prefix, suffix []byte
	last, lastWant []byte
	known          bool
}

// quick reports whether result is certainly right for the request of the
// step with index step, by the shape learned; false means "decode and
// check it".
func (vf *verifier) quick(step int, st *Step, result, want []byte) bool {
	if step >= len(vf.shapes) {
		return false
	}
	sh := &vf.shapes[step]
	switch {
	case !sh.known:
		return false
	case sh.prefix != nil:
		np := len(sh.prefix)
		return len(result) == np+len(want)+len(sh.suffix) &&
			string(result[:np]) == string(sh.prefix) &&
			string(result[np+len(want):]) == string(sh.suffix) &&
			string(result[np:np+len(want)]) == string(want) &&
			(st.plainExpect || plain(want))
	}
	return string(result) == string(sh.last) && string(want) == string(sh.lastWant)
}

// checkLearn is check, learning the step's shape from the first answer
// that passes.
func (vf *verifier) checkLearn(step int, st *Step, result, want []byte) *Error {
	e := vf.check(st, result, want)
	if e != nil {
		return e
	}
	if step >= len(vf.shapes) {
		vf.shapes = append(vf.shapes, make([]shape, step+1-len(vf.shapes))...)
	}
	if sh := &vf.shapes[step]; !sh.known {
		vf.learn(sh, st, result, want)
	}
	return nil
}

func (vf *verifier) learn(sh *shape, st *Step, result, want []byte) {
	sh.known = true
	if st.Match == MatchEqual && len(want) > 0 && plain(want) {
		q := make([]byte, 0, len(want)+2)
		q = append(append(append(q, '"'), want...), '"')
		if i := bytes.Index(result, q); i >= 0 && bytes.LastIndex(result, q) == i {
			prefix, suffix := result[:i+1], result[i+1+len(want):]
			// The probe: the same document with another text must pass
			// with that text expected, and fail with the learned one.
			vf.probes++
			probe := strconv.AppendUint([]byte("mcpload-shape-probe-"), vf.probes*0x9e3779b97f4a7c15, 36)
			doc := append(append(append([]byte(nil), prefix...), probe...), suffix...)
			if !bytes.Contains(prefix, probe) && !bytes.Contains(suffix, probe) &&
				vf.check(st, doc, probe) == nil && vf.check(st, doc, want) != nil {
				sh.prefix = append([]byte(nil), prefix...)
				sh.suffix = append([]byte(nil), suffix...)
				return
			}
		}
	}
	sh.last = append([]byte(nil), result...)
	sh.lastWant = append([]byte(nil), want...)
}

// plain reports whether b is printable ASCII that JSON writes as is: no
// quote, no backslash, no control byte.
func plain(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// check verifies result, the raw result member of the answer to a request
// of st, against want, the rendered expectation.
func (vf *verifier) check(st *Step, result, want []byte) *Error {
	if len(result) == 0 || result[0] != '{' {
		return &Error{Kind: KindUnexpected, Msg: "result is not an object"}
	}
	if st.modern {
		if e := complete(result); e != nil {
			return e
		}
	}
	if st.Match == MatchNone && st.Method != "tools/call" {
		if !sonic.Valid(result) {
			return &Error{Kind: KindProtocol, Msg: "result is not JSON"}
		}
		return nil
	}
	v := &vf.view
	v.reset()
	if err := codec.UnmarshalNoCopy(result, v); err != nil {
		return &Error{Kind: KindUnexpected, Msg: "result of the wrong shape", Err: err}
	}
	text := vf.text[:0]
	switch st.Method {
	case "tools/call":
		if v.IsError {
			msg := "tool reported an error"
			if len(v.Content) > 0 {
				msg += ": " + v.Content[0].Text
			}
			return &Error{Kind: KindUnexpected, Msg: msg}
		}
		if len(v.Content) == 0 {
			return &Error{Kind: KindUnexpected, Msg: "no content"}
		}
		text = append(text, v.Content[0].Text...)
	case "resources/read":
		if len(v.Contents) == 0 {
			return &Error{Kind: KindUnexpected, Msg: "no contents"}
		}
		text = append(text, v.Contents[0].Text...)
	case "prompts/get":
		if len(v.Messages) == 0 {
			return &Error{Kind: KindUnexpected, Msg: "no messages"}
		}
		text = append(text, v.Messages[0].Content.Text...)
	case "tools/list":
		for i, t := range v.Tools {
			if i > 0 {
				text = append(text, ',')
			}
			text = append(text, t.Name...)
		}
	case "prompts/list":
		for i, p := range v.Prompts {
			if i > 0 {
				text = append(text, ',')
			}
			text = append(text, p.Name...)
		}
	case "resources/list":
		for i, r := range v.Resources {
			if i > 0 {
				text = append(text, ',')
			}
			text = append(text, r.URI...)
		}
	default:
		text = append(text, result...)
	}
	vf.text = text
	switch st.Match {
	case MatchEqual:
		if !bytes.Equal(text, want) {
			return &Error{Kind: KindUnexpected, Msg: "got " + clip(text) + ", want " + strconv.Quote(string(want))}
		}
	case MatchContains:
		if !bytes.Contains(text, want) {
			return &Error{Kind: KindUnexpected, Msg: "got " + clip(text) + ", want it to contain " + strconv.Quote(string(want))}
		}
	}
	return nil
}

// complete checks that a 2026-07-28 result says "resultType":"complete":
// input_required is no answer to a load's calls, and a server that leaves
// resultType out does not speak the revision.
func complete(result []byte) *Error {
	raw, found, err := codec.ObjectField(result, "resultType")
	if err == codec.ErrEscaped {
		// A key with an escape might spell resultType: decode.
		var r struct {
			ResultType codec.RawJSON `json:"resultType"`
		}
		err = codec.Unmarshal(result, &r)
		raw, found = r.ResultType, r.ResultType != nil
	}
	if err != nil {
		return &Error{Kind: KindProtocol, Msg: "result is not a JSON object", Err: err}
	}
	if !found {
		return &Error{Kind: KindUnexpected, Msg: `result without resultType (protocol ` + ProtocolStateless + `)`}
	}
	if s, err := codec.StringValue(raw); err != nil || string(s) != "complete" {
		return &Error{Kind: KindUnexpected, Msg: "resultType " + clip(raw) + `, want "complete"`}
	}
	return nil
}

// clip quotes b, shortened for an error message.
func clip(b []byte) string {
	if len(b) > 80 {
		return strconv.Quote(string(b[:80])) + "..."
	}
	return strconv.Quote(string(b))
}

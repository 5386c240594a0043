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
}

// check verifies result, the raw result member of the answer to a request
// of st, against want, the rendered expectation.
func (vf *verifier) check(st *Step, result, want []byte) *Error {
	if len(result) == 0 || result[0] != '{' {
		return &Error{Kind: KindUnexpected, Msg: "result is not an object"}
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

// clip quotes b, shortened for an error message.
func clip(b []byte) string {
	if len(b) > 80 {
		return strconv.Quote(string(b[:80])) + "..."
	}
	return strconv.Quote(string(b))
}

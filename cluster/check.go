package cluster

import (
	"bytes"
	"strings"
	"unicode/utf8"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/session"
)

// The checks of what comes off the cluster's subjects before it reaches a
// client. A peer runs this code and never fails them; what fails them is
// garbage, or a forgery, and is dropped and counted (Stats.BadMessages).

// maxRelayedEvent bounds one event of a relayed stream: an event that a
// frame cut is held until its end arrives, up to this size.
const maxRelayedEvent = 64 << 20

// busPayloadOK reports whether a bus message from another node may reach
// this node's subscribers. Their callbacks splice the payload into
// messages to clients (the engine writes a resource update's payload
// as the value of "uri"), so it must be exactly what its topic carries:
//
//   - resources/updated/<uri>: the JSON string of <uri> itself;
//   - list_changed/<kind>: nothing;
//   - any other topic (an embedder's own): nothing, or one compact JSON
//     value (spliceable).
//
// A payload that is not JSON, or that is JSON followed by more (a
// request spliced after the notification), never passes.
func busPayloadOK(topic string, payload []byte) bool {
	switch {
	case strings.HasPrefix(topic, session.TopicResourceUpdated):
		uri := topic[len(session.TopicResourceUpdated):]
		if uri == "" || len(payload) < 2 || payload[0] != '"' || !spliceable(payload) {
			return false
		}
		if s, err := codec.StringValue(payload); err == nil { // no escape: compare in place
			return string(s) == uri
		}
		var s string
		return codec.Unmarshal(payload, &s) == nil && s == uri
	case strings.HasPrefix(topic, session.TopicListChanged):
		return len(payload) == 0
	}
	return len(payload) == 0 || spliceable(payload)
}

// spliceable reports whether b is one JSON value that may be spliced into
// a message as it stands: valid JSON and valid UTF-8, with no control
// byte at all (a raw line end, even as JSON whitespace, would split a
// newline-framed message or an SSE data line in two; codec.Valid lets raw
// control bytes inside strings pass).
func spliceable(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c == 0x7f {
			return false
		}
	}
	return utf8.Valid(b) && validJSON(b)
}

// validJSON reports whether b is one JSON value.
func validJSON(b []byte) bool { return codec.Valid(b) }

// headerOK reports whether k: v may be a header of an answer relayed to a
// client: k an HTTP token, v without control bytes but tab (no line end
// to start a header, or a body, of its own).
func headerOK(k, v []byte) bool {
	if len(k) == 0 {
		return false
	}
	for _, c := range k {
		if c <= ' ' || c >= 0x7f || bytes.IndexByte([]byte(`"(),/:;<=>?@[\]{}`), c) >= 0 {
			return false
		}
	}
	for _, c := range v {
		if (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// bodyType returns the media type of an answer's body, without its
// parameters, for checkBody and checkEvents; nil when there is nothing to
// check: no type, or a body compressed (Content-Encoding) by the owner's
// transport, which is relayed as it came, after the frame checks alone
// (its bytes reach the client's decoder whole, or not at all).
func bodyType(fr *frame) []byte {
	var ct []byte
	for _, kv := range fr.headers {
		switch {
		case bytes.EqualFold(kv[0], []byte("Content-Encoding")):
			if v := bytes.TrimSpace(kv[1]); len(v) > 0 && !bytes.EqualFold(v, []byte("identity")) {
				return nil
			}
		case bytes.EqualFold(kv[0], []byte("Content-Type")):
			ct = kv[1]
			if i := bytes.IndexByte(ct, ';'); i >= 0 {
				ct = ct[:i]
			}
			ct = bytes.TrimSpace(ct)
		}
	}
	return ct
}

var (
	ctJSON = []byte("application/json")
	ctSSE  = []byte("text/event-stream")
)

// checkBody reports whether body may reach the client as the whole body
// of an answer of content type ct: a JSON answer is one JSON value (or
// nothing), an event stream whole events whose data is JSON
// (checkStream). Other answers (none, plain text) carry no MCP message
// and pass.
func checkBody(ct, body []byte) bool {
	switch {
	case bytes.EqualFold(ct, ctJSON):
		return len(body) == 0 || validJSON(body)
	case bytes.EqualFold(ct, ctSSE):
		var p codec.SSEParser
		p.MaxSize = maxRelayedEvent
		n, ok := checkStream(&p, body)
		return ok && n == len(body)
	}
	return true
}

// checkStream checks the whole events at the start of b, an event stream
// read up to here by p: it returns how many bytes they take, and false if
// one of them fails (eventOK) or is over p.MaxSize. The bytes after n
// are the start of an event yet to end.
func checkStream(p *codec.SSEParser, b []byte) (n int, ok bool) {
	for n < len(b) {
		ev, k, dispatched, err := p.Next(b[n:])
		if err != nil {
			return n, false
		}
		if k == 0 {
			break
		}
		if dispatched && !eventOK(&ev) {
			return n, false
		}
		n += k
	}
	return n, true
}

// eventOK reports whether a relayed SSE event may reach the client: its
// data is one JSON value, or empty (the priming event); the legacy
// transport's "endpoint" event carries a URI instead.
func eventOK(ev *codec.SSEEvent) bool {
	return len(ev.Data) == 0 || ev.Event == "endpoint" || validJSON(ev.Data)
}

// checkEvents checks the data of a relayed stream's frame: it returns the
// whole, checked events to write to the client, and holds back the start
// of one the frame cut until its end arrives. It returns false when an
// event fails its checks: the stream is then cut (the client resumes it).
// The bytes it returns are valid until the next call.
func (f *forward) checkEvents(p []byte) ([]byte, bool) {
	if f.tailOff > 0 { // written since: drop it
		f.tail = append(f.tail[:0], f.tail[f.tailOff:]...)
		f.tailOff = 0
	}
	f.sse.MaxSize = maxRelayedEvent
	if len(f.tail) == 0 {
		n, ok := checkStream(&f.sse, p)
		if !ok {
			return nil, false
		}
		f.tail = append(f.tail, p[n:]...)
		return p[:n], true
	}
	if len(f.tail)+len(p) > maxRelayedEvent {
		return nil, false
	}
	f.tail = append(f.tail, p...)
	n, ok := checkStream(&f.sse, f.tail)
	if !ok {
		return nil, false
	}
	f.tailOff = n
	return f.tail[:n], true
}

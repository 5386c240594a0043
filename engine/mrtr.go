package engine

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
)

// Multi round-trip requests (2026-07-28). A handler asks its client for
// input (CreateMessage, Elicit, ListRoots) with the same calls in both
// eras. In a session (2025-11-25 and older) they are server-to-client
// requests. In a stateless request the engine looks the answer up in the
// request's inputResponses, or in the answers its requestState carries
// from earlier rounds; when it is not there, the call fails with
// ErrInputRequired and the request is answered with an
// InputRequiredResult naming every input asked for, whatever the handler
// then returned. The client gathers the input and retries the request,
// which runs the handler again from the start: a handler asks for its
// inputs in the same order every time, since an input's key is its
// method and its rank among the handler's requests.
//
// requestState carries the answers gathered so far, bound to the request's
// method and parameters and to an expiry, and signed with HMAC-SHA256
// under Options.StateKeys: the first key signs, any key verifies, so a key
// can rotate. The client cannot read it for anything, change it, move it
// to another request or keep it past Options.StateTTL.

// ErrInputRequired is returned to a handler of a stateless request whose
// client has not yet given the input it asked for. The handler should
// return; the engine answers with an InputRequiredResult, and the client
// retries with the input.
var ErrInputRequired = errors.New("engine: input required from the client (the request will be retried with it)")

// maxStateBytes bounds a requestState, as received and as issued.
const maxStateBytes = 64 << 10

// mrtrState is a stateless request's input rounds.
type mrtrState struct {
	answers map[string]json.RawMessage // inputResponses and the state's earlier answers
	used    map[string]json.RawMessage // the answers the handler consumed, carried forward
	pending []pendingInput
	seq     map[string]int // inputs asked for so far, by method
	err     *codec.Error   // the request's inputResponses or requestState is unusable
}

// pendingInput is an input a handler asked its client for: under key, a
// request of method with params (raw JSON, nil for none).
type pendingInput struct {
	key, method string
	params      []byte
}

// appendInputRequests appends the inputRequests member naming n inputs
// (at returns the i-th): the one encoding of what a stateless request's
// InputRequiredResult and a task in input_required ask for.
func appendInputRequests(dst []byte, n int, at func(i int) *pendingInput) []byte {
	dst = append(dst, `"inputRequests":{`...)
	for i := range n {
		if i > 0 {
			dst = append(dst, ',')
		}
		p := at(i)
		dst = codec.AppendString(dst, p.key)
		dst = append(dst, `:{"method":`...)
		dst = codec.AppendString(dst, p.method)
		if p.params != nil {
			dst = append(dst, `,"params":`...)
			dst = append(dst, p.params...)
		}
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// statePayload is what requestState signs.
type statePayload struct {
	Method  string                     `json:"m"`
	Digest  string                     `json:"d"`
	Expires int64                      `json:"e"`
	Answers map[string]json.RawMessage `json:"a,omitempty"`
}

// mrtrParams are the params of a retried request the engine reads.
type mrtrParams struct {
	InputResponses json.RawMessage `json:"inputResponses"`
	RequestState   *string         `json:"requestState"`
}

// loadMRTR reads the request's inputResponses and requestState once.
func (r *request) loadMRTR() *mrtrState {
	if r.mrtr != nil {
		return r.mrtr
	}
	st := &mrtrState{answers: map[string]json.RawMessage{}, used: map[string]json.RawMessage{}, seq: map[string]int{}}
	r.mrtr = st
	var p mrtrParams
	if len(r.msg.Params) > 0 {
		if err := codec.Unmarshal(r.msg.Params, &p); err != nil {
			st.err = paramsError(r.msg.Method+" params", r.msg.Params, &p)
			return st
		}
	}
	if p.RequestState != nil {
		ans, err := r.s.openState(*p.RequestState, r.msg.Method, r.digest())
		if err != nil {
			st.err = codec.NewError(codec.CodeInvalidParams, "invalid params: requestState: "+err.Error())
			return st
		}
		for k, v := range ans {
			st.answers[k] = v
		}
	}
	if len(p.InputResponses) > 0 && string(p.InputResponses) != "null" {
		var in map[string]json.RawMessage
		if err := codec.Unmarshal(p.InputResponses, &in); err != nil {
			st.err = codec.NewError(codec.CodeInvalidParams, "invalid params: inputResponses must be an object of results")
			return st
		}
		for k, v := range in {
			st.answers[k] = v
		}
	}
	return st
}

// checkMRTR fails a stateless request whose requestState or
// inputResponses is unusable, before its handler runs.
func (r *request) checkMRTR() error {
	if !r.stateless.on || len(r.msg.Params) == 0 {
		return nil
	}
	if r.tool.ok {
		if !r.tool.retry {
			return nil
		}
	} else {
		var v [2][]byte
		if codec.ObjectFields(r.msg.Params, retryKeys, v[:]) == nil && v[0] == nil && v[1] == nil {
			return nil
		}
	}
	if st := r.loadMRTR(); st.err != nil {
		return st.err
	}
	return nil
}

var retryKeys = []string{"inputResponses", "requestState"}

// input is a handler's request for client input in a stateless request.
func (r *request) input(key, method string, params, result any) error {
	st := r.loadMRTR()
	if st.err != nil {
		return st.err
	}
	if key == "" {
		st.seq[method]++
		key = inputKey(method, st.seq[method])
	}
	if raw, ok := st.answers[key]; ok {
		if err := decodeAnswer(key, raw, result); err != nil {
			return err
		}
		st.used[key] = raw
		return nil
	}
	var raw []byte
	if params != nil {
		var err error
		if raw, err = codec.Marshal(params); err != nil {
			return fmt.Errorf("engine: encoding %s params: %w", method, err)
		}
	}
	st.pending = append(st.pending, pendingInput{key: key, method: method, params: raw})
	return ErrInputRequired
}

// inputKey names the n-th input of method a handler asks for.
func inputKey(method string, n int) string {
	short := method
	switch method {
	case mcp.MethodElicitationCreate:
		short = "elicitation"
	case mcp.MethodSamplingCreateMessage:
		short = "sampling"
	case mcp.MethodRootsList:
		short = "roots"
	}
	return short + "-" + strconv.Itoa(n)
}

// appendInputRequired appends r's InputRequiredResult, and its code.
func (s *Server) appendInputRequired(r *request, dst []byte) ([]byte, int) {
	st := r.mrtr
	start := len(dst)
	dst = codec.AppendResultStart(dst, r.msg.ID)
	dst = append(dst, `{"resultType":"input_required",`...)
	dst = appendInputRequests(dst, len(st.pending), func(i int) *pendingInput { return &st.pending[i] })
	state, err := s.sealState(r.msg.Method, r.digest(), st.used)
	if errors.Is(err, errStateTooBig) {
		// The client's answers make the state too big to carry: its
		// request is what is wrong.
		return errAnswer(dst[:start], r.msg.ID, codec.CodeInvalidParams,
			"invalid params: the answers in inputResponses are too large to carry in requestState (at most "+strconv.Itoa(maxStateBytes>>10)+" KiB)")
	}
	if err != nil {
		return errAnswer(dst[:start], r.msg.ID, codec.CodeInternalError, "internal error: sealing requestState")
	}
	dst = append(dst, `,"requestState":`...)
	dst = codec.AppendString(dst, state)
	dst = s.appendTail(dst, true, nil, false, true)
	return append(dst, "}}"...), 0
}

// digest identifies a request for its requestState: a hash of its method
// and of its params other than _meta, inputResponses and requestState,
// with object keys sorted, so that the client's encoding does not matter.
func (r *request) digest() string {
	var p map[string]any
	if len(r.msg.Params) > 0 {
		_ = json.Unmarshal(r.msg.Params, &p)
	}
	delete(p, "_meta")
	delete(p, "inputResponses")
	delete(p, "requestState")
	b, _ := json.Marshal(p) // encoding/json sorts map keys
	h := sha256.New()
	h.Write([]byte(r.msg.Method))
	h.Write([]byte{0})
	h.Write(b)
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:18])
}

// Errors of requestState.
var (
	errStateMalformed = errors.New("malformed")
	errStateSignature = errors.New("signature does not verify")
	errStateExpired   = errors.New("expired")
	errStateRequest   = errors.New("issued for another request")
	errStateTooBig    = errors.New("too large")
)

// sealState signs the answers gathered for a request.
func (s *Server) sealState(method, digest string, answers map[string]json.RawMessage) (string, error) {
	payload, err := json.Marshal(statePayload{Method: method, Digest: digest, Expires: time.Now().Add(s.opts.StateTTL).Unix(), Answers: answers})
	if err != nil {
		return "", err
	}
	tok := s.signState(payload)
	if len(tok) > maxStateBytes {
		return "", fmt.Errorf("engine: requestState %w (%d bytes)", errStateTooBig, len(tok))
	}
	return tok, nil
}

// signState returns the requestState token of payload, signed with the
// first key.
func (s *Server) signState(payload []byte) string {
	mac := hmac.New(sha256.New, s.stateKeys()[0])
	mac.Write(payload)
	return base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// openState verifies a requestState and returns the answers it carries.
func (s *Server) openState(tok, method, digest string) (map[string]json.RawMessage, error) {
	if len(tok) > maxStateBytes {
		return nil, errStateTooBig
	}
	dot := bytes.IndexByte([]byte(tok), '.')
	if dot < 0 {
		return nil, errStateMalformed
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(tok[:dot])
	sig, err2 := base64.RawURLEncoding.DecodeString(tok[dot+1:])
	if err1 != nil || err2 != nil {
		return nil, errStateMalformed
	}
	ok := false
	for _, k := range s.stateKeys() {
		mac := hmac.New(sha256.New, k)
		mac.Write(payload)
		if hmac.Equal(sig, mac.Sum(nil)) {
			ok = true
			break
		}
	}
	if !ok {
		return nil, errStateSignature
	}
	var p statePayload
	if err := json.Unmarshal(payload, &p); err != nil {
		return nil, errStateMalformed
	}
	if time.Now().Unix() > p.Expires {
		return nil, errStateExpired
	}
	if p.Method != method || p.Digest != digest {
		return nil, errStateRequest
	}
	return p.Answers, nil
}

// stateKeys returns the keys requestState is signed with.
func (s *Server) stateKeys() [][]byte {
	if len(s.opts.StateKeys) > 0 {
		return s.opts.StateKeys
	}
	return s.stateKey
}

// newStateKey returns a random key, for a server configured with none.
func newStateKey() [][]byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return [][]byte{k}
}

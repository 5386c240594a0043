package engine

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
)

// What a handler that speaks for other servers (a gateway) may ask of
// the engine about a request besides its Peer, and the signing of state
// it hands its clients. Nothing here names an upstream.

// PeerOwner returns who the client of p is, as the engine binds tasks to
// clients: "sub:<subject>" for an authenticated caller, else for a
// 2026-07-28 request "addr:<address>" (the client's address; "addr:"
// when the transport has none), else "sess:<session id>". It returns ""
// for a Peer the engine did not make. Handlers that keep state for a
// stateless client across its requests bind the state to it, so that
// another client's request cannot use it.
func PeerOwner(p handlers.Peer) string {
	r, ok := p.(*request)
	if !ok {
		return ""
	}
	return taskOwner(r.sess, r.caller(), r.stateless.on)
}

// PeerLogLevel returns the lowest level a log message must have to reach
// p's client (mcp.LogLevelIndex names them): a 2026-07-28 request's
// _meta logLevel, "" when it named none (it gets no log message); a
// session's logging/setLevel, "debug" when it set none (every message
// reaches it). "" for a Peer the engine did not make.
func PeerLogLevel(p handlers.Peer) string {
	r, ok := p.(*request)
	if !ok {
		return ""
	}
	i := int(r.stateless.level)
	if !r.stateless.on {
		i = r.sess.LogLevel()
		if i < 0 {
			i = 0
		}
	}
	if i < 0 || i >= len(mcp.LogLevels) {
		return ""
	}
	return mcp.LogLevels[i]
}

// PeerTask returns the id of the task p's request runs as ("" when none)
// and whether the client was told of it: a tool registered with
// DeferTask (or a raw tool with RawOptions.DeferTask) runs before it is
// a task, and becomes one when it calls handlers.StartTask.
func PeerTask(p handlers.Peer) (id string, started bool) {
	r, ok := p.(*request)
	if !ok || r.task == nil {
		return "", false
	}
	t := r.task
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.id, t.started
}

// NodeID returns Options.NodeID: the node's name in a cluster, "" alone.
func (s *Server) NodeID() string { return s.opts.NodeID }

// SignState returns payload signed with the keys that sign 2026-07-28
// requestState (Options.StateKeys: the first signs), as a token of
// base64url characters and one '.': state a handler hands its client and
// gets back must be unforgeable, and every node of a cluster, sharing the
// keys, verifies it.
func (s *Server) SignState(payload []byte) string { return s.signState(payload) }

// VerifyState returns the payload of a token SignState made with any of
// the keys, or ErrStateSignature.
func (s *Server) VerifyState(tok string) ([]byte, error) {
	dot := bytes.IndexByte([]byte(tok), '.')
	if dot < 0 || len(tok) > maxStateBytes {
		return nil, ErrStateSignature
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(tok[:dot])
	sig, err2 := base64.RawURLEncoding.DecodeString(tok[dot+1:])
	if err1 != nil || err2 != nil {
		return nil, ErrStateSignature
	}
	for _, k := range s.stateKeys() {
		mac := hmac.New(sha256.New, k)
		mac.Write(payload)
		if hmac.Equal(sig, mac.Sum(nil)) {
			return payload, nil
		}
	}
	return nil, ErrStateSignature
}

// ErrStateSignature reports a token VerifyState does not accept.
var ErrStateSignature = errors.New("engine: state does not verify")

// RequestDigest identifies a request for state bound to it, as the
// engine's requestState is: a hash of its method and of its params but
// _meta, inputResponses and requestState, object keys sorted, so that a
// client's re-encoding of a retry does not change it.
func RequestDigest(method string, params []byte) string {
	r := request{msg: codec.Message{Method: method, Params: params}}
	return r.digest()
}

// StateNode returns the node a requestState names: a state of the form
// "<node>.~<rest>" belongs to the node that issued it (a handler that
// holds the work the state names keeps it in that node's memory; the
// engine's own states hold everything in themselves and name none). A
// cluster forwards a retry that carries such a state to that node (HTTP:
// mcphttp.Options.Route is offered the state, whose node SessionNode
// reads). nil when state names none.
func StateNode(state []byte) []byte {
	i := bytes.IndexByte(state, '.')
	if i <= 0 || i+1 >= len(state) || state[i+1] != '~' {
		return nil
	}
	for _, c := range state[:i] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return nil
		}
	}
	return state[:i]
}

package gateway_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpedge/mcpedge"
	"github.com/mcpedge/mcpedge/client"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/gateway"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Bad input of the era translation: each gets its clear error, and
// nothing else is disturbed.

// byName authenticates a 2026-07-28 request as the client its _meta
// clientInfo names (a subject each): what binds a held call to its
// client when clients share an address.
type byName struct{}

func (byName) Authorize(_ context.Context, _ *session.Session, _ string, params []byte, _ bool) (any, error) {
	var p struct {
		Meta struct {
			Info struct {
				Name string `json:"name"`
			} `json:"io.modelcontextprotocol/clientInfo"`
		} `json:"_meta"`
	}
	_ = json.Unmarshal(params, &p)
	return subject(p.Meta.Info.Name), nil
}

func (byName) AuthorizeTool(any, string, []string) error { return nil }

var _ engine.Authorizer = byName{}

const (
	elicitCall  = `"name":"test_input_required_result_elicitation","arguments":{}`
	elicitRetry = elicitCall + `,"inputResponses":{"user_name":{"action":"accept","content":{"name":"Ada"}}},"requestState":`
)

// TestTranslateBadRetry: a retry whose requestState names a call that
// has ended, timed out or is another client's gets -32602, and the call
// (when it is another's) is left alone; a forged or tampered state, and
// malformed inputResponses, are -32602 too.
func TestTranslateBadRetry(t *testing.T) {
	f, err := tryFront(t, gateway.Options{Upstreams: []gateway.Upstream{selfUpstreamV("x", "conformance", "2025-11-25")}},
		func(o *mcpedge.Options) { o.Authorize = byName{} })
	require.NoError(t, err)
	ada := f.raw(t, "ada", `{"elicitation":{}}`)
	eve := f.raw(t, "eve", `{"elicitation":{}}`)
	round1 := func() string {
		t.Helper()
		m, e := ada.call(mcp.MethodToolsCall, elicitCall)
		require.Nil(t, e)
		require.Equal(t, "input_required", str(m["resultType"]))
		return string(m["requestState"])
	}
	invalid := func(e *codec.Error) {
		t.Helper()
		require.NotNil(t, e)
		assert.Equal(t, codec.CodeInvalidParams, e.Code, e.Message)
	}

	t.Run("another client's", func(t *testing.T) {
		st := round1()
		_, e := eve.call(mcp.MethodToolsCall, elicitRetry+st)
		invalid(e)
		assert.Contains(t, e.Message, "not this client's")
		assert.Equal(t, 1, f.gw.HeldCount(), "the call is left alone")
		m, e := ada.call(mcp.MethodToolsCall, elicitRetry+st)
		require.Nil(t, e)
		assert.Contains(t, string(m["content"]), "Hello, Ada!")
	})
	t.Run("ended", func(t *testing.T) {
		st := round1()
		_, e := ada.call(mcp.MethodToolsCall, elicitRetry+st)
		require.Nil(t, e)
		_, e = ada.call(mcp.MethodToolsCall, elicitRetry+st)
		invalid(e)
	})
	t.Run("timed out", func(t *testing.T) {
		st := round1()
		f.gw.ExpireHeld()
		_, e := ada.call(mcp.MethodToolsCall, elicitRetry+st)
		invalid(e)
	})
	t.Run("another request's", func(t *testing.T) {
		st := round1()
		_, e := ada.call(mcp.MethodToolsCall, `"name":"test_input_required_result_elicitation","arguments":{"x":1},"requestState":`+st)
		invalid(e)
		_, e = ada.call(mcp.MethodToolsCall, `"name":"test_simple_text","arguments":{},"requestState":`+st)
		invalid(e)
		f.gw.ExpireHeld()
	})
	t.Run("tampered or forged", func(t *testing.T) {
		st := round1()
		for _, bad := range []string{
			st[:len(st)-1] + `-TAMPERED"`,
			`"~h~eyJoIjoieCJ9.c2lnbmF0dXJl"`,
			`"a.~h~eyJoIjoieCJ9.c2ln"`,
			`"not a state of ours"`,
		} {
			_, e := ada.call(mcp.MethodToolsCall, elicitRetry+bad)
			invalid(e)
		}
		assert.Equal(t, 1, f.gw.HeldCount())
		f.gw.ExpireHeld()
	})
	t.Run("malformed inputResponses keep the call", func(t *testing.T) {
		st := round1()
		for _, bad := range []string{`"inputResponses":7`, `"inputResponses":{"user_name":12345}`} {
			_, e := ada.call(mcp.MethodToolsCall, elicitCall+`,`+bad+`,"requestState":`+st)
			invalid(e)
		}
		assert.Equal(t, 1, f.gw.HeldCount())
		m, e := ada.call(mcp.MethodToolsCall, elicitRetry+st)
		require.Nil(t, e)
		assert.Contains(t, string(m["content"]), "Hello, Ada!")
	})
	assert.Equal(t, 0, f.gw.HeldCount())
}

// TestTranslateExpiryCancelsUpstream: a held call whose client never
// retries ends: its upstream's request gets an error, the upstream call
// is cancelled.
func TestTranslateExpiryCancelsUpstream(t *testing.T) {
	f := startFront(t, gateway.Options{Upstreams: []gateway.Upstream{selfUpstream("x", "fake")}})
	r := f.raw(t, "raw", `{"elicitation":{}}`)
	m, e := r.call(mcp.MethodToolsCall, `"name":"elicit","arguments":{}`)
	require.Nil(t, e)
	require.Equal(t, "input_required", str(m["resultType"]), "%v", m)
	f.gw.ExpireHeld()
	m, e = r.call(mcp.MethodToolsCall, `"name":"cancelled","arguments":{}`)
	require.Nil(t, e)
	assert.Contains(t, string(m["content"]), `"1"`, "the upstream heard the cancellation")
}

// TestTranslateUndeclaredInput: an upstream that asks for input the
// client did not declare the capability for gets an error, and the
// client a clear one (-32021 naming it), in both directions.
func TestTranslateUndeclaredInput(t *testing.T) {
	t.Run("down", func(t *testing.T) {
		f := startFront(t, gateway.Options{Upstreams: []gateway.Upstream{selfUpstreamV("x", "conformance", "2025-11-25")}})
		r := f.raw(t, "raw", `{}`)
		_, e := r.call(mcp.MethodToolsCall, `"name":"test_missing_capability","arguments":{}`)
		require.NotNil(t, e)
		assert.Equal(t, mcp.CodeMissingClientCapability, e.Code)
		assert.Contains(t, string(e.Data), "sampling")
		assert.Equal(t, 0, f.gw.HeldCount())
	})
	t.Run("up", func(t *testing.T) {
		f := startFront(t, gateway.Options{Upstreams: []gateway.Upstream{selfUpstream("x", "fake26")}})
		c := f.dial(t, client.Options{Era: client.EraLegacy}) // no elicitation
		_, err := c.CallTool(testCtx(t), "ask", map[string]any{})
		var ce *codec.Error
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, mcp.CodeMissingClientCapability, ce.Code)
		assert.Contains(t, ce.Message, "elicitation/create")
	})
}

// TestTranslateRoundsBound: more input rounds than Options.MaxRounds
// fail the call with -32000 {"limit":"upstream-input-rounds"}, in both
// directions, and nothing stays held.
func TestTranslateRoundsBound(t *testing.T) {
	limit := func(t *testing.T, e *codec.Error) {
		t.Helper()
		require.NotNil(t, e)
		assert.Equal(t, codec.CodeServerBusy, e.Code)
		assert.Contains(t, string(e.Data), "upstream-input-rounds")
	}
	t.Run("down", func(t *testing.T) {
		f := startFront(t, gateway.Options{MaxRounds: 1, Upstreams: []gateway.Upstream{selfUpstreamV("x", "conformance", "2025-11-25")}})
		r := f.raw(t, "raw", `{"elicitation":{}}`)
		m, e := r.call(mcp.MethodToolsCall, `"name":"test_input_required_result_multi_round","arguments":{}`)
		require.Nil(t, e)
		require.Equal(t, "input_required", str(m["resultType"]))
		_, e = r.call(mcp.MethodToolsCall, `"name":"test_input_required_result_multi_round","arguments":{},"inputResponses":{"step1":{"action":"accept","content":{"name":"Ada"}}},"requestState":`+string(m["requestState"]))
		limit(t, e)
		assert.Equal(t, 0, f.gw.HeldCount())
	})
	t.Run("up", func(t *testing.T) {
		f := startFront(t, gateway.Options{MaxRounds: 3, Upstreams: []gateway.Upstream{selfUpstream("x", "fake26")}})
		var asked int
		c := f.dial(t, client.Options{Era: client.EraLegacy, OnElicitation: func(context.Context, *client.ServerRequest, *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			asked++
			return &mcp.ElicitResult{Action: "accept", Content: codec.RawJSON(`{"name":"Ada"}`)}, nil
		}})
		_, err := c.CallTool(testCtx(t), "rounds", map[string]any{})
		var ce *codec.Error
		require.ErrorAs(t, err, &ce)
		limit(t, ce)
		assert.Equal(t, 3, asked)
		r, err := c.CallTool(testCtx(t), "ask", map[string]any{})
		require.NoError(t, err, "the connection serves on")
		assert.Equal(t, "answered", text(t, r))
	})
}

// TestTranslateHeldBounds: past MaxHeldPerClient (and MaxHeld) a call
// is not held: the upstream's request gets an error and the client
// -32000 {"limit":"upstream-held"}; the calls held are untouched.
func TestTranslateHeldBounds(t *testing.T) {
	f := startFront(t, gateway.Options{MaxHeldPerClient: 2, MaxHeld: 3, Upstreams: []gateway.Upstream{selfUpstreamV("x", "conformance", "2025-11-25")}})
	r := f.raw(t, "raw", `{"elicitation":{}}`)
	var states []string
	for range 2 {
		m, e := r.call(mcp.MethodToolsCall, elicitCall)
		require.Nil(t, e)
		states = append(states, string(m["requestState"]))
	}
	_, e := r.call(mcp.MethodToolsCall, elicitCall)
	require.NotNil(t, e)
	assert.Equal(t, codec.CodeServerBusy, e.Code)
	assert.Contains(t, string(e.Data), "upstream-held")
	assert.Equal(t, 2, f.gw.HeldCount())
	for _, st := range states {
		m, e := r.call(mcp.MethodToolsCall, elicitRetry+st)
		require.Nil(t, e)
		assert.True(t, strings.Contains(string(m["content"]), "Hello, Ada!"))
	}
	assert.Equal(t, 0, f.gw.HeldCount())
}

package engine_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
)

// subject is a caller of fakeAuthz.
type subject string

func (s subject) AuthSubject() string { return string(s) }

// authCall is one question fakeAuthz was asked.
type authCall struct {
	method string
	block  bool
}

// fakeAuthz authorizes the requests whose params._meta["t"] names a
// subject, or whose session has a caller. With slow set it cannot decide
// without blocking, as a JWT not seen before.
type fakeAuthz struct {
	slow bool
	// gate, when not nil, holds each decision made with leave to block
	// until it is closed; entered receives once for each.
	gate, entered chan struct{}
	mu            sync.Mutex
	calls         []authCall
}

var errNoToken = &codec.Error{Code: -31001, Message: "no token"}

func (a *fakeAuthz) Authorize(_ context.Context, sess *session.Session, method string, params []byte, block bool) (any, error) {
	a.mu.Lock()
	a.calls = append(a.calls, authCall{method, block})
	a.mu.Unlock()
	if c := sess.Auth(); c != nil {
		return c, nil
	}
	meta, ok, _ := codec.ObjectField(params, "_meta")
	if !ok {
		return nil, errNoToken
	}
	raw, ok, _ := codec.ObjectField(meta, "t")
	if !ok {
		return nil, errNoToken
	}
	if a.slow && !block {
		return nil, engine.ErrAuthWouldBlock
	}
	if block && a.gate != nil {
		a.entered <- struct{}{}
		<-a.gate
	}
	s, err := codec.StringValue(raw)
	if err != nil {
		return nil, errNoToken
	}
	return subject(s), nil
}

func (a *fakeAuthz) AuthorizeTool(caller any, _ string, scopes []string) error {
	if caller == subject("root") || len(scopes) == 0 {
		return nil
	}
	return &codec.Error{Code: -31003, Message: "needs " + strings.Join(scopes, " ")}
}

// take returns the questions asked since the last take.
func (a *fakeAuthz) take() []authCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.calls
	a.calls = nil
	return c
}

const statelessMetaFmt = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}%s}`

// statelessReq is a 2026-07-28 request; tok, when set, names its caller.
func statelessReq(id int, method, fields, tok string) string {
	extra := ""
	if tok != "" {
		extra = `,"t":"` + tok + `"`
	}
	if fields != "" {
		fields += ","
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{%s%s}}`, id, method, fields, fmt.Sprintf(statelessMetaFmt, extra))
}

// authFixture is a fixture whose server asks a fakeAuthz, with the tools
// whoami (served by a worker), whoami_inline (NonBlocking) and admin
// (requires the scope admin), which answer the subject of their context's
// caller.
func authFixture(t *testing.T, a *fakeAuthz, opts engine.Options) *fixture {
	opts.Authorize = a
	f := newFixture(t, opts)
	whoami := func(ctx context.Context, _ *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.TextResult("caller " + engine.SubjectOf(engine.Caller(ctx))), nil
	}
	r := f.srv.Registry()
	require.NoError(t, r.AddTool(&mcp.Tool{Name: "whoami"}, whoami))
	require.NoError(t, r.AddTool(&mcp.Tool{Name: "whoami_inline"}, whoami, handlers.ToolOptions{NonBlocking: true}))
	require.NoError(t, r.AddTool(&mcp.Tool{Name: "admin"}, whoami, handlers.ToolOptions{RequiredScopes: []string{"admin"}}))
	return f
}

// TestAuthorizeBeforeEverything: Options.Authorize is asked once about
// each request, before anything the engine answers itself (ping, list
// pages, server/discover, subscriptions/listen, tasks), in both eras; a
// refusal is the only answer. Notifications and responses are not asked
// about.
func TestAuthorizeBeforeEverything(t *testing.T) {
	a := &fakeAuthz{}
	f := authFixture(t, a, engine.Options{})
	c := f.client(t)
	for i, m := range []string{"ping", "tools/list", "resources/list", "prompts/list", "tasks/list", "tasks/get", "tools/call", "initialize"} {
		requireError(t, c.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{}}`, i, m)), fmt.Sprint(i), -31001)
	}
	for i, m := range []string{"server/discover", "tools/list", "subscriptions/listen", "tasks/get", "tasks/cancel", "tools/call", "resources/read"} {
		requireError(t, c.call(statelessReq(100+i, m, "", "")), fmt.Sprint(100+i), -31001)
	}
	c.notify(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	calls := a.take()
	assert.Len(t, calls, 15, "one question per request, none for the notification")
	for _, q := range calls {
		assert.False(t, q.block, "asked on the loop")
	}
	assert.Nil(t, c.sess.Auth())
	assert.Equal(t, session.StateNew, c.sess.State(), "nothing was served")

	// Initialize with a token: the caller becomes the session's.
	m := c.call(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"},"_meta":{"t":"alice"}}}`)
	require.Nil(t, m.Error)
	c.notify(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	assert.Equal(t, subject("alice"), c.sess.Auth())
	assert.Equal(t, "caller alice", c.call(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`).text(t))
	assert.Equal(t, "caller alice", c.call(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"whoami_inline","arguments":{}}}`).text(t))
	requireError(t, c.call(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"admin","arguments":{}}}`), "3", -31003)
	require.Nil(t, c.call(`{"jsonrpc":"2.0","id":4,"method":"ping"}`).Error)
}

// TestAuthorizeStatelessPerRequest: 2026-07-28 requests on one
// connection carry their own callers, which are not its session's:
// handlers, inline or not, see their own request's.
func TestAuthorizeStatelessPerRequest(t *testing.T) {
	a := &fakeAuthz{}
	f := authFixture(t, a, engine.Options{})
	c := f.client(t)
	for i, who := range []string{"alice", "bob", "alice"} {
		for _, tool := range []string{"whoami", "whoami_inline"} {
			m := c.call(statelessReq(i, "tools/call", `"name":"`+tool+`","arguments":{}`, who))
			assert.Equal(t, "caller "+who, m.text(t), tool)
		}
	}
	requireError(t, c.call(statelessReq(9, "tools/call", `"name":"admin","arguments":{}`, "alice")), "9", -31003)
	m := c.call(statelessReq(10, "tools/call", `"name":"admin","arguments":{}`, "root"))
	assert.Equal(t, "caller root", m.text(t))
	assert.Nil(t, c.sess.Auth(), "a request's caller is not its connection's")
}

// TestAuthorizeDeferred: what the Authorizer cannot decide on the loop is
// handed to the worker pool whole and asked again there, with leave to
// block; the loop sees the request queued. Its answer reaches a Replier's
// Final once, and the caller reaches the handler.
func TestAuthorizeDeferred(t *testing.T) {
	a := &fakeAuthz{slow: true}
	f := authFixture(t, a, engine.Options{})
	c := f.client(t)

	out := c.handle(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"},"_meta":{"t":"alice"}}}`)
	assert.Empty(t, out, "queued, not answered on the loop")
	m := c.sink.next(t)
	require.Nil(t, m.Error)
	assert.Equal(t, []authCall{{"initialize", false}, {"initialize", true}}, a.take())
	assert.Equal(t, subject("alice"), c.sess.Auth())
	c.notify(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	assert.Equal(t, "caller alice", c.call(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`).text(t))
	assert.Equal(t, []authCall{{"tools/call", false}}, a.take(), "the session's caller is decided on the loop")

	// 2026-07-28, through HandleMessage with a Replier (a transport that
	// waits for Final): each request verified on a worker.
	d := f.client(t)
	for i, tc := range []struct{ method, fields string }{
		{"tools/call", `"name":"whoami","arguments":{}`},
		{"tools/call", `"name":"whoami_inline","arguments":{}`},
		{"tools/list", ""},
		{"server/discover", ""},
	} {
		sink := newChanSink()
		serveFrame(context.Background(), f.srv.Conn(d.sess), []byte(statelessReq(i, tc.method, tc.fields, "bob")), sink)
		m := sink.next(t)
		require.Nil(t, m.Error, "%s: %+v", tc.method, m.Error)
		if tc.method == "tools/call" {
			assert.Equal(t, "caller bob", m.text(t))
		}
		assert.Equal(t, []authCall{{tc.method, false}, {tc.method, true}}, a.take())
	}
	sink := newChanSink()
	serveFrame(context.Background(), f.srv.Conn(d.sess), []byte(statelessReq(9, "tools/call", `"name":"admin","arguments":{}`, "bob")), sink)
	requireError(t, sink.next(t), "9", -31003)
}

// TestAuthorizeBigFrame: a frame served whole on the worker pool (over
// Options.BigMessage) is authorized there, once, with leave to block.
func TestAuthorizeBigFrame(t *testing.T) {
	a := &fakeAuthz{slow: true}
	f := authFixture(t, a, engine.Options{BigMessage: 8})
	c := f.client(t)
	assert.Empty(t, c.handle(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	requireError(t, c.sink.next(t), "1", -31001)
	assert.Equal(t, []authCall{{"ping", true}}, a.take())
	assert.Empty(t, c.handle(statelessReq(2, "tools/call", `"name":"whoami","arguments":{}`, "carol")))
	assert.Equal(t, "caller carol", c.sink.next(t).text(t))
	assert.Equal(t, []authCall{{"tools/call", true}}, a.take())
}

// TestAuthorizeDeferredShare: requests waiting on the worker pool for
// their authorization count against their session's -max-inflight share,
// so one unauthenticated connection cannot take the whole pool with
// tokens that are slow to verify; the share is given back once each is
// decided.
func TestAuthorizeDeferredShare(t *testing.T) {
	a := &fakeAuthz{slow: true, gate: make(chan struct{}), entered: make(chan struct{}, 8)}
	f := authFixture(t, a, engine.Options{MaxInflight: 2})
	c := f.client(t)
	for i := range 2 {
		assert.Empty(t, c.handle(statelessReq(i, "tools/list", "", "eve")))
		<-a.entered
	}
	m := parse(t, c.handle(statelessReq(2, "tools/list", "", "eve")))
	requireError(t, m, "2", codec.CodeServerBusy)
	assert.Contains(t, string(m.Error.Data), `"max-inflight"`)
	assert.Equal(t, 2, c.sess.InFlight())
	close(a.gate)
	for range 2 {
		require.Nil(t, c.sink.next(t).Error)
	}
	f.idle(t)
	require.Eventually(t, func() bool { return c.sess.InFlight() == 0 }, wait, time.Millisecond)
	assert.Equal(t, "caller eve", c.call(statelessReq(3, "tools/call", `"name":"whoami","arguments":{}`, "eve")).text(t))
}

package engine_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
	"github.com/stretchr/testify/require"
)

// TestKeepAliveClosesUnresponsiveSession runs in a synctest bubble: the
// keep-alive ticker and the ping timeouts are on its virtual clock.
func TestKeepAliveClosesUnresponsiveSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, engine.Options{KeepAlive: 50 * time.Millisecond, KeepAliveMisses: 2})
		// answering replies to every ping it receives, from before it is
		// initialized; silent never does.
		answering := f.client(t)
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			for {
				select {
				case b := <-answering.sink.ch:
					m := parse(t, b)
					if m.Method == mcp.MethodPing {
						answering.srv.Conn(answering.sess).HandleFrame(codec.AppendResult(nil, m.ID, nil), nil)
					}
				case <-stop:
					return
				}
			}
		}()
		answering.init(`{}`)
		silent := f.ready(t, `{}`)
		require.Eventually(t, func() bool { return silent.sess.State() == session.StateClosed }, wait, 5*time.Millisecond,
			"a session that misses its pings stays open")
		// The silent session was pinged, and told to forget the missed pings.
		sawPing := false
		for len(silent.sink.ch) > 0 {
			if parse(t, <-silent.sink.ch).Method == mcp.MethodPing {
				sawPing = true
			}
		}
		require.True(t, sawPing)
		time.Sleep(250 * time.Millisecond) // several more intervals, on the bubble's clock
		require.Equal(t, session.StateReady, answering.sess.State(), "a session that answers its pings was closed")
	})
}

func TestElicitationComplete(t *testing.T) {
	f := newFixture(t, engine.Options{})
	c := f.ready(t, `{"elicitation":{"url":{}}}`)
	require.NoError(t, f.srv.ElicitationComplete(c.sess.ID(), "el-1"))
	n := c.sink.next(t)
	require.Equal(t, mcp.NotificationElicitationComplete, n.Method)
	require.JSONEq(t, `{"elicitationId":"el-1"}`, string(n.Params))
	require.ErrorIs(t, f.srv.ElicitationComplete("no-such-session", "el-1"), engine.ErrUnknownSession)
}

func TestURLElicitationRequiredError(t *testing.T) {
	f := newFixture(t, engine.Options{})
	require.NoError(t, f.srv.Registry().AddTool(&mcp.Tool{Name: "needs-login"},
		func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, mcp.URLElicitationRequired("sign in first", mcp.ElicitParams{
				Message: "Sign in", URL: "https://example.com/login", ElicitationID: "el-7",
			})
		}))
	c := f.ready(t, `{"elicitation":{"url":{}}}`)
	m := c.call(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"needs-login"}}`)
	requireError(t, m, "1", codec.CodeURLElicitationNeeded)
	require.Equal(t, "sign in first", m.Error.Message)
	require.JSONEq(t, `{"elicitations":[{"mode":"url","message":"Sign in","url":"https://example.com/login","elicitationId":"el-7"}]}`, string(m.Error.Data))
}

func TestRootsListChangedCallback(t *testing.T) {
	got := make(chan string, 1)
	f := newFixture(t, engine.Options{OnRootsListChanged: func(s *session.Session) { got <- s.ID() }})
	c := f.ready(t, `{"roots":{"listChanged":true}}`)
	c.notify(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	select {
	case id := <-got:
		require.Equal(t, c.sess.ID(), id)
	case <-time.After(wait):
		t.Fatal("OnRootsListChanged not called")
	}
}

func TestCapabilitiesHaveNoNulls(t *testing.T) {
	srv := engine.New(engine.Options{})
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	caps := srv.Capabilities()
	require.NotNil(t, caps.Logging)
	require.Nil(t, caps.Tools)
	require.Nil(t, caps.Resources)
	require.Nil(t, caps.Prompts)
	require.Nil(t, caps.Completions)

	r := srv.Registry()
	require.NoError(t, r.AddTool(&mcp.Tool{Name: "t"}, func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.TextResult("x"), nil
	}))
	require.NoError(t, r.AddStaticResource(&mcp.Resource{URI: "mem://a", Name: "a"}, mcp.ResourceContents{URI: "mem://a", Text: "a"}))
	require.NoError(t, r.AddPrompt(&mcp.Prompt{Name: "p"}, func(context.Context, *handlers.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{}, nil
	}))
	r.AddPromptCompletion("p", "x", func(context.Context, *handlers.CompleteRequest) (*mcp.CompleteResult, error) {
		return &mcp.CompleteResult{}, nil
	})
	caps = srv.Capabilities()
	require.True(t, caps.Tools.ListChanged)
	require.True(t, caps.Resources.Subscribe)
	require.True(t, caps.Prompts.ListChanged)
	require.NotNil(t, caps.Completions)
	require.NotNil(t, caps.Tasks)
	body, err := codec.Marshal(&caps)
	require.NoError(t, err)
	require.False(t, strings.Contains(string(body), "null"), "capabilities hold a null: %s", body)
}

package http

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/auth"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"
)

// directAnswers records what ServeDirect answers, by token.
type directAnswers struct {
	mu  sync.Mutex
	got map[uint64]directAnswer
	ch  chan uint64
}

type directAnswer struct {
	status, retryAfter int
	body               string
}

func newDirectAnswers() *directAnswers {
	return &directAnswers{got: map[uint64]directAnswer{}, ch: make(chan uint64, 16)}
}

func (d *directAnswers) DirectAnswer(token uint64, status, retryAfter int, body []byte) {
	d.mu.Lock()
	d.got[token] = directAnswer{status, retryAfter, string(body)}
	d.mu.Unlock()
	d.ch <- token
}

// wait returns the answer of token, which must come within 5 s.
func (d *directAnswers) wait(t *testing.T, token uint64) directAnswer {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		d.mu.Lock()
		a, ok := d.got[token]
		d.mu.Unlock()
		if ok {
			return a
		}
		select {
		case <-d.ch:
		case <-deadline:
			t.Fatalf("no answer for %d", token)
		}
	}
}

// TestServeDirect: a message served without its HTTP request is answered
// with the status and body its POST has (the same message POSTed is the
// reference), or refused, having done nothing, when it is not one the
// engine answers at once or the server cannot serve it so.
func TestServeDirect(t *testing.T) {
	e := newEnv(t, envOpts{})
	sid := e.initialize()
	to := newDirectAnswers()
	for i, tc := range []struct {
		name    string
		sid     string
		msg     string
		decoded bool // give it decoded
		served  bool
		status  int
		same    bool // the body is the POST's
	}{
		{"ping", sid, `{"jsonrpc":"2.0","id":7,"method":"ping"}`, false, true, 200, true},
		{"ping decoded", sid, `{"jsonrpc":"2.0","id":8,"method":"ping"}`, true, true, 200, true},
		{"setLevel", sid, `{"jsonrpc":"2.0","id":9,"method":"logging/setLevel","params":{"level":"error"}}`, true, true, 200, true},
		{"tools/list", sid, `{"jsonrpc":"2.0","id":10,"method":"tools/list"}`, false, true, 200, true},
		{"unknown task", sid, `{"jsonrpc":"2.0","id":11,"method":"tasks/get","params":{"taskId":"nope"}}`, true, true, 200, true},
		{"notification", sid, `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`, true, true, 202, true},
		{"an answer nobody waits for", sid, `{"jsonrpc":"2.0","id":"x.1","result":{}}`, true, true, 202, true},
		{"a call for a handler", sid, `{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`, false, false, 0, false},
		{"initialize", sid, initBody, false, false, 0, false},
		{"not JSON", sid, `{"jsonrpc":"2.0","id":13,`, false, false, 0, false},
		{"a batch", sid, `[{"jsonrpc":"2.0","id":14,"method":"ping"}]`, false, false, 0, false},
		{"unknown session", "0123456789abcdef0123456789abcdef", `{"jsonrpc":"2.0","id":15,"method":"ping"}`, false, false, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &session.DirectRequest{Session: []byte(tc.sid), Message: []byte(tc.msg)}
			if tc.decoded {
				var m codec.Message
				require.NoError(t, codec.Decode(r.Message, &m))
				r.Decoded = &m
			}
			token := uint64(100 + i)
			served := e.srv.ServeDirect(r, to, token)
			require.Equal(t, tc.served, served)
			if !served {
				to.mu.Lock()
				_, answered := to.got[token]
				to.mu.Unlock()
				require.False(t, answered, "refused, yet answered")
				return
			}
			got := to.wait(t, token)
			assert.Equal(t, tc.status, got.status)
			assert.Zero(t, got.retryAfter)
			if tc.same {
				resp := e.do(t, req{sid: tc.sid, body: tc.msg})
				want := body(t, resp)
				assert.Equal(t, resp.StatusCode, got.status)
				assert.Equal(t, want, got.body)
			}
		})
	}
	sess, ok := e.eng.Sessions().Get(sid)
	require.True(t, ok)
	assert.Equal(t, mcp.LogLevelIndex("error"), sess.LogLevel(), "setLevel served directly took effect")
}

// TestServeDirectBound: with authorization, a message is served directly
// only for the subject its session is bound to; any other (or none) is
// refused, and its whole request gets the transport's 403.
func TestServeDirectBound(t *testing.T) {
	v, err := auth.New(auth.Config{Audience: "http://127.0.0.1/mcp", Tokens: []string{"token-one", "token-two"}})
	require.NoError(t, err)
	t.Cleanup(v.Close)
	e := newEnv(t, envOpts{opts: Options{Auth: v}})
	bearer := func(tok string) map[string]string {
		return map[string]string{"Authorization": "Bearer " + tok, "Mcp-Protocol-Version": ""}
	}
	resp := e.do(t, req{body: initBody, headers: bearer("token-one")})
	require.Equal(t, http.StatusOK, resp.StatusCode, body(t, resp))
	sid := resp.Header.Get("Mcp-Session-Id")
	to := newDirectAnswers()
	ping := []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	for i, tc := range []struct {
		subject string
		served  bool
	}{{"static:1", true}, {"static:2", false}, {"", false}} {
		t.Run("subject "+tc.subject, func(t *testing.T) {
			served := e.srv.ServeDirect(&session.DirectRequest{Session: []byte(sid), Subject: tc.subject, Message: ping}, to, uint64(i))
			require.Equal(t, tc.served, served)
			if served {
				assert.Equal(t, 200, to.wait(t, uint64(i)).status)
			}
		})
	}
	resp = e.do(t, req{sid: sid, body: string(ping), headers: bearer("token-two")})
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, body(t, resp))
}

// TestServeDirectRefused: a request the engine refuses for the client's
// rate is answered 429 with Retry-After, as its POST is; a server that
// is shutting down serves nothing directly.
func TestServeDirectRefused(t *testing.T) {
	e := newEnv(t, envOpts{eng: engine.Options{Rate: 0.001, RateBurst: 2}})
	sid := e.initialize() // the notification takes one of the burst
	to := newDirectAnswers()
	ping := []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	r := &session.DirectRequest{Session: []byte(sid), Message: ping}
	require.True(t, e.srv.ServeDirect(r, to, 1))
	require.Equal(t, 200, to.wait(t, 1).status)
	require.True(t, e.srv.ServeDirect(r, to, 2))
	got := to.wait(t, 2)
	assert.Equal(t, http.StatusTooManyRequests, got.status, got.body)
	assert.Positive(t, got.retryAfter)
	resp := e.do(t, req{sid: sid, body: string(ping)})
	want := body(t, resp)
	assert.Equal(t, resp.StatusCode, got.status)
	// The same refusal, but for the time it leaves to wait, which runs
	// down between the two.
	wantRetry, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	require.NoError(t, err)
	assert.InDelta(t, wantRetry, got.retryAfter, 1)
	assert.Equal(t, withoutWait(t, want), withoutWait(t, got.body))

	e.srv.closing.Store(true)
	assert.False(t, e.srv.ServeDirect(r, to, 3), "served while shutting down")
	e.srv.closing.Store(false)
}

// withoutWait returns a refusal's JSON-RPC error with its
// data.retryAfterMs left out.
func withoutWait(t *testing.T, body string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &m), body)
	e, _ := m["error"].(map[string]any)
	require.NotNil(t, e, body)
	d, _ := e["data"].(map[string]any)
	require.NotNil(t, d, body)
	require.Contains(t, d, "retryAfterMs")
	delete(d, "retryAfterMs")
	return m
}

// TestWriteDirect: a direct answer is written as the server writes its
// own: the status, Retry-After, the JSON body, compressed when large and
// the client admits it; a 202 with no body.
func TestWriteDirect(t *testing.T) {
	eng := engine.New(engine.Options{})
	srv := New(eng, Options{}) // not serving: WriteDirect needs none of it
	t.Cleanup(func() {
		_ = srv.Shutdown(context.Background())
		_ = eng.Shutdown(context.Background())
	})
	big := `{"jsonrpc":"2.0","id":1,"result":{"text":"` + strings.Repeat("x", 4096) + `"}}`
	for _, tc := range []struct {
		name           string
		status, retry  int
		body, encoding string
	}{
		{"json", 200, 0, `{"jsonrpc":"2.0","id":1,"result":{}}`, ""},
		{"refused", 429, 3, `{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"rate"}}`, ""},
		{"accepted", 202, 0, "", ""},
		{"large", 200, 0, big, "gzip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ctx fasthttp.RequestCtx
			ctx.Init(&fasthttp.Request{}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, nil)
			ctx.Request.Header.Set("Accept-Encoding", "gzip")
			srv.WriteDirect(&ctx, tc.status, tc.retry, []byte(tc.body))
			assert.Equal(t, tc.status, ctx.Response.StatusCode())
			if tc.retry > 0 {
				assert.Equal(t, strconv.Itoa(tc.retry), string(ctx.Response.Header.Peek("Retry-After")))
			}
			assert.Equal(t, tc.encoding, string(ctx.Response.Header.ContentEncoding()))
			got := ctx.Response.Body()
			if tc.encoding == "gzip" {
				zr, err := gzip.NewReader(strings.NewReader(string(got)))
				require.NoError(t, err)
				got, err = io.ReadAll(zr)
				require.NoError(t, err)
			}
			assert.Equal(t, tc.body, string(got))
			if tc.body != "" {
				assert.Equal(t, "application/json", string(ctx.Response.Header.ContentType()))
			}
		})
	}
}

// slowAuth is an Authorizer whose decision about a ping needs leave to
// block: the engine queues what it would have answered at once, and
// serves it on a worker.
type slowAuth struct{}

func (slowAuth) Authorize(_ context.Context, _ *session.Session, method string, _ []byte, block bool) (any, error) {
	if method == "ping" && !block {
		return nil, engine.ErrAuthWouldBlock
	}
	return nil, nil
}

func (slowAuth) AuthorizeTool(any, string, []string) error { return nil }

// TestServeDirectQueued: a direct message whose authorization would wait
// is queued by the engine rather than answered at once; ServeDirect
// returns at once all the same, and the answer comes later, from the
// worker, as its POST's does.
func TestServeDirectQueued(t *testing.T) {
	e := newEnv(t, envOpts{eng: engine.Options{Authorize: slowAuth{}}})
	sid := e.initialize()
	to := newDirectAnswers()
	ping := `{"jsonrpc":"2.0","id":21,"method":"ping"}`
	msg := []byte(ping)
	require.True(t, e.srv.ServeDirect(&session.DirectRequest{Session: []byte(sid), Message: msg}, to, 1))
	// The buffer it came in is the caller's again at once (a link
	// reader's, which reads the next frame into it): what the engine
	// keeps of a request it queues is a copy of its own.
	copy(msg, strings.Repeat("x", len(msg)))
	got := to.wait(t, 1)
	resp := e.do(t, req{sid: sid, body: ping})
	want := body(t, resp)
	assert.Equal(t, resp.StatusCode, got.status)
	assert.Equal(t, want, got.body)
	assert.Contains(t, got.body, `"id":21`)
}

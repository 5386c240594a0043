package http

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/require"
)

// limitOf reads the limit named by a refusal's JSON-RPC body.
func limitOf(t *testing.T, b string) string {
	t.Helper()
	var m struct {
		Error *struct {
			Code int `json:"code"`
			Data struct {
				Limit string `json:"limit"`
			} `json:"data"`
		} `json:"error"`
	}
	require.NoError(t, codec.Unmarshal([]byte(b), &m), b)
	require.NotNil(t, m.Error, b)
	require.Equal(t, codec.CodeServerBusy, m.Error.Code, b)
	return m.Error.Data.Limit
}

// The engine's limits reach an HTTP client as 429 with Retry-After and the
// JSON-RPC error as the body, not as 200.
func TestEngineLimitsAnswer429(t *testing.T) {
	t.Run("rate", func(t *testing.T) {
		e := newEnv(t, envOpts{eng: engine.Options{Rate: 0.01, RateBurst: 2}})
		sid := e.initialize() // one token; notifications take none
		resp := e.do(t, req{sid: sid, body: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`})
		require.Equal(t, http.StatusOK, resp.StatusCode, body(t, resp))
		resp = e.do(t, req{sid: sid, body: `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`})
		b := body(t, resp)
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, b)
		require.Equal(t, engine.LimitRate, limitOf(t, b))
		secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		require.NoError(t, err)
		require.GreaterOrEqual(t, secs, 90, "one token per 100 s")
	})
	t.Run("in flight", func(t *testing.T) {
		e := newEnv(t, envOpts{loopback: true, eng: engine.Options{MaxInflight: 1}})
		sid := e.initialize()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			if resp, err := e.try(ctx, req{sid: sid, body: callBody(1, "block", `{}`)}); err == nil {
				resp.Body.Close()
			}
		}()
		select {
		case <-e.tool.started:
		case <-time.After(5 * time.Second):
			t.Fatal("block did not start")
		}
		resp := e.do(t, req{sid: sid, body: callBody(2, "block", `{}`)})
		b := body(t, resp)
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, b)
		require.Equal(t, engine.LimitInflight, limitOf(t, b))
		require.NotEmpty(t, resp.Header.Get("Retry-After"))
		// Answers the engine gives itself are not in flight.
		resp = e.do(t, req{sid: sid, body: `{"jsonrpc":"2.0","id":3,"method":"ping"}`})
		require.Equal(t, http.StatusOK, resp.StatusCode, body(t, resp))
		cancel()
		<-done
	})
}

// Blocking handlers run on the engine's bounded worker pool, as on every
// transport: with the one worker busy, a second session's call waits for
// it in the fair scheduler's queue; a third, finding every queue full
// (QueueTotal), is refused 503 with the limit "workers"; answers the
// engine gives itself still come, and the queued call runs once the
// worker is free.
func TestWorkerPoolBoundsHTTP(t *testing.T) {
	e := newEnv(t, envOpts{loopback: true, eng: engine.Options{Workers: 1, QueueTotal: 1}})
	a, b, c := e.initialize(), e.initialize(), e.initialize()
	blocked := func(ctx context.Context, sid string) <-chan struct{} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			if resp, err := e.try(ctx, req{sid: sid, body: callBody(1, "block", `{}`)}); err == nil {
				resp.Body.Close()
			}
		}()
		return done
	}
	started := func(what string) {
		t.Helper()
		select {
		case <-e.tool.started:
		case <-time.After(5 * time.Second):
			t.Fatal(what + " did not start")
		}
	}
	cause := func(what string) {
		t.Helper()
		select {
		case cause := <-e.tool.causes:
			require.ErrorIs(t, cause, ErrClientGone)
		case <-time.After(5 * time.Second):
			t.Fatal(what + " was not cancelled")
		}
	}
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	doneA := blocked(ctxA, a)
	started("a's call")
	ctxB, cancelB := context.WithCancel(context.Background())
	defer cancelB()
	doneB := blocked(ctxB, b)
	require.Eventually(t, func() bool {
		_, queued := e.eng.PoolStats()
		return queued == 1
	}, 5*time.Second, time.Millisecond, "b's call waits for the worker")

	resp := e.do(t, req{sid: c, body: callBody(1, "block", `{}`)})
	body2 := body(t, resp)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, body2)
	require.Equal(t, engine.LimitWorkers, limitOf(t, body2))
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	resp = e.do(t, req{sid: c, body: `{"jsonrpc":"2.0","id":2,"method":"ping"}`})
	require.Equal(t, http.StatusOK, resp.StatusCode, body(t, resp))

	cancelA() // a goes away: its call is cancelled, the worker takes b's
	<-doneA
	cause("a's call")
	started("b's queued call")
	cancelB()
	<-doneB
	cause("b's call")
}

// Task hoarders over HTTP: a task refused for the client's share is 429
// with Retry-After, one refused because every worker tasks may use runs
// one is 503, in both revisions; never 200.
func TestTaskLimitsAnswer429(t *testing.T) {
	const tasksMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
	addLong := func(t *testing.T, e *env) {
		require.NoError(t, e.eng.Registry().AddToolWith(&mcp.Tool{Name: "long"}, func(ctx context.Context, _ *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
			<-ctx.Done()
			return nil, context.Cause(ctx)
		}, handlers.ToolOptions{TaskSupport: mcp.TaskOptional}))
	}
	stateless := func(id int) req {
		return statelessReq("tools/call", "long", fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"long","arguments":{},%s}}`, id, tasksMeta), nil)
	}
	legacy := func(sid string, id int) req {
		return req{sid: sid, body: fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"long","arguments":{},"task":{"ttl":60000}}}`, id)}
	}
	refused := func(t *testing.T, e *env, r req, status int, limit string) {
		t.Helper()
		resp := e.do(t, r)
		b := body(t, resp)
		require.Equal(t, status, resp.StatusCode, b)
		require.Equal(t, limit, limitOf(t, b))
		require.NotEmpty(t, resp.Header.Get("Retry-After"))
	}
	t.Run("client share", func(t *testing.T) {
		e := newEnv(t, envOpts{loopback: true, eng: engine.Options{MaxTasksPerClient: 2}})
		addLong(t, e)
		for id := 1; id <= 2; id++ {
			resp := e.do(t, stateless(id))
			b := body(t, resp)
			require.Equal(t, http.StatusOK, resp.StatusCode, b)
			require.Contains(t, b, `"resultType":"task"`)
		}
		refused(t, e, stateless(3), http.StatusTooManyRequests, engine.LimitTasks)
		// A session of the same address shares the share.
		sid := e.initialize()
		refused(t, e, legacy(sid, 4), http.StatusTooManyRequests, engine.LimitTasks)
	})
	t.Run("task workers", func(t *testing.T) {
		e := newEnv(t, envOpts{loopback: true, eng: engine.Options{TaskWorkers: 1}})
		addLong(t, e)
		sid := e.initialize()
		resp := e.do(t, legacy(sid, 1))
		b := body(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode, b)
		require.Contains(t, b, `"task":{`)
		refused(t, e, legacy(sid, 2), http.StatusServiceUnavailable, engine.LimitTaskWorkers)
		refused(t, e, stateless(3), http.StatusServiceUnavailable, engine.LimitTaskWorkers)
	})
}

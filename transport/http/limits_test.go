package http

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// initOnly sends initialize and nothing else, as a client filling the
// session table does; it returns the status and the session id.
func (e *env) initOnly(t *testing.T, hc *http.Client) (int, string, *http.Response) {
	t.Helper()
	hr, err := http.NewRequest(http.MethodPost, e.url, strings.NewReader(initBody))
	require.NoError(t, err)
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json, text/event-stream")
	if hc == nil {
		hc = e.hc
	}
	resp, err := hc.Do(hr)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), resp
}

// limitError checks an answer over a limit: Retry-After and a JSON-RPC
// error naming the limit.
func limitError(t *testing.T, resp *http.Response, limit string) {
	t.Helper()
	b := body(t, resp)
	assert.NotEmpty(t, resp.Header.Get("Retry-After"), b)
	var m struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Data    struct {
				Limit string `json:"limit"`
				Max   int    `json:"max"`
			} `json:"data"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(b), &m), b)
	assert.Equal(t, codeTransport, m.Error.Code)
	assert.Equal(t, limit, m.Error.Data.Limit, b)
	assert.Positive(t, m.Error.Data.Max, b)
}

// TestInitializeFloodDoesNotLockOut: a client that sends nothing but
// initialize filled the session table, and every new client was refused
// until the idle timeout (30 minutes) freed it. Sessions whose client
// never came back are evicted to make room.
func TestInitializeFloodDoesNotLockOut(t *testing.T) {
	const max = 50
	e := newEnv(t, envOpts{opts: Options{MaxSessions: max}})
	for i := 0; i < 3*max; i++ {
		status, _, resp := e.initOnly(t, nil)
		b := body(t, resp)
		require.Equal(t, http.StatusOK, status, b)
	}
	assert.Equal(t, max, e.srv.Sessions())
	sid := e.initialize() // a real client gets in
	resp := e.do(t, req{sid: sid, body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`})
	assert.Equal(t, http.StatusOK, resp.StatusCode, body(t, resp))
}

// TestFullTableOfBusySessions: when every session is busy (a stream open
// on each) there is nothing to evict: 503, Retry-After, and the limit
// named. A session never used after initialize is evicted before an idle
// one that was used.
func TestFullTableOfBusySessions(t *testing.T) {
	e := newEnv(t, envOpts{opts: Options{MaxSessions: 3}})
	var sids []string
	for i := 0; i < 3; i++ {
		sid := e.initialize()
		resp := e.do(t, req{method: http.MethodGet, sid: sid})
		require.Equal(t, http.StatusOK, resp.StatusCode)
		t.Cleanup(func() { resp.Body.Close() })
		waitFor(t, 2*time.Second, "the stream to open", e.srv.lookup([]byte(sid)).busy)
		sids = append(sids, sid)
	}
	status, _, resp := e.initOnly(t, nil)
	assert.Equal(t, http.StatusServiceUnavailable, status)
	limitError(t, resp, "max-sessions")
	for _, sid := range sids {
		assert.NotNil(t, e.srv.lookup([]byte(sid)), "busy sessions are never evicted")
	}
	// The first session waiting for its client's next request is evicted
	// before the idle ones.
	resp = e.do(t, req{method: http.MethodDelete, sid: sids[0]})
	require.Equal(t, http.StatusNoContent, resp.StatusCode, body(t, resp))
	status, pending, resp := e.initOnly(t, nil)
	require.Equal(t, http.StatusOK, status, body(t, resp))
	sid := e.initialize()
	assert.Nil(t, e.srv.lookup([]byte(pending)), "the uninitialized session made room")
	assert.NotNil(t, e.srv.lookup([]byte(sid)))
}

// TestTableHeldByPingedSessions (issue 20, defect 7): 66,000 initialize
// and one ping each from one address held the whole table: every new
// client got 503 until -session-idle, 30 minutes, as pings kept the
// sessions alive and eviction spared any session used once. Now one
// address gets a share of the table by default, and when the table is
// full anyway (the share raised, for a proxy) a new client from elsewhere
// evicts the idle session used least recently.
func TestTableHeldByPingedSessions(t *testing.T) {
	ping := func(t *testing.T, e *env, hc *http.Client, sid string) int {
		hr, err := http.NewRequest(http.MethodPost, e.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		require.NoError(t, err)
		hr.Header.Set("Content-Type", "application/json")
		hr.Header.Set("Accept", "application/json, text/event-stream")
		hr.Header.Set("Mcp-Session-Id", sid)
		hr.Header.Set("Mcp-Protocol-Version", testVersion)
		resp, err := hc.Do(hr)
		require.NoError(t, err)
		body(t, resp)
		return resp.StatusCode
	}
	// fill initializes and pings n sessions from hc, or fewer when one is
	// refused, returning them in the order they were used.
	fill := func(t *testing.T, e *env, hc *http.Client, n int) (sids []string, last int) {
		for range n {
			status, sid, resp := e.initOnly(t, hc)
			body(t, resp)
			if status != http.StatusOK {
				return sids, status
			}
			require.Equal(t, http.StatusOK, ping(t, e, hc, sid))
			sids = append(sids, sid)
		}
		return sids, http.StatusOK
	}
	t.Run("a share per address by default", func(t *testing.T) {
		e := newEnv(t, envOpts{loopback: true, opts: Options{MaxSessions: 128}})
		a, b := e.clientFrom(t, "127.0.0.2"), e.clientFrom(t, "127.0.0.3")
		sids, last := fill(t, e, a, 65)
		assert.Equal(t, 64, len(sids), "a sixteenth of the table, at least 64")
		assert.Equal(t, http.StatusTooManyRequests, last)
		status, sid, resp := e.initOnly(t, b)
		require.Equal(t, http.StatusOK, status, body(t, resp))
		assert.Equal(t, http.StatusOK, ping(t, e, b, sid))
		for _, sid := range sids {
			require.NotNil(t, e.srv.lookup([]byte(sid)), "the table was not full")
		}
	})
	t.Run("the idle session used least recently makes room", func(t *testing.T) {
		e := newEnv(t, envOpts{loopback: true, opts: Options{MaxSessions: 64, MaxSessionsPerIP: -1}})
		a, b := e.clientFrom(t, "127.0.0.2"), e.clientFrom(t, "127.0.0.3")
		sids, _ := fill(t, e, a, 64)
		require.Equal(t, 64, len(sids), "no share: one address fills the table")
		require.Equal(t, 64, e.srv.Sessions())
		for _, sid := range sids[:10] { // used again: the least recent is sids[10]
			require.Equal(t, http.StatusOK, ping(t, e, a, sid))
		}
		status, sid, resp := e.initOnly(t, b)
		require.Equal(t, http.StatusOK, status, body(t, resp))
		assert.Equal(t, http.StatusOK, ping(t, e, b, sid))
		assert.Nil(t, e.srv.lookup([]byte(sids[10])), "the least recently used session was evicted")
		assert.Equal(t, http.StatusNotFound, ping(t, e, a, sids[10]))
		for _, sid := range sids[:10] {
			assert.NotNil(t, e.srv.lookup([]byte(sid)))
		}
		assert.Equal(t, 64, e.srv.Sessions())
	})
}

// TestInitTimeoutReapsUninitializedSessions: a session whose client sent
// nothing after initialize is closed after InitTimeout, well before the
// idle timeout; one that was used stays.
func TestInitTimeoutReapsUninitializedSessions(t *testing.T) {
	e := newEnv(t, envOpts{opts: Options{InitTimeout: 200 * time.Millisecond, SessionIdle: time.Hour}})
	used := e.initialize()
	var abandoned []string
	for i := 0; i < 20; i++ {
		status, sid, resp := e.initOnly(t, nil)
		body(t, resp)
		require.Equal(t, http.StatusOK, status)
		abandoned = append(abandoned, sid)
	}
	// A session used for a request other than notifications/initialized
	// completed its initialization too.
	status, pinged, resp := e.initOnly(t, nil)
	body(t, resp)
	require.Equal(t, http.StatusOK, status)
	resp = e.do(t, req{sid: pinged, body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`})
	require.Equal(t, http.StatusOK, resp.StatusCode, body(t, resp))

	waitFor(t, 5*time.Second, "the uninitialized sessions to be reaped", func() bool { return e.srv.Sessions() == 2 })
	assert.NotNil(t, e.srv.lookup([]byte(used)))
	assert.NotNil(t, e.srv.lookup([]byte(pinged)))
	for _, sid := range abandoned {
		assert.Nil(t, e.srv.lookup([]byte(sid)))
	}
	e.srv.pending.mu.Lock()
	assert.Zero(t, len(e.srv.pending.q)-e.srv.pending.head, "the queue of uninitialized sessions is pruned")
	e.srv.pending.mu.Unlock()
}

// clientFrom returns an HTTP client whose connections come from src, a
// loopback address standing for a distinct client.
func (e *env) clientFrom(t *testing.T, src string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return d.DialContext(ctx, "tcp", e.ln.Addr().String())
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// TestMaxSessionsPerIP: one address gets at most MaxSessionsPerIP
// sessions (429 beyond), others are not affected, and a session that
// ends frees its place.
func TestMaxSessionsPerIP(t *testing.T) {
	e := newEnv(t, envOpts{loopback: true, opts: Options{MaxSessionsPerIP: 2}})
	a, b := e.clientFrom(t, "127.0.0.2"), e.clientFrom(t, "127.0.0.3")
	var sids []string
	for i := 0; i < 2; i++ {
		status, sid, resp := e.initOnly(t, a)
		require.Equal(t, http.StatusOK, status, body(t, resp))
		sids = append(sids, sid)
	}
	status, _, resp := e.initOnly(t, a)
	assert.Equal(t, http.StatusTooManyRequests, status)
	limitError(t, resp, "max-sessions-per-ip")
	// Legacy sessions count too.
	lr, err := a.Get(e.base + "/sse")
	require.NoError(t, err)
	assert.Equal(t, http.StatusTooManyRequests, lr.StatusCode)
	limitError(t, lr, "max-sessions-per-ip")

	status, _, resp = e.initOnly(t, b)
	assert.Equal(t, http.StatusOK, status, body(t, resp))

	resp = e.do(t, req{method: http.MethodDelete, sid: sids[0]})
	require.Equal(t, http.StatusNoContent, resp.StatusCode, body(t, resp))
	status, _, resp = e.initOnly(t, a)
	assert.Equal(t, http.StatusOK, status, body(t, resp))
}

// TestStreamsOutliveWriteTimeout: WriteTimeout bounds each write, not an
// SSE stream: a standalone stream idle longer than it (no keep-alive
// comments) and the SSE reply of a call longer than it both keep going.
func TestStreamsOutliveWriteTimeout(t *testing.T) {
	e := newEnv(t, envOpts{loopback: true, opts: Options{WriteTimeout: 100 * time.Millisecond, KeepAlive: -1}})
	sid := e.initialize()
	resp := e.do(t, req{method: http.MethodGet, sid: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	defer resp.Body.Close()
	s := newSSE(resp.Body)
	_, err := s.next() // priming
	require.NoError(t, err)
	time.Sleep(350 * time.Millisecond) // idle past WriteTimeout on a real socket: what is tested
	h := e.srv.lookup([]byte(sid))
	for i := 0; i < 2; i++ {
		b := codec.GetBuffer()
		b.B = codec.AppendNotification(b.B, "notifications/message", []byte(`{"level":"info","data":"late"}`))
		require.NoError(t, h.Send(b))
		ev, err := s.next()
		require.NoError(t, err)
		assert.Contains(t, ev.Data, "late")
		time.Sleep(250 * time.Millisecond) // idle past WriteTimeout again: what is tested
	}

	call := e.do(t, req{sid: sid, body: callBody(5, "count", `{"n":3,"delayMs":150}`)})
	require.Equal(t, http.StatusOK, call.StatusCode)
	evs := newSSE(call.Body).events(t)
	call.Body.Close()
	require.NotEmpty(t, evs)
	assert.Contains(t, evs[len(evs)-1].Data, "counted to 3")
}

// TestSubscriptionLimitStatus: a subscribe or listen over the session's
// subscription limit is answered 429 with Retry-After, its JSON-RPC error
// -32000 {"limit":"subscriptions"}, whether the engine refused it at
// once or on a worker (a big listen).
func TestSubscriptionLimitStatus(t *testing.T) {
	e := newEnv(t, envOpts{eng: engine.Options{MaxSubscriptions: 2}})
	check := func(t *testing.T, resp *http.Response) {
		t.Helper()
		b := body(t, resp)
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, b)
		assert.NotEmpty(t, resp.Header.Get("Retry-After"))
		a := decodeAnswer(t, b)
		require.NotNil(t, a.Error, b)
		assert.Equal(t, codec.CodeServerBusy, a.Error.Code)
		assert.JSONEq(t, `{"limit":"subscriptions"}`, string(a.Error.Data))
	}
	sid := e.initialize()
	for i := range 2 {
		resp := e.do(t, req{sid: sid, body: fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/subscribe","params":{"uri":"mem://s/%d"}}`, i, i)})
		require.Equal(t, http.StatusOK, resp.StatusCode, body(t, resp))
	}
	check(t, e.do(t, req{sid: sid, body: `{"jsonrpc":"2.0","id":9,"method":"resources/subscribe","params":{"uri":"mem://s/9"}}`}))

	for _, n := range []int{3, 100} {
		uris := make([]string, n)
		for i := range uris {
			uris[i] = strconv.Quote("mem://l/" + strconv.Itoa(i))
		}
		check(t, e.do(t, statelessReq("subscriptions/listen", "", statelessBody(n, "subscriptions/listen", `"notifications":{"resourceSubscriptions":[`+strings.Join(uris, ",")+`]}`), nil)))
	}
}

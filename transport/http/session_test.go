package http

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"
)

func TestSSEPollingReplay(t *testing.T) {
	// SEP-1699: the handler closes its stream; the client resumes with GET
	// and Last-Event-ID and gets the rest, the result included.
	e := newEnv(t, envOpts{})
	sid := e.initialize()
	resp := e.do(t, req{sid: sid, body: callBody(1, "closer", `{"delayMs":50}`), headers: map[string]string{"Mcp-Protocol-Version": "2025-03-26"}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	s := newSSE(resp.Body)
	evs := s.events(t)
	resp.Body.Close()
	require.NotEmpty(t, evs)
	assert.True(t, evs[0].HasRetry, "priming event first")
	assert.Empty(t, evs[0].Data)
	assert.Contains(t, s.raw.String(), "\n\nretry: ", "a retry hint before the stream closes")
	for _, ev := range evs {
		assert.NotContains(t, ev.Data, `"result"`, "the result comes after the stream closed")
	}
	last := evs[len(evs)-1].ID
	require.NotEmpty(t, last)

	// The handler answers meanwhile: the result is stored before the
	// request leaves the session's in-flight set.
	h := e.srv.lookup([]byte(sid))
	require.NotNil(t, h)
	waitFor(t, 5*time.Second, "the handler to answer", func() bool { return h.sess.InFlight() == 0 })
	resp = e.do(t, req{method: http.MethodGet, sid: sid, headers: map[string]string{"Last-Event-ID": last}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	replay := newSSE(resp.Body).events(t)
	resp.Body.Close()
	require.Len(t, replay, 3, "priming, progress, result")
	assert.Equal(t, last, replay[0].ID, "the priming event of a resumed stream repeats the client's position")
	assert.Contains(t, replay[1].Data, "after close")
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"reconnected"}]}}`, replay[2].Data)

	t.Run("resume while the request still runs, then live", func(t *testing.T) {
		resp := e.do(t, req{sid: sid, body: callBody(2, "closer", `{"delayMs":300}`)})
		evs := newSSE(resp.Body).events(t)
		resp.Body.Close()
		resp = e.do(t, req{method: http.MethodGet, sid: sid, headers: map[string]string{"Last-Event-ID": evs[len(evs)-1].ID}})
		require.Equal(t, http.StatusOK, resp.StatusCode)
		replay := newSSE(resp.Body).events(t)
		resp.Body.Close()
		require.Len(t, replay, 3)
		assert.Contains(t, replay[2].Data, `"id":2,"result"`)
	})
	t.Run("resume from the middle", func(t *testing.T) {
		resp := e.do(t, req{sid: sid, body: callBody(3, "count", `{"n":4}`)})
		evs := newSSE(resp.Body).events(t)
		resp.Body.Close()
		require.Len(t, evs, 6)
		resp = e.do(t, req{method: http.MethodGet, sid: sid, headers: map[string]string{"Last-Event-ID": evs[2].ID}})
		replay := newSSE(resp.Body).events(t)
		resp.Body.Close()
		require.Len(t, replay, 4, "priming and the three events after the one named")
		for i, ev := range replay[1:] {
			assert.Equal(t, evs[3+i], ev)
		}
	})
}

func TestLastEventIDErrors(t *testing.T) {
	e := newEnv(t, envOpts{opts: Options{EventStoreBytes: 2048}})
	sid := e.initialize()
	// A stream whose early events the store evicts.
	resp := e.do(t, req{sid: sid, body: callBody(9, "spam", `{"n":20,"size":300}`)})
	evs := newSSE(resp.Body).events(t)
	resp.Body.Close()
	require.Len(t, evs, 22)
	require.Contains(t, evs[21].Data, `"id":9,"result"`)

	tests := []struct {
		name, id string
		msg      string
	}{
		{"malformed", "garbage", "malformed Last-Event-ID"},
		{"malformed number", "1-x", "malformed Last-Event-ID"},
		{"unknown stream", "99-1", "unknown Last-Event-ID"},
		{"from the future", "1-999999", "unknown Last-Event-ID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := e.do(t, req{method: http.MethodGet, sid: sid, headers: map[string]string{"Last-Event-ID": tt.id}})
			b := body(t, resp)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, b)
			code, msg, id := rpcError(t, b)
			assert.Equal(t, codeTransport, code)
			assert.Contains(t, msg, tt.msg)
			assert.Equal(t, "null", string(id))
		})
	}
	t.Run("evicted events of a request end it with an error", func(t *testing.T) {
		resp := e.do(t, req{method: http.MethodGet, sid: sid, headers: map[string]string{"Last-Event-ID": evs[0].ID}})
		require.Equal(t, http.StatusOK, resp.StatusCode)
		got := newSSE(resp.Body).events(t)
		resp.Body.Close()
		require.Len(t, got, 2, "priming and the error")
		code, msg, id := rpcError(t, got[1].Data)
		assert.Equal(t, codeTransport, code)
		assert.Contains(t, msg, "evicted")
		assert.Equal(t, "9", string(id), "the error answers the request the stream carried")
	})
	t.Run("what is still stored replays", func(t *testing.T) {
		resp := e.do(t, req{method: http.MethodGet, sid: sid, headers: map[string]string{"Last-Event-ID": evs[19].ID}})
		require.Equal(t, http.StatusOK, resp.StatusCode)
		got := newSSE(resp.Body).events(t)
		resp.Body.Close()
		require.Len(t, got, 3)
		assert.Equal(t, evs[20], got[1])
		assert.Equal(t, evs[21], got[2])
	})
	h := e.srv.lookup([]byte(sid))
	t.Run("evicted standalone events", func(t *testing.T) {
		// Fill the store through the standalone stream with no GET open:
		// the first events go, and with them the POST stream above.
		for i := 0; i < 20; i++ {
			b := codec.GetBuffer()
			b.B = codec.AppendNotification(b.B, "notifications/message", []byte(`{"level":"info","data":"`+strings.Repeat("y", 300)+`"}`))
			require.NoError(t, h.Send(b))
		}
		for _, id := range []string{"0-0", evs[20].ID} {
			resp := e.do(t, req{method: http.MethodGet, sid: sid, headers: map[string]string{"Last-Event-ID": id}})
			b := body(t, resp)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, b)
			_, msg, _ := rpcError(t, b)
			assert.Contains(t, msg, "evicted")
		}
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	assert.LessOrEqual(t, h.store.bytes, 2048, "the store stays within its bound")
	assert.Empty(t, h.recs, "records of finished, evicted streams are dropped")
}

func TestStandaloneStream(t *testing.T) {
	e := newEnv(t, envOpts{opts: Options{KeepAlive: 30 * time.Millisecond}})
	sid := e.initialize()
	h := e.srv.lookup([]byte(sid))

	// Messages sent before any GET wait in the store.
	b := codec.GetBuffer()
	b.B = codec.AppendNotification(b.B, "notifications/message", []byte(`{"level":"info","data":"early"}`))
	require.NoError(t, h.Send(b))

	resp := e.do(t, req{method: http.MethodGet, sid: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	s := newSSE(resp.Body)
	prime, err := s.next()
	require.NoError(t, err)
	assert.True(t, prime.HasRetry)
	ev, err := s.next()
	require.NoError(t, err)
	assert.Contains(t, ev.Data, "early")

	// A subscription's update arrives on the stream.
	sub := e.do(t, req{sid: sid, body: `{"jsonrpc":"2.0","id":4,"method":"resources/subscribe","params":{"uri":"mem://notes/todo"}}`})
	require.Equal(t, http.StatusOK, sub.StatusCode, body(t, sub))
	call := e.do(t, req{sid: sid, body: `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"note_write","arguments":{"name":"todo","text":"x"}}}`})
	require.Equal(t, http.StatusOK, call.StatusCode, body(t, call))
	ev, err = s.next()
	require.NoError(t, err)
	assert.JSONEq(t, `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"mem://notes/todo"}}`, ev.Data)
	_, sid0, _, _ := parseEventID([]byte(ev.ID))
	assert.Zero(t, sid0, "standalone events belong to stream 0")

	// Keep-alive comments flow while idle.
	waitFor(t, 2*time.Second, "a keep-alive comment", func() bool {
		var chunk [256]byte
		n, _ := resp.Body.Read(chunk[:])
		s.raw.Write(chunk[:n])
		return strings.Contains(s.raw.String(), ": keep-alive\n")
	})
	assert.True(t, h.busy(), "an open stream keeps the session busy")

	// DELETE ends the session and its stream.
	del := e.do(t, req{method: http.MethodDelete, sid: sid})
	require.Equal(t, http.StatusNoContent, del.StatusCode, body(t, del))
	_, err = io.ReadAll(resp.Body)
	require.NoError(t, err, "the stream ends cleanly")
	resp.Body.Close()
	resp = e.do(t, req{sid: sid, body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`})
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, body(t, resp))
}

func TestSecondGETReplacesTheFirst(t *testing.T) {
	e := newEnv(t, envOpts{})
	sid := e.initialize()
	first := e.do(t, req{method: http.MethodGet, sid: sid})
	require.Equal(t, http.StatusOK, first.StatusCode)
	second := e.do(t, req{method: http.MethodGet, sid: sid})
	require.Equal(t, http.StatusOK, second.StatusCode)
	_, err := io.ReadAll(first.Body)
	require.NoError(t, err, "the first stream ends")
	first.Body.Close()
	h := e.srv.lookup([]byte(sid))
	b := codec.GetBuffer()
	b.B = codec.AppendNotification(b.B, "notifications/tools/list_changed", nil)
	require.NoError(t, h.Send(b))
	s := newSSE(second.Body)
	_, err = s.next()
	require.NoError(t, err)
	ev, err := s.next()
	require.NoError(t, err)
	assert.Contains(t, ev.Data, "list_changed")
	second.Body.Close()
}

func TestSlowConsumer(t *testing.T) {
	e := newEnv(t, envOpts{loopback: true, sndbuf: 4096, opts: Options{MaxStreamBuffer: 16 << 10, KeepAlive: -1}})
	sid := e.initialize()
	h := e.srv.lookup([]byte(sid))
	c, err := e.dial()
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.(*net.TCPConn).SetReadBuffer(4096))
	_, err = fmt.Fprintf(c, "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nMcp-Session-Id: %s\r\n\r\n", sid)
	require.NoError(t, err)
	br := bufio.NewReader(c)
	status, err := br.ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, status, "200")
	waitFor(t, 2*time.Second, "the stream to open", h.busy)

	// The client reads nothing more; the server keeps sending.
	data := []byte(`{"level":"info","data":"` + strings.Repeat("z", 1000) + `"}`)
	sent := 0
	for h.busy() && sent < 100000 {
		b := codec.GetBuffer()
		b.B = codec.AppendNotification(b.B, "notifications/message", data)
		require.NoError(t, h.Send(b))
		sent++
		if sent%64 == 0 {
			// A producer's pace, not synchronisation: the cut must come
			// from the client not reading, not from one burst outrunning
			// the writer.
			time.Sleep(time.Millisecond)
		}
	}
	waitFor(t, 5*time.Second, "the slow stream to be cut", func() bool { return !h.busy() })
	t.Logf("cut after %d messages", sent)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = io.Copy(io.Discard, br)
	assert.NoError(t, err, "the server closed the connection")
	assert.NotEqual(t, session.StateClosed, h.sess.State(), "the session lives on for a resume")
	resp := e.do(t, req{sid: sid, body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`})
	assert.Equal(t, http.StatusOK, resp.StatusCode, body(t, resp))
}

func TestLargeEventsAreNotSlowConsumers(t *testing.T) {
	tests := []struct {
		name    string
		max     int
		n, size int
	}{
		// One event far over the bound, then the result: both pass.
		{"an event over the bound", 4096, 1, 200000},
		// A burst within the bound passes however fast it comes.
		{"a burst within the bound", 0, 8, 50000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envOpts{loopback: true, opts: Options{MaxStreamBuffer: tt.max}})
			sid := e.initialize()
			resp := e.do(t, req{sid: sid, body: callBody(1, "spam", fmt.Sprintf(`{"n":%d,"size":%d}`, tt.n, tt.size))})
			require.Equal(t, http.StatusOK, resp.StatusCode)
			evs := newSSE(resp.Body).events(t)
			resp.Body.Close()
			require.Len(t, evs, tt.n+2)
			for _, ev := range evs[1 : tt.n+1] {
				assert.Greater(t, len(ev.Data), tt.size)
			}
			assert.Contains(t, evs[tt.n+1].Data, fmt.Sprintf(`"sent %d"`, tt.n))
		})
	}
}

func TestSessionBurstReaped(t *testing.T) {
	e := newEnv(t, envOpts{opts: Options{SessionIdle: 100 * time.Millisecond}})
	const n = 2000
	var wg sync.WaitGroup
	var opened atomic.Int64
	work := make(chan struct{}, n)
	for i := 0; i < n; i++ {
		work <- struct{}{}
	}
	close(work)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				resp, err := e.try(context.Background(), req{body: initBody})
				if !assert.NoError(t, err) {
					return
				}
				b := body(t, resp)
				if assert.Equal(t, http.StatusOK, resp.StatusCode, b) && assert.NotEmpty(t, resp.Header.Get("Mcp-Session-Id"), b) {
					opened.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	require.EqualValues(t, n, opened.Load())
	waitFor(t, 5*time.Second, "every abandoned session to be reaped", func() bool {
		return e.srv.Sessions() == 0 && e.eng.Sessions().Len() == 0
	})
}

// TestMaxSessions: a full table makes room for a new session by evicting
// the idle one used least recently.
func TestMaxSessions(t *testing.T) {
	e := newEnv(t, envOpts{opts: Options{MaxSessions: 3}})
	var sids []string
	for i := 0; i < 3; i++ {
		sids = append(sids, e.initialize())
	}
	resp := e.do(t, req{sid: sids[0], body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`})
	require.Equal(t, http.StatusOK, resp.StatusCode, body(t, resp))
	resp = e.do(t, req{body: initBody})
	b := body(t, resp)
	assert.Equal(t, http.StatusOK, resp.StatusCode, b)
	assert.Equal(t, 3, e.srv.Sessions())
	assert.NotNil(t, e.srv.lookup([]byte(sids[0])), "used last")
	assert.Nil(t, e.srv.lookup([]byte(sids[1])), "used least recently")
	assert.NotNil(t, e.srv.lookup([]byte(sids[2])))
}

func TestReaperSparesBusySessions(t *testing.T) {
	e := newEnv(t, envOpts{opts: Options{SessionIdle: time.Hour}})
	busy := e.initialize()
	idle := e.initialize()
	resp := e.do(t, req{method: http.MethodGet, sid: busy})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	defer resp.Body.Close()
	waitFor(t, 2*time.Second, "the stream to open", e.srv.lookup([]byte(busy)).busy)
	assert.Equal(t, 1, e.srv.reapIdle(time.Now().Add(2*time.Hour)))
	assert.NotNil(t, e.srv.lookup([]byte(busy)))
	assert.Nil(t, e.srv.lookup([]byte(idle)))
}

func TestShutdownEndsStreams(t *testing.T) {
	e := newEnv(t, envOpts{loopback: true})
	sid := e.initialize()
	resp := e.do(t, req{method: http.MethodGet, sid: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	done := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(resp.Body)
		done <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, e.srv.Shutdown(ctx))
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the stream outlived Shutdown")
	}
	resp.Body.Close()
	assert.Zero(t, e.srv.Sessions())
}

func TestListChangedReachesGETStream(t *testing.T) {
	e := newEnv(t, envOpts{})
	sid := e.initialize()
	// The session must have seen the list for a change to be announced.
	l := e.do(t, req{sid: sid, body: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`})
	require.Equal(t, http.StatusOK, l.StatusCode, body(t, l))
	resp := e.do(t, req{method: http.MethodGet, sid: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	defer resp.Body.Close()
	waitFor(t, 2*time.Second, "the stream to open", e.srv.lookup([]byte(sid)).busy)
	require.NoError(t, e.eng.Registry().AddTool(&mcp.Tool{Name: "late", Description: "added late"},
		func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.TextResult("late"), nil
		}))
	s := newSSE(resp.Body)
	_, err := s.next()
	require.NoError(t, err)
	ev, err := s.next()
	require.NoError(t, err)
	assert.JSONEq(t, `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`, ev.Data)
}

// nullSink is the Out of a session of no HTTP transport (as a TCP
// connection's would be).
type nullSink struct{}

func (nullSink) Send(b *codec.Buffer) error { codec.PutBuffer(b); return nil }

// TestServersShareEngineTable: the engine's session table is the only
// index of sessions. Two Servers on one engine, and a session of another
// transport, share it; each Server finds, reaps and shuts down only its
// own sessions.
func TestServersShareEngineTable(t *testing.T) {
	e := newEnv(t, envOpts{})
	a := e.initialize()
	// A legacy session of e.srv, open while the test runs.
	resp := e.do(t, req{method: http.MethodGet, path: "/sse", headers: map[string]string{"Mcp-Protocol-Version": ""}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	_, err := br.ReadString('\n')
	require.NoError(t, err)
	line, err := br.ReadString('\n')
	require.NoError(t, err)
	legacy := strings.TrimPrefix(strings.TrimSpace(line), "data: /message?sessionId=")
	require.Len(t, legacy, 32)
	other := e.eng.Open(nullSink{}).Session()
	defer e.eng.Conn(other).Close(nil)

	b := New(e.eng, Options{SessionIdle: time.Hour, InitTimeout: time.Hour})
	serve := func(srv *Server, sid, body string) *fasthttp.Response {
		var r fasthttp.Request
		benchRequest(&r, sid, body)
		var ctx fasthttp.RequestCtx
		ctx.Init(&r, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, nil)
		srv.Handler()(&ctx)
		var out fasthttp.Response
		ctx.Response.CopyTo(&out)
		return &out
	}
	r := serve(b, "", initBody)
	require.Equal(t, http.StatusOK, r.StatusCode(), string(r.Body()))
	bsid := string(r.Header.Peek("Mcp-Session-Id"))
	require.Len(t, bsid, 32)
	assert.Equal(t, 4, e.eng.Sessions().Len(), "one table for every transport and server")
	assert.Equal(t, 2, e.srv.Sessions(), "each server counts its own")
	assert.Equal(t, 1, b.Sessions())

	// Lookups find a session only on its own server and as its own kind.
	assert.NotNil(t, e.srv.lookup([]byte(a)))
	assert.Nil(t, b.lookup([]byte(a)), "another server's session")
	assert.Nil(t, e.srv.lookup([]byte(bsid)))
	assert.Nil(t, e.srv.lookup([]byte(other.ID())), "another transport's session")
	assert.Nil(t, e.srv.lookup([]byte(legacy)), "a legacy session is not a Streamable HTTP one")
	assert.NotNil(t, e.srv.lookupLegacy([]byte(legacy)))
	assert.Nil(t, b.lookupLegacy([]byte(legacy)))
	assert.Nil(t, e.srv.lookupLegacy([]byte(a)))
	assert.Nil(t, e.srv.lookupLegacy([]byte(other.ID())))
	r = serve(b, a, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	assert.Equal(t, http.StatusNotFound, r.StatusCode(), "another server's session id is unknown here")
	r = serve(e.srv, other.ID(), `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	assert.Equal(t, http.StatusNotFound, r.StatusCode(), "another transport's session id is unknown here")

	// b's reaper and Shutdown close b's sessions only.
	assert.Equal(t, 1, b.reapIdle(time.Now().Add(2*time.Hour)))
	assert.Zero(t, b.Sessions())
	r = serve(b, "", initBody)
	require.Equal(t, http.StatusOK, r.StatusCode(), string(r.Body()))
	bsid = string(r.Header.Peek("Mcp-Session-Id"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, b.Shutdown(ctx))
	_, ok := e.eng.Sessions().Get(bsid)
	assert.False(t, ok, "Shutdown closed b's session")
	assert.Zero(t, b.Sessions())
	assert.NotNil(t, e.srv.lookup([]byte(a)))
	assert.NotNil(t, e.srv.lookupLegacy([]byte(legacy)))
	assert.Equal(t, session.StateNew, other.State())
	assert.Equal(t, 2, e.srv.Sessions())
}

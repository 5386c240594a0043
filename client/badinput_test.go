package client_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/client"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// noLeaks checks, after every other cleanup of the test, that no goroutine
// started during it is left.
func noLeaks(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

// fakeReq is one message a scripted server read.
type fakeReq struct {
	Method string
	ID     string // raw JSON id, "" for a notification
	Line   string
}

const initResult = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"}}`

// scripted runs a newline-JSON TCP server that answers initialize and
// passes every later message to script, which writes what it likes.
// script returning false closes the connection.
func scripted(t *testing.T, script func(r fakeReq, w io.Writer) bool) string {
	return fakeServer(t, func(c net.Conn) {
		sc := bufio.NewScanner(c)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var m codec.Message
			line := sc.Text()
			if codec.Decode([]byte(line), &m) != nil {
				return
			}
			r := fakeReq{Method: m.Method, ID: string(m.ID), Line: line}
			if r.Method == "initialize" {
				fmt.Fprintf(c, `{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", r.ID, initResult)
				continue
			}
			if r.Method == "notifications/initialized" {
				continue
			}
			if !script(r, c) {
				return
			}
		}
	})
}

func TestBadServers(t *testing.T) {
	tests := []struct {
		name   string
		script func(r fakeReq, w io.Writer) bool
		opts   client.Options
		tr     func(addr string) client.Transport
		want   error
		// wantText, if set, must appear in the error.
		wantText string
	}{
		{
			name: "garbage",
			script: func(r fakeReq, w io.Writer) bool {
				io.WriteString(w, "this is not json\n")
				return true
			},
			want: client.ErrProtocol,
		},
		{
			name: "not JSON-RPC",
			script: func(r fakeReq, w io.Writer) bool {
				io.WriteString(w, `{"jsonrpc":"1.0","id":1}`+"\n")
				return true
			},
			want: client.ErrProtocol,
		},
		{
			name: "closes mid-stream",
			script: func(r fakeReq, w io.Writer) bool {
				io.WriteString(w, `{"jsonrpc":"2.0","id":`+r.ID+`,"resu`)
				return false
			},
			want:     client.ErrConnectionLost,
			wantText: "unexpected EOF",
		},
		{
			name: "closes between messages",
			script: func(r fakeReq, w io.Writer) bool {
				return false
			},
			want: client.ErrConnectionLost,
		},
		{
			name: "unknown id",
			script: func(r fakeReq, w io.Writer) bool {
				if r.ID != "" {
					io.WriteString(w, `{"jsonrpc":"2.0","id":424242,"result":{}}`+"\n")
					io.WriteString(w, `{"jsonrpc":"2.0","id":"nope","result":{}}`+"\n")
				}
				return true
			},
			opts: client.Options{Era: client.EraLegacy, RequestTimeout: 200 * time.Millisecond},
			want: client.ErrTimeout,
		},
		{
			name: "never answers",
			script: func(r fakeReq, w io.Writer) bool {
				return true
			},
			opts: client.Options{Era: client.EraLegacy, RequestTimeout: 150 * time.Millisecond},
			want: client.ErrTimeout,
		},
		{
			name: "over the size limit",
			script: func(r fakeReq, w io.Writer) bool {
				fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"pad":"%s"}}`+"\n", r.ID, strings.Repeat("x", 4096))
				return true
			},
			tr:   func(addr string) client.Transport { return &client.TCPTransport{Addr: addr, MaxMessage: 1024} },
			want: client.ErrTooLarge,
		},
		{
			name: "error without id",
			script: func(r fakeReq, w io.Writer) bool {
				io.WriteString(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`+"\n")
				return true
			},
			opts: client.Options{Era: client.EraLegacy, RequestTimeout: 150 * time.Millisecond},
			want: client.ErrTimeout,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			noLeaks(t)
			addr := scripted(t, tt.script)
			var tr client.Transport = &client.TCPTransport{Addr: addr}
			if tt.tr != nil {
				tr = tt.tr(addr)
			}
			tt.opts.Era = client.EraLegacy
			c := dial(t, tr, tt.opts)
			start := time.Now()
			_, err := c.CallTool(testCtx(t), "echo", map[string]any{"text": "x"})
			require.Error(t, err)
			require.ErrorIs(t, err, tt.want, "got %v", err)
			if tt.wantText != "" {
				assert.Contains(t, err.Error(), tt.wantText)
			}
			assert.Less(t, time.Since(start), 5*time.Second)
			require.NoError(t, c.Close())
		})
	}
}

// TestAnswersTwice: the second answer is dropped; the connection stays
// usable.
func TestAnswersTwice(t *testing.T) {
	noLeaks(t)
	addr := scripted(t, func(r fakeReq, w io.Writer) bool {
		if r.ID != "" {
			for range 2 {
				fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"ok"}]}}`+"\n", r.ID)
			}
		}
		return true
	})
	c := dial(t, &client.TCPTransport{Addr: addr}, client.Options{Era: client.EraLegacy})
	for range 3 {
		r, err := c.CallTool(testCtx(t), "echo", nil)
		require.NoError(t, err)
		assert.Equal(t, "ok", r.Content[0].Text)
	}
	require.NoError(t, c.Close())
}

// TestCancelSendsNotification: a cancelled or timed-out call tells the
// server with notifications/cancelled naming the request.
func TestCancelSendsNotification(t *testing.T) {
	noLeaks(t)
	cancelled := make(chan string, 4)
	var lastID atomic.Value
	addr := scripted(t, func(r fakeReq, w io.Writer) bool {
		switch {
		case r.Method == "notifications/cancelled":
			cancelled <- r.Line
		case r.ID != "":
			lastID.Store(r.ID)
		}
		return true
	})
	c := dial(t, &client.TCPTransport{Addr: addr}, client.Options{Era: client.EraLegacy, RequestTimeout: 100 * time.Millisecond})

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	err := c.Ping(ctx)
	require.ErrorIs(t, err, context.Canceled)
	select {
	case line := <-cancelled:
		assert.Contains(t, line, `"requestId":`+lastID.Load().(string))
	case <-time.After(5 * time.Second):
		t.Fatal("no notifications/cancelled after a cancelled call")
	}

	err = c.Ping(context.Background())
	require.ErrorIs(t, err, client.ErrTimeout)
	select {
	case line := <-cancelled:
		assert.Contains(t, line, `"requestId":`+lastID.Load().(string))
		assert.Contains(t, line, "timed out")
	case <-time.After(5 * time.Second):
		t.Fatal("no notifications/cancelled after a timed-out call")
	}
	require.NoError(t, c.Close())
}

// TestPendingFailOnDrop: every pending call fails at once, with the
// cause, when the connection drops.
func TestPendingFailOnDrop(t *testing.T) {
	noLeaks(t)
	drop := make(chan struct{})
	var seen atomic.Int64
	addr := scripted(t, func(r fakeReq, w io.Writer) bool {
		if r.ID != "" && seen.Add(1) == 20 {
			<-drop
			return false
		}
		return true
	})
	c := dial(t, &client.TCPTransport{Addr: addr}, client.Options{Era: client.EraLegacy, RequestTimeout: -1})
	errs := make(chan error, 20)
	for range 20 {
		go func() { errs <- c.Ping(context.Background()) }()
	}
	require.Eventually(t, func() bool { return c.InFlight() == 20 }, 5*time.Second, time.Millisecond)
	close(drop)
	for range 20 {
		select {
		case err := <-errs:
			require.ErrorIs(t, err, client.ErrConnectionLost)
		case <-time.After(5 * time.Second):
			t.Fatal("a pending call did not fail after the drop")
		}
	}
	<-c.Done()
	require.ErrorIs(t, c.Err(), client.ErrConnectionLost)
	require.NoError(t, c.Close())
}

func TestInitFailures(t *testing.T) {
	tests := []struct {
		name   string
		answer func(id string) string
		want   error
	}{
		{"timeout", func(string) string { return "" }, client.ErrInitTimeout},
		{"unsupported version", func(id string) string {
			return `{"jsonrpc":"2.0","id":` + id + `,"result":{"protocolVersion":"1999-01-01","capabilities":{},"serverInfo":{"name":"x","version":"1"}}}`
		}, client.ErrUnsupportedVersion},
		{"error", func(id string) string {
			return `{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32600,"message":"go away"}}`
		}, &codec.Error{}},
		{"garbage result", func(id string) string {
			return `{"jsonrpc":"2.0","id":` + id + `,"result":[1,2]}`
		}, client.ErrProtocol},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			noLeaks(t)
			addr := fakeServer(t, func(c net.Conn) {
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					var m codec.Message
					if codec.Decode(sc.Bytes(), &m) == nil && m.Method == "initialize" {
						if a := tt.answer(string(m.ID)); a != "" {
							io.WriteString(c, a+"\n")
						}
					}
				}
			})
			c := client.New(&client.TCPTransport{Addr: addr}, client.Options{Era: client.EraLegacy, InitTimeout: 200 * time.Millisecond})
			start := time.Now()
			err := c.Connect(context.Background())
			require.Error(t, err)
			if ce, ok := tt.want.(*codec.Error); ok {
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, "go away", ce.Message)
			} else {
				require.ErrorIs(t, err, tt.want, "got %v", err)
			}
			assert.Less(t, time.Since(start), 3*time.Second)
			assert.Equal(t, client.StateClosed, c.State())
			require.NoError(t, c.Close())
		})
	}
}

// TestHTTPBadServers covers the same failures over Streamable HTTP.
func TestHTTPBadServers(t *testing.T) {
	tests := []struct {
		name  string
		reply func(w http.ResponseWriter, id string)
		opts  client.Options
		max   int
		want  error
	}{
		{"garbage JSON", func(w http.ResponseWriter, id string) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, "{{{{")
		}, client.Options{Era: client.EraLegacy}, 0, client.ErrProtocol},
		{"garbage SSE", func(w http.ResponseWriter, id string) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: nope\n\n")
		}, client.Options{Era: client.EraLegacy}, 0, client.ErrProtocol},
		{"stream closed before the answer", func(w http.ResponseWriter, id string) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"x\"}}\n\n")
		}, client.Options{Era: client.EraLegacy}, 0, client.ErrStreamEnded},
		{"too large", func(w http.ResponseWriter, id string) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"pad":"%s"}}`, id, strings.Repeat("y", 4096))
		}, client.Options{Era: client.EraLegacy}, 1024, client.ErrTooLarge},
		{"never answers", func(w http.ResponseWriter, id string) {
			time.Sleep(time.Second) // a server slower than RequestTimeout: what is tested
		}, client.Options{Era: client.EraLegacy, RequestTimeout: 150 * time.Millisecond}, 0, client.ErrTimeout},
		{"server error", func(w http.ResponseWriter, id string) {
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, "boom")
		}, client.Options{Era: client.EraLegacy}, 0, &client.HTTPError{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			noLeaks(t)
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodPost {
					w.WriteHeader(http.StatusMethodNotAllowed)
					return
				}
				body, _ := io.ReadAll(r.Body)
				switch {
				case strings.Contains(string(body), `"initialize"`):
					w.Header().Set("Content-Type", "application/json")
					fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, idOf(body), initResult)
				case strings.Contains(string(body), `"id"`):
					tt.reply(w, idOf(body))
				default:
					w.WriteHeader(http.StatusAccepted)
				}
			}))
			t.Cleanup(func() {
				hs.CloseClientConnections()
				hs.Close()
			})
			hc := &http.Client{Transport: &http.Transport{}}
			t.Cleanup(hc.CloseIdleConnections)
			c := dial(t, &client.HTTPTransport{URL: hs.URL, Client: hc, MaxMessage: tt.max}, tt.opts)
			_, err := c.CallTool(testCtx(t), "echo", nil)
			require.Error(t, err)
			if he, ok := tt.want.(*client.HTTPError); ok {
				require.ErrorAs(t, err, &he)
				assert.Equal(t, http.StatusInternalServerError, he.StatusCode)
			} else {
				require.ErrorIs(t, err, tt.want, "got %v", err)
			}
			require.NoError(t, c.Close())
		})
	}
}

package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/stretchr/testify/require"
)

// fakeAnswer builds the right answer to a bench-workload request, so that
// fakes misbehave only where a test says.
func fakeAnswer(msg *codec.Message) []byte {
	var out []byte
	switch msg.Method {
	case "initialize":
		return codec.AppendResult(out, msg.ID, []byte(`{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"fake","version":"0"}}`))
	case "tools/call":
		var p struct {
			Name      string `json:"name"`
			Arguments struct {
				Text string `json:"text"`
			} `json:"arguments"`
		}
		_ = codec.Unmarshal(msg.Params, &p)
		res := append([]byte(`{"content":[{"type":"text","text":`), codec.AppendString(nil, p.Arguments.Text)...)
		res = append(res, "}]}"...)
		return codec.AppendResult(out, msg.ID, res)
	case "resources/read":
		return codec.AppendResult(out, msg.ID, []byte(`{"contents":[{"uri":"mem://hello","text":"hello"}]}`))
	}
	return codec.AppendResult(out, msg.ID, []byte(`{}`))
}

// fakeTCP serves newline JSON-RPC on a loopback port: initialize is always
// answered right, everything else by serve, which returns the lines to
// write (nil: nothing) or close to drop the connection.
type fakeTCP struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]bool
}

type fakeReply struct {
	lines [][]byte
	close bool
	delay time.Duration
}

func startFakeTCP(t *testing.T, serve func(c net.Conn, msg *codec.Message, raw []byte) fakeReply) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := &fakeTCP{ln: ln, conns: map[net.Conn]bool{}}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.conns[c] = true
			f.mu.Unlock()
			f.wg.Add(1)
			go func() {
				defer f.wg.Done()
				defer c.Close()
				br := bufio.NewReader(c)
				var wmu sync.Mutex
				for {
					line, err := br.ReadBytes('\n')
					if err != nil {
						return
					}
					var msg codec.Message
					if codec.Decode(bytes.TrimSpace(line), &msg) != nil || msg.Kind != codec.KindRequest {
						continue
					}
					var rep fakeReply
					if msg.Method == "initialize" {
						rep.lines = [][]byte{fakeAnswer(&msg)}
					} else {
						rep = serve(c, &msg, line)
					}
					if rep.close {
						return
					}
					write := func() {
						wmu.Lock()
						defer wmu.Unlock()
						for _, l := range rep.lines {
							_, _ = c.Write(append(l, '\n'))
						}
					}
					if rep.delay > 0 {
						go func() {
							time.Sleep(rep.delay) // a slow answer is what the fake was asked for
							write()
						}()
						continue
					}
					write()
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		f.mu.Lock()
		for c := range f.conns {
			c.Close()
		}
		f.mu.Unlock()
		f.wg.Wait()
	})
	return "tcp://" + ln.Addr().String()
}

// fakeHTTP serves Streamable HTTP at /mcp: initialize is answered right
// with a session id, notifications 202, requests by serve.
func startFakeHTTP(t *testing.T, serve func(w http.ResponseWriter, msg *codec.Message)) string {
	return startFakeHTTPWith(t, "s", func(w http.ResponseWriter, _ *http.Request, msg *codec.Message) { serve(w, msg) })
}

// startFakeHTTPWith is startFakeHTTP with the session ids it hands out
// starting with prefix, and the request at hand for serve.
func startFakeHTTPWith(t *testing.T, prefix string, serve func(w http.ResponseWriter, r *http.Request, msg *codec.Message)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var n int
	var mu sync.Mutex
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			w.WriteHeader(http.StatusOK)
			return
		}
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(r.Body)
		var msg codec.Message
		if err := codec.Decode(buf.Bytes(), &msg); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		switch {
		case msg.Kind == codec.KindNotification:
			w.WriteHeader(http.StatusAccepted)
		case msg.Method == "initialize":
			mu.Lock()
			n++
			id := prefix + strconv.Itoa(n)
			mu.Unlock()
			w.Header().Set("Mcp-Session-Id", id)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(fakeAnswer(&msg))
		default:
			serve(w, r, &msg)
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		_ = srv.Close()
	})
	return "http://" + ln.Addr().String() + "/mcp"
}

func writeJSON(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

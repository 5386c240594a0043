package engine_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers/builtin"
	"github.com/mcpedge/mcpedge/session"
)

// The engine's entry points are fuzzed with whole frames in every lifecycle
// state of the session they arrive on. The corpus is seeded with the frames
// clients really sent: testdata/traffic.jsonl holds the messages of a run of
// the official conformance suite (Streamable HTTP) and of the TypeScript SDK
// interop tests (stdio) against bin/mcpedge, one per line.
//
// Every input must leave the server without a panic (recovered ones
// included: Panics stays 0), and everything it sends must be JSON.

const (
	stateNew = iota
	stateInitializing
	stateReady
	stateClosed
	stateStateless // a stateless exchange (a 2026-07-28 HTTP POST)
	numStates
)

func trafficSeeds(f *testing.F) [][]byte {
	f.Helper()
	data, err := os.ReadFile("testdata/traffic.jsonl")
	if err != nil {
		f.Fatal(err)
	}
	var seeds [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 {
			seeds = append(seeds, append([]byte(nil), line...))
		}
	}
	if len(seeds) == 0 {
		f.Fatal("testdata/traffic.jsonl holds no frame")
	}
	// Hostile variants: invalid UTF-8 in a string, a truncated frame.
	seeds = append(seeds,
		[]byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"prompts/get\",\"params\":{\"name\":\"greet\",\"arguments\":{\"name\":\"a\xffb\"}}}"),
		[]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","argu`),
	)
	// The stateless revision (2026-07-28): discovery, a call, a multi
	// round-trip request and its retry, a listen stream, bad _meta.
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{},"elicitation":{},"roots":{}},"io.modelcontextprotocol/logLevel":"debug","traceparent":"00-1-2-01"}`
	seeds = append(seeds,
		[]byte(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+meta+`}}`),
		[]byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_simple_text","arguments":{},`+meta+`}}`),
		[]byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"test_sampling","arguments":{"prompt":"p"},`+meta+`}}`),
		[]byte(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"test_sampling","arguments":{"prompt":"p"},"inputResponses":{"sampling-1":{"role":"assistant","content":{"type":"text","text":"x"},"model":"m"}},"requestState":"e30.AAAA",`+meta+`}}`),
		[]byte(`{"jsonrpc":"2.0","id":5,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true,"resourceSubscriptions":["test://watched-resource"]},`+meta+`}}`),
		[]byte(`{"jsonrpc":"2.0","id":6,"method":"resources/read","params":{"uri":"test://nope",`+meta+`}}`),
		[]byte(`{"jsonrpc":"2.0","id":7,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"v9"}}}`),
		[]byte(`{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`),
	)
	// Tasks of both revisions: creation, and the methods on a handle.
	const tasksMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
	seeds = append(seeds,
		[]byte(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"slow_compute","arguments":{"seconds":0.01},`+tasksMeta+`}}`),
		[]byte(`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"test_tool_with_task","arguments":{},`+tasksMeta+`}}`),
		[]byte(`{"jsonrpc":"2.0","id":11,"method":"tasks/update","params":{"taskId":"x.y","inputResponses":{"elicitation-1":{"action":"accept"}},`+tasksMeta+`}}`),
		[]byte(`{"jsonrpc":"2.0","id":12,"method":"tasks/get","params":{"taskId":"x.y",`+tasksMeta+`}}`),
		[]byte(`{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"slow_compute","arguments":{"seconds":0.01},"task":{"ttl":1000}}}`),
		[]byte(`{"jsonrpc":"2.0","id":14,"method":"tasks/result","params":{"taskId":"x.y"}}`),
		[]byte(`{"jsonrpc":"2.0","id":15,"method":"tasks/list","params":{"cursor":"MQ"}}`),
	)
	return seeds
}

// jsonSink checks that everything sent through it is one JSON value.
type jsonSink struct {
	bad atomic.Pointer[[]byte]
}

func (s *jsonSink) Send(b *codec.Buffer) error {
	if !json.Valid(b.B) {
		c := append([]byte(nil), b.B...)
		s.bad.Store(&c)
	}
	codec.PutBuffer(b)
	return nil
}

func fuzzServer(f *testing.F) *engine.Server {
	srv := engine.New(engine.Options{ClientRequestTimeout: 50 * time.Millisecond, BigMessage: 512, MaxMessage: 1 << 20})
	// The conformance set answers what the recorded traffic calls; the demo
	// set adds tools with progress, notes and subscriptions.
	for _, set := range []string{"conformance", "demo"} {
		if err := builtin.Install(set, srv.Registry(), builtin.Env{ResourceUpdated: srv.ResourceUpdated}); err != nil {
			f.Fatal(err)
		}
	}
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return srv
}

// sessionIn returns a session of srv in the lifecycle state st.
func sessionIn(srv *engine.Server, st uint8, sink session.Sink) *session.Session {
	if st%numStates == stateStateless {
		return srv.OpenStateless(sink).Session()
	}
	sess := srv.Open(sink).Session()
	if st%numStates >= stateInitializing {
		srv.Conn(sess).HandleFrame([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{},"elicitation":{},"roots":{}},"clientInfo":{"name":"fuzz","version":"1"}}}`), nil)
	}
	if st%numStates >= stateReady {
		srv.Conn(sess).HandleFrame([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), nil)
	}
	if st%numStates == stateClosed {
		srv.Conn(sess).Close(errors.New("fuzz: closed first"))
	}
	return sess
}

// settle closes sess, waits (boundedly) for the pool to finish its work,
// and fails on a recovered panic or a message that is not JSON.
func settle(t *testing.T, srv *engine.Server, sess *session.Session, sink *jsonSink) {
	srv.Conn(sess).Close(errors.New("fuzz: input done"))
	for deadline := time.Now().Add(2 * time.Second); srv.Active() > 0 && time.Now().Before(deadline); {
		runtime.Gosched()
	}
	if n := srv.Panics(); n != 0 {
		t.Fatalf("%d panic(s) recovered (see the log)", n)
	}
	if b := sink.bad.Load(); b != nil {
		t.Fatalf("sent a message that is not JSON: %q", *b)
	}
}

func FuzzHandleFrame(f *testing.F) {
	for i, seed := range trafficSeeds(f) {
		f.Add(seed, uint8(i))
	}
	srv := fuzzServer(f)
	f.Fuzz(func(t *testing.T, frame []byte, state uint8) {
		sink := &jsonSink{}
		sess := sessionIn(srv, state, sink)
		out := srv.Conn(sess).HandleFrame(frame, nil)
		if len(out) > 0 && !json.Valid(out) {
			t.Fatalf("answer is not JSON: %q", out)
		}
		settle(t, srv, sess, sink)
	})
}

func FuzzHandleMessage(f *testing.F) {
	for i, seed := range trafficSeeds(f) {
		f.Add(seed, uint8(i))
	}
	srv := fuzzServer(f)
	f.Fuzz(func(t *testing.T, frame []byte, state uint8) {
		sink := &jsonSink{}
		sess := sessionIn(srv, state, sink)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		serveFrame(ctx, srv.Conn(sess), frame, sink)
		settle(t, srv, sess, sink)
	})
}

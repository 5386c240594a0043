package main

import (
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/internal/testserver"
	"github.com/mcpedge/mcpedge/transport/tcp"
)

// TestRequestTail pins the bytes after a request's id in both revisions.
func TestRequestTail(t *testing.T) {
	for protocol, want := range map[string]string{
		protocolSession: `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}` + "\n",
		protocolStateless: `,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
			`"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"refclient","version":"1"}},` +
			`"name":"echo","arguments":{"text":"hi"}}}` + "\n",
	} {
		if got := string(requestTail(protocol, "hi")); got != want {
			t.Errorf("%s:\n got %s\nwant %s", protocol, got, want)
		}
	}
}

// TestRunBothRevisions runs refclient briefly against mcpedge in process
// in each revision: answers come, none an error, none unmatched.
func TestRunBothRevisions(t *testing.T) {
	addr, _ := testserver.TCP(t, testserver.Engine(t, "bench", engine.Options{}), tcp.Options{Loops: 1})
	for _, protocol := range []string{protocolSession, protocolStateless} {
		res, err := run(&options{addr: addr, conns: 2, inflight: 4, duration: 200 * time.Millisecond, warmup: 50 * time.Millisecond,
			timeout: 5 * time.Second, text: "refclient abc 1", protocol: protocol})
		if err != nil {
			t.Fatalf("%s: %v", protocol, err)
		}
		if res.Requests == 0 || res.Errors != 0 || res.Unmatched != 0 || res.Protocol != protocol {
			t.Errorf("%s: %+v", protocol, res)
		}
	}
}

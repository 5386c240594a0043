package engine_test

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestShutdownUnderLoad calls Shutdown while requests keep arriving on
// several goroutines: every request is answered exactly once (a result
// before the drain began, a busy error after) and Shutdown returns.
//
// Under -race it fails while HandleFrame checks Server.closing and then
// calls inflight.Add(1) (engine/dispatch.go) with nothing ordering that Add
// before the inflight.Wait that Shutdown starts (engine/engine.go): a
// sync.WaitGroup Add from zero concurrent with Wait is a misuse, reported
// as a data race, and a request admitted in that window is not drained.
func TestShutdownUnderLoad(t *testing.T) {
	f := newFixture(t, engine.Options{})
	const senders = 4
	var wg sync.WaitGroup
	stop := make(chan struct{})
	sent := make([]int, senders)
	clients := make([]*client, senders)
	for i := range clients {
		clients[i] = f.ready(t, `{}`)
	}
	// Shutdown begins once every sender is under way, and they go on
	// sending through it until it has returned (stop) or they have sent
	// as many requests as their sinks hold answers.
	var underWay sync.WaitGroup
	underWay.Add(senders)
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[g]
			var out []byte
			for i := 0; i < cap(c.sink.ch)-96; i++ {
				select {
				case <-stop:
					return
				default:
				}
				frame := []byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`)
				out = f.srv.Conn(c.sess).HandleFrame(frame, out[:0])
				if len(out) > 0 {
					c.sink.ch <- append([]byte(nil), out...)
				}
				sent[g]++
				if i == 64 {
					underWay.Done()
				}
			}
		}()
	}
	underWay.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	require.NoError(t, f.srv.Shutdown(ctx))
	close(stop)
	wg.Wait()
	for g, c := range clients {
		got := 0
		for len(c.sink.ch) > 0 {
			m := parse(t, <-c.sink.ch)
			if m.Error != nil {
				assert.Contains(t, []int{codec.CodeServerBusy, codec.CodeInvalidRequest}, m.Error.Code, "%+v", m.Error)
			}
			got++
		}
		assert.Equal(t, sent[g], got, "sender %d: every request answered once", g)
	}
}

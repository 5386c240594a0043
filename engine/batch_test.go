package engine_test

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/require"
)

// initAt initializes c at revision version.
func (c *client) initAt(version string) {
	c.t.Helper()
	m := c.call(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	require.Nil(c.t, m.Error, "initialize: %+v", m.Error)
	c.notify(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// batchAnswer reads a batch's answer: out when it was given at once, else
// the next message sent.
func (c *client) batchAnswer(out []byte) []msg {
	c.t.Helper()
	if len(out) == 0 {
		select {
		case out = <-c.sink.ch:
		case <-timeAfterWait():
			c.t.Fatal("no batch answer")
		}
	}
	require.Equal(c.t, byte('['), out[0], "not an array: %s", out)
	var raw []codec.RawJSON
	require.NoError(c.t, codec.Unmarshal(out, &raw))
	ms := make([]msg, len(raw))
	for i, r := range raw {
		ms[i] = parse(c.t, r)
	}
	sort.Slice(ms, func(i, j int) bool { return string(ms[i].ID) < string(ms[j].ID) })
	return ms
}

func TestBatch(t *testing.T) {
	f := newFixture(t, engine.Options{})
	const (
		ping   = `{"jsonrpc":"2.0","id":1,"method":"ping"}`
		echo   = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`
		notif  = `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}`
		unknow = `{"jsonrpc":"2.0","id":4,"method":"no/such"}`
	)
	t.Run("2025-03-26 answered with an array", func(t *testing.T) {
		c := f.client(t)
		c.initAt(mcp.Version20250326)
		ms := c.batchAnswer(c.handle(" [" + ping + "," + echo + "," + notif + "," + unknow + ",42]"))
		require.Len(t, ms, 4)
		require.Equal(t, "1", string(ms[0].ID))
		require.Nil(t, ms[0].Error)
		require.Equal(t, "2", string(ms[1].ID))
		require.Equal(t, "hi", ms[1].text(t))
		requireError(t, ms[2], "4", codec.CodeMethodNotFound)
		requireError(t, ms[3], "null", codec.CodeInvalidRequest) // 42 is no message
		c.sink.none(t, 50*time.Millisecond)
	})
	t.Run("queued requests", func(t *testing.T) {
		c := f.client(t)
		c.initAt(mcp.Version20250326)
		frame := "["
		for i := 1; i <= 20; i++ {
			if i > 1 {
				frame += ","
			}
			frame += fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"slow","arguments":{"tag":"b%d"}}}`, i, i)
		}
		require.Empty(t, c.handle(frame+"]"))
		for range 20 {
			<-f.started
		}
		close(f.release)
		ms := c.batchAnswer(nil)
		require.Len(t, ms, 20)
		for _, m := range ms {
			require.Nil(t, m.Error)
		}
	})
	t.Run("all notifications: no answer", func(t *testing.T) {
		c := f.client(t)
		c.initAt(mcp.Version20250326)
		require.Empty(t, c.handle("["+notif+","+notif+"]"))
		c.sink.none(t, 50*time.Millisecond)
	})
	for _, version := range []string{"", mcp.Version20241105, mcp.Version20250618, mcp.Version20251125} {
		t.Run("refused at "+version, func(t *testing.T) {
			c := f.client(t)
			if version != "" {
				c.initAt(version)
			}
			requireError(t, parse(t, c.handle("["+ping+"]")), "null", codec.CodeInvalidRequest)
		})
	}
	t.Run("empty array refused", func(t *testing.T) {
		c := f.client(t)
		c.initAt(mcp.Version20250326)
		requireError(t, parse(t, c.handle("[]")), "null", codec.CodeInvalidRequest)
		require.Equal(t, byte('{'), c.handle("[1,")[0]) // not JSON: -32700
	})
	t.Run("non-batch frames unchanged", func(t *testing.T) {
		c := f.client(t)
		c.initAt(mcp.Version20250326)
		require.Nil(t, c.call(ping).Error)
		require.Nil(t, c.call(" \n"+ping).Error)
	})
}

func TestVersionGating(t *testing.T) {
	f := newFixture(t, engine.Options{Name: "n", Title: "Edge", Version: "1"})
	init := func(version string) (mcp.InitializeResult, *client) {
		c := f.client(t)
		m := c.call(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		require.Nil(t, m.Error)
		var res mcp.InitializeResult
		require.NoError(t, codec.Unmarshal(m.Result, &res))
		c.notify(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		return res, c
	}
	for _, tc := range []struct {
		version      string
		tasks, title bool
		progressMsg  bool
	}{
		{mcp.Version20241105, false, false, false},
		{mcp.Version20250326, false, false, true},
		{mcp.Version20250618, false, true, true},
		{mcp.Version20251125, true, true, true},
	} {
		t.Run(tc.version, func(t *testing.T) {
			res, c := init(tc.version)
			require.Equal(t, tc.tasks, res.Capabilities.Tasks != nil)
			require.Equal(t, tc.title, res.ServerInfo.Title == "Edge")
			require.NotNil(t, res.Capabilities.Tools)

			// Progress: message only from 2025-03-26.
			require.Empty(t, c.handle(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"progress","_meta":{"progressToken":"p"}}}`))
			n := c.sink.next(t)
			require.Equal(t, mcp.NotificationProgress, n.Method)
			var p struct {
				Message *string `json:"message"`
			}
			require.NoError(t, codec.Unmarshal(n.Params, &p))
			require.Equal(t, tc.progressMsg, p.Message != nil, "params %s", n.Params)
			for {
				if m := c.sink.next(t); m.Method == "" {
					break
				}
			}

			// A task-augmented call of a client before tasks is a plain call.
			m := c.call(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},"task":{"ttl":1000}}}`)
			if tc.tasks {
				require.NotNil(t, m.Error, "result %s", m.Result) // echo does not support tasks
			} else {
				require.Equal(t, "x", m.text(t))
			}
		})
	}
}

func timeAfterWait() <-chan time.Time { return time.After(wait) }

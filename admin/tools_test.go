package admin_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/admin"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tcpSession is an initialized MCP session over TCP.
type tcpSession struct {
	t  *testing.T
	c  net.Conn
	r  *bufio.Reader
	id int
}

func dialSession(t *testing.T, addr string) *tcpSession {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	s := &tcpSession{t: t, c: c, r: bufio.NewReader(c)}
	assert.Contains(t, s.call("initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`), `"result"`)
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return s
}

func (s *tcpSession) send(line string) {
	_, err := io.WriteString(s.c, line+"\n")
	require.NoError(s.t, err)
}

func (s *tcpSession) call(method, params string) string {
	s.t.Helper()
	s.id++
	s.send(`{"jsonrpc":"2.0","id":` + strconv.Itoa(s.id) + `,"method":"` + method + `","params":` + params + `}`)
	_ = s.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	ans, err := s.r.ReadString('\n')
	require.NoError(s.t, err)
	return ans
}

func (s *tcpSession) tool(name, args string) string {
	s.t.Helper()
	return s.call("tools/call", `{"name":`+strconv.Quote(name)+`,"arguments":`+args+`}`)
}

// TestToolSeries: known calls give the per-tool series, labelled by tool
// and upstream and bounded by the registry: inline and pool-served tools,
// ok, isError, a JSON-RPC error, a refusal, an unknown name (other), a
// panic, a tool behind an upstream, and a tool removed (dropped).
func TestToolSeries(t *testing.T) {
	s := serve(t)
	reg := s.srv.Registry()
	text := func(_ context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.TextResult("done"), nil
	}
	require.NoError(t, reg.AddTool(&mcp.Tool{Name: "slow"}, text))
	require.NoError(t, reg.AddTool(&mcp.Tool{Name: "fails"}, func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, errors.New("the tool failed")
	}))
	require.NoError(t, reg.AddTool(&mcp.Tool{Name: "bad"}, func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, codec.NewError(codec.CodeInvalidParams, "no such thing")
	}))
	require.NoError(t, reg.AddTool(&mcp.Tool{Name: "boom"}, func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		panic("boom")
	}))
	require.NoError(t, reg.AddTool(&mcp.Tool{Name: "up/search"}, text, handlers.ToolOptions{Upstream: "up"}))

	c := dialSession(t, s.tcp)
	for range 3 {
		assert.Contains(t, c.tool("echo", `{"text":"hi"}`), `"hi"`) // NonBlocking: on the event loop
	}
	assert.Contains(t, c.tool("echo", `{"text":5}`), `"isError":true`) // fails its schema: a result with isError
	for range 2 {
		assert.Contains(t, c.tool("slow", `{}`), `"done"`) // on the worker pool
	}
	assert.Contains(t, c.tool("fails", `{}`), `"isError":true`)
	assert.Contains(t, c.tool("bad", `{}`), `-32602`)
	assert.Contains(t, c.tool("boom", `{}`), `-32603`)
	assert.Contains(t, c.tool("up/search", `{}`), `"done"`)
	for i := range 4 {
		assert.Contains(t, c.tool("nope-"+strconv.Itoa(i), `{}`), `-32602`) // unknown names: one series, other
	}

	// A refusal: the rate limit refuses before the params are read.
	l := s.srv.Engine().Limits()
	l.Rate, l.RateBurst = 0.001, 1
	s.srv.Engine().SetLimits(l)
	assert.Contains(t, c.tool("slow", `{}`), `"done"`)
	assert.Contains(t, c.tool("slow", `{}`), `"limit":"rate"`)
	l.Rate, l.RateBurst = 0, 0
	s.srv.Engine().SetLimits(l)

	got := scrape(t, s.admin)
	want := map[string]float64{
		`mcpedge_tool_calls_total{tool="echo",upstream="",outcome="ok"}`:              3,
		`mcpedge_tool_calls_total{tool="echo",upstream="",outcome="tool_error"}`:      1,
		`mcpedge_tool_calls_total{tool="slow",upstream="",outcome="ok"}`:              3,
		`mcpedge_tool_calls_total{tool="slow",upstream="",outcome="refused"}`:         1,
		`mcpedge_tool_calls_total{tool="fails",upstream="",outcome="tool_error"}`:     1,
		`mcpedge_tool_calls_total{tool="bad",upstream="",outcome="invalid_params"}`:   1,
		`mcpedge_tool_calls_total{tool="boom",upstream="",outcome="internal_error"}`:  1,
		`mcpedge_tool_calls_total{tool="up/search",upstream="up",outcome="ok"}`:       1,
		`mcpedge_tool_calls_total{tool="other",upstream="",outcome="invalid_params"}`: 4,
		// Pool-served calls are all timed.
		`mcpedge_tool_duration_seconds_count{tool="fails",upstream=""}`:       1,
		`mcpedge_tool_duration_seconds_count{tool="up/search",upstream="up"}`: 1,
	}
	for series, n := range want {
		assert.Equal(t, n, got[series], series)
	}
	// slow's three pool-served calls are timed; its refusal, answered at
	// once, is sampled (one in 16), so it may be timed too.
	for _, series := range []string{
		`mcpedge_tool_duration_seconds_count{tool="slow",upstream=""}`,
		`mcpedge_tool_duration_seconds_bucket{tool="slow",upstream="",le="+Inf"}`,
	} {
		assert.Contains(t, []float64{3, 4}, got[series], series)
	}
	assert.Equal(t, got[`mcpedge_tool_duration_seconds_count{tool="slow",upstream=""}`],
		got[`mcpedge_tool_duration_seconds_bucket{tool="slow",upstream="",le="+Inf"}`], "the +Inf bucket is the count")
	var total float64
	for series, v := range got {
		if strings.HasPrefix(series, "mcpedge_tool_calls_total{") {
			total += v
			assert.NotContains(t, series, "nope", "unknown names are other")
		}
	}
	assert.Equal(t, 16.0, total, "every call counted once")
	assert.Equal(t, got[`mcpedge_requests_total{transport="tcp",method="tools/call"}`], total, "as many as tools/call requests")
	assert.LessOrEqual(t, got[`mcpedge_tool_duration_seconds_count{tool="echo",upstream=""}`], 4.0, "calls on the event loop are sampled")

	// A tool removed is dropped; registered again, it starts from zero.
	reg.RemoveTools("fails")
	got = scrape(t, s.admin)
	for series := range got {
		assert.NotContains(t, series, `tool="fails"`)
	}
	assert.Equal(t, 3.0, got[`mcpedge_tool_calls_total{tool="slow",upstream="",outcome="ok"}`], "the others keep theirs")
	assert.Contains(t, c.tool("fails", `{}`), `-32602`)
	assert.Equal(t, 5.0, scrape(t, s.admin)[`mcpedge_tool_calls_total{tool="other",upstream="",outcome="invalid_params"}`], "now unknown: other")
}

// TestToolSeriesUnderChanges: calls counted while the registry changes
// (the table rebuilt under them) are all counted, under a name registered
// or other.
func TestToolSeriesUnderChanges(t *testing.T) {
	m := admin.NewMetrics()
	reg := handlers.NewRegistry(handlers.Options{})
	m.TrackTools(reg)
	sess := session.New(context.Background(), nil)
	text := func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.TextResult("x"), nil
	}
	const callers, calls = 4, 2000
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				m.ToolDone(sess, "t"+strconv.Itoa(i%4), 0, false, time.Microsecond)
			}
		}()
	}
	for i := range 200 {
		name := "t" + strconv.Itoa(i%4)
		if i%2 == 0 {
			require.NoError(t, reg.AddTool(&mcp.Tool{Name: name}, text))
		} else {
			reg.RemoveTools(name)
		}
	}
	wg.Wait()
	st := m.Status(context.Background(), nil)
	var n uint64
	for _, ts := range st.Tools {
		n += ts.Calls
	}
	// Calls counted under a tool removed meanwhile are dropped with it:
	// only the tools registered at the end, and other, remain.
	assert.LessOrEqual(t, n, uint64(callers*calls))
	var names []string
	for _, ts := range st.Tools {
		names = append(names, ts.Tool)
	}
	assert.Subset(t, []string{"t0", "t1", "t2", "t3", "other"}, names)

	// Settled: each call counts once under its tool.
	require.NoError(t, reg.AddTool(&mcp.Tool{Name: "t0"}, text))
	calls0 := func() uint64 {
		for _, ts := range m.Status(context.Background(), nil).Tools {
			if ts.Tool == "t0" {
				return ts.Calls
			}
		}
		return 0
	}
	before := calls0()
	for range 10 {
		m.ToolDone(sess, "t0", 0, false, -1)
	}
	assert.Equal(t, before+10, calls0())
}

package cluster_test

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/cluster"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/handlers/builtin"
	"github.com/mcpedge/mcpedge/mcp"
	mcphttp "github.com/mcpedge/mcpedge/transport/http"
	"github.com/valyala/fasthttp"
)

// benchNode is a node whose HTTP handler the benchmark calls directly:
// no client sockets, so what is measured is the node's own work and, for
// a forwarded request, the trip through NATS to the owner and back.
type benchNode struct {
	n *cluster.Node
	h fasthttp.RequestHandler
}

func newBenchNode(b *testing.B, name string, routes []string, link bool) *benchNode {
	o := cluster.Options{Node: name, Embed: "127.0.0.1:0", Routes: routes, Keys: [][]byte{stateKey}}
	if link {
		o.Link = "127.0.0.1:0"
	}
	n, err := cluster.Start(context.Background(), o)
	if err != nil {
		b.Fatal(err)
	}
	eng := engine.New(engine.Options{Name: "bench", Bus: n.Bus(), NodeID: n.Name()})
	if err := builtin.Install("bench", eng.Registry(), builtin.Env{}); err != nil {
		b.Fatal(err)
	}
	// job may run as a task: a task of the session, at its home.
	if err := eng.Registry().AddToolWith(&mcp.Tool{Name: "job", InputSchema: []byte(`{"type":"object"}`)},
		func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.TextResult("done"), nil
		},
		handlers.ToolOptions{TaskSupport: mcp.TaskOptional}); err != nil {
		b.Fatal(err)
	}
	hs := mcphttp.New(eng, mcphttp.Options{Addr: "127.0.0.1:0", Route: n.Route, Cluster: n})
	n.Attach(hs)
	n.Serve(hs.Handler())
	b.Cleanup(func() {
		_ = hs.Shutdown(context.Background())
		_ = eng.Shutdown(context.Background())
		_ = n.Close()
	})
	return &benchNode{n: n, h: hs.Handler()}
}

// linkIO sums the frames and the writes of the nodes' direct links.
func linkIO(nds ...*benchNode) (frames, writes uint64) {
	for _, nd := range nds {
		st := nd.n.Stats()
		frames += st.LinkFrames
		writes += st.LinkWrites
	}
	return frames, writes
}

var benchAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}

// do serves one POST on nd and returns its status.
func (nd *benchNode) do(ctx *fasthttp.RequestCtx, req *fasthttp.Request) int {
	ctx.Init(req, benchAddr, nil)
	nd.h(ctx)
	st := ctx.Response.StatusCode()
	ctx.Response.Reset()
	return st
}

func request(sid, body string) *fasthttp.Request {
	req := new(fasthttp.Request)
	req.Header.SetMethod("POST")
	req.SetRequestURI("http://127.0.0.1/mcp")
	req.Header.SetHost("127.0.0.1")
	req.Header.SetContentType("application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	req.SetBodyString(body)
	return req
}

// BenchmarkForward measures what a node does with a request of a session
// whose home is another node. Parallel, as real traffic is.
//
//   - home, replica: tools/call of echo served by the session's home, and
//     by another node (a replica, from the session's record): an
//     ordinary request is served where it lands, at the same cost.
//   - local, forwarded: tasks/get of a task of the session, served by the
//     task's node, and landing on another node, which forwards it there:
//     the difference is the cost of forwarding.
//
// forwarded goes on the nodes' direct link; forwarded-nats through NATS
// (nodes without a link).
func BenchmarkForward(b *testing.B) {
	b.Run("link", func(b *testing.B) { benchForward(b, true) })
	b.Run("nats", func(b *testing.B) { benchForward(b, false) })
}

func benchForward(b *testing.B, link bool) {
	a := newBenchNode(b, "a", nil, link)
	bn := newBenchNode(b, "b", []string{"nats-route://" + a.n.RouteAddr().String()}, link)
	deadline := time.Now().Add(10 * time.Second)
	for a.n.Routes() == 0 || bn.n.Routes() == 0 {
		if time.Now().After(deadline) {
			b.Fatal("no route")
		}
		time.Sleep(10 * time.Millisecond)
	}
	var ctx fasthttp.RequestCtx
	ctx.Init(request("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`), benchAddr, nil)
	a.h(&ctx)
	sid := string(ctx.Response.Header.Peek("Mcp-Session-Id"))
	if sid == "" {
		b.Fatal("no session")
	}
	if st := a.do(&ctx, request(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)); st != 202 {
		b.Fatal(st)
	}
	ctx.Init(request(sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"job","arguments":{},"task":{"ttl":600000}}}`), benchAddr, nil)
	a.h(&ctx)
	task := ctx.Response.Body()
	i := bytes.Index(task, []byte(`"taskId":"`))
	if i < 0 {
		b.Fatalf("no task: %s", task)
	}
	task = task[i+len(`"taskId":"`):]
	id := string(task[:bytes.IndexByte(task, '"')])
	ctx.Response.Reset()
	echo := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`
	get := `{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"` + id + `"}}`
	// Wait until b knows the session and reaches a's subjects (and its
	// link).
	for bn.do(&ctx, request(sid, get)) != 200 || bn.n.Stats().Forwarded == 0 || link && bn.n.Stats().ForwardedLink == 0 {
		if time.Now().After(deadline) {
			b.Fatal("b does not forward to a")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, bc := range []struct {
		name string
		nd   *benchNode
		body string
	}{{"home", a, echo}, {"replica", bn, echo}, {"local", a, get}, {"forwarded", bn, get}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(32) // forwarding waits on the network: keep requests in flight
			frames, writes := linkIO(a, bn)
			reportCPU(b, func() {
				b.RunParallel(func(pb *testing.PB) {
					var ctx fasthttp.RequestCtx
					req := request(sid, bc.body)
					for pb.Next() {
						if st := bc.nd.do(&ctx, req); st != 200 {
							b.Errorf("status %d", st)
							return
						}
					}
				})
			})
			if f, w := linkIO(a, bn); w > writes {
				b.ReportMetric(float64(f-frames)/float64(w-writes), "frames/write")
			}
		})
	}
}

// BenchmarkReplicaFirstCall measures the first request of a session on a
// node that does not hold it yet: under round-robin each node pays it
// once per session (the record looked up, the session rebuilt from it and
// held), so short sessions pay it on most of their requests. The sessions
// are opened on a, their records awaited at b, and each one's first
// tools/call served by b; opening and ending them is outside the timer
// and the CPU count. Against BenchmarkForward/*/replica (a session b
// holds already), the difference is what holding a session costs.
func BenchmarkReplicaFirstCall(b *testing.B) {
	b.StopTimer() // started again around the first calls only
	a := newBenchNode(b, "a", nil, true)
	bn := newBenchNode(b, "b", []string{"nats-route://" + a.n.RouteAddr().String()}, true)
	deadline := time.Now().Add(10 * time.Second)
	for a.n.Routes() == 0 || bn.n.Routes() == 0 {
		if time.Now().After(deadline) {
			b.Fatal("no route")
		}
		time.Sleep(10 * time.Millisecond)
	}
	const batch = 500
	var ctx fasthttp.RequestCtx
	initReq := request("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`)
	echo := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`
	sids := make([]string, 0, batch)
	var cpu time.Duration
	b.ReportAllocs()
	for done := 0; done < b.N; {
		sids = sids[:0]
		for range min(batch, b.N-done) {
			ctx.Init(initReq, benchAddr, nil)
			a.h(&ctx)
			sid := string(ctx.Response.Header.Peek("Mcp-Session-Id"))
			if sid == "" {
				b.Fatalf("no session: %s", ctx.Response.Body())
			}
			if st := a.do(&ctx, request(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)); st != 202 {
				b.Fatal(st)
			}
			sids = append(sids, sid)
		}
		for bn.n.Stats().Records < a.n.Stats().Records {
			if time.Now().After(deadline.Add(time.Minute)) {
				b.Fatal("records do not reach b")
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond) // and their next revision (ready): the time of a client's round trip
		reqs := make([]*fasthttp.Request, len(sids))
		for i, sid := range sids {
			reqs[i] = request(sid, echo)
		}
		start := cpuClock()
		b.StartTimer()
		for _, req := range reqs {
			if st := bn.do(&ctx, req); st != 200 {
				b.Fatalf("status %d", st)
			}
		}
		b.StopTimer()
		cpu += cpuClock() - start
		for _, sid := range sids {
			del := request(sid, "")
			del.Header.SetMethod("DELETE")
			a.do(&ctx, del)
		}
		done += len(sids)
	}
	b.ReportMetric(float64(cpu)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
}

package cluster_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
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
	a, bn, sid, echo, get := forwardPair(b, link)
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

// BenchmarkHop measures what forwarding adds to a request against the
// floor (docs/cluster.md, "A cheaper hop"), in one run, at 1, 8 and 64
// requests in flight. Four paths, each in chunks of calls taken in turn
// until each made b.N calls, so that the machine's drift weighs on all of
// them alike:
//
//   - local: a tasks/get of a session's task, served by the task's node;
//   - forwarded: the same, landing on the other node, which sends it to
//     the task's node on their direct link, as a direct message;
//   - floor: a bare request and answer of the same sizes over one TCP
//     connection (BenchmarkFloorDirect's), its callers doing nothing
//     else;
//   - loaded floor: local, then the floor's round trip: the bare round
//     trip of callers that do the same work as a forwarded request's.
//
// It reports each one's CPU per call (medians of the rounds), the hop
// (forwarded less local: what forwarding adds to a request), the loaded
// floor's (loaded floor less local), and the hop's ratio to each floor.
func BenchmarkHop(b *testing.B) {
	a, bn, sid, _, get := forwardPair(b, true)
	l := startFloorDirect(b)
	floorReq := make([]byte, floorRequest)
	node := func(nd *benchNode) func() func() bool {
		return func() func() bool {
			var ctx fasthttp.RequestCtx
			req := request(sid, get)
			return func() bool {
				if st := nd.do(&ctx, req); st != 200 {
					b.Errorf("status %d", st)
					return false
				}
				return true
			}
		}
	}
	local, forwarded := node(a), node(bn)
	floor := func() func() bool {
		ch := make(chan []byte, 1)
		return func() bool {
			if err := l.call(floorReq, ch); err != nil {
				b.Error(err)
				return false
			}
			return true
		}
	}
	loaded := func() func() bool {
		lo, fl := local(), floor()
		return func() bool { return lo() && fl() }
	}
	paths := []func() func() bool{local, forwarded, floor, loaded}
	for _, inFlight := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("in-flight=%d", inFlight), func(b *testing.B) {
			// run makes calls calls with inFlight goroutines, each with
			// the function its own call of mk returns, and returns their
			// CPU per call, in µs.
			run := func(calls int, mk func() func() bool) float64 {
				var next atomic.Int64
				var wg sync.WaitGroup
				start := cpuClock()
				for range inFlight {
					wg.Add(1)
					go func() {
						defer wg.Done()
						one := mk()
						for next.Add(1) <= int64(calls) {
							if !one() {
								return
							}
						}
					}()
				}
				wg.Wait()
				return float64(cpuClock()-start) / float64(time.Microsecond) / float64(calls)
			}
			chunk := 300 * inFlight
			direct := bn.n.Stats().ForwardedDirect
			frames, writes := linkIO(a, bn)
			var floorFrames, floorWrites uint64
			var rounds [4][]float64 // each round's CPU per call, µs, by path
			b.ResetTimer()
			for done := 0; done < b.N; done += chunk {
				k := min(chunk, b.N-done)
				for i, path := range paths {
					w := l.writes.Load()
					rounds[i] = append(rounds[i], run(k, path))
					if i == 2 {
						floorFrames, floorWrites = floorFrames+2*uint64(k), floorWrites+l.writes.Load()-w
					}
				}
			}
			b.StopTimer()
			if got := bn.n.Stats().ForwardedDirect - direct; got < uint64(b.N) {
				b.Fatalf("%d of %d forwards went as direct messages", got, b.N)
			}
			if f, w := linkIO(a, bn); w > writes {
				b.ReportMetric(float64(f-frames)/float64(w-writes), "link-frames/write")
			}
			if floorWrites > 0 {
				b.ReportMetric(float64(floorFrames)/float64(floorWrites), "floor-frames/write")
			}
			// Medians of the rounds: a round the machine slowed weighs no
			// more than one.
			var med [4]float64
			for i := range rounds {
				med[i] = median(slices.Clone(rounds[i]))
			}
			var hops, loadedHops []float64
			for r := range rounds[0] {
				hop := rounds[1][r] - rounds[0][r]
				hops = append(hops, hop/rounds[2][r])
				loadedHops = append(loadedHops, hop/(rounds[3][r]-rounds[0][r]))
			}
			b.ReportMetric(med[0], "local-cpu-µs/op")
			b.ReportMetric(med[1], "forwarded-cpu-µs/op")
			b.ReportMetric(med[2], "floor-cpu-µs/op")
			b.ReportMetric(med[3]-med[0], "loaded-floor-cpu-µs/op")
			b.ReportMetric(med[1]-med[0], "hop-cpu-µs/op")
			b.ReportMetric(median(hops), "hop/floor")
			b.ReportMetric(median(loadedHops), "hop/loaded-floor")
		})
	}
}

// median returns the median of v (which it sorts), 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}

// forwardPair starts two nodes, a and bn, routed to each other (with
// direct links when link), opens a session on a, makes it a task, and
// waits until bn forwards the task's tasks/get to a. It returns the
// session's id, a tools/call of echo and that tasks/get.
func forwardPair(b *testing.B, link bool) (a, bn *benchNode, sid, echo, get string) {
	a = newBenchNode(b, "a", nil, link)
	bn = newBenchNode(b, "b", []string{"nats-route://" + a.n.RouteAddr().String()}, link)
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
	sid = string(ctx.Response.Header.Peek("Mcp-Session-Id"))
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
	echo = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`
	get = `{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"` + id + `"}}`
	// Wait until b knows the session and reaches a's subjects (and its
	// link).
	for bn.do(&ctx, request(sid, get)) != 200 || bn.n.Stats().Forwarded == 0 || link && bn.n.Stats().ForwardedLink == 0 {
		if time.Now().After(deadline) {
			b.Fatal("b does not forward to a")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return a, bn, sid, echo, get
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

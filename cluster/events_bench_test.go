package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/cluster"
)

// BenchmarkEventKept measures what one SSE event costs the cluster
// (cluster/events.go): every event a node issues for a session is signed
// and published on <prefix>.ev, and every other node checks it and keeps
// a copy for resumption.
//
//   - issue: the issuing node's Event (encode, sign, publish to its
//     embedded server), with a second node routed and keeping every
//     event; cpu-µs/op is the whole process's, both nodes and their
//     nats-servers, waited for until the other node has kept them all.
//   - keep: the receiving node's part alone, on a message already
//     signed: the signature, the checks, the copy into its store.
func BenchmarkEventKept(b *testing.B) {
	start := func(name string, routes []string) *cluster.Node {
		n, err := cluster.Start(context.Background(), cluster.Options{Node: name, Embed: "127.0.0.1:0", Routes: routes, Keys: [][]byte{stateKey}})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = n.Close() })
		return n
	}
	a := start("ea", nil)
	c := start("eb", []string{"nats-route://" + a.RouteAddr().String()})
	deadline := time.Now().Add(10 * time.Second)
	for a.Routes() == 0 || c.Routes() == 0 {
		if time.Now().After(deadline) {
			b.Fatal("no route")
		}
		time.Sleep(10 * time.Millisecond)
	}
	const sid = "ea.4f9c2d0e8b7a6c5d"
	reqID := []byte("7")
	data := []byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"7","progress":3,"total":10,"message":"step 3 of 10"}}`)
	// The other node keeps a's events once it hears of a: wait for it.
	for seq := uint64(1); c.Stats().EventsIn == 0; seq++ {
		if time.Now().After(deadline) {
			b.Fatal("the events are not kept")
		}
		a.Event(sid, 1, seq, reqID, false, data)
		time.Sleep(10 * time.Millisecond)
	}
	b.Run("issue", func(b *testing.B) {
		b.ReportAllocs()
		in := c.Stats().EventsIn
		reportCPU(b, func() {
			for i := 0; i < b.N; i++ {
				a.Event(sid, 1, uint64(i)+1000, reqID, false, data)
			}
			for c.Stats().EventsIn < in+uint64(b.N) {
				if st := a.Stats(); st.BusDropped > 0 {
					b.Fatalf("events dropped: %+v", st)
				}
				time.Sleep(time.Millisecond)
			}
		})
	})
	b.Run("keep", func(b *testing.B) {
		m := a.EventMessage(sid, 2, 1, reqID, false, data)
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		reportCPU(b, func() {
			for i := 0; i < b.N; i++ {
				c.KeepEvent(m)
			}
		})
	})
}

// Command bigstall measures what a big message costs the other connections
// of its event loop: one connection sends big echo calls back to back while
// another, on the same event loop, pings every millisecond; it prints the
// pings' latency percentiles. Run it against mcpedge -loops 1:
//
//	mcpedge -tcp 127.0.0.1:7400 -http "" -loops 1 &
//	cd bench && go run ./cmd/bigstall -addr 127.0.0.1:7400 -d 6s
package main

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"time"
)

func initConn(addr string) (net.Conn, *bufio.Reader) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		panic(err)
	}
	r := bufio.NewReaderSize(c, 1<<20)
	fmt.Fprintf(c, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`+"\n"+`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	if _, err := r.ReadBytes('\n'); err != nil {
		panic(err)
	}
	return c, r
}

func main() {
	addr := flag.String("addr", "127.0.0.1:47400", "")
	size := flag.Int("size", 3900<<10, "")
	dur := flag.Duration("d", 10*time.Second, "")
	tool := flag.String("tool", "echo", "")
	flag.Parse()
	if *size <= 0 || *dur <= 0 {
		fmt.Fprintln(os.Stderr, "bigstall: -size and -d must be positive")
		os.Exit(2)
	}
	stop := time.Now().Add(*dur)
	big := 0
	go func() {
		c, r := initConn(*addr)
		text := strings.Repeat("x", *size)
		line := []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":{"text":%q}}}`+"\n", *tool, text))
		for time.Now().Before(stop) {
			if _, err := c.Write(line); err != nil {
				fmt.Fprintln(os.Stderr, "big:", err)
				return
			}
			if _, err := r.ReadBytes('\n'); err != nil {
				fmt.Fprintln(os.Stderr, "big:", err)
				return
			}
			big++
		}
	}()
	c, r := initConn(*addr)
	var lat []time.Duration
	for i := 2; time.Now().Before(stop); i++ {
		t0 := time.Now()
		fmt.Fprintf(c, `{"jsonrpc":"2.0","id":%d,"method":"ping"}`+"\n", i)
		if _, err := r.ReadBytes('\n'); err != nil {
			panic(err)
		}
		lat = append(lat, time.Since(t0))
		time.Sleep(time.Millisecond)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p := func(q float64) time.Duration { return lat[int(q*float64(len(lat)-1))] }
	fmt.Printf("big calls %d, pings %d: p50 %v p99 %v p99.9 %v max %v\n", big, len(lat), p(0.5), p(0.99), p(0.999), lat[len(lat)-1])
}

// Command profile serves the bench workload with mcpedge's engine and
// transports in process, under runtime/pprof, while a child process (this
// same binary) puts mcpload's load on it; it writes the server's CPU
// profile, and optionally a heap profile after opening idle sessions.
//
//	cd bench && go run ./cmd/profile -transport http -c 64 -duration 5s -cpuprofile /tmp/http.pprof
//	go tool pprof -top /tmp/http.pprof
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers/builtin"
	"github.com/mcpedge/mcpedge/loadtest"
	mcphttp "github.com/mcpedge/mcpedge/transport/http"
	"github.com/mcpedge/mcpedge/transport/tcp"
)

// loadEnv makes the binary the load generator: its value is the target.
const loadEnv = "PROFILE_LOAD_TARGET"

func main() {
	transport := flag.String("transport", "http", "http or tcp")
	conns := flag.Int("c", 64, "connections")
	inflight := flag.Int("inflight", 1, "requests in flight per connection (pipelined)")
	duration := flag.Duration("duration", 5*time.Second, "profiled load")
	warmup := flag.Duration("warmup", time.Second, "load before profiling starts")
	cpuOut := flag.String("cpuprofile", "cpu.pprof", "CPU profile `file`")
	heapOut := flag.String("heapprofile", "", "if set, open -sessions idle sessions after the load and write a heap profile to `file`")
	sessions := flag.Int("sessions", 5000, "idle sessions for -heapprofile")
	flag.Parse()
	if t := os.Getenv(loadEnv); t != "" {
		loadgen(t, *conns, *inflight, *duration, *warmup, *sessions)
		return
	}

	srv := engine.New(engine.Options{})
	if err := builtin.Install("bench", srv.Registry(), builtin.Env{}); err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	addr := ln.Addr().String()
	var target string
	var stop func(context.Context) error
	switch *transport {
	case "http":
		hs := mcphttp.New(srv, mcphttp.Options{Addr: addr})
		go func() { _ = hs.Serve(context.Background(), ln) }()
		target, stop = "http://"+addr+"/mcp", hs.Shutdown
	case "tcp":
		ln.Close()
		ts := tcp.New(srv, tcp.Options{Addr: addr, Loops: runtime.NumCPU()})
		go func() { _ = ts.ListenAndServe(context.Background()) }()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if ts.Addr(ctx) == nil {
			log.Fatal("tcp server did not start")
		}
		cancel()
		target, stop = "tcp://"+addr, ts.Shutdown
	default:
		log.Fatalf("-transport %q: http or tcp", *transport)
	}

	exe, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	args := []string{"-c", strconv.Itoa(*conns), "-inflight", strconv.Itoa(*inflight), "-duration", duration.String(), "-warmup", warmup.String(), "-sessions", strconv.Itoa(*sessions)}
	if *heapOut != "" {
		args = append(args, "-heapprofile", "child")
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), loadEnv+"="+target)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		log.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	dec := json.NewDecoder(stdout)
	var mark struct{ Phase string }
	// The child says when the measured phase starts and when it ends.
	for dec.Decode(&mark) == nil && mark.Phase != "measure" {
	}
	f, err := os.Create(*cpuOut)
	if err != nil {
		log.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		log.Fatal(err)
	}
	var res loadtest.Result
	for dec.Decode(&mark) == nil && mark.Phase != "done" {
	}
	pprof.StopCPUProfile()
	f.Close()
	if err := dec.Decode(&res); err == nil {
		l := res.Latency
		if l == nil {
			l = &loadtest.LatencyStats{}
		}
		fmt.Printf("%s c=%d: %.0f req/s, p50 %.0fµs p99 %.0fµs, %d errors; CPU profile in %s\n",
			target, *conns, res.Throughput, l.P50, l.P99, res.Errors, *cpuOut)
	}
	if *heapOut != "" {
		for dec.Decode(&mark) == nil && mark.Phase != "sessions" {
		}
		runtime.GC()
		h, err := os.Create(*heapOut)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.WriteHeapProfile(h); err != nil {
			log.Fatal(err)
		}
		h.Close()
		fmt.Printf("heap profile with %d idle sessions open in %s\n", *sessions, *heapOut)
		_ = stdout.Close()
	}
	_ = cmd.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = stop(ctx)
	_ = srv.Shutdown(ctx)
}

// loadgen is the child: it reports phases on stdout as JSON lines.
func loadgen(spec string, conns, inflight int, duration, warmup time.Duration, sessions int) {
	target, err := loadtest.ParseTarget(spec)
	if err != nil {
		log.Fatal(err)
	}
	enc := json.NewEncoder(os.Stdout)
	go func() {
		time.Sleep(warmup)
		_ = enc.Encode(map[string]string{"Phase": "measure"})
	}()
	res, err := loadtest.Run(context.Background(), loadtest.Config{Target: target, Connections: conns, InFlight: inflight, Duration: duration, Warmup: warmup})
	if err != nil {
		log.Fatal(err)
	}
	_ = enc.Encode(map[string]string{"Phase": "done"})
	_ = enc.Encode(res)
	if flag.Lookup("heapprofile").Value.String() == "child" {
		// Open idle sessions and hold them while the parent writes its heap
		// profile (it closes our stdout when done).
		// The settle time, read on the parent, is the parent's window.
		_, _ = loadtest.RunSessions(context.Background(), loadtest.SessionsConfig{
			Target: target, Sessions: sessions, Settle: 4 * time.Second, PID: os.Getppid(),
			Progress: func(n int) {
				if n >= sessions {
					_ = enc.Encode(map[string]string{"Phase": "sessions"})
				}
			},
		})
	}
}

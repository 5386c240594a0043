package main

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcpedge/mcpedge/loadtest"
)

type sessionRow struct {
	transport, name string
	res             *loadtest.Result
}

type profileData struct {
	transport, headline string
	cum, flat, heap     string
}

type reportData struct {
	cfg          *config
	began, ended time.Time
	points       []*point
	sessions     []sessionRow
	profiles     []profileData
	micro        string
}

// The goals mcpedge is held to, against the floor of the same run.
const (
	goalCPU     = 1.5  // server CPU per request, at most this times the floor's
	goalRPS     = 0.9  // requests/s, at least this share of the floor's
	goalP99     = 1.2  // p99, at most this times the floor's
	goalSession = 2048 // resident bytes per idle session
	goalConns   = 64
)

func (r *reportData) find(tr, name string, conns int) *point {
	for _, p := range r.points {
		if p.transport == tr && p.name == name && p.conns == conns {
			return p
		}
	}
	return nil
}

func rps(r *loadtest.Result) float64 { return r.Throughput }
func p50(r *loadtest.Result) float64 { return lat(r).P50 }
func p99(r *loadtest.Result) float64 { return lat(r).P99 }
func errs(r *loadtest.Result) float64 {
	return float64(r.Errors)
}

func fmtUS(v float64) string {
	switch {
	case v == 0:
		return "-"
	case v < 1000:
		return strconv.FormatFloat(v, 'f', 0, 64) + " µs"
	case v < 1e6:
		return strconv.FormatFloat(v/1e3, 'f', 2, 64) + " ms"
	}
	return strconv.FormatFloat(v/1e6, 'f', 2, 64) + " s"
}

func ratio(a, b float64) string {
	if a == 0 || b == 0 || math.IsNaN(a/b) {
		return "-"
	}
	return strconv.FormatFloat(a/b, 'f', 2, 64) + "×"
}

func (r *reportData) markdown() string {
	c := r.cfg
	var b strings.Builder
	fmt.Fprintf(&b, "# Benchmarks\n\n")
	fmt.Fprintf(&b, "Written by `make bench-peers` (bench/cmd/benchpeers) on %s, in %s. Do not edit by hand: run it again.\n\n",
		r.began.UTC().Format("2006-01-02 15:04 MST"), r.ended.Sub(r.began).Round(time.Second))
	fmt.Fprintf(&b, "- Machine: %s.\n", machine())
	fmt.Fprintf(&b, "- Command: `make bench-peers` = `cd bench && go run ./cmd/benchpeers -root .. -out ../docs/benchmarks.md` (flags: -duration %s -warmup %s -conns %s -rounds %d -sessions %d).\n",
		c.duration, c.warmup, joinInts(c.conns), c.rounds, c.sessions)
	fmt.Fprintf(&b, "- Each point is `mcpload -c N -duration %s -warmup %s` (closed loop, one request in flight per connection, the `tools/call echo` step of the bench workload, every answer verified), each figure the median of %d rounds. Targets alternate: each connection count visits every server before the next count, and each round starts from another server. The load generator runs on the same cores as the server.\n",
		c.duration, c.warmup, c.rounds)
	b.WriteString("- Servers: **mcpedge** (`mcpedge -handlers bench`); **go-sdk** (github.com/modelcontextprotocol/go-sdk v1.8.0, Streamable HTTP handler with its defaults: stateful, SSE answers); **mcp-go** (github.com/mark3labs/mcp-go v1.2.1, streamable HTTP server with its defaults, JSON answers); **floor** (bench/cmd/floor-http: bare fasthttp; bench/cmd/floor-tcp: bare gnet, and a bufio loop for stdio), which answer the same calls with the least work a correct server can do and keep no sessions.\n")
	b.WriteString("- **Server CPU per request** is the server process's user+system time from /proc/PID/stat over the measured phase, divided by the requests answered. On a 2-core machine the load generator shares the cores, so requests/s flatters slow servers; CPU per request is the figure that decides.\n")
	b.WriteString("- Over stdio there is one session per process: N is the number of requests in flight on the one pipe.\n\n")

	r.goals(&b)

	for _, tr := range c.transports {
		var names []string
		for _, p := range r.points {
			if p.transport == tr && !slices.Contains(names, p.name) {
				names = append(names, p.name)
			}
		}
		if len(names) == 0 {
			continue
		}
		fmt.Fprintf(&b, "## %s\n\n", map[string]string{"http": "Streamable HTTP", "tcp": "TCP (newline-delimited JSON-RPC)", "stdio": "stdio"}[tr])
		b.WriteString("| conns | server | req/s | p50 | p99 | server CPU/req | CPU vs floor | errors |\n|---:|---|---:|---:|---:|---:|---:|---:|\n")
		for _, n := range c.conns {
			floor := r.find(tr, "floor", n)
			for _, name := range names {
				p := r.find(tr, name, n)
				if p == nil {
					continue
				}
				cpu := p.median(cpuPerReq)
				vs := "-"
				if floor != nil && name != "floor" {
					vs = ratio(cpu, floor.median(cpuPerReq))
				}
				fmt.Fprintf(&b, "| %d | %s | %.0f | %s | %s | %s | %s | %.0f |\n", n, name, p.median(rps), fmtUS(p.median(p50)), fmtUS(p.median(p99)), fmtCPU(cpu), vs, p.median(errs))
			}
		}
		b.WriteString("\n")
	}

	if len(r.sessions) > 0 {
		b.WriteString("## Resident memory per idle session\n\n")
		fmt.Fprintf(&b, "`mcpload -mode sessions -sessions %d -pid PID` on a fresh server: the server's VmRSS after %d sessions are open, less VmRSS with the first 16 open, divided by the sessions opened in between. Over TCP each session is also a connection. The floors keep no sessions and are left out.\n\n", c.sessions, c.sessions)
		b.WriteString("| transport | server | opened | RSS before | RSS after | per idle session |\n|---|---|---:|---:|---:|---:|\n")
		for _, s := range r.sessions {
			sr := s.res.Sessions
			fmt.Fprintf(&b, "| %s | %s | %d | %.1f MiB | %.1f MiB | %.2f KiB |\n", s.transport, s.name, sr.Opened,
				float64(sr.RSSBefore)/(1<<20), float64(sr.RSSAfter)/(1<<20), sr.RSSPerSession/1024)
		}
		b.WriteString("\n")
	}

	if len(r.profiles) > 0 {
		b.WriteString("## Where mcpedge spends its CPU\n\n")
		fmt.Fprintf(&b, "bench/cmd/profile serves the bench set with mcpedge's engine and transport in process under runtime/pprof while a child process puts the same load on it (%d connections, echo, %s measured), then opens %d idle sessions and writes a heap profile. Reproduce with `cd bench && go run ./cmd/profile -transport http -c %d -cpuprofile cpu.pprof -heapprofile heap.pprof && go tool pprof -top cpu.pprof`.\n\n", goalConns, c.profile, c.sessions, goalConns)
		for _, p := range r.profiles {
			fmt.Fprintf(&b, "### %s\n\nUnder the profiler: %s.\n\n", p.transport, p.headline)
			for _, sec := range []struct{ title, body string }{
				{"CPU: pprof -top -cum (the 30 heaviest by cumulative time)", p.cum},
				{"CPU: pprof -top (the 20 heaviest by own time)", p.flat},
				{fmt.Sprintf("Heap in use with %d idle sessions open: pprof -sample_index=inuse_space -top", c.sessions), p.heap},
			} {
				if sec.body == "" {
					continue
				}
				fmt.Fprintf(&b, "<details><summary>%s</summary>\n\n```\n%s\n```\n\n</details>\n\n", sec.title, sec.body)
			}
		}
	}

	b.WriteString(mcploadNotes)

	if r.micro != "" {
		b.WriteString("## Go micro-benchmarks\n\n")
		fmt.Fprintf(&b, "`go test -run '^$' -bench . -benchmem -benchtime %s ./codec/ ./session/ ./handlers/ ./engine/`, on the same machine right after the runs above.\n\n", c.microTime)
		b.WriteString("| benchmark | ns/op | ops/s | B/op | allocs/op |\n|---|---:|---:|---:|---:|\n")
		pkg := ""
		for _, line := range strings.Split(r.micro, "\n") {
			if strings.HasPrefix(line, "pkg: ") {
				pkg = strings.TrimPrefix(strings.TrimPrefix(line, "pkg: "), "github.com/mcpedge/mcpedge/")
				continue
			}
			m := benchLine.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			ns, _ := strconv.ParseFloat(m[2], 64)
			ops := "-"
			if ns > 0 {
				ops = humanRate(1e9 / ns)
			}
			fmt.Fprintf(&b, "| %s.%s | %s | %s | %s | %s |\n", pkg, m[1], m[2], ops, m[3], m[4])
		}
		b.WriteString("\nParallel benchmarks report ns/op over all goroutines, so their ops/s is the machine's. Raw output:\n\n<details><summary>go test -bench output</summary>\n\n```\n")
		b.WriteString(strings.TrimSpace(r.micro))
		b.WriteString("\n```\n\n</details>\n")
	}
	return b.String()
}

var benchLine = regexp.MustCompile(`^(Benchmark\S+)\s+\d+\s+([\d.]+) ns/op(?:.*?\s([\d.]+) B/op\s+(\d+) allocs/op)?`)

func (r *reportData) goals(b *strings.Builder) {
	b.WriteString("## Goals\n\n")
	fmt.Fprintf(b, "At %d keep-alive connections, against the floor of the same run: mcpedge's server CPU per request within %.1f× the floor's, requests/s at least %.0f%% of the floor's, p99 no worse than %.1f× the floor's; at most %d bytes resident per idle session.\n\n",
		goalConns, goalCPU, 100*goalRPS, goalP99, goalSession)
	b.WriteString("| transport | figure | mcpedge | floor | ratio | ratio in each round | goal | met |\n|---|---|---:|---:|---:|---:|---:|:-:|\n")
	for _, tr := range []string{"http", "tcp"} {
		m, f := r.find(tr, "mcpedge", goalConns), r.find(tr, "floor", goalConns)
		if m == nil || f == nil {
			continue
		}
		row := func(fig string, fn func(*loadtest.Result) float64, fmtV func(float64) string, goal float64, lower bool) {
			mv, fv := m.median(fn), f.median(fn)
			// The ratio of each round's pair of runs, taken a few
			// seconds apart: how much the machine moved the figure.
			var per []string
			for i := range min(len(m.runs), len(f.runs)) {
				if m.runs[i] != nil && f.runs[i] != nil {
					per = append(per, strings.TrimSuffix(ratio(fn(m.runs[i]), fn(f.runs[i])), "×"))
				}
			}
			rounds := strings.Join(per, ", ")
			met := "no"
			if fv > 0 && ((lower && mv/fv <= goal) || (!lower && mv/fv >= goal)) {
				met = "yes"
			}
			g := "≤ " + strconv.FormatFloat(goal, 'f', 1, 64) + "×"
			if !lower {
				g = "≥ " + strconv.FormatFloat(goal, 'f', 2, 64) + "×"
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", tr, fig, fmtV(mv), fmtV(fv), ratio(mv, fv), rounds, g, met)
		}
		row("server CPU/req", cpuPerReq, fmtCPU, goalCPU, true)
		row("req/s", rps, func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }, goalRPS, false)
		row("p99", p99, fmtUS, goalP99, true)
	}
	for _, s := range r.sessions {
		if s.name != "mcpedge" {
			continue
		}
		v := s.res.Sessions.RSSPerSession
		met := "no"
		if v <= goalSession {
			met = "yes"
		}
		fmt.Fprintf(b, "| %s | bytes per idle session | %.0f | - | - | - | ≤ %d | %s |\n", s.transport, v, goalSession, met)
	}
	b.WriteString("\n")
}

func fmtCPU(v float64) string {
	if v == 0 {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " µs"
}

func humanRate(v float64) string {
	switch {
	case v >= 1e9:
		return strconv.FormatFloat(v/1e9, 'f', 2, 64) + " G"
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', 2, 64) + " M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', 1, 64) + " k"
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// mcploadNotes tells how the numbers above can be had by hand.
const mcploadNotes = `## Running mcpload yourself

` + "```" + `
make build
bin/mcpedge -handlers bench -tcp 127.0.0.1:7400 -http 127.0.0.1:7401 &
bin/mcpload -c 64 -duration 10s -pid $! http://127.0.0.1:7401/mcp
bin/mcpload -c 64 -inflight 16 -pid $! tcp://127.0.0.1:7400
bin/mcpload -c 64 -rate 20000 -mix echo=70,add=10,read=10,greet=5,tools/list=2,resources/list=1,prompts/list=1,ping=1 tcp://127.0.0.1:7400
bin/mcpload -c 16 stdio:bin/mcpedge -stdio -handlers bench
bin/mcpload -mode sessions -sessions 10000 -pid $! http://127.0.0.1:7401/mcp
bin/mcpedge -handlers demo -tcp 127.0.0.1:7500 -http '' & bin/mcpload -mode fanout -subscribers 200 -updates 100 tcp://127.0.0.1:7500
` + "```" + `

- ` + "`-json FILE`" + ` writes the result in the schema ` + "`mcpload/v1`" + ` (documented in loadtest/doc.go), ` + "`-html FILE`" + ` a page with the latency-percentile and throughput-over-time charts that opens offline; ` + "`-max-p99`" + ` and ` + "`-max-error-rate`" + ` make the exit code 1 when crossed.
- ` + "`-rate`" + ` runs open loop: latency counts from each request's intended send time, so a stall shows in every request scheduled behind it.
- Every answer is verified (the id was asked, the content is what the step expects); failures are counted as connect, timeout, closed, transport, protocol, id_mismatch, rpc_error or unexpected.
- Over TCP and stdio a closed loop is pipelined: ` + "`-inflight N`" + ` keeps N requests in flight on each connection, the freed slots' requests go out in one write, answers are read in large chunks and verified by a byte comparison against the shape learned from the first answer, with no allocation per message. bench/cmd/refclient, the least a pipelined client can do (ids matched, nothing verified), is its yardstick: see the scaling section (` + "`make bench-cores`" + `), where each load generator has cores of its own.
- ` + "`-client`" + ` drives the same load through the client library's pool (client.NewPool, CallRaw) instead of mcpload's own lean connections. Its HTTP transport is net/http, which costs the load generator about twice the CPU per request of the default fasthttp path, so on a 2-core machine the default is the one that keeps mcpload from being the bottleneck.

`

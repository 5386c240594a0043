package main

// The scaling run (-cores, make bench-cores): each server pinned to S
// cores, the load generator to the rest, for each S asked that leaves the
// load at least one core. It writes its own section of the report, between
// markers, and leaves the rest of the file as it was; the full run keeps
// that section when it rewrites the file.

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/mcpedge/mcpedge/loadtest"
)

// The scaling run's workloads.
const (
	coresHTTPConns = 256 // HTTP: mcpload closed loop, one request in flight per connection
	coresTCPConns  = 64  // TCP: pipelined, with
	coresInFlight  = 16  // requests in flight per connection
)

const (
	coresBegin = "<!-- bench-cores: begin. Written by make bench-cores; make bench-peers keeps it. -->"
	coresEnd   = "<!-- bench-cores: end -->"
)

// corePoint is one measurement of the scaling run.
type corePoint struct {
	point
	cores int    // the server's
	gen   string // load generator: mcpload or refclient
}

type coresReport struct {
	cfg          *config
	asked        []int
	cpus         []int
	began, ended time.Time
	ran          []int // the server core counts run
	points       []*corePoint
}

// allowedCPUs lists the CPUs this process may run on, from
// /proc/self/status, or 0..NumCPU-1.
func allowedCPUs() []int {
	data, err := os.ReadFile("/proc/self/status")
	if err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			v, ok := strings.CutPrefix(line, "Cpus_allowed_list:")
			if !ok {
				continue
			}
			if cpus, err := parseCPUList(strings.TrimSpace(v)); err == nil && len(cpus) > 0 {
				return cpus
			}
		}
	}
	cpus := make([]int, runtime.NumCPU())
	for i := range cpus {
		cpus[i] = i
	}
	return cpus
}

// parseCPUList parses a kernel CPU list, "0-3,8,10-11".
func parseCPUList(s string) ([]int, error) {
	var cpus []int
	for _, f := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(f, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, err
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return nil, err
			}
		}
		for i := a; i <= b; i++ {
			cpus = append(cpus, i)
		}
	}
	return cpus, nil
}

// cpuList writes cpus as a taskset list.
func cpuList(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}

func runCores(ctx context.Context, c *config, asked []int) error {
	if _, err := exec.LookPath("taskset"); err != nil {
		return errors.New("-cores needs taskset (util-linux) to pin the servers and the load to their cores, and it is not on PATH")
	}
	began := time.Now()
	cpus := allowedCPUs()
	rep := &coresReport{cfg: c, asked: asked, cpus: cpus, began: began}
	for _, s := range asked {
		if s >= 1 && s < len(cpus) {
			rep.ran = append(rep.ran, s)
		} else {
			log.Printf("-cores: skipping %d server cores: this process may use %d CPUs (%s), and the load needs at least one", s, len(cpus), cpuList(cpus))
		}
	}
	if len(rep.ran) == 0 {
		return fmt.Errorf("-cores %s: no server core count below the %d CPUs here", joinInts(asked), len(cpus))
	}
	log.Printf("building into %s", c.bin)
	if err := build(ctx, c); err != nil {
		return err
	}
	byBin := map[string]peer{}
	for _, p := range peers(c.bin) {
		byBin[filepath.Base(p.bin)] = p
	}
	for _, s := range rep.ran {
		if err := rep.measure(ctx, byBin, s); err != nil {
			return err
		}
	}
	rep.ended = time.Now()
	section := rep.markdown()
	old, err := os.ReadFile(c.out)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	doc := string(old)
	if doc == "" {
		doc = "# Benchmarks\n\n"
	}
	doc = spliceCores(doc, section)
	if err := os.MkdirAll(filepath.Dir(c.out), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(c.out, []byte(doc), 0o644); err != nil {
		return err
	}
	log.Printf("wrote the scaling section of %s in %s", c.out, time.Since(began).Round(time.Second))
	return nil
}

// measure runs every point with the servers on s cores.
func (r *coresReport) measure(ctx context.Context, byBin map[string]peer, s int) error {
	c := r.cfg
	srvPin := &pinning{cpus: cpuList(r.cpus[:s]), procs: s}
	loadPin := &pinning{cpus: cpuList(r.cpus[s:]), procs: len(r.cpus) - s}
	log.Printf("servers on CPUs %s (GOMAXPROCS=%d), load on CPUs %s (GOMAXPROCS=%d)", srvPin.cpus, srvPin.procs, loadPin.cpus, loadPin.procs)

	type target struct {
		srv     *server
		name    string
		gen     string
		tcp     bool
		measure *corePoint
	}
	var servers []*server
	defer func() {
		for _, sv := range servers {
			sv.stop()
		}
	}()
	startOne := func(bin string, http, tcp bool) (*server, error) {
		sv, err := startPinned(byBin[bin], http, tcp, srvPin)
		if err != nil {
			return nil, err
		}
		servers = append(servers, sv)
		return sv, nil
	}
	edge, err := startOne("mcpedge", true, true)
	if err != nil {
		return err
	}
	floorHTTP, err := startOne("floor-http", true, false)
	if err != nil {
		return err
	}
	floorTCP, err := startOne("floor-tcp", false, true)
	if err != nil {
		return err
	}
	mcpgo, err := startOne("mcpgo-server", true, false)
	if err != nil {
		return err
	}
	gosdk, err := startOne("gosdk-server", true, false)
	if err != nil {
		return err
	}
	groups := [][]*target{
		{{srv: edge, name: "mcpedge"}, {srv: floorHTTP, name: "floor"}, {srv: mcpgo, name: "mcp-go"}, {srv: gosdk, name: "go-sdk"}},
		{
			{srv: edge, name: "mcpedge", gen: "mcpload", tcp: true}, {srv: floorTCP, name: "floor", gen: "mcpload", tcp: true},
			{srv: edge, name: "mcpedge", gen: "refclient", tcp: true}, {srv: floorTCP, name: "floor", gen: "refclient", tcp: true},
		},
	}
	for _, g := range groups {
		for _, t := range g {
			tr, conns := "http", coresHTTPConns
			if t.tcp {
				tr, conns = "tcp", coresTCPConns
			}
			if t.gen == "" {
				t.gen = "mcpload"
			}
			t.measure = &corePoint{point: point{transport: tr, name: t.name, conns: conns}, cores: s, gen: t.gen}
			r.points = append(r.points, t.measure)
		}
	}
	common := []string{"-duration", c.duration.String(), "-warmup", c.warmup.String()}
	for round := 0; round < c.rounds; round++ {
		for _, g := range groups {
			for k := range g {
				t := g[(k+round)%len(g)]
				pid := strconv.Itoa(t.srv.pid())
				var res *loadtest.Result
				var err error
				switch {
				case !t.tcp:
					res, err = loadPinned(ctx, loadPin, filepath.Join(c.bin, "mcpload"), append(append([]string{"-q", "-json", "-", "-timeout", "10s",
						"-c", strconv.Itoa(coresHTTPConns), "-pid", pid}, common...), "http://"+t.srv.httpAddr+"/mcp")...)
				case t.gen == "mcpload":
					res, err = loadPinned(ctx, loadPin, filepath.Join(c.bin, "mcpload"), append(append([]string{"-q", "-json", "-", "-timeout", "10s",
						"-c", strconv.Itoa(coresTCPConns), "-inflight", strconv.Itoa(coresInFlight), "-pid", pid}, common...), "tcp://"+t.srv.tcpAddr)...)
				default:
					res, err = loadPinned(ctx, loadPin, filepath.Join(c.bin, "refclient"), append(append([]string{"-json", "-",
						"-c", strconv.Itoa(coresTCPConns), "-inflight", strconv.Itoa(coresInFlight), "-pid", pid}, common...), "tcp://"+t.srv.tcpAddr)...)
				}
				key := fmt.Sprintf("S=%d %s/%s/%s", s, t.measure.transport, t.name, t.gen)
				if err != nil {
					log.Printf("%s: %v", key, err)
				} else {
					log.Printf("%-30s round %d: %8.0f req/s  server cpu %6.2fµs/call  load cpu %5.2fµs/call  errors %d",
						key, round+1, res.Throughput, cpuPerReq(res), loadCPU(res), res.Errors)
					for k, v := range res.ErrorSamples {
						log.Printf("%-30s   first %s: %s", key, k, v)
					}
				}
				t.measure.runs = append(t.measure.runs, res)
				if ctx.Err() != nil {
					return ctx.Err()
				}
			}
		}
	}
	return nil
}

func loadCPU(r *loadtest.Result) float64 {
	if r == nil || r.Load == nil {
		return 0
	}
	return r.Load.CPUPerRequestUS
}

func (r *coresReport) find(s int, tr, name, gen string) *corePoint {
	for _, p := range r.points {
		if p.cores == s && p.transport == tr && p.name == name && p.gen == gen {
			return p
		}
	}
	return nil
}

// med is p's median of f, 0 when p is missing.
func med(p *corePoint, f func(*loadtest.Result) float64) float64 {
	if p == nil {
		return 0
	}
	return p.median(f)
}

func (r *coresReport) markdown() string {
	c := r.cfg
	var b strings.Builder
	b.WriteString(coresBegin + "\n")
	b.WriteString("## Scaling across cores\n\n")
	fmt.Fprintf(&b, "Written by `make bench-cores` (bench/cmd/benchpeers -cores) on %s, in %s; the rest of this file is `make bench-peers`'s, which keeps this section.\n\n",
		r.began.UTC().Format("2006-01-02 15:04 MST"), r.ended.Sub(r.began).Round(time.Second))
	fmt.Fprintf(&b, "- Machine: %s; this process could use CPUs %s.\n", machine(), cpuList(r.cpus))
	fmt.Fprintf(&b, "- Command: `make bench-cores CORES=%s` = `cd bench && go run ./cmd/benchpeers -cores %s -root .. -out ../docs/benchmarks.md` (flags: -duration %s -warmup %s -rounds %d). Server core counts run: %s (a count runs when it leaves the load at least one core).\n",
		joinInts(r.asked), joinInts(r.asked), c.duration, c.warmup, c.rounds, joinInts(r.ran))
	fmt.Fprintf(&b, "- With S server cores, each server runs under `taskset -c` on the first S CPUs with GOMAXPROCS=S (gnet's event loops and mcpedge's follow the CPUs it may use), and the load generator on the other %d−S with GOMAXPROCS to match. All servers are up at once, idle but for the one measured.\n", len(r.cpus))
	fmt.Fprintf(&b, "- HTTP: `mcpload -c %d` (Streamable HTTP, closed loop, one request in flight per connection). TCP: `mcpload -c %d -inflight %d` and `refclient -c %d -inflight %d`, pipelined closed loop. Every call is `tools/call` of `echo`; mcpload verifies every answer, refclient (bench/cmd/refclient: plain sockets, ids matched, nothing else read) is the least a load generator can do, so mcpload ÷ refclient shows mcpload's own cost. Each figure is the median of %d rounds; targets alternate within a round.\n",
		coresHTTPConns, coresTCPConns, coresInFlight, coresTCPConns, coresInFlight, c.rounds)
	b.WriteString("- **Server CPU/call** is the server process's user+system time from /proc over the measured phase per call answered; **load CPU/call** the load generator's own. Requests/s is the pair's: on few cores the load generator can be what limits it, and CPU per call is the figure that decides.\n\n")

	b.WriteString("| server cores | load cores | HTTP mcpedge req/s | ÷ floor | CPU/call ÷ floor | mcp-go req/s | go-sdk req/s | TCP mcpedge req/s | ÷ floor | CPU/call ÷ floor | mcpload ÷ refclient, floor | mcpload ÷ refclient, mcpedge |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range r.ran {
		he, hf := r.find(s, "http", "mcpedge", "mcpload"), r.find(s, "http", "floor", "mcpload")
		te, tf := r.find(s, "tcp", "mcpedge", "mcpload"), r.find(s, "tcp", "floor", "mcpload")
		re, rf := r.find(s, "tcp", "mcpedge", "refclient"), r.find(s, "tcp", "floor", "refclient")
		fmt.Fprintf(&b, "| %d | %d | %.0f | %s | %s | %.0f | %.0f | %.0f | %s | %s | %s | %s |\n", s, len(r.cpus)-s,
			med(he, rps), ratio(med(he, rps), med(hf, rps)), ratio(med(he, cpuPerReq), med(hf, cpuPerReq)),
			med(r.find(s, "http", "mcp-go", "mcpload"), rps), med(r.find(s, "http", "go-sdk", "mcpload"), rps),
			med(te, rps), ratio(med(te, rps), med(tf, rps)), ratio(med(te, cpuPerReq), med(tf, cpuPerReq)),
			ratio(med(tf, rps), med(rf, rps)), ratio(med(te, rps), med(re, rps)))
	}
	b.WriteString("\n| server cores | workload | load generator | server | req/s | p99 | server CPU/call | ÷ floor | load CPU/call | errors |\n")
	b.WriteString("|---:|---|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range r.points {
		wl := fmt.Sprintf("HTTP, %d conns", p.conns)
		if p.transport == "tcp" {
			wl = fmt.Sprintf("TCP, %d conns × %d", p.conns, coresInFlight)
		}
		vs := "-"
		if f := r.find(p.cores, p.transport, "floor", p.gen); f != nil && p.name != "floor" {
			vs = ratio(med(p, cpuPerReq), med(f, cpuPerReq))
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %.0f | %s | %s | %s | %s | %.0f |\n", p.cores, wl, p.gen, p.name,
			med(p, rps), fmtUS(med(p, p99)), fmtCPU(med(p, cpuPerReq)), vs, fmtLoadCPU(med(p, loadCPU)), med(p, errs))
	}
	b.WriteString("\n" + coresEnd + "\n")
	return b.String()
}

func fmtLoadCPU(v float64) string {
	if v == 0 {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 2, 64) + " µs"
}

// spliceCores puts section (markers included) into doc: in place of the
// one there, or else before the memory section, or else at the end.
func spliceCores(doc, section string) string {
	return spliceMarked(doc, section, coresBegin, coresEnd)
}

// coresSection returns the scaling section of doc, markers included, or
// "".
func coresSection(doc string) string { return markedSection(doc, coresBegin, coresEnd) }

// The cluster section is written by hand from make bench-cluster
// (bench/cluster.sh, which prints its medians); a run of benchpeers keeps
// it.
const (
	clusterBegin = "<!-- bench-cluster: begin. From make bench-cluster (bench/cluster.sh); make bench-peers keeps it. -->"
	clusterEnd   = "<!-- bench-cluster: end -->"
)

// markedSection returns the section of doc between begin and end, markers
// included, or "".
func markedSection(doc, begin, end string) string {
	i := strings.Index(doc, begin)
	if i < 0 {
		return ""
	}
	j := strings.Index(doc[i:], end)
	if j < 0 {
		return ""
	}
	return doc[i:i+j+len(end)] + "\n"
}

// replaceMarked puts section into doc in place of the one between begin
// and end; ok is false when doc has none.
func replaceMarked(doc, section, begin, end string) (out string, ok bool) {
	i := strings.Index(doc, begin)
	if i < 0 {
		return doc, false
	}
	j := strings.Index(doc[i:], end)
	if j < 0 {
		return doc, false
	}
	return doc[:i] + section + strings.TrimPrefix(doc[i+j+len(end):], "\n"), true
}

// spliceMarked puts section into doc in place of the one between begin
// and end, or else before the memory section, or else at the end.
func spliceMarked(doc, section, begin, end string) string {
	if out, ok := replaceMarked(doc, section, begin, end); ok {
		return out
	}
	for _, h := range []string{"## Resident memory per idle session", "## Where mcpedge spends its CPU", "## Running mcpload yourself", "## Go micro-benchmarks"} {
		if i := strings.Index(doc, "\n"+h); i >= 0 {
			return doc[:i+1] + section + "\n" + doc[i+1:]
		}
	}
	return strings.TrimRight(doc, "\n") + "\n\n" + section
}

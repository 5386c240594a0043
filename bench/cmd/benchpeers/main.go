// Command benchpeers runs the peer comparison behind docs/benchmarks.md:
// it builds mcpedge, mcpload and the peer servers (the official go-sdk,
// mcp-go, a bare fasthttp floor and a bare gnet floor), starts each on a
// free loopback port, runs mcpload against every one in turn, alternating
// targets at each connection count, over Streamable HTTP, TCP (where the
// target has it) and stdio, weighs idle sessions, runs the Go
// micro-benchmarks and writes the report.
//
//	cd bench && go run ./cmd/benchpeers -root .. -out ../docs/benchmarks.md
//
// With -stateless-only it runs only the stateless comparison
// (stateless.go: mcpedge in protocol 2026-07-28 against 2025-11-25, beside
// the peers' stateless modes) and writes only its section; the full run
// measures it too unless -stateless=false.
//
//	cd bench && go run ./cmd/benchpeers -stateless-only -duration 4s -root .. -out ../docs/benchmarks.md
//
// With -ops-only it runs only the operations cost (ops.go: mcpedge's
// server CPU per call with the admin listener's metrics on against off,
// and with authorization by a static token and by RS256 JWTs, cached and
// not, against none) and writes only its section; the full run measures
// it too unless -ops=false.
//
//	cd bench && go run ./cmd/benchpeers -ops-only -duration 3s -warmup 1s -root .. -out ../docs/benchmarks.md
//
// With -cores it runs the scaling comparison instead (cores.go): each
// server pinned to S cores, the load to the rest, for each S listed that
// fits, and writes only its own section of the report.
//
//	cd bench && go run ./cmd/benchpeers -cores 1,2,4,8 -root .. -out ../docs/benchmarks.md
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mcpedge/mcpedge/loadtest"
)

type config struct {
	root, out, bin string
	duration       time.Duration
	warmup         time.Duration
	conns          []int
	rounds         int
	sessions       int
	micro          bool
	microTime      string
	profile        time.Duration
	transports     []string
	stateless      bool
	ops            bool
}

func main() {
	var c config
	var conns, transports, cores string
	flag.StringVar(&c.root, "root", "..", "the mcpedge repository root")
	flag.StringVar(&c.out, "out", "", "write the report to `file` (default ROOT/docs/benchmarks.md)")
	flag.StringVar(&c.bin, "bin", "", "build into `dir` (default a temporary directory)")
	flag.DurationVar(&c.duration, "duration", 3*time.Second, "measured phase of each point")
	flag.DurationVar(&c.warmup, "warmup", time.Second, "warm-up of each point")
	flag.StringVar(&conns, "conns", "1,16,64,256", "connection counts")
	flag.IntVar(&c.rounds, "rounds", 3, "rounds over every point; the report takes each figure's median")
	flag.IntVar(&c.sessions, "sessions", 5000, "idle sessions opened to weigh one")
	flag.BoolVar(&c.micro, "micro", true, "run the Go micro-benchmarks too")
	flag.StringVar(&c.microTime, "benchtime", "300ms", "-benchtime of the micro-benchmarks")
	flag.StringVar(&transports, "transports", "http,tcp,stdio", "transports to measure")
	flag.StringVar(&cores, "cores", "", "run the scaling comparison instead, for these server core counts (e.g. 1,2,4,8): servers pinned with taskset to S cores, the load to the rest; writes only the report's \"Scaling across cores\" section")
	flag.BoolVar(&c.stateless, "stateless", true, "measure the stateless section too (mcpedge in protocol 2026-07-28 against 2025-11-25 over HTTP and TCP, beside the peers' stateless modes); false keeps the section the report has")
	statelessOnly := flag.Bool("stateless-only", false, "run only the stateless comparison; writes only the report's \"Stateless calls\" section")
	flag.BoolVar(&c.ops, "ops", true, "measure the operations cost too (mcpedge's server CPU per call with metrics on against off, with authorization against none); false keeps the section the report has")
	opsOnly := flag.Bool("ops-only", false, "run only the operations cost; writes only the report's \"Operations cost\" section")
	flag.DurationVar(&c.profile, "profile", 4*time.Second, "profile mcpedge in process (bench/cmd/profile) at 64 connections over HTTP and TCP for this long (0: skip)")
	flag.Parse()
	for _, f := range strings.Split(conns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			log.Fatalf("benchpeers: -conns %q", conns)
		}
		c.conns = append(c.conns, n)
	}
	c.transports = strings.Split(transports, ",")
	root, err := filepath.Abs(c.root)
	if err != nil {
		log.Fatal(err)
	}
	c.root = root
	if c.out == "" {
		c.out = filepath.Join(root, "docs", "benchmarks.md")
	}
	if c.bin == "" {
		dir, err := os.MkdirTemp("", "benchpeers")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(dir)
		c.bin = dir
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *opsOnly {
		if cores != "" || *statelessOnly {
			log.Fatal("benchpeers: -ops-only, -cores and -stateless-only are separate runs")
		}
		began := time.Now()
		log.Printf("building into %s", c.bin)
		if err := build(ctx, &c); err != nil {
			log.Fatal("benchpeers: ", err)
		}
		if err := writeOps(ctx, &c); err != nil {
			log.Fatal("benchpeers: ", err)
		}
		log.Printf("wrote the operations section of %s in %s", c.out, time.Since(began).Round(time.Second))
		return
	}
	if *statelessOnly {
		if cores != "" {
			log.Fatal("benchpeers: -cores and -stateless-only are separate runs")
		}
		began := time.Now()
		log.Printf("building into %s", c.bin)
		if err := build(ctx, &c); err != nil {
			log.Fatal("benchpeers: ", err)
		}
		if err := writeStateless(ctx, &c); err != nil {
			log.Fatal("benchpeers: ", err)
		}
		log.Printf("wrote the stateless section of %s in %s", c.out, time.Since(began).Round(time.Second))
		return
	}
	if cores != "" {
		var counts []int
		for _, f := range strings.Split(cores, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				log.Fatalf("benchpeers: -cores %q: want server core counts, 1,2,4,8", cores)
			}
			counts = append(counts, n)
		}
		if err := runCores(ctx, &c, counts); err != nil {
			log.Fatal("benchpeers: ", err)
		}
		return
	}
	if err := run(ctx, &c); err != nil {
		log.Fatal("benchpeers: ", err)
	}
}

// peer is one server in the comparison.
type peer struct {
	name  string
	bin   string
	http  bool // serves -http ADDR
	tcp   bool // serves -tcp ADDR
	stdio []string
	// args returns the arguments serving HTTP on h and TCP on t (either
	// may be empty).
	args func(h, t string) []string
}

func peers(bin string) []peer {
	return []peer{
		{name: "mcpedge", bin: filepath.Join(bin, "mcpedge"), http: true, tcp: true,
			stdio: []string{"-stdio", "-handlers", "bench", "-log-level", "warn"},
			args: func(h, t string) []string {
				return []string{"-handlers", "bench", "-log-level", "warn", "-http", h, "-tcp", t}
			}},
		{name: "floor", bin: filepath.Join(bin, "floor-http"), http: true,
			args: func(h, _ string) []string { return []string{"-http", h} }},
		{name: "floor", bin: filepath.Join(bin, "floor-tcp"), tcp: true, stdio: []string{"-stdio"},
			args: func(_, t string) []string { return []string{"-tcp", t} }},
		{name: "mcp-go", bin: filepath.Join(bin, "mcpgo-server"), http: true, stdio: []string{"-stdio"},
			args: func(h, _ string) []string { return []string{"-http", h} }},
		{name: "go-sdk", bin: filepath.Join(bin, "gosdk-server"), http: true, stdio: []string{"-stdio"},
			args: func(h, _ string) []string { return []string{"-http", h} }},
	}
}

// server is a running peer.
type server struct {
	p        peer
	cmd      *exec.Cmd
	httpAddr string
	tcpAddr  string
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func start(p peer, wantHTTP, wantTCP bool) (*server, error) {
	return startPinned(p, wantHTTP, wantTCP, nil)
}

// pinning runs a process on some cores only: under taskset -c cpus, with
// GOMAXPROCS set to their number.
type pinning struct {
	cpus  string // taskset's list, "0-3"
	procs int
}

// command returns the command running bin with args, pinned if pin is set.
func (pin *pinning) command(ctx context.Context, bin string, args ...string) *exec.Cmd {
	if pin == nil {
		return exec.CommandContext(ctx, bin, args...)
	}
	cmd := exec.CommandContext(ctx, "taskset", append([]string{"-c", pin.cpus, bin}, args...)...)
	cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(pin.procs))
	return cmd
}

func startPinned(p peer, wantHTTP, wantTCP bool, pin *pinning) (*server, error) {
	s := &server{p: p}
	var err error
	if wantHTTP {
		if s.httpAddr, err = freePort(); err != nil {
			return nil, err
		}
	}
	if wantTCP {
		if s.tcpAddr, err = freePort(); err != nil {
			return nil, err
		}
	}
	// taskset execs the server: the pid is the server's.
	s.cmd = pin.command(context.Background(), p.bin, p.args(s.httpAddr, s.tcpAddr)...)
	s.cmd.Stdout, s.cmd.Stderr = nil, nil
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	for _, a := range []string{s.httpAddr, s.tcpAddr} {
		if a == "" {
			continue
		}
		if err := waitListen(a, 10*time.Second); err != nil {
			s.stop()
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
	}
	return s, nil
}

func waitListen(addr string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("nothing listens on %s", addr)
}

func (s *server) pid() int { return s.cmd.Process.Pid }

func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

// point is one measurement: a target at a connection count.
type point struct {
	transport, name string
	conns           int
	runs            []*loadtest.Result
}

// median is the median of f over the rounds that ran: robust to a round
// that another process on the machine disturbed.
func (p *point) median(f func(*loadtest.Result) float64) float64 {
	var v []float64
	for _, r := range p.runs {
		if r != nil {
			v = append(v, f(r))
		}
	}
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func build(ctx context.Context, c *config) error {
	steps := [][]string{
		{c.root, "go", "build", "-o", filepath.Join(c.bin, "mcpedge"), "./cmd/mcpedge"},
		{c.root, "go", "build", "-o", filepath.Join(c.bin, "mcpload"), "./cmd/mcpload"},
		{filepath.Join(c.root, "bench"), "go", "build", "-o", c.bin + "/", "./cmd/gosdk-server", "./cmd/mcpgo-server", "./cmd/floor-http", "./cmd/floor-tcp", "./cmd/profile", "./cmd/refclient"},
	}
	for _, s := range steps {
		cmd := exec.CommandContext(ctx, s[1], s[2:]...)
		cmd.Dir = s[0]
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %w", strings.Join(s[1:], " "), err)
		}
	}
	return nil
}

// mcpload runs the load tool and decodes its JSON result.
func mcpload(ctx context.Context, c *config, args ...string) (*loadtest.Result, error) {
	return loadPinned(ctx, nil, filepath.Join(c.bin, "mcpload"), append([]string{"-q", "-json", "-"}, args...)...)
}

// loadPinned runs a load generator that writes mcpload's JSON result on
// its standard output (mcpload -json -, refclient -json -) and decodes it.
func loadPinned(ctx context.Context, pin *pinning, bin string, args ...string) (*loadtest.Result, error) {
	cmd := pin.command(ctx, bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var res loadtest.Result
	if jerr := json.Unmarshal(out.Bytes(), &res); jerr != nil {
		return nil, fmt.Errorf("%s %s: %v: %s", filepath.Base(bin), strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return &res, nil
}

func run(ctx context.Context, c *config) error {
	began := time.Now()
	log.Printf("building into %s", c.bin)
	if err := build(ctx, c); err != nil {
		return err
	}
	rep := &reportData{cfg: c, began: began}
	all := peers(c.bin)
	for _, tr := range c.transports {
		var set []peer
		for _, p := range all {
			if (tr == "http" && p.http) || (tr == "tcp" && p.tcp) || (tr == "stdio" && p.stdio != nil) {
				set = append(set, p)
			}
		}
		if len(set) == 0 {
			continue
		}
		var servers []*server
		stopAll := func() {
			for _, s := range servers {
				if s != nil {
					s.stop()
				}
			}
		}
		if tr != "stdio" {
			for _, p := range set {
				s, err := start(p, tr == "http", tr == "tcp")
				if err != nil {
					stopAll()
					return err
				}
				servers = append(servers, s)
			}
		}
		points := map[string]*point{}
		for round := 0; round < c.rounds; round++ {
			for _, n := range c.conns {
				// Alternate: each count visits every target before the next
				// count, and each round starts from a different target.
				for k := range set {
					i := (k + round) % len(set)
					p := set[i]
					key := tr + "/" + p.name + "/" + strconv.Itoa(n)
					pt := points[key]
					if pt == nil {
						pt = &point{transport: tr, name: p.name, conns: n}
						points[key] = pt
						rep.points = append(rep.points, pt)
					}
					args := []string{"-c", strconv.Itoa(n), "-duration", c.duration.String(), "-warmup", c.warmup.String(), "-timeout", "10s"}
					var target string
					switch tr {
					case "http":
						target = "http://" + servers[i].httpAddr + "/mcp"
						args = append(args, "-pid", strconv.Itoa(servers[i].pid()))
					case "tcp":
						target = "tcp://" + servers[i].tcpAddr
						args = append(args, "-pid", strconv.Itoa(servers[i].pid()))
					case "stdio":
						target = "stdio:" + strings.Join(append([]string{p.bin}, p.stdio...), " ")
					}
					args = append(args, strings.Fields(target)...)
					res, err := mcpload(ctx, c, args...)
					if err != nil {
						log.Printf("%s: %v", key, err)
					} else {
						log.Printf("%-26s round %d: %8.0f req/s  p50 %7.0fµs  p99 %7.0fµs  cpu %6.1fµs/req  errors %d",
							key, round+1, res.Throughput, lat(res).P50, lat(res).P99, cpuPerReq(res), res.Errors)
						for k, v := range res.ErrorSamples {
							log.Printf("%-26s   first %s: %s", key, k, v)
						}
					}
					pt.runs = append(pt.runs, res)
					if ctx.Err() != nil {
						stopAll()
						return ctx.Err()
					}
				}
			}
		}
		stopAll()
	}

	// The stateless section: its own servers, after the others stopped.
	var statelessSec string
	if c.stateless {
		log.Printf("the stateless comparison")
		sec, err := runStateless(ctx, c)
		if err != nil {
			return err
		}
		statelessSec = sec
	}
	// The operations section: its own servers too.
	var opsSec string
	if c.ops {
		log.Printf("the operations cost")
		sec, err := runOps(ctx, c)
		if err != nil {
			return err
		}
		opsSec = sec
	}

	// Idle sessions, each on a fresh server.
	for _, tr := range []string{"http", "tcp"} {
		if !slices.Contains(c.transports, tr) {
			continue
		}
		for _, p := range all {
			if (tr == "http" && !p.http) || (tr == "tcp" && !p.tcp) || p.name == "floor" {
				continue
			}
			s, err := start(p, tr == "http", tr == "tcp")
			if err != nil {
				return err
			}
			target := "http://" + s.httpAddr + "/mcp"
			if tr == "tcp" {
				target = "tcp://" + s.tcpAddr
			}
			res, err := mcpload(ctx, c, "-mode", "sessions", "-sessions", strconv.Itoa(c.sessions), "-pid", strconv.Itoa(s.pid()), target)
			s.stop()
			if err != nil {
				log.Printf("sessions %s %s: %v", tr, p.name, err)
				continue
			}
			log.Printf("sessions %-5s %-8s %d opened, %.0f bytes per idle session", tr, p.name, res.Sessions.Opened, res.Sessions.RSSPerSession)
			rep.sessions = append(rep.sessions, sessionRow{transport: tr, name: p.name, res: res})
		}
	}

	if c.profile > 0 {
		for _, tr := range []string{"http", "tcp"} {
			if !slices.Contains(c.transports, tr) {
				continue
			}
			log.Printf("profiling mcpedge over %s", tr)
			prof, err := profileRun(ctx, c, tr)
			if err != nil {
				log.Printf("profile %s: %v", tr, err)
				continue
			}
			rep.profiles = append(rep.profiles, prof)
		}
	}

	if c.micro {
		log.Printf("running the Go micro-benchmarks")
		cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", ".", "-benchmem", "-benchtime", c.microTime,
			"./codec/", "./session/", "./handlers/", "./engine/")
		cmd.Dir = c.root
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			log.Printf("micro-benchmarks: %v", err)
		}
		rep.micro = out.String()
	}
	rep.ended = time.Now()
	doc := rep.markdown()
	// Keep the sections make bench-cores wrote, and make bench-stateless
	// and make bench-ops when this run did not measure them.
	old, _ := os.ReadFile(c.out)
	if statelessSec == "" {
		statelessSec = statelessSection(string(old))
	}
	if statelessSec != "" {
		doc = spliceStateless(doc, statelessSec)
	}
	if opsSec == "" {
		opsSec = opsSection(string(old))
	}
	if opsSec != "" {
		doc = spliceOps(doc, opsSec)
	}
	if sec := coresSection(string(old)); sec != "" {
		doc = spliceCores(doc, sec)
	}
	if sec := markedSection(string(old), clusterBegin, clusterEnd); sec != "" {
		doc = spliceMarked(doc, sec, clusterBegin, clusterEnd)
	}
	if err := os.MkdirAll(filepath.Dir(c.out), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(c.out, []byte(doc), 0o644); err != nil {
		return err
	}
	log.Printf("wrote %s in %s", c.out, time.Since(began).Round(time.Second))
	return nil
}

// profileRun runs bench/cmd/profile over tr and returns pprof's summary:
// the heaviest functions by cumulative time.
func profileRun(ctx context.Context, c *config, tr string) (profileData, error) {
	out := filepath.Join(c.bin, "cpu-"+tr+".pprof")
	heap := filepath.Join(c.bin, "heap-"+tr+".pprof")
	bin := filepath.Join(c.bin, "profile")
	cmd := exec.CommandContext(ctx, bin, "-transport", tr, "-c", strconv.Itoa(goalConns), "-duration", c.profile.String(),
		"-cpuprofile", out, "-heapprofile", heap, "-sessions", strconv.Itoa(c.sessions))
	var headline bytes.Buffer
	cmd.Stdout, cmd.Stderr = &headline, os.Stderr
	if err := cmd.Run(); err != nil {
		return profileData{}, err
	}
	// pprof runs go tool pprof with args, then the binary and the profile.
	pprof := func(profile string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "go", append(append([]string{"tool", "pprof"}, args...), bin, profile)...)
		cmd.Dir = c.root
		var b bytes.Buffer
		cmd.Stdout, cmd.Stderr = &b, &b
		err := cmd.Run()
		return trimPprof(b.String()), err
	}
	var p profileData
	p.transport = tr
	// The first line says what was measured; drop the file name.
	line, _, _ := strings.Cut(strings.TrimSpace(headline.String()), "\n")
	p.headline, _, _ = strings.Cut(line, "; CPU profile in")
	var err error
	if p.cum, err = pprof(out, "-top", "-cum", "-nodecount=30"); err != nil {
		return p, fmt.Errorf("pprof: %w: %s", err, p.cum)
	}
	p.flat, _ = pprof(out, "-top", "-nodecount=20")
	if p.heap, err = pprof(heap, "-sample_index=inuse_space", "-top", "-nodecount=12"); err != nil {
		log.Printf("heap profile %s: %v: %s", tr, err, p.heap)
		p.heap = ""
	}
	return p, nil
}

// trimPprof drops pprof's header lines that name files and build ids.
func trimPprof(s string) string {
	var keep []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if strings.HasPrefix(l, "File: ") || strings.HasPrefix(l, "Build ID: ") || strings.HasPrefix(l, "Time: ") {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}

func lat(r *loadtest.Result) loadtest.LatencyStats {
	if r == nil || r.Latency == nil {
		return loadtest.LatencyStats{}
	}
	return *r.Latency
}

func cpuPerReq(r *loadtest.Result) float64 {
	if r == nil || r.Server == nil {
		return 0
	}
	return r.Server.CPUPerRequestUS
}

func machine() string {
	var b strings.Builder
	model := ""
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	kernel := ""
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = strings.TrimSpace(string(data))
	}
	mem := ""
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		line, _, _ := strings.Cut(string(data), "\n")
		mem = strings.Join(strings.Fields(strings.TrimPrefix(line, "MemTotal:")), " ")
	}
	fmt.Fprintf(&b, "%d CPUs (%s), %s memory, Linux %s, %s %s/%s", runtime.NumCPU(), model, mem, kernel, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return b.String()
}

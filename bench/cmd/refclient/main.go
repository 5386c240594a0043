// Command refclient is the benchmark's reference load client for MCP over
// TCP: the least a pipelined client can do. Each connection is a plain
// net.Conn driven by one goroutine: after the initialize handshake it
// writes -inflight tools/call requests of the bench workload's echo tool,
// then reads whatever answers have come, matches each to an outstanding
// request by its id alone and writes as many new requests as were answered,
// all in one write (closed loop, -inflight in flight at all times). No
// answer is decoded, no latency measured: its rate is the ceiling a load
// generator can reach on the same cores, against which mcpload's own cost
// shows.
//
//	refclient -c 64 -inflight 16 -duration 10s -pid $(pgrep floor-tcp) tcp://127.0.0.1:7400
//
// -protocol 2026-07-28 speaks the stateless revision: no initialize, and
// every request carries the revision's _meta (pre-encoded, as the rest of
// the request).
//
// -json writes the result with the field names of mcpload's JSON
// (throughput_rps, server.cpu_per_request_us, ...), so one decoder reads
// both.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	var o options
	flag.IntVar(&o.conns, "c", 16, "connections")
	flag.IntVar(&o.inflight, "inflight", 16, "requests in flight per connection")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "length of the measured phase")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Second, "load before the measured phase, not counted")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Second, "connection set-up (dial and initialize)")
	flag.IntVar(&o.pid, "pid", 0, "server process whose CPU time per answer is read from /proc")
	flag.StringVar(&o.text, "text", "refclient abcdefgh 12345", "the echo tool's text argument (sent as is: no JSON escaping)")
	flag.StringVar(&o.jsonOut, "json", "", "write the result as JSON to `file` (- for stdout, replacing the text line)")
	flag.StringVar(&o.protocol, "protocol", protocolSession, "protocol revision: "+protocolSession+" (initialize first) or "+protocolStateless+" (stateless: no initialize, every request carries the revision's _meta)")
	cpuProfile := flag.String("cpuprofile", "", "write refclient's own CPU profile to `file`")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "Usage: refclient [flags] tcp://host:port\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	o.addr = strings.TrimPrefix(flag.Arg(0), "tcp://")
	if o.protocol != protocolSession && o.protocol != protocolStateless {
		fmt.Fprintf(os.Stderr, "refclient: -protocol %q: want %s or %s\n", o.protocol, protocolSession, protocolStateless)
		os.Exit(2)
	}
	if o.conns < 1 || o.inflight < 1 || o.duration <= 0 {
		fmt.Fprintln(os.Stderr, "refclient: -c, -inflight and -duration must be positive")
		os.Exit(2)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "refclient:", err)
			os.Exit(2)
		}
		defer f.Close()
	}
	res, err := run(&o)
	pprof.StopCPUProfile()
	if err != nil {
		fmt.Fprintln(os.Stderr, "refclient:", err)
		os.Exit(1)
	}
	if o.jsonOut != "-" {
		fmt.Printf("refclient %s: %d connections x %d in flight, %.2fs: %d answers (%d errors, %d unmatched), %.0f msgs/s",
			o.addr, o.conns, o.inflight, res.DurationS, res.Requests, res.Errors, res.Unmatched, res.Throughput)
		fmt.Printf(", refclient %.2f µs CPU per answer", res.Load.CPUPerRequestUS)
		if res.Server != nil {
			fmt.Printf(", server %.2f µs", res.Server.CPUPerRequestUS)
		}
		fmt.Println()
	}
	if o.jsonOut != "" {
		b, _ := json.MarshalIndent(res, "", "  ")
		b = append(b, '\n')
		if o.jsonOut == "-" {
			_, err = os.Stdout.Write(b)
		} else {
			err = os.WriteFile(o.jsonOut, b, 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "refclient:", err)
			os.Exit(1)
		}
	}
	if res.Errors > 0 || res.Unmatched > 0 {
		os.Exit(1)
	}
}

type options struct {
	addr                      string
	conns, inflight, pid      int
	duration, warmup, timeout time.Duration
	text, jsonOut, protocol   string
}

// result has the names of mcpload's JSON fields where they mean the same.
type result struct {
	Schema      string       `json:"schema"` // "refclient/v1"
	Target      string       `json:"target"`
	Transport   string       `json:"transport"`
	Protocol    string       `json:"protocol"`
	Connections int          `json:"connections"`
	InFlight    int          `json:"in_flight"`
	WarmupS     float64      `json:"warmup_s"`
	DurationS   float64      `json:"duration_s"`
	Requests    int64        `json:"requests"` // answers in the measured phase
	OK          int64        `json:"ok"`
	Errors      int64        `json:"errors"`    // error answers
	Unmatched   int64        `json:"unmatched"` // answers whose id was not outstanding
	Throughput  float64      `json:"throughput_rps"`
	Server      *serverStats `json:"server,omitempty"`
	Load        *loadStats   `json:"load"` // refclient's own CPU time
}

type loadStats struct {
	CPUSeconds      float64 `json:"cpu_s"`
	CPUPerRequestUS float64 `json:"cpu_per_request_us"`
}

type serverStats struct {
	PID             int     `json:"pid"`
	CPUSeconds      float64 `json:"cpu_s"`
	CPUPerRequestUS float64 `json:"cpu_per_request_us"`
}

// conn is one connection and its loop's state, owned by its goroutine but
// for the counters, which the main goroutine reads.
type conn struct {
	c        net.Conn
	inflight uint64
	ids      []uint64 // the id outstanding in each slot, 0 when free
	gen      []uint64
	free     []int // free slots
	out      []byte
	buf      []byte
	head     []byte // a request up to its id
	tail     []byte // and after it

	answers, errs, unmatched atomic.Int64
	_                        [64]byte // keep the next conn's counters off this cache line
}

// The protocol revisions refclient speaks.
const (
	protocolSession   = "2025-11-25"
	protocolStateless = "2026-07-28"
)

const initialize = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + protocolSession + `","capabilities":{},"clientInfo":{"name":"refclient","version":"1"}}}` + "\n" +
	`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"

// modernMeta is the params member every 2026-07-28 request carries in
// place of the session initialize opened.
const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + protocolStateless + `","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"refclient","version":"1"}},`

// requestTail is a request after its id: tools/call of echo with text,
// in the revision protocol.
func requestTail(protocol, text string) []byte {
	meta := ""
	if protocol == protocolStateless {
		meta = modernMeta
	}
	return []byte(`,"method":"tools/call","params":{` + meta + `"name":"echo","arguments":{"text":"` + text + `"}}}` + "\n")
}

func run(o *options) (*result, error) {
	conns := make([]*conn, o.conns)
	var wg sync.WaitGroup
	errc := make(chan error, o.conns)
	for i := range conns {
		k := &conn{
			inflight: uint64(o.inflight),
			ids:      make([]uint64, o.inflight),
			gen:      make([]uint64, o.inflight),
			buf:      make([]byte, 256<<10),
			head:     []byte(`{"jsonrpc":"2.0","id":`),
			tail:     requestTail(o.protocol, o.text),
		}
		for s := o.inflight - 1; s >= 0; s-- {
			k.free = append(k.free, s)
		}
		conns[i] = k
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := k.dial(o.addr, o.timeout, o.protocol == protocolSession); err != nil {
				errc <- err
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		for _, k := range conns {
			if k.c != nil {
				_ = k.c.Close()
			}
		}
		return nil, err
	}
	var stopping atomic.Bool
	loopErr := make(chan error, o.conns)
	for _, k := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// loop returns when the connection fails, or is closed at the end.
			if err := k.loop(); !stopping.Load() {
				loopErr <- err
			}
		}()
	}
	sum := func() (a, e, u int64) {
		for _, k := range conns {
			a += k.answers.Load()
			e += k.errs.Load()
			u += k.unmatched.Load()
		}
		return
	}
	time.Sleep(o.warmup)
	a0, e0, u0 := sum()
	cpu0, cpuErr := procCPU(o.pid)
	self0, _ := procCPU(os.Getpid())
	t0 := time.Now()
	time.Sleep(o.duration)
	a1, e1, u1 := sum()
	cpu1, cpuErr1 := procCPU(o.pid)
	self1, _ := procCPU(os.Getpid())
	span := time.Since(t0)
	stopping.Store(true)
	for _, k := range conns {
		_ = k.c.Close()
	}
	wg.Wait()
	close(loopErr)
	if err := <-loopErr; err != nil {
		return nil, err
	}
	res := &result{
		Schema: "refclient/v1", Target: "tcp://" + o.addr, Transport: "tcp", Protocol: o.protocol, Connections: o.conns, InFlight: o.inflight,
		WarmupS: o.warmup.Seconds(), DurationS: span.Seconds(),
		Requests: a1 - a0, Errors: e1 - e0, Unmatched: u1 - u0,
	}
	res.OK = res.Requests - res.Errors
	res.Throughput = float64(res.Requests) / span.Seconds()
	res.Load = &loadStats{CPUSeconds: (self1 - self0).Seconds()}
	if res.Requests > 0 {
		res.Load.CPUPerRequestUS = float64(self1-self0) / float64(time.Microsecond) / float64(res.Requests)
	}
	if o.pid > 0 && cpuErr == nil && cpuErr1 == nil {
		res.Server = &serverStats{PID: o.pid, CPUSeconds: (cpu1 - cpu0).Seconds()}
		if res.Requests > 0 {
			res.Server.CPUPerRequestUS = float64(cpu1-cpu0) / float64(time.Microsecond) / float64(res.Requests)
		}
	}
	return res, nil
}

// dial connects and, with handshake (the session revision), runs the
// handshake: initialize (id 0) and its answer, then
// notifications/initialized, sent with the first requests.
func (k *conn) dial(addr string, timeout time.Duration, handshake bool) error {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	k.c = c
	if !handshake {
		return nil
	}
	if _, err := io.WriteString(c, initialize[:strings.IndexByte(initialize, '\n')+1]); err != nil {
		return err
	}
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	n := 0
	for {
		m, err := c.Read(k.buf[n:])
		if err != nil {
			return fmt.Errorf("initialize: %w", err)
		}
		n += m
		if i := bytes.IndexByte(k.buf[:n], '\n'); i >= 0 {
			line := k.buf[:i]
			if !bytes.Contains(line, []byte(`"result"`)) {
				return fmt.Errorf("initialize: %s", line)
			}
			if n > i+1 {
				return errors.New("initialize: more than its answer came")
			}
			break
		}
		if n == len(k.buf) {
			return errors.New("initialize: answer too long")
		}
	}
	_ = c.SetReadDeadline(time.Time{})
	k.out = append(k.out[:0], initialize[strings.IndexByte(initialize, '\n')+1:]...)
	return nil
}

// loop keeps the connection's slots full until the connection is closed.
func (k *conn) loop() error {
	n := 0 // bytes held in buf
	for {
		// One write for every free slot.
		for _, s := range k.free {
			k.gen[s]++
			id := k.gen[s]*k.inflight + uint64(s) + 1
			k.ids[s] = id
			k.out = append(k.out, k.head...)
			k.out = strconv.AppendUint(k.out, id, 10)
			k.out = append(k.out, k.tail...)
		}
		k.free = k.free[:0]
		if len(k.out) > 0 {
			if _, err := k.c.Write(k.out); err != nil {
				return err
			}
			k.out = k.out[:0]
		}
		// Read what has come; answer every complete line.
		for len(k.free) == 0 {
			if n == len(k.buf) {
				k.buf = append(k.buf, make([]byte, len(k.buf))...)
			}
			m, err := k.c.Read(k.buf[n:])
			if err != nil {
				return err
			}
			n += m
			used, ok, bad, foreign := 0, int64(0), int64(0), int64(0)
			for {
				i := bytes.IndexByte(k.buf[used:n], '\n')
				if i < 0 {
					break
				}
				line := k.buf[used : used+i]
				used += i + 1
				id, isErr, found := parseID(line)
				if !found {
					continue // a notification
				}
				s := (id - 1) % k.inflight
				if id == 0 || k.ids[s] != id {
					foreign++
					continue
				}
				k.ids[s] = 0
				k.free = append(k.free, int(s))
				ok++
				if isErr {
					bad++
				}
			}
			n = copy(k.buf, k.buf[used:n])
			k.answers.Add(ok)
			if bad > 0 {
				k.errs.Add(bad)
			}
			if foreign > 0 {
				k.unmatched.Add(foreign)
			}
		}
	}
}

var idKey = []byte(`"id":`)

// parseID reads the number after the first "id": of an answer, and whether
// an "error" member follows it at once (how every server measured orders
// its answers); found is false when the line has no numeric id.
func parseID(line []byte) (id uint64, isErr, found bool) {
	const pre = `{"jsonrpc":"2.0","id":`
	i := len(pre)
	if len(line) < i || string(line[:i]) != pre {
		j := bytes.Index(line, idKey)
		if j < 0 {
			return 0, false, false
		}
		i = j + len(idKey)
	}
	start := i
	for i < len(line) && line[i] >= '0' && line[i] <= '9' {
		id = id*10 + uint64(line[i]-'0')
		i++
	}
	if i == start {
		return 0, false, false
	}
	rest := line[i:]
	isErr = len(rest) >= 9 && string(rest[:9]) == `,"error":`
	return id, isErr, true
}

// procCPU is process pid's user plus system CPU time so far, from
// /proc/PID/stat (0 when pid is 0).
func procCPU(pid int) (time.Duration, error) {
	if pid <= 0 {
		return 0, nil
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat")
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	ut, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	st, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("malformed /proc stat")
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

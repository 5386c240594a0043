package main

// The stateless run (-stateless-only, make bench-stateless; also part of
// the full run unless -stateless=false): mcpedge serving protocol
// 2026-07-28 (no session, every request carrying its _meta) against itself
// serving the session revision 2025-11-25, over Streamable HTTP and TCP,
// and beside the peers' stateless modes. It writes its own section of the
// report, between markers, and leaves the rest of the file as it was; a
// full run that skips it keeps the section there.

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcpedge/mcpedge/loadtest"
)

// The protocol revisions compared.
const (
	eraSession   = loadtest.ProtocolSession
	eraStateless = loadtest.ProtocolStateless
)

// The stateless run's workloads.
const (
	statelessHTTPConns = goalConns // HTTP: closed loop, one request in flight per connection
	statelessTCPConns  = 16        // TCP: pipelined, with
	statelessInFlight  = 16        // requests in flight per connection
	// statelessGoal bounds mcpedge's server CPU per stateless call against
	// a session-bound one: "no more", with room for a shared machine's noise.
	statelessGoal = 1.10
)

const (
	statelessBegin = "<!-- bench-stateless: begin. Written by make bench-stateless (or make bench-peers); make bench-peers -stateless=false keeps it. -->"
	statelessEnd   = "<!-- bench-stateless: end -->"
)

// eraPoint is one measurement of the stateless run: a server in a mode,
// spoken to in a protocol revision.
type eraPoint struct {
	point
	mode     string // how the server was run: "default", "stateless"
	protocol string // what mcpload spoke
	// refused is why the server did not serve the revision to mcpload (the
	// probe's first error), "" when it did; a refused point is not
	// measured.
	refused string
}

type statelessReport struct {
	cfg          *config
	began, ended time.Time
	points       []*eraPoint
}

// statelessTarget is a server of the stateless run and what is asked of it.
type statelessTarget struct {
	srv     *server
	tcp     bool
	measure *eraPoint
}

// runStateless measures the stateless section and returns it, markers
// included. The binaries must be built.
func runStateless(ctx context.Context, c *config) (string, error) {
	rep := &statelessReport{cfg: c, began: time.Now()}
	byBin := map[string]peer{}
	for _, p := range peers(c.bin) {
		byBin[filepath.Base(p.bin)] = p
	}
	var servers []*server
	defer func() {
		for _, s := range servers {
			s.stop()
		}
	}()
	startOne := func(bin string, http, tcp bool, extra ...string) (*server, error) {
		p := byBin[bin]
		args := p.args
		p.args = func(h, t string) []string { return append(args(h, t), extra...) }
		s, err := start(p, http, tcp)
		if err != nil {
			return nil, err
		}
		servers = append(servers, s)
		return s, nil
	}
	edge, err := startOne("mcpedge", true, true)
	if err != nil {
		return "", err
	}
	gosdk, err := startOne("gosdk-server", true, false, "-stateless")
	if err != nil {
		return "", err
	}
	mcpgo, err := startOne("mcpgo-server", true, false, "-stateless")
	if err != nil {
		return "", err
	}
	add := func(s *server, name, mode, protocol string, tcp bool) *statelessTarget {
		tr, conns := "http", statelessHTTPConns
		if tcp {
			tr, conns = "tcp", statelessTCPConns
		}
		t := &statelessTarget{srv: s, tcp: tcp, measure: &eraPoint{point: point{transport: tr, name: name, conns: conns}, mode: mode, protocol: protocol}}
		rep.points = append(rep.points, t.measure)
		return t
	}
	groups := [][]*statelessTarget{
		{
			add(edge, "mcpedge", "default", eraSession, false), add(edge, "mcpedge", "default", eraStateless, false),
			add(gosdk, "go-sdk", "stateless", eraStateless, false), add(gosdk, "go-sdk", "stateless", eraSession, false),
			add(mcpgo, "mcp-go", "stateless", eraStateless, false), add(mcpgo, "mcp-go", "stateless", eraSession, false),
		},
		{add(edge, "mcpedge", "default", eraSession, true), add(edge, "mcpedge", "default", eraStateless, true)},
	}
	mcploadBin := filepath.Join(c.bin, "mcpload")
	// A probe first: a revision a server refuses is noted, not measured.
	for _, g := range groups {
		for _, t := range g {
			res, err := loadPinned(ctx, nil, mcploadBin, append([]string{"-q", "-json", "-", "-timeout", "5s", "-n", "50", "-warmup", "0",
				"-protocol", t.measure.protocol}, t.target())...)
			key := t.measure.key()
			switch {
			case err != nil:
				t.measure.refused = err.Error()
			case res.OK == 0 || res.Errors > 0:
				t.measure.refused = firstError(res)
			}
			if t.measure.refused != "" {
				log.Printf("%-40s not served: %s", key, t.measure.refused)
			}
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
		}
	}
	common := []string{"-duration", c.duration.String(), "-warmup", c.warmup.String(), "-timeout", "10s"}
	for round := 0; round < c.rounds; round++ {
		for _, g := range groups {
			for k := range g {
				// Alternate: each round starts from another target.
				t := g[(k+round)%len(g)]
				if t.measure.refused != "" {
					continue
				}
				args := append([]string{"-q", "-json", "-", "-protocol", t.measure.protocol, "-pid", strconv.Itoa(t.srv.pid())}, common...)
				if t.tcp {
					args = append(args, "-c", strconv.Itoa(statelessTCPConns), "-inflight", strconv.Itoa(statelessInFlight))
				} else {
					args = append(args, "-c", strconv.Itoa(statelessHTTPConns))
				}
				res, err := loadPinned(ctx, nil, mcploadBin, append(args, t.target())...)
				logRound(t.measure.key(), round, res, err)
				t.measure.runs = append(t.measure.runs, res)
				if ctx.Err() != nil {
					return "", ctx.Err()
				}
			}
		}
	}
	rep.ended = time.Now()
	return rep.markdown(), nil
}

func (t *statelessTarget) target() string {
	if t.tcp {
		return "tcp://" + t.srv.tcpAddr
	}
	return "http://" + t.srv.httpAddr + "/mcp"
}

func (p *eraPoint) key() string {
	return p.transport + "/" + p.name + "(" + p.mode + ")/" + p.protocol
}

// firstError is a failed run's first error sample, or its error count.
func firstError(r *loadtest.Result) string {
	kinds := make([]string, 0, len(r.ErrorSamples))
	for k := range r.ErrorSamples {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		if v := r.ErrorSamples[k]; v != "" {
			return v
		}
	}
	return fmt.Sprintf("%d of %d requests failed", r.Errors, r.Requests)
}

// writeStateless measures the stateless section and puts it into the
// report file, leaving the rest of the file as it was.
func writeStateless(ctx context.Context, c *config) error {
	section, err := runStateless(ctx, c)
	if err != nil {
		return err
	}
	old, err := os.ReadFile(c.out)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	doc := string(old)
	if doc == "" {
		doc = "# Benchmarks\n\n"
	}
	doc = spliceStateless(doc, section)
	if err := os.MkdirAll(filepath.Dir(c.out), 0o755); err != nil {
		return err
	}
	return os.WriteFile(c.out, []byte(doc), 0o644)
}

func (r *statelessReport) find(tr, name, protocol string) *eraPoint {
	for _, p := range r.points {
		if p.transport == tr && p.name == name && p.protocol == protocol {
			return p
		}
	}
	return nil
}

// emed is p's median of f, 0 when p is missing or was not measured.
func emed(p *eraPoint, f func(*loadtest.Result) float64) float64 {
	if p == nil || p.refused != "" {
		return 0
	}
	return p.median(f)
}

func (r *statelessReport) markdown() string {
	c := r.cfg
	var b strings.Builder
	b.WriteString(statelessBegin + "\n")
	b.WriteString("## Stateless calls: protocol 2026-07-28\n\n")
	fmt.Fprintf(&b, "Written by `make bench-stateless` (bench/cmd/benchpeers -stateless-only) or `make bench-peers` on %s, in %s.\n\n",
		r.began.UTC().Format("2006-01-02 15:04 MST"), r.ended.Sub(r.began).Round(time.Second))
	fmt.Fprintf(&b, "- Machine: %s.\n", machine())
	fmt.Fprintf(&b, "- Command: `cd bench && go run ./cmd/benchpeers -stateless-only -root .. -out ../docs/benchmarks.md` (flags: -duration %s -warmup %s -rounds %d).\n",
		c.duration, c.warmup, c.rounds)
	fmt.Fprintf(&b, "- Revision 2026-07-28 has no sessions: mcpload (`-protocol 2026-07-28`) sends no initialize, and every request carries the version, the client's capabilities and its identity in `params._meta` (over HTTP also `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, and no `Mcp-Session-Id`); every answer is verified as in the session revision, and its result must say `\"resultType\":\"complete\"`. The session revision (`-protocol 2025-11-25`, the default) runs initialize once per connection, before the measured phase.\n")
	fmt.Fprintf(&b, "- HTTP: `mcpload -c %d` (closed loop, one request in flight per connection). TCP: `mcpload -c %d -inflight %d` (pipelined). Every call is `tools/call` of `echo`. Each figure is the median of %d rounds; within a round the targets alternate, each round starting from another. All servers are up at once, idle but for the one measured; the load generator shares the cores.\n",
		statelessHTTPConns, statelessTCPConns, statelessInFlight, c.rounds)
	b.WriteString("- Servers: **mcpedge** (`mcpedge -handlers bench`: both revisions on the same endpoints, chosen per request); **go-sdk** v1.8.0 with `StreamableHTTPOptions{Stateless: true}` (`gosdk-server -stateless`: the mode in which it serves 2026-07-28; SSE answers); **mcp-go** v1.2.1 with `WithStateLess(true)` (`mcpgo-server -stateless`; it serves 2026-07-28 per request in either mode; JSON answers). The peers serve no TCP. In their stateless modes the peers also answer the session revision's calls without a session (a temporary one per POST): those rows are their stateless 2025-11-25 figures.\n")
	b.WriteString("- **Server CPU/call** is the server process's user+system time from /proc over the measured phase per call answered.\n\n")

	// The claim: mcpedge's stateless call against its session-bound one.
	fmt.Fprintf(&b, "A stateless call should cost mcpedge no more server CPU than a session-bound one (goal: 2026-07-28 ÷ 2025-11-25 ≤ %.2f×, the margin being the machine's noise):\n\n", statelessGoal)
	b.WriteString("| transport | figure | mcpedge 2025-11-25 (session) | mcpedge 2026-07-28 (stateless) | 2026 ÷ 2025 | in each round | goal | met |\n|---|---|---:|---:|---:|---:|---:|:-:|\n")
	for _, tr := range []string{"http", "tcp"} {
		s, m := r.find(tr, "mcpedge", eraSession), r.find(tr, "mcpedge", eraStateless)
		if s == nil || m == nil {
			continue
		}
		row := func(fig string, fn func(*loadtest.Result) float64, fmtV func(float64) string, goal float64) {
			sv, mv := emed(s, fn), emed(m, fn)
			var per []string
			if s.refused == "" && m.refused == "" {
				for i := range min(len(s.runs), len(m.runs)) {
					if s.runs[i] != nil && m.runs[i] != nil {
						per = append(per, strings.TrimSuffix(ratio(fn(m.runs[i]), fn(s.runs[i])), "×"))
					}
				}
			}
			g, met := "-", "-"
			if goal > 0 {
				g = "≤ " + strconv.FormatFloat(goal, 'f', 2, 64) + "×"
				met = "no"
				if sv > 0 && mv > 0 && mv/sv <= goal {
					met = "yes"
				}
				if mv == 0 {
					met = "-"
				}
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", tr, fig, fmtV(sv), fmtV(mv), ratio(mv, sv), strings.Join(per, ", "), g, met)
		}
		row("server CPU/call", cpuPerReq, fmtCPU, statelessGoal)
		row("req/s", rps, fmtRPS, 0)
		row("p99", p99, fmtUS, 0)
	}
	b.WriteString("\n")

	b.WriteString("| transport | server | mode | protocol | req/s | p50 | p99 | server CPU/call | CPU ÷ mcpedge 2026-07-28 | errors |\n|---|---|---|---|---:|---:|---:|---:|---:|---:|\n")
	fellBack := false
	for _, p := range r.points {
		wl := fmt.Sprintf("HTTP, %d conns", p.conns)
		if p.transport == "tcp" {
			wl = fmt.Sprintf("TCP, %d conns × %d", p.conns, statelessInFlight)
		}
		if p.refused != "" {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | not served | - | - | - | - | - |\n", wl, p.name, p.mode, p.protocol)
			continue
		}
		vs := "-"
		if ref := r.find(p.transport, "mcpedge", eraStateless); ref != nil && p != ref {
			if ref.refused == "" {
				vs = ratio(emed(p, cpuPerReq), emed(ref, cpuPerReq))
			} else if alt := r.find(p.transport, "mcpedge", eraSession); alt != nil && p != alt && alt.refused == "" {
				// mcpedge did not serve 2026-07-28 here: against its
				// session figure, marked.
				vs = ratio(emed(p, cpuPerReq), emed(alt, cpuPerReq)) + " †"
				fellBack = true
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %.0f |\n", wl, p.name, p.mode, p.protocol,
			fmtRPS(emed(p, rps)), fmtUS(emed(p, p50)), fmtUS(emed(p, p99)), fmtCPU(emed(p, cpuPerReq)), vs, emed(p, errs))
	}
	b.WriteString("\n")
	var notes []string
	if fellBack {
		notes = append(notes, "- † Against mcpedge's "+eraSession+" figure on the same transport: it did not serve "+eraStateless+" there.")
	}
	for _, p := range r.points {
		if p.refused == "" {
			continue
		}
		n := fmt.Sprintf("- %s (%s mode) did not serve %s over %s to mcpload (a 50-call probe; first error: `%s`), so it was not measured in that revision.",
			p.name, p.mode, p.protocol, map[string]string{"http": "Streamable HTTP", "tcp": "TCP"}[p.transport], strings.ReplaceAll(p.refused, "`", "'"))
		if p.name != "mcpedge" && p.protocol == eraStateless {
			if alt := r.find(p.transport, p.name, eraSession); alt != nil && alt.refused == "" {
				n += fmt.Sprintf(" Its stateless %s figures stand in for the comparison.", eraSession)
			}
		}
		notes = append(notes, n)
	}
	if len(notes) > 0 {
		b.WriteString(strings.Join(notes, "\n") + "\n\n")
	}
	b.WriteString(statelessEnd + "\n")
	return b.String()
}

func fmtRPS(v float64) string {
	if v == 0 {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

// logRound logs one round of a stateless or operations point: its
// figures, or why it has none.
func logRound(key string, round int, res *loadtest.Result, err error) {
	if err != nil {
		log.Printf("%s: %v", key, err)
		return
	}
	log.Printf("%-40s round %d: %8.0f req/s  p99 %7.0fµs  server cpu %6.1fµs/call  errors %d",
		key, round+1, res.Throughput, lat(res).P99, cpuPerReq(res), res.Errors)
	for k, v := range res.ErrorSamples {
		log.Printf("%-40s   first %s: %s", key, k, v)
	}
}

// spliceStateless puts section (markers included) into doc: in place of
// the one there, or else before the scaling section, or else where the
// scaling section would go.
func spliceStateless(doc, section string) string {
	if out, ok := replaceMarked(doc, section, statelessBegin, statelessEnd); ok {
		return out
	}
	if i := strings.Index(doc, coresBegin); i >= 0 {
		return doc[:i] + section + "\n" + doc[i:]
	}
	return spliceCores(doc, section)
}

// statelessSection returns the stateless section of doc, markers
// included, or "".
func statelessSection(doc string) string {
	return markedSection(doc, statelessBegin, statelessEnd)
}

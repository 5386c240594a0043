package main

import (
	"strings"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/loadtest"
)

func TestSpliceStateless(t *testing.T) {
	sec := func(body string) string {
		return statelessBegin + "\n## Stateless calls: protocol 2026-07-28\n\n" + body + "\n" + statelessEnd + "\n"
	}
	cores := coresBegin + "\n## Scaling across cores\n\nx\n" + coresEnd + "\n"
	full := "# Benchmarks\n\n## TCP\n\ntable\n\n## Resident memory per idle session\n\nmem\n"

	// Without a scaling section: before the memory section.
	doc := spliceStateless(full, sec("one"))
	if !strings.Contains(doc, "table\n\n"+statelessBegin) || !strings.Contains(doc, statelessEnd+"\n\n## Resident memory") {
		t.Fatalf("first splice:\n%s", doc)
	}
	// The scaling section goes after it.
	doc = spliceCores(doc, cores)
	if i, j := strings.Index(doc, statelessEnd), strings.Index(doc, coresBegin); i < 0 || j < i {
		t.Fatalf("cores after stateless:\n%s", doc)
	}
	// Replaced in place, the rest untouched.
	doc2 := spliceStateless(doc, sec("two"))
	if strings.Contains(doc2, "one") || strings.Count(doc2, statelessBegin) != 1 || strings.Replace(doc2, "two", "one", 1) != doc {
		t.Fatalf("second splice:\n%s", doc2)
	}
	// A full run keeps both: taken out of the old file, put in the new.
	if got := spliceCores(spliceStateless(full, statelessSection(doc2)), coresSection(doc2)); got != doc2 {
		t.Fatalf("kept sections:\n%s\nwant\n%s", got, doc2)
	}
	// With a scaling section first: before it.
	got := spliceStateless(spliceCores(full, cores), sec("x"))
	if !strings.Contains(got, statelessEnd+"\n\n"+coresBegin) {
		t.Fatalf("before cores:\n%s", got)
	}
}

func TestStatelessMarkdown(t *testing.T) {
	run := func(rps, cpu float64) *loadtest.Result {
		return &loadtest.Result{Throughput: rps, Server: &loadtest.ServerStats{CPUPerRequestUS: cpu}, Latency: &loadtest.LatencyStats{P50: 100, P99: 900}}
	}
	pt := func(tr, name, mode, protocol string, conns int, refused string, runs ...*loadtest.Result) *eraPoint {
		return &eraPoint{point: point{transport: tr, name: name, conns: conns, runs: runs}, mode: mode, protocol: protocol, refused: refused}
	}
	r := &statelessReport{cfg: &config{duration: time.Second, warmup: time.Second, rounds: 1}, began: time.Now(), ended: time.Now(),
		points: []*eraPoint{
			pt("http", "mcpedge", "default", eraSession, 64, "", run(10000, 50)),
			pt("http", "mcpedge", "default", eraStateless, 64, "loadtest: transport 400: HTTP status 400"),
			pt("http", "go-sdk", "stateless", eraStateless, 64, "", run(2000, 400)),
			pt("tcp", "mcpedge", "default", eraSession, 16, "", run(50000, 10)),
			pt("tcp", "mcpedge", "default", eraStateless, 16, "", run(49000, 10.5)),
		}}
	md := r.markdown()
	for _, want := range []string{
		statelessBegin, statelessEnd,
		"| tcp | server CPU/call | 10.0 µs | 10.5 µs | 1.05× | 1.05 | ≤ 1.10× | yes |",
		"| http | server CPU/call | 50.0 µs | - | - |  | ≤ 1.10× | - |",
		"| HTTP, 64 conns | mcpedge | default | 2026-07-28 | not served |",
		"| TCP, 16 conns × 16 | mcpedge | default | 2026-07-28 | 49000 |",
		"mcpedge (default mode) did not serve 2026-07-28 over Streamable HTTP",
		"| HTTP, 64 conns | go-sdk | stateless | 2026-07-28 | 2000 | 100 µs | 900 µs | 400.0 µs | 8.00× † | 0 |",
		"† Against mcpedge's 2025-11-25 figure",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("missing %q in\n%s", want, md)
		}
	}
}

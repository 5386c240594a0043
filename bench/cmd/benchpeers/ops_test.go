package main

import (
	"strings"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/loadtest"
)

func TestOpsMarkdown(t *testing.T) {
	run := func(rps, cpu float64) *loadtest.Result {
		return &loadtest.Result{Throughput: rps, Server: &loadtest.ServerStats{CPUPerRequestUS: cpu}, Latency: &loadtest.LatencyStats{P50: 100, P99: 900}}
	}
	pt := func(tr, variant string, conns int, refused string, runs ...*loadtest.Result) *opsPoint {
		return &opsPoint{point: point{transport: tr, name: "mcpedge", conns: conns, runs: runs}, variant: variant, refused: refused}
	}
	r := &opsReport{cfg: &config{duration: 3 * time.Second, warmup: time.Second, rounds: 3}, began: time.Now(), ended: time.Now(), signing: 2 * time.Second,
		points: []*opsPoint{
			pt("http", opsAdminOff, 64, "", run(30000, 30), run(31000, 29), run(29000, 31)),
			pt("http", opsMetricsOn, 64, "", run(30000, 30.5), run(31000, 30), run(29000, 31.5)),
			pt("tcp", opsAdminOff, 16, "", run(500000, 2), run(500000, 2), run(500000, 2)),
			pt("tcp", opsMetricsOn, 16, "", run(480000, 2.2), run(480000, 1.8), run(480000, 2.2)),
			pt("http", opsTracing, 64, "", run(30000, 30.3), run(31000, 29.5), run(29000, 31)),
			pt("http", opsStatic, 64, "", run(30000, 31), run(31000, 31), run(29000, 31)),
			pt("http", opsJWTCached, 64, "", run(30000, 33), run(31000, 32), run(29000, 32)),
			pt("http", opsJWTDistinc, 64, "loadtest: transport 401: HTTP status 401"),
		}}
	md := r.markdown()
	for _, want := range []string{
		opsBegin, opsEnd, "## Operations cost: metrics, tracing and authorization",
		"(flags: -duration 3s -warmup 1s -rounds 3)",
		"| http | metrics on | server CPU/call | 30.0 µs | 30.5 µs | 1.02× | 1.02, 1.03, 1.02 | ≤ 1.03× | yes |",
		"| tcp | metrics on | server CPU/call | 2.00 µs | 2.20 µs | 1.10× | 1.10, 0.90, 1.10 | ≤ 1.03× | no |",
		"| http | tracing at 0.01 | server CPU/call | 30.0 µs | 30.3 µs | 1.01× | 1.01, 1.02, 1.00 | ≤ 1.03× | yes |",
		"- TCP, metrics on: the rounds' ratios of server CPU per call spread from 0.90× to 1.10×, wider than the goal's margin",
		"-otel-sample 0.01",
		"| HTTP, 64 conns | no auth | 30000 | 100 µs | 900 µs | 30.0 µs | - | - | 0 |",
		"| HTTP, 64 conns | static token | 30000 | 100 µs | 900 µs | 31.0 µs | 1.03× | +1.0 µs | 0 |",
		"| HTTP, 64 conns | JWT RS256, one token (cached) | 30000 | 100 µs | 900 µs | 32.0 µs | 1.07× | +2.0 µs | 0 |",
		"| HTTP, 64 conns | JWT RS256, 20000 tokens in turn (verified each time) | not served |",
		"did not serve mcpload (a 50-call probe; first error: `loadtest: transport 401: HTTP status 401`)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("missing %q in\n%s", want, md)
		}
	}
	if strings.Contains(md, "- HTTP, metrics on: the rounds' ratios") {
		t.Errorf("HTTP's rounds agree:\n%s", md)
	}
	if strings.Contains(md, "metrics on | 30000") {
		t.Errorf("metrics on is not an authorization row:\n%s", md)
	}
}

func TestSpliceOps(t *testing.T) {
	sec := func(body string) string {
		return opsBegin + "\n## Operations cost: metrics and authorization\n\n" + body + "\n" + opsEnd + "\n"
	}
	stateless := statelessBegin + "\n## Stateless calls\n\ns\n" + statelessEnd + "\n"
	cores := coresBegin + "\n## Scaling across cores\n\nx\n" + coresEnd + "\n"
	full := "# Benchmarks\n\n## TCP\n\ntable\n\n## Resident memory per idle session\n\nmem\n"

	// Alone: before the memory section.
	doc := spliceOps(full, sec("one"))
	if !strings.Contains(doc, "table\n\n"+opsBegin) || !strings.Contains(doc, opsEnd+"\n\n## Resident memory") {
		t.Fatalf("alone:\n%s", doc)
	}
	// After the stateless section, before the scaling one.
	doc = spliceCores(spliceStateless(full, stateless), cores)
	doc = spliceOps(doc, sec("one"))
	if !strings.Contains(doc, statelessEnd+"\n\n"+opsBegin) || !strings.Contains(doc, opsEnd+"\n\n"+coresBegin) {
		t.Fatalf("between:\n%s", doc)
	}
	// Without a stateless section, before the scaling one.
	got := spliceOps(spliceCores(full, cores), sec("x"))
	if !strings.Contains(got, opsEnd+"\n\n"+coresBegin) {
		t.Fatalf("before cores:\n%s", got)
	}
	// Replaced in place, the rest untouched.
	doc2 := spliceOps(doc, sec("two"))
	if strings.Contains(doc2, "one") || strings.Count(doc2, opsBegin) != 1 || strings.Replace(doc2, "two", "one", 1) != doc {
		t.Fatalf("in place:\n%s", doc2)
	}
	// A full run keeps it: taken out of the old file, put in the new.
	if got := spliceCores(spliceOps(spliceStateless(full, statelessSection(doc2)), opsSection(doc2)), coresSection(doc2)); got != doc2 {
		t.Fatalf("kept sections:\n%s\nwant\n%s", got, doc2)
	}
	if opsSection(full) != "" {
		t.Fatal("no section in full")
	}
}

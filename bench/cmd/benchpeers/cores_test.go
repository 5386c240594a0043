package main

import (
	"strings"
	"testing"
)

func TestParseCPUList(t *testing.T) {
	for in, want := range map[string]string{"0": "0", "0-3": "0,1,2,3", "0-1,4,6-7": "0,1,4,6,7"} {
		got, err := parseCPUList(in)
		if err != nil || cpuList(got) != want {
			t.Errorf("parseCPUList(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	if _, err := parseCPUList("x"); err == nil {
		t.Error("parseCPUList(x): no error")
	}
}

func TestSpliceCores(t *testing.T) {
	sec := func(body string) string {
		return coresBegin + "\n## Scaling across cores\n\n" + body + "\n" + coresEnd + "\n"
	}
	full := "# Benchmarks\n\n## TCP\n\ntable\n\n## Resident memory per idle session\n\nmem\n"

	// Inserted before the memory section the first time.
	doc := spliceCores(full, sec("one"))
	if !strings.Contains(doc, "table\n\n"+coresBegin) || !strings.Contains(doc, coresEnd+"\n\n## Resident memory") {
		t.Fatalf("first splice:\n%s", doc)
	}
	// Replaced in place after that, the rest untouched.
	doc2 := spliceCores(doc, sec("two"))
	if strings.Contains(doc2, "one") || !strings.Contains(doc2, "two") || strings.Count(doc2, coresBegin) != 1 {
		t.Fatalf("second splice:\n%s", doc2)
	}
	if strings.Replace(doc2, "two", "one", 1) != doc {
		t.Fatalf("the rest changed:\n%s\nwas\n%s", doc2, doc)
	}
	// The full run keeps it: taken out of the old file, put in the new.
	if got := coresSection(doc2); got != sec("two") {
		t.Fatalf("coresSection = %q", got)
	}
	if got := spliceCores(full, coresSection(doc2)); got != doc2 {
		t.Fatalf("kept section:\n%s", got)
	}
	// A file without the other sections gets it at the end.
	if got := spliceCores("# Benchmarks\n", sec("x")); got != "# Benchmarks\n\n"+sec("x") {
		t.Fatalf("append: %q", got)
	}
}

func TestClusterSectionKept(t *testing.T) {
	sec := clusterBegin + "\n## Cluster\n\nfigures\n\n" + clusterEnd + "\n"
	old := "# B\n\n## HTTP\n\nold\n\n" + sec + "\n## Resident memory per idle session\n\nm\n"
	fresh := "# B\n\n## HTTP\n\nnew\n\n## Resident memory per idle session\n\nm\n"
	got := spliceMarked(fresh, markedSection(old, clusterBegin, clusterEnd), clusterBegin, clusterEnd)
	if !strings.Contains(got, "figures") || !strings.Contains(got, "new") || strings.Index(got, "figures") > strings.Index(got, "## Resident memory") {
		t.Fatalf("got:\n%s", got)
	}
	again := spliceMarked(got, markedSection(old, clusterBegin, clusterEnd), clusterBegin, clusterEnd)
	if strings.Count(again, clusterBegin) != 1 {
		t.Fatalf("section doubled:\n%s", again)
	}
}

package admin

import (
	"bytes"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/auth"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/session"
)

// Per-tool series: mcpedge_tool_calls_total{tool,upstream,outcome} and
// mcpedge_tool_duration_seconds{tool,upstream}, fed by the engine's
// ToolObserver (Metrics.ToolDone).
//
// Labels are bounded by the registry: a series per tool registered now
// (its upstream from handlers.ToolOptions.Upstream, "" for a tool served
// here), and "other" for any name the registry does not hold, so that a
// client cannot grow the label set. A tool removed from the registry is
// dropped: its series end (Prometheus marks them stale), and a tool
// registered again under that name starts from zero (a counter reset,
// which rate() absorbs).

// outcomes are the values of the outcome label: how a tools/call ended.
var outcomes = [...]string{
	"ok",              // a result
	"tool_error",      // a result with isError set: the tool failed, or its arguments did not validate
	"refused",         // a limit (-32000) or authorization (-31001, -31003) refused it before it ran
	"cancelled",       // -32800
	"invalid_params",  // -32602: an unknown tool, malformed params
	"invalid_request", // -32600, -32601, -32700
	"internal_error",  // -32603: a handler panicked, a result that broke its output schema
	"server_error",    // any other code of -32099 to -32000 (request timeout, URL elicitation needed...)
	"other_error",     // any other code
}

const nOutcomes = len(outcomes)

// outcomeIndex returns the index in outcomes of a call's end.
func outcomeIndex(code int, toolError bool) int {
	switch code {
	case 0:
		if toolError {
			return 1
		}
		return 0
	case codec.CodeServerBusy, auth.CodeUnauthorized, auth.CodeForbidden:
		return 2
	case codec.CodeRequestCancelled:
		return 3
	case codec.CodeInvalidParams:
		return 4
	case codec.CodeInvalidRequest, codec.CodeMethodNotFound, codec.CodeParseError:
		return 5
	case codec.CodeInternalError:
		return 6
	}
	if code >= -32099 && code <= -32000 {
		return 7
	}
	return 8
}

// toolStats are one tool's series.
type toolStats struct {
	name, upstream string
	labels         string // tool="…",upstream="…", escaped

	ok    shardedCounter           // the hottest: sharded as requests
	calls [nOutcomes]atomic.Uint64 // the other outcomes (calls[0] unused)
	dur   histogram
}

func newToolStats(name, upstream string) *toolStats {
	return &toolStats{name: name, upstream: upstream,
		labels: `tool="` + escapeLabel(name) + `",upstream="` + escapeLabel(upstream) + `"`}
}

func (st *toolStats) count(o int) uint64 {
	if o == 0 {
		return st.ok.sum()
	}
	return st.calls[o].Load()
}

// toolTable maps the tools registered to their series. It is immutable:
// a change of the registry builds another.
type toolTable struct {
	byName map[string]*toolStats
	list   []*toolStats // registration order, other last
	other  *toolStats
}

// toolSeries holds the current toolTable and what rebuilds it.
type toolSeries struct {
	table atomic.Pointer[toolTable]
	dirty atomic.Bool // the registry changed since the table was built
	reg   atomic.Pointer[handlers.Registry]
	mu    sync.Mutex // serializes rebuilds
}

func (ts *toolSeries) init() {
	other := newToolStats("other", "")
	ts.table.Store(&toolTable{byName: map[string]*toolStats{}, list: []*toolStats{other}, other: other})
}

// current returns the table, rebuilt first when the registry changed.
func (ts *toolSeries) current() *toolTable {
	if ts.dirty.Load() {
		ts.rebuild()
	}
	return ts.table.Load()
}

// rebuild makes the table of the tools registered now. A tool still
// registered, with the same upstream, keeps its series.
func (ts *toolSeries) rebuild() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if !ts.dirty.Swap(false) {
		return // another rebuilt it meanwhile
	}
	reg := ts.reg.Load()
	if reg == nil {
		return
	}
	old := ts.table.Load()
	nt := &toolTable{byName: make(map[string]*toolStats, len(old.byName))}
	reg.EachTool(func(name string, o handlers.ToolOptions) {
		st := old.byName[name]
		if st == nil || st.upstream != o.Upstream {
			st = newToolStats(name, o.Upstream)
		}
		nt.byName[name] = st
		nt.list = append(nt.list, st)
	})
	// Unknown names are "other"; a tool registered under that very name
	// (served here) takes them, so that no series is written twice.
	if st, ok := nt.byName["other"]; ok && st.upstream == "" {
		nt.other = st
	} else {
		nt.other = old.other
		nt.list = append(nt.list, nt.other)
	}
	ts.table.Store(nt)
}

// TrackTools labels the per-tool series with the tools of reg, following
// its changes (Attach calls it with the server's registry; an embedder
// that installs Metrics on an engine of its own calls it with
// engine.Server.Registry). Before it, every tool counts as "other".
func (m *Metrics) TrackTools(reg *handlers.Registry) {
	if m.tools.reg.Swap(reg) == nil {
		reg.OnChange(func(kind handlers.ListKind) {
			if kind == handlers.ListTools {
				m.tools.dirty.Store(true)
			}
		})
	}
	m.tools.dirty.Store(true)
}

// ToolDone implements engine.ToolObserver: one call of tool ended with
// code (toolError: a result with isError set), d its duration or -1 when
// not timed.
func (m *Metrics) ToolDone(sess *session.Session, tool string, code int, toolError bool, d time.Duration) {
	tt := m.tools.current()
	st := tt.byName[tool]
	if st == nil {
		st = tt.other
	}
	if o := outcomeIndex(code, toolError); o == 0 {
		st.ok.s[shardOf(sess)].n.Add(1)
	} else {
		st.calls[o].Add(1)
	}
	if d >= 0 {
		st.dur.observe(d)
	}
}

// writeTools writes the per-tool series counted.
func (m *Metrics) writeTools(w io.Writer) {
	tt := m.tools.current()
	var calls, dur bytes.Buffer
	for _, st := range tt.list {
		for o := range outcomes {
			if n := st.count(o); n > 0 {
				calls.WriteString(`mcpedge_tool_calls_total{` + st.labels + `,outcome="` + outcomes[o] + `"} `)
				calls.WriteString(strconv.FormatUint(n, 10))
				calls.WriteByte('\n')
			}
		}
		st.dur.write(&dur, "mcpedge_tool_duration_seconds", st.labels)
	}
	if calls.Len() > 0 {
		m.writeFamily(w, "mcpedge_tool_calls_total", "counter")
		_, _ = w.Write(calls.Bytes())
	}
	if dur.Len() > 0 {
		m.writeFamily(w, "mcpedge_tool_duration_seconds", "histogram")
		_, _ = w.Write(dur.Bytes())
	}
}

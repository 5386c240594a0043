package engine

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMethodTable: every method the engine serves appears once in the
// method table, which its lookup finds and nothing else; each row says
// what serves it on each path it is served on.
func TestMethodTable(t *testing.T) {
	seen := map[string]bool{}
	for i := range methods {
		m := &methods[i]
		t.Run(m.name, func(t *testing.T) {
			require.False(t, seen[m.name], "twice in the table")
			seen[m.name] = true
			assert.Same(t, m, lookup(m.name))
			assert.Equal(t, i, MethodIndex(m.name))
			assert.Equal(t, m.name, MethodLabel(i))
			assert.NotEqual(t, unknown.name, m.name)

			require.True(t, m.since != "" || m.stateless, "served in no revision")
			if m.since != "" {
				assert.Contains(t, mcp.SessionVersions, m.since)
				assert.True(t, m.now != opNone || m.pool != opNone, "a session's requests have nothing to serve them")
				assert.True(t, m.now <= opInlineTool, "now is a session's at-once op")
			} else {
				assert.Equal(t, opNone, m.now)
			}
			if m.stateless {
				assert.True(t, m.statelessNow != opNone || m.pool != opNone, "a stateless request has nothing to serve it")
				assert.Contains(t, []op{opNone, opListPage, opInlineTool, opDiscover, opListen, opStatelessTask}, m.statelessNow)
			} else {
				assert.Equal(t, opNone, m.statelessNow)
			}
			if m.now == opStaticRead || m.now == opInlineTool || m.statelessNow == opInlineTool {
				assert.NotEqual(t, opNone, m.pool, "answered at once only sometimes: the pool serves the rest")
			}
			assert.True(t, m.pool == opNone || m.pool >= opCallTool, "pool is a pool op")
			assert.Contains(t, []string{"", "name", "uri", "taskId"}, m.nameParam)
			assert.Equal(t, m.early, m.now == opPing || m.now == opInitialize)
		})
	}
	lists := map[handlers.ListName]string{}
	for i := range methods {
		if m := &methods[i]; m.now == opListPage || m.statelessNow == opListPage {
			require.Empty(t, lists[m.list], "%s and %s page the same list", lists[m.list], m.name)
			lists[m.list] = m.name
		}
	}
	assert.Len(t, lists, 4)
	// Names near the table's (same length, first and last bytes) are not
	// in it.
	for i := range methods {
		n := methods[i].name
		for _, other := range []string{n[:len(n)-1] + "X", "X" + n[1:], n + "s", n[:len(n)-1], n[:1] + "X" + n[2:]} {
			if !seen[other] {
				assert.Same(t, &unknown, lookup(other), other)
				assert.Equal(t, NumMethods, MethodIndex(other), other)
			}
		}
	}
	for _, other := range []string{"", "x", "ab", "notifications/initialized", "sampling/createMessage", "roots/list"} {
		assert.Same(t, &unknown, lookup(other), other)
	}
	assert.Equal(t, "other", MethodLabel(NumMethods))
	assert.Equal(t, "other", MethodLabel(-1))
}

// TestMethodsPerRevision: the methods the table serves in each revision
// are the client requests of that revision's schema
// (testdata/client_requests.json, read from each revision's schema.json),
// and 2026-07-28's tasks extension.
func TestMethodsPerRevision(t *testing.T) {
	raw, err := os.ReadFile("testdata/client_requests.json")
	require.NoError(t, err)
	var spec map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &spec))
	want := func(key string) []string {
		var l []string
		require.NoError(t, json.Unmarshal(spec[key], &l), key)
		require.NotEmpty(t, l, key)
		return l
	}
	for _, v := range mcp.AllVersions {
		t.Run(v, func(t *testing.T) {
			w := want(v)
			if v == mcp.Version20260728 {
				w = append(w, want(v+" "+mcp.ExtensionTasks)...)
			}
			slices.Sort(w)
			var got []string
			for i := range methods {
				m := &methods[i]
				if (v == mcp.Version20260728 && m.stateless) || (v != mcp.Version20260728 && m.servedIn(v)) {
					got = append(got, m.name)
				}
			}
			slices.Sort(got)
			assert.Equal(t, w, got)
		})
	}
}

// BenchmarkMethodLookup: a method's row, for tools/call (the hot one),
// ping, and a method nobody serves.
func BenchmarkMethodLookup(b *testing.B) {
	for _, name := range []string{mcp.MethodToolsCall, mcp.MethodPing, "x/unknown"} {
		name := string(append([]byte(nil), name...)) // not the constant's memory
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for range b.N {
				n += int(lookup(name).now)
			}
			sinkInt = n
		})
	}
}

var sinkInt int

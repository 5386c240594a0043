package engine_test

import (
	"fmt"
	"testing"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/require"
)

// TestVersionsOffered holds Options.Versions: initialize negotiates among
// the session revisions offered (none: -32022 naming those offered), a
// 2026-07-28 request gets -32022 unless that revision is offered, and
// server/discover lists only what is offered.
func TestVersionsOffered(t *testing.T) {
	initialize := func(v string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, v)
	}
	type supported struct {
		Supported []string `json:"supported"`
		Requested string   `json:"requested"`
	}
	tests := []struct {
		name      string
		versions  []string
		offered   []string // what server/discover and -32022 list
		init      string   // requested in initialize
		negotiate string   // "" : initialize refused with -32022
		stateless bool     // 2026-07-28 requests served
	}{
		{"all by default", nil, mcp.AllVersions[:], "2025-06-18", "2025-06-18", true},
		{"unknown ignored", []string{"1999-01-01"}, mcp.AllVersions[:], "2025-11-25", "2025-11-25", true},
		{"session only", []string{"2025-11-25"}, []string{"2025-11-25"}, "2025-06-18", "2025-11-25", false},
		{"two session", []string{"2024-11-05", "2025-06-18"}, []string{"2025-06-18", "2024-11-05"}, "2024-11-05", "2024-11-05", false},
		{"stateless only", []string{"2026-07-28"}, []string{"2026-07-28"}, "2025-11-25", "", true},
		{"both, pinned", []string{"2026-07-28", "2025-03-26"}, []string{"2026-07-28", "2025-03-26"}, "2025-11-25", "2025-03-26", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, engine.Options{Versions: tt.versions})
			require.Equal(t, tt.offered, f.srv.Versions())

			c := f.client(t)
			m := c.call(req26(1, "server/discover", "", `{}`))
			if tt.stateless {
				var d mcp.DiscoverResult
				m.decode(t, &d)
				require.Equal(t, tt.offered, d.SupportedVersions)
				m = c.call(req26(2, "tools/call", `"name":"echo","arguments":{"text":"hi"}`, `{}`))
				require.Equal(t, "hi", m.text(t))
			} else {
				requireError(t, m, "1", mcp.CodeUnsupportedProtocolVersion)
				var d supported
				require.NoError(t, codec.Unmarshal(m.Error.Data, &d))
				require.Equal(t, supported{tt.offered, "2026-07-28"}, d)
				m = c.call(req26(2, "tools/call", `"name":"echo","arguments":{"text":"hi"}`, `{}`))
				requireError(t, m, "2", mcp.CodeUnsupportedProtocolVersion)
			}

			s := f.client(t)
			m = s.call(initialize(tt.init))
			if tt.negotiate == "" {
				requireError(t, m, "1", mcp.CodeUnsupportedProtocolVersion)
				var d supported
				require.NoError(t, codec.Unmarshal(m.Error.Data, &d))
				require.Equal(t, supported{tt.offered, tt.init}, d)
				require.Contains(t, m.Error.Message, "2026-07-28")
				return
			}
			var ir mcp.InitializeResult
			m.decode(t, &ir)
			require.Equal(t, tt.negotiate, ir.ProtocolVersion)
			require.Equal(t, tt.negotiate, s.sess.Version())
		})
	}
}

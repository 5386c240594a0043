package cluster

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// servicesNode is a node as far as services reports need: a name, keys,
// and peer b alive in incarnation "2".
func servicesNode(name, inc string, key string) *Node {
	n := &Node{sig: newSigner([][]byte{[]byte(key)}), name: name, inc: inc, log: slog.New(slog.DiscardHandler)}
	n.members.peers = map[string]*peer{}
	n.svcs.kick = make(chan struct{}, 1)
	return n
}

func seq(states ...any) func(func(string, bool) bool) {
	return func(yield func(string, bool) bool) {
		for i := 0; i+1 < len(states); i += 2 {
			if !yield(states[i].(string), states[i+1].(bool)) {
				return
			}
		}
	}
}

// TestServicesReports: a node's report of its services reaches the
// others signed and bounded; what is forged, malformed, too large, or
// from a node not known alive in that incarnation is dropped.
func TestServicesReports(t *testing.T) {
	a := servicesNode("a", "1", "key")
	a.members.peers["b"] = &peer{name: "b", inc: "2", seen: time.Now()}
	b := servicesNode("b", "2", "key")
	b.SetServices(seq("x", true, "y", false, "", true, "bad name", true))
	report, ok := b.appendServices(nil)
	require.True(t, ok)

	a.onServices(&nats.Msg{Data: report})
	assert.Equal(t, map[string]map[string]bool{"b": {"x": true, "y": false}}, a.PeerServices(), "names that cannot be told are left out")
	assert.True(t, a.UpElsewhere("x"))
	assert.False(t, a.UpElsewhere("y"))
	assert.False(t, a.UpElsewhere("z"))
	assert.Equal(t, "b", a.upAt("x", true))

	// Where a session's request goes.
	for _, tt := range []struct {
		name   string
		placer Placer
		method string
		home   bool
		to     string
	}{
		{"no placer", nil, "tools/call", false, ""},
		{"record change", nil, "logging/setLevel", true, ""},
		{"bound", func(*codec.Message) (bool, string) { return true, "" }, "tools/call", true, ""},
		{"down here, up at b", func(*codec.Message) (bool, string) { return false, "x" }, "tools/call", false, "b"},
		{"down everywhere", func(*codec.Message) (bool, string) { return false, "y" }, "tools/call", false, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a.SetPlacer(tt.placer)
			home, to := a.place(&codec.Message{Kind: codec.KindRequest, Method: tt.method, Params: []byte(`{}`)})
			assert.Equal(t, tt.home, home)
			assert.Equal(t, tt.to, to)
		})
	}
	a.SetPlacer(nil)

	bad := func(t *testing.T, data []byte) {
		t.Helper()
		before := a.stats.badMessages.Load()
		a.onServices(&nats.Msg{Data: data})
		assert.Equal(t, before+1, a.stats.badMessages.Load(), "counted as bad")
	}
	body := report[:len(report)-macSize]
	resign := func(body []byte) []byte { return b.sig.sign(append([]byte(nil), body...), 0) }
	t.Run("forged", func(t *testing.T) {
		other := servicesNode("b", "2", "another key")
		other.SetServices(seq("x", false))
		forged, _ := other.appendServices(nil)
		bad(t, forged)
		assert.True(t, a.UpElsewhere("x"), "b's own report stands")
	})
	t.Run("changed on the way", func(t *testing.T) {
		changed := append([]byte(nil), report...)
		changed[len(body)-1] ^= 1
		bad(t, changed)
	})
	t.Run("malformed", func(t *testing.T) {
		for _, body := range [][]byte{
			{},
			{msgServices},
			append(append([]byte(nil), body...), 1), // a name cut short
			append(append([]byte(nil), body...), 1, 'z', 2),                          // a state that is not 0 or 1
			append(append([]byte(nil), body...), 1, ' ', 1),                          // an unprintable name
			append(appendStr(appendStr([]byte{msgServices}, "b c"), "2"), 1, 'x', 1), // a bad node name
		} {
			bad(t, resign(body))
		}
	})
	t.Run("too many", func(t *testing.T) {
		many := appendStr(appendStr([]byte{msgServices}, "b"), "2")
		for i := range maxServices + 1 {
			many = append(appendStr(many, "s"+strings.Repeat("0", 3)+string(rune('a'+i%26))+strings.Repeat("x", i/26)), 1)
		}
		bad(t, resign(many))
	})
	t.Run("too large", func(t *testing.T) {
		bad(t, make([]byte, maxServicesMessage+1))
	})
	t.Run("a node not known", func(t *testing.T) {
		c := servicesNode("c", "3", "key")
		c.SetServices(seq("z", true))
		r, _ := c.appendServices(nil)
		a.onServices(&nats.Msg{Data: r})
		assert.False(t, a.UpElsewhere("z"), "dropped: c is not a live peer")
	})
	t.Run("another incarnation", func(t *testing.T) {
		old := servicesNode("b", "9", "key")
		old.SetServices(seq("x", false))
		r, _ := old.appendServices(nil)
		a.onServices(&nats.Msg{Data: r})
		assert.True(t, a.UpElsewhere("x"), "dropped: b runs as incarnation 2")
	})
	t.Run("the node lost", func(t *testing.T) {
		a.members.peers["b"].dead = true
		assert.False(t, a.UpElsewhere("x"), "a lost node's report does not count")
		a.forgetServices("b")
		assert.Empty(t, a.PeerServices())
	})
}

// TestServicesBounded: a node tells at most maxServices services.
func TestServicesBounded(t *testing.T) {
	n := servicesNode("a", "1", "key")
	n.SetServices(func(yield func(string, bool) bool) {
		for i := 0; ; i++ {
			if !yield("s"+strings.Repeat("x", i%200)+string(rune('a'+i%26)), true) {
				return
			}
			if i > 10*maxServices {
				t.Fatal("the report does not stop")
			}
		}
	})
	r, ok := n.appendServices(nil)
	require.True(t, ok)
	assert.LessOrEqual(t, len(r), maxServicesMessage)
	body, ok := n.sig.open(r)
	require.True(t, ok)
	_, _, up, ok := parseServices(body)
	require.True(t, ok)
	assert.LessOrEqual(t, len(up), maxServices)
}

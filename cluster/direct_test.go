package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/session"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDirectRoundTrip: a direct message survives its link frame, with its
// message decoded by the sender where every member lies in the message
// (the owner then takes it as Decode would give it), and without where
// Decode unescaped or corrected one (the owner decodes it).
func TestDirectRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name, msg string
		decoded   bool
	}{
		{"request", `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":"a.1"}}`, true},
		{"string id", `{"jsonrpc":"2.0","id":"x","method":"ping"}`, true},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`, true},
		{"answer", `{"jsonrpc":"2.0","id":"a.x1.3","result":{"action":"accept"}}`, true},
		{"error", `{"jsonrpc":"2.0","id":"a.x1.4","error":{"code":-1,"message":"no"}}`, true},
		{"escaped method", `{"jsonrpc":"2.0","id":1,"method":"pin\u0067"}`, false},
		{"invalid UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"x\":\"\xff\"}}", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := []byte(tc.msg)
			var m codec.Message
			require.NoError(t, codec.Decode(msg, &m))
			in := session.DirectRequest{Session: []byte("a.s1"), Subject: "static:1", Message: msg, TraceParent: []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")}
			frame := appendDirect(nil, &in, &m, nil)
			var out session.DirectRequest
			var dm codec.Message
			require.True(t, parseDirect(frame, &out, &dm))
			assert.Equal(t, string(in.Session), string(out.Session))
			assert.Equal(t, in.Subject, out.Subject)
			assert.Equal(t, string(in.TraceParent), string(out.TraceParent))
			assert.Empty(t, out.TraceState)
			assert.Equal(t, tc.msg, string(out.Message))
			if !tc.decoded {
				assert.Nil(t, out.Decoded)
				return
			}
			require.NotNil(t, out.Decoded)
			var want codec.Message
			require.NoError(t, codec.Decode(out.Message, &want))
			assert.Equal(t, want, *out.Decoded)
			// Every slice points into the message the owner holds.
			mv := codec.Mover{Old: out.Message}
			for _, f := range [][]byte{dm.ID, dm.Params, dm.Result, dm.Error} {
				if f != nil {
					_, ok := mv.Offset(f)
					assert.True(t, ok)
				}
			}
		})
	}
	t.Run("trace parent of the forward's span", func(t *testing.T) {
		in := session.DirectRequest{Session: []byte("a.s1"), Message: []byte(`{"jsonrpc":"2.0","method":"x"}`), TraceParent: []byte("client's")}
		var out session.DirectRequest
		var dm codec.Message
		require.True(t, parseDirect(appendDirect(nil, &in, nil, &forwardTrace{parent: "forward's"}), &out, &dm))
		assert.Equal(t, "forward's", string(out.TraceParent))
		assert.Nil(t, out.Decoded, "no decoded message was given")
	})
}

// TestParseDirectRefuses: what a direct message must not be is refused
// whole: members out of the message, members a message of its kind has
// not, fields over their bounds.
func TestParseDirectRefuses(t *testing.T) {
	msg := []byte(`{"jsonrpc":"2.0","id":7,"method":"ping"}`)
	frame := func(kind codec.Kind, at [5][2]int, sid string) []byte {
		b := appendBytes(nil, []byte(sid))
		b = appendStr(b, "")
		b = appendBytes(b, nil)
		b = appendBytes(b, nil)
		b = append(b, 1, byte(kind))
		for _, a := range at {
			b = appendUvarint(appendUvarint(b, a[0]), a[1])
		}
		return append(b, msg...)
	}
	id, method := [2]int{22, 2}, [2]int{34, 5} // "7" at 22, "ping" at 34: offsets, lengths plus one
	ok := frame(codec.KindRequest, [5][2]int{id, method}, "a.s1")
	var r session.DirectRequest
	var m codec.Message
	require.True(t, parseDirect(ok, &r, &m), "the reference frame")
	require.Equal(t, "7", string(m.ID))
	require.Equal(t, "ping", m.Method)
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"member past the end", frame(codec.KindRequest, [5][2]int{id, {34, 100}}, "a.s1")},
		{"offset past the end", frame(codec.KindRequest, [5][2]int{id, {1000, 2}}, "a.s1")},
		{"request without id", frame(codec.KindRequest, [5][2]int{{}, method}, "a.s1")},
		{"notification with id", frame(codec.KindNotification, [5][2]int{id, method}, "a.s1")},
		{"answer without result", frame(codec.KindResponse, [5][2]int{id}, "a.s1")},
		{"unknown kind", frame(codec.Kind(42), [5][2]int{id, method}, "a.s1")},
		{"no session", frame(codec.KindRequest, [5][2]int{id, method}, "")},
		{"session too long", frame(codec.KindRequest, [5][2]int{id, method}, string(make([]byte, maxIDLen+1)))},
		{"short", ok[:3]},
		{"no message", ok[:len(ok)-len(msg)]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.False(t, parseDirect(tc.frame, &r, &m))
		})
	}
}

// TestDecodedOK: the members of each kind of message.
func TestDecodedOK(t *testing.T) {
	id, result, errObj := []byte("1"), []byte("{}"), []byte(`{"code":1,"message":"x"}`)
	for _, tc := range []struct {
		name string
		m    codec.Message
		ok   bool
	}{
		{"request", codec.Message{Kind: codec.KindRequest, ID: id, Method: "ping"}, true},
		{"request with result", codec.Message{Kind: codec.KindRequest, ID: id, Method: "ping", Result: result}, false},
		{"notification", codec.Message{Kind: codec.KindNotification, Method: "x"}, true},
		{"notification without method", codec.Message{Kind: codec.KindNotification}, false},
		{"answer", codec.Message{Kind: codec.KindResponse, ID: id, Result: result}, true},
		{"answer with method", codec.Message{Kind: codec.KindResponse, ID: id, Method: "x", Result: result}, false},
		{"error", codec.Message{Kind: codec.KindError, ID: id, Error: errObj}, true},
		{"error with result", codec.Message{Kind: codec.KindError, ID: id, Error: errObj, Result: result}, false},
		{"invalid", codec.Message{Kind: codec.KindInvalid, ID: id, Method: "x"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.ok, decodedOK(&tc.m)) })
	}
}

// TestLostPeerLinkDropped: the link to a peer that membership finds lost
// is dropped at once (a forward finds a link up without asking
// membership), and dialled anew once the peer is back.
func TestLostPeerLinkDropped(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two nodes")
	}
	key := [][]byte{[]byte("0123456789abcdef0123456789abcdef")}
	start := func(name string, routes []string) *Node {
		n, err := Start(context.Background(), Options{Node: name, Embed: "127.0.0.1:0", Routes: routes, Keys: key, Link: "127.0.0.1:0", Heartbeat: 100 * time.Millisecond})
		require.NoError(t, err)
		t.Cleanup(func() { _ = n.Close() })
		return n
	}
	a := start("a", nil)
	b := start("b", []string{"nats-route://" + a.RouteAddr().String()})
	var lc *linkConn
	require.Eventually(t, func() bool { lc = b.linkTo("a"); return lc != nil }, 10*time.Second, 10*time.Millisecond)
	require.Same(t, lc, b.linkTo("a"), "the link up is found again")
	b.markDead("a", "a test says so")
	require.True(t, lc.dead.Load(), "the lost peer's link is dropped")
	// a's next heartbeat brings it back, and a forward dials anew.
	require.Eventually(t, func() bool {
		again := b.linkTo("a")
		return again != nil && again != lc
	}, 10*time.Second, 10*time.Millisecond)
}

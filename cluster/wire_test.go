package cluster

import (
	"bytes"
	"net"
	"net/netip"
	"testing"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
	"github.com/valyala/fasthttp"
)

func TestBusMessageRoundTrip(t *testing.T) {
	for _, tc := range []struct{ topic, payload string }{
		{"resources/updated/mem://board/x", `"mem://board/x"`},
		{"list_changed/tools", ""},
		{"t", string(bytes.Repeat([]byte{0xff}, 300))},
	} {
		t.Run(tc.topic, func(t *testing.T) {
			m := appendBusMessage(nil, tc.topic, []byte(tc.payload))
			topic, payload, ok := parseBusMessage(m)
			if !ok || topic != tc.topic || string(payload) != tc.payload {
				t.Fatalf("got %q %q %v", topic, payload, ok)
			}
		})
	}
	for _, bad := range [][]byte{nil, {0}, {5, 'a'}, {0xff, 0xff, 0xff}} {
		if _, _, ok := parseBusMessage(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestFrameRoundTrip(t *testing.T) {
	var ctx fasthttp.RequestCtx
	ctx.SetStatusCode(201)
	ctx.Response.Header.Set("Mcp-Session-Id", "a.123")
	ctx.Response.Header.SetContentType("application/json")
	b := appendFrameStart(nil, frWhole, 3)
	b = appendHead(b, &ctx)
	b = append(b, `{"ok":true}`...)
	f, ok := parseFrame(b, nil)
	if !ok || f.kind != frWhole || f.seq != 3 || f.status != 201 || string(f.body) != `{"ok":true}` {
		t.Fatalf("got %+v %v", f, ok)
	}
	got := map[string]string{}
	for _, kv := range f.headers {
		got[string(kv[0])] = string(kv[1])
	}
	if got["Mcp-Session-Id"] != "a.123" || got["Content-Type"] != "application/json" {
		t.Fatalf("headers %v", got)
	}
	if _, ok := got["Content-Length"]; ok {
		t.Fatal("hop header forwarded")
	}
	for _, bad := range [][]byte{nil, {'Q', 0}, {frWhole, 0, 0}, {frHead, 0, 0xc8, 0x01, 0xff}, {frWhole}} {
		if _, ok := parseFrame(bad, nil); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestToken(t *testing.T) {
	for _, tc := range []struct {
		subj string
		want uint64
		ok   bool
	}{
		{"p.reply.a.z", 35, true},
		{"p.reply.a.", 0, false},
		{"p.reply.b.1", 0, false},
		{"p.reply.a.!", 0, false},
	} {
		got, ok := token(tc.subj, "p.reply.a.")
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: %d %v", tc.subj, got, ok)
		}
	}
}

func TestNames(t *testing.T) {
	for name, want := range map[string]bool{"a": true, "node-1_x": true, "": false, "a.b": false, "a b": false, "*": false, ">": false, string(bytes.Repeat([]byte("x"), 65)): false} {
		if ValidName(name) != want || validName([]byte(name)) != want {
			t.Errorf("%q: want %v", name, want)
		}
	}
	for _, tc := range []struct {
		host string
		port int
		want string
	}{
		{"web-3.example.com", 7401, "web-3-7401"},
		{"weird host!", 80, "weird-host--80"},
		{"", 7400, "node-7400"},
		{string(bytes.Repeat([]byte("h"), 80)), 7401, string(bytes.Repeat([]byte("h"), 59)) + "-7401"},
	} {
		got := DefaultName(tc.host, tc.port)
		if got != tc.want || !ValidName(got) {
			t.Errorf("DefaultName(%q, %d) = %q", tc.host, tc.port, got)
		}
	}
}

func TestSameAddr(t *testing.T) {
	for _, tc := range []struct {
		route, host string
		port        int
		want        bool
	}{
		{"127.0.0.1:6222", "127.0.0.1", 6222, true},
		{"localhost:6222", "0.0.0.0", 6222, true},
		{"127.0.0.1:6223", "127.0.0.1", 6222, false},
		{"10.0.0.2:6222", "10.0.0.1", 6222, false},
		{"10.0.0.1:6222", "10.0.0.1", 6222, true},
	} {
		if got := sameAddr(tc.route, tc.host, tc.port); got != tc.want {
			t.Errorf("sameAddr(%q, %q, %d) = %v", tc.route, tc.host, tc.port, got)
		}
	}
}

// FuzzParsers feeds every parser of bytes from NATS arbitrary input: none
// may panic.
func FuzzParsers(f *testing.F) {
	var ctx fasthttp.RequestCtx
	ctx.SetStatusCode(200)
	ctx.Response.Header.SetContentType("text/event-stream")
	f.Add(appendHead(appendFrameStart(nil, frHead, 0), &ctx))
	f.Add(appendBusMessage(nil, "list_changed/tools", nil))
	f.Add([]byte{frData, 1, 'x'})
	var req fasthttp.RequestCtx
	req.Request.Header.SetMethod("POST")
	req.Request.SetRequestURI("/mcp")
	req.Request.Header.Set("Mcp-Session-Id", "a.1")
	req.Request.SetBodyString(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	f.Add(appendRequest(nil, &req, nil))
	f.Add([]byte("id: a-1\ndata: {\"a\":1}\n\nevent: endpoint\ndata: /m\n\n"))
	n := &Node{sig: newSigner([][]byte{[]byte("k")}), name: "a", inc: "1", inst: "a.1"}
	f.Add(n.appendRecord(nil, &entry{rev: 3, home: "a", homeInc: "1", rec: session.Record{ID: "a.x", Version: "2025-11-25", LogLevel: 2, Subscriptions: []string{"mem://x"}}}))
	f.Add(n.appendHeartbeat(nil, msgHeartbeat))
	n.svcs.kick = make(chan struct{}, 1)
	n.SetServices(func(yield func(string, bool) bool) { _ = yield("x", true) && yield("y", false) })
	if r, ok := n.appendServices(nil); ok {
		f.Add(r[:len(r)-macSize])
	}
	f.Add(append([]byte{eventKind, 3, 'a', '.', 'x', 3, 'a', '.', '1', 1, 2, 0, 0}, `{"jsonrpc":"2.0"}`...))
	dmsg := []byte(`{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":"a.1"}}`)
	var dm codec.Message
	_ = codec.Decode(dmsg, &dm)
	f.Add(appendDirect(nil, &session.DirectRequest{Session: []byte("a.s1"), Subject: "static:1", Message: dmsg}, &dm, nil))
	f.Add(appendFrameStart(nil, frDirect, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = parseRecord(b)
		_, _, _, _, _ = parseHeartbeat(b)
		_, _, _, _ = parseServices(b)
		_, _ = parseEvent(b)
		_, _ = n.sig.open(b)
		_, _, _ = eventInstance(b)
		if topic, payload, ok := parseBusMessage(b); ok {
			_ = busPayloadOK(topic, payload)
		}
		_, _ = parseFrame(b, nil)
		_, _ = decodeRequest(b, nil)
		var dr session.DirectRequest
		var dm codec.Message
		if parseDirect(b, &dr, &dm) && dr.Decoded != nil && !decodedOK(dr.Decoded) {
			t.Fatalf("a direct message decoded as no message is: %+v", dm)
		}
		_ = checkBody(ctJSON, b)
		_ = checkBody(ctSSE, b)
		// A relayed stream cut anywhere passes (or fails) as whole.
		whole := checkBody(ctSSE, b)
		fw := new(forward)
		var out []byte
		ok := true
		for i := 0; i < len(b) && ok; i += 5 {
			var o []byte
			o, ok = fw.checkEvents(b[i:min(i+5, len(b))])
			out = append(out, o...)
		}
		if ok && whole && string(out) != string(b) {
			t.Fatalf("relayed %q of %q", out, b)
		}
		// Split at every point: a prefix of a valid message must not
		// parse as something that reads past it.
		for i := range b {
			_, _ = parseFrame(b[:i], nil)
			_, _ = decodeRequest(b[:i], nil)
			_ = parseDirect(b[:i], &dr, &dm)
			_, _ = parseRecord(b[:i])
			_, _ = parseEvent(b[:i])
			_, _, _, _ = parseServices(b[:i])
		}
	})
}

// TestRecordRoundTrip: a record survives its wire form, signed; a record
// that another key signed, or that was changed on the way, does not pass.
func TestRecordRoundTrip(t *testing.T) {
	n := &Node{sig: newSigner([][]byte{[]byte("key one")})}
	e := &entry{rev: 7, home: "node-b", homeInc: "k3j", rec: session.Record{
		ID: "node-a.0123456789abcdef", Version: "2025-11-25", Ready: true, LogLevel: 3, Subject: "static:1",
		Remote:        netip.MustParseAddr("10.0.0.9"),
		ClientInfo:    mcp.Implementation{Name: "c", Version: "1"},
		ClientCaps:    mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{}, Extensions: codec.RawJSON(`{"x":{}}`)},
		Subscriptions: []string{"mem://a", "mem://b"},
	}}
	b := n.appendRecord(nil, e)
	body, ok := n.sig.open(b)
	if !ok {
		t.Fatal("signature")
	}
	got, ok := parseRecord(body)
	if !ok {
		t.Fatal("parse")
	}
	if got.rev != e.rev || got.home != e.home || got.homeInc != e.homeInc || got.rec.ID != e.rec.ID || got.rec.Version != e.rec.Version ||
		!got.rec.Ready || got.rec.LogLevel != 3 || got.rec.Subject != "static:1" || got.rec.Remote != e.rec.Remote ||
		got.rec.ClientInfo.Name != "c" || got.rec.ClientCaps.Elicitation == nil || string(got.rec.ClientCaps.Extensions) != `{"x":{}}` ||
		len(got.rec.Subscriptions) != 2 || got.rec.Subscriptions[1] != "mem://b" {
		t.Fatalf("%+v", got)
	}
	other := &Node{sig: newSigner([][]byte{[]byte("key two")})}
	if _, ok := other.sig.open(b); ok {
		t.Fatal("a record signed with another key passes")
	}
	rotated := &Node{sig: newSigner([][]byte{[]byte("key two"), []byte("key one")})}
	if _, ok := rotated.sig.open(b); !ok {
		t.Fatal("a record signed with an older key fails")
	}
	b[10] ^= 1
	if _, ok := n.sig.open(b); ok {
		t.Fatal("a changed record passes")
	}
}

// TestForwardHeader: the headers that describe one hop stay behind,
// whatever their case; every other travels.
func TestForwardHeader(t *testing.T) {
	for _, tc := range []struct {
		k    string
		want bool
	}{
		{"Content-Length", false}, {"content-length", false},
		{"Accept-Encoding", false}, {"ACCEPT-ENCODING", false},
		{"Connection", false}, {"Keep-Alive", false}, {"keep-alive", false},
		{"Transfer-Encoding", false}, {"Date", false}, {"date", false},
		{"Server", false}, {"server", false},
		{"Content-Type", true}, {"Mcp-Session-Id", true}, {"Host", true},
		{"Accept", true}, {"Authorization", true}, {"Last-Event-ID", true},
		{"Servers", true}, {"Dates", true}, {"Connectio", true}, {"Content-Lengths", true},
	} {
		t.Run(tc.k, func(t *testing.T) {
			if got := forwardHeader([]byte(tc.k)); got != tc.want {
				t.Errorf("forwardHeader(%q) = %v, want %v", tc.k, got, tc.want)
			}
		})
	}
}

// TestAppendAddr: the client's address travels as its String writes it,
// and the owner reads back the same address.
func TestAppendAddr(t *testing.T) {
	for _, a := range []net.Addr{
		&net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 4321},
		&net.TCPAddr{IP: net.ParseIP("10.1.2.3").To4(), Port: 1},
		&net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 443},
		&net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 80, Zone: "eth0"},
		&net.TCPAddr{},
		&net.UnixAddr{Name: "/tmp/x", Net: "unix"},
	} {
		t.Run(a.String(), func(t *testing.T) {
			r := reader{b: appendAddr(nil, a)}
			got := r.bytes()
			if r.bad || len(r.b) != 0 || string(got) != a.String() {
				t.Fatalf("appendAddr: %q, want %q", got, a.String())
			}
			var tn tunnelConn
			tn.setRemote(got)
			if ta, ok := a.(*net.TCPAddr); ok && ta.IP != nil && tn.RemoteAddr().String() != a.String() {
				t.Errorf("read back as %s, want %s", tn.RemoteAddr(), a)
			}
		})
	}
}

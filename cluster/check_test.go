package cluster

import (
	"strings"
	"testing"
)

// TestBusPayloadOK: a bus payload reaches subscribers only as what its
// topic carries; nothing that would splice a second message after (or
// instead of) a notification passes.
func TestBusPayloadOK(t *testing.T) {
	const upd = "resources/updated/mem://board/x"
	for _, tc := range []struct {
		name, topic, payload string
		ok                   bool
	}{
		{"update", upd, `"mem://board/x"`, true},
		{"update escaped", upd, `"mem:\/\/board\/x"`, true},
		{"update of another uri", upd, `"mem://board/y"`, false},
		{"update not a string", upd, `{"uri":"mem://board/x"}`, false},
		{"update null", upd, `null`, false},
		{"update empty", upd, ``, false},
		{"update not json", upd, `mem://board/x`, false},
		{"update spliced request", upd, `"mem://board/x"}}` + "\n" + `{"jsonrpc":"2.0","id":9,"method":"sampling/createMessage","params":{"x":{"y":"z"`, false},
		{"update spliced without line end", upd, `"mem://board/x"}},{"jsonrpc":"2.0","id":9,"method":"sampling/createMessage","params":{"x":{"y":"z"`, false},
		{"update trailing line end", upd, `"mem://board/x"` + "\n", false},
		{"update with a raw control byte", "resources/updated/a\x01b", "\"a\x01b\"", false},
		{"update invalid utf-8", "resources/updated/\xff", "\"\xff\"", false},
		{"update of an empty uri", "resources/updated/", `""`, false},
		{"list change", "list_changed/tools", ``, true},
		{"list change with payload", "list_changed/tools", `{}`, false},
		{"own topic, json", "board", `{"name":"a","text":"b"}`, true},
		{"own topic, empty", "board", ``, true},
		{"own topic, not json", "board", `{"name":`, false},
		{"own topic, two values", "board", `{} {}`, false},
		{"own topic, line end", "board", "{}\n{}", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := busPayloadOK(tc.topic, []byte(tc.payload)); got != tc.ok {
				t.Fatalf("busPayloadOK(%q, %q) = %v", tc.topic, tc.payload, got)
			}
		})
	}
}

func TestHeaderOK(t *testing.T) {
	for _, tc := range []struct {
		k, v string
		ok   bool
	}{
		{"Content-Type", "application/json", true},
		{"Mcp-Session-Id", "a.1", true},
		{"X", "a\tb", true},
		{"", "x", false},
		{"Bad Name", "x", false},
		{"X:", "x", false},
		{"X", "a\r\nSet-Cookie: s=1", false},
		{"X", "a\nb", false},
		{"X", "a\x00", false},
	} {
		if got := headerOK([]byte(tc.k), []byte(tc.v)); got != tc.ok {
			t.Errorf("headerOK(%q, %q) = %v", tc.k, tc.v, got)
		}
	}
}

func TestCheckBody(t *testing.T) {
	for _, tc := range []struct {
		name, ct, body string
		ok             bool
	}{
		{"json", "application/json", `{"jsonrpc":"2.0","id":1,"result":{}}`, true},
		{"json empty", "application/json", ``, true},
		{"json broken", "application/json", `{"jsonrpc":"2.0","id":1,"result":{}`, false},
		{"json two", "application/json", `{} {"jsonrpc":"2.0","id":1,"method":"x"}`, false},
		{"sse", "text/event-stream", "id: 1\nretry: 100\ndata: \n\nevent: message\ndata: {\"a\":1}\n\n", true},
		{"sse not json", "text/event-stream", "data: {\"a\":\n\n", false},
		{"sse cut", "text/event-stream", "data: {\"a\":1}\n", false},
		{"sse endpoint", "text/event-stream", "event: endpoint\ndata: /message?sessionId=a.1\n\n", true},
		{"other", "text/plain", "anything", true},
		{"compressed or untyped", "", "\x1f\x8b...", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := checkBody([]byte(tc.ct), []byte(tc.body)); got != tc.ok {
				t.Fatalf("checkBody(%q, %q) = %v", tc.ct, tc.body, got)
			}
		})
	}
}

func TestBodyType(t *testing.T) {
	f := frame{headers: [][2][]byte{{[]byte("content-type"), []byte("text/event-stream; charset=utf-8")}}}
	if got := string(bodyType(&f)); got != "text/event-stream" {
		t.Fatalf("%q", got)
	}
	f.headers = append(f.headers, [2][]byte{[]byte("Content-Encoding"), []byte("gzip")})
	if got := bodyType(&f); got != nil {
		t.Fatalf("a compressed body has type %q", got)
	}
}

// TestCheckEvents: a relayed stream reaches the client in whole, checked
// events, however the owner's writes were cut into frames; an event that
// fails stops it.
func TestCheckEvents(t *testing.T) {
	stream := "id: a-1\nretry: 1000\ndata: \n\n: keep-alive\n\nid: a-2\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n" +
		"id: a-3\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"elicitation/create\",\"params\":{\"message\":\"" + strings.Repeat("x", 300) + "\"}}\n\n"
	for cut := 1; cut < len(stream); cut += 7 {
		for cut2 := cut; cut2 <= len(stream); cut2 += 53 {
			f := new(forward)
			var out []byte
			for _, p := range []string{stream[:cut], stream[cut:cut2], stream[cut2:]} {
				b, ok := f.checkEvents([]byte(p))
				if !ok {
					t.Fatalf("cut at %d, %d: refused", cut, cut2)
				}
				out = append(out, b...)
			}
			if string(out) != stream {
				t.Fatalf("cut at %d, %d: got %q", cut, cut2, out)
			}
		}
	}
	bad := "data: {\"ok\":1}\n\ndata: {\"jsonrpc\":\"2.0\"}}\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"sampling/createMessage\"}\n\n"
	f := new(forward)
	out, ok := f.checkEvents([]byte(bad[:20]))
	if !ok || len(out) != len("data: {\"ok\":1}\n\n") {
		t.Fatalf("first event: %q %v", out, ok)
	}
	if _, ok := f.checkEvents([]byte(bad[20:])); ok {
		t.Fatal("an event whose data is not one JSON value passed")
	}
}

// BenchmarkChecks: what the checks add to a forwarded answer (a small JSON
// result, and the same result as one relayed event) and to a bus message.
func BenchmarkChecks(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hi"}],"isError":false}}`)
	b.Run("json answer", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = checkBody(ctJSON, body)
		}
	})
	b.Run("relayed event", func(b *testing.B) {
		ev := []byte("id: a-2\ndata: " + string(body) + "\n\n")
		f := new(forward)
		b.ReportAllocs()
		for b.Loop() {
			_, _ = f.checkEvents(ev)
		}
	})
	b.Run("bus update", func(b *testing.B) {
		payload := []byte(`"mem://board/news"`)
		b.ReportAllocs()
		for b.Loop() {
			_ = busPayloadOK("resources/updated/mem://board/news", payload)
		}
	})
}

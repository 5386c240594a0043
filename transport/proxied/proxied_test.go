package proxied

import (
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/pires/go-proxyproto"
)

func mustParse(t testing.TB, list ...string) *Trusted {
	t.Helper()
	tr, err := Parse(list)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name string
		list []string
		in   []string
		out  []string
		bad  bool
	}{
		{name: "cidr", list: []string{"10.0.0.0/8"}, in: []string{"10.1.2.3"}, out: []string{"11.0.0.1", "::1"}},
		{name: "single", list: []string{"192.0.2.7"}, in: []string{"192.0.2.7", "::ffff:192.0.2.7"}, out: []string{"192.0.2.8"}},
		{name: "v6", list: []string{" fd00::/8 ", ""}, in: []string{"fd12::1"}, out: []string{"fe80::1"}},
		{name: "mapped prefix", list: []string{"::ffff:10.0.0.0/104"}, in: []string{"10.9.9.9"}, out: []string{"11.0.0.0"}},
		{name: "not unmasked", list: []string{"10.1.2.3/8"}, in: []string{"10.200.0.1"}},
		{name: "garbage", list: []string{"10.0.0.0/33"}, bad: true},
		{name: "name", list: []string{"lb.example"}, bad: true},
		{name: "zone", list: []string{"fe80::1%eth0"}, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := Parse(tc.list)
			if tc.bad {
				if err == nil {
					t.Fatalf("Parse(%q) accepted", tc.list)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range tc.in {
				if !tr.Contains(netip.MustParseAddr(a)) {
					t.Errorf("%s not trusted", a)
				}
			}
			for _, a := range tc.out {
				if tr.Contains(netip.MustParseAddr(a)) {
					t.Errorf("%s trusted", a)
				}
			}
		})
	}
	if tr, err := Parse([]string{"", " "}); tr != nil || err != nil {
		t.Fatalf("empty list: %v, %v", tr, err)
	}
	var none *Trusted
	if none.Contains(netip.MustParseAddr("10.0.0.1")) || none.String() != "" {
		t.Fatal("nil Trusted trusts")
	}
}

func TestFromHeaders(t *testing.T) {
	tr := mustParse(t, "10.0.0.0/8", "fd00::/8")
	lb := netip.MustParseAddr("10.0.0.2")
	stranger := netip.MustParseAddr("203.0.113.9")
	b := func(s ...string) [][]byte {
		out := make([][]byte, len(s))
		for i, v := range s {
			out[i] = []byte(v)
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		peer     netip.Addr
		fwd, xff [][]byte
		want     string
	}{
		{"no header", lb, nil, nil, "10.0.0.2"},
		{"xff one", lb, nil, b("198.51.100.7"), "198.51.100.7"},
		{"xff forged left part ignored", lb, nil, b("1.2.3.4, 198.51.100.7"), "198.51.100.7"},
		{"xff through two trusted", lb, nil, b("198.51.100.7, 10.9.9.9"), "198.51.100.7"},
		{"xff all trusted", lb, nil, b("10.1.1.1, 10.9.9.9"), "10.1.1.1"},
		{"xff lines in order", lb, nil, b("1.2.3.4", "198.51.100.7"), "198.51.100.7"},
		{"xff with port", lb, nil, b("198.51.100.7:4711"), "198.51.100.7"},
		{"xff v6", lb, nil, b("[2001:db8::1]:80"), "2001:db8::1"},
		{"xff v6 bare", lb, nil, b("2001:db8::1"), "2001:db8::1"},
		{"xff unknown stops", lb, nil, b("198.51.100.7, unknown, 10.9.9.9"), "10.9.9.9"},
		{"xff garbage", lb, nil, b("<script>"), "10.0.0.2"},
		{"xff empty items", lb, nil, b(" , ,198.51.100.7 ,"), "198.51.100.7"},
		{"forged from a stranger", stranger, nil, b("198.51.100.7"), "203.0.113.9"},
		{"forwarded", lb, b(`for=192.0.2.60;proto=http;by=203.0.113.43`), nil, "192.0.2.60"},
		{"forwarded wins over xff", lb, b(`for=192.0.2.60`), b("198.51.100.7"), "192.0.2.60"},
		{"forwarded v6 quoted", lb, b(`for="[2001:db8:cafe::17]:4711"`), nil, "2001:db8:cafe::17"},
		{"forwarded chain", lb, b(`for=192.0.2.43, for=198.51.100.17;by=10.0.0.1`), nil, "198.51.100.17"},
		{"forwarded obfuscated", lb, b(`for=_hidden, for=10.2.2.2`), nil, "10.2.2.2"},
		{"forwarded no for", lb, b(`proto=https`), nil, "10.0.0.2"},
		{"forwarded case", lb, b(`For=192.0.2.60`), nil, "192.0.2.60"},
		{"zone refused", lb, nil, b("fe80::1%eth0"), "10.0.0.2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tr.FromHeaders(tc.peer, tc.fwd, tc.xff)
			if got != netip.MustParseAddr(tc.want) {
				t.Fatalf("client %v, want %s", got, tc.want)
			}
		})
	}
}

func TestFromHeadersAllocs(t *testing.T) {
	tr := mustParse(t, "10.0.0.0/8")
	lb := netip.MustParseAddr("10.0.0.2")
	xff := [][]byte{[]byte("1.2.3.4, 198.51.100.7, 10.9.9.9")}
	fwd := [][]byte{[]byte(`for="[2001:db8:cafe::17]:4711";proto=https`)}
	if n := testing.AllocsPerRun(100, func() {
		_ = tr.FromHeaders(lb, nil, xff)
		_ = tr.FromHeaders(lb, fwd, nil)
	}); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

func v2Header(t testing.TB, src string) []byte {
	t.Helper()
	h := proxyproto.HeaderProxyFromAddrs(2, net.TCPAddrFromAddrPort(netip.MustParseAddrPort(src)), net.TCPAddrFromAddrPort(netip.MustParseAddrPort("10.0.0.1:7400")))
	b, err := h.Format()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseHeader(t *testing.T) {
	v1 := []byte("PROXY TCP4 198.51.100.7 10.0.0.1 4711 7400\r\n")
	v2 := v2Header(t, "[2001:db8::7]:4711")
	local := []byte("\r\n\r\n\x00\r\nQUIT\n\x20\x00\x00\x00")
	for _, tc := range []struct {
		name   string
		in     []byte
		client string // "" none
		n      int    // 0: incomplete
		bad    bool
	}{
		{name: "v1", in: append(append([]byte{}, v1...), `{"jsonrpc"`...), client: "198.51.100.7:4711", n: len(v1)},
		{name: "v1 partial", in: v1[:20]},
		{name: "v1 tiny", in: []byte("PRO")},
		{name: "v1 unknown", in: []byte("PROXY UNKNOWN\r\n"), n: 15},
		{name: "v1 too long", in: append([]byte("PROXY TCP4 "), make([]byte, 200)...), bad: true},
		{name: "v1 malformed", in: []byte("PROXY TCP4 1.2.3 4.5.6.7 1 2\r\n"), bad: true},
		{name: "v1 bad port", in: []byte("PROXY TCP4 1.2.3.4 4.5.6.7 99999 2\r\n"), bad: true},
		{name: "v2", in: append(append([]byte{}, v2...), "x"...), client: "[2001:db8::7]:4711", n: len(v2)},
		{name: "v2 partial", in: v2[:len(v2)-1]},
		{name: "v2 signature only", in: v2[:10]},
		{name: "v2 local", in: local, n: 16},
		{name: "v2 huge", in: append(append([]byte{}, sigV2...), 0x21, 0x11, 0xff, 0xff), bad: true},
		{name: "v2 bad command", in: append(append([]byte{}, sigV2...), 0x2f, 0x11, 0, 12, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12), bad: true},
		{name: "not proxy", in: []byte(`{"jsonrpc":"2.0"}`), bad: true},
		{name: "empty", in: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := ParseHeader(tc.in)
			if tc.bad {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("err %v, want ErrMalformed", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Len != tc.n {
				t.Fatalf("len %d, want %d", h.Len, tc.n)
			}
			var want netip.AddrPort
			if tc.client != "" {
				want = netip.MustParseAddrPort(tc.client)
			}
			if h.Client != want {
				t.Fatalf("client %v, want %v", h.Client, want)
			}
		})
	}
}

func TestBegins(t *testing.T) {
	for in, want := range map[string]bool{
		"P": true, "PROXY": true, "PROXY TCP4": true, "\r\n\r\n": true, string(sigV2) + "!": true,
		"": false, "{": false, "POST / HTTP/1.1": false, "\r\n\r\nx": false, "Content-Length: 2": false,
	} {
		if got := Begins([]byte(in)); got != want {
			t.Errorf("Begins(%q) = %v", in, got)
		}
	}
}

// FuzzParseHeader: no input makes the parser panic, read past its input
// or report a length it was not given.
func FuzzParseHeader(f *testing.F) {
	f.Add([]byte("PROXY TCP4 198.51.100.7 10.0.0.1 4711 7400\r\n"))
	f.Add([]byte("PROXY UNKNOWN\r\n"))
	f.Add([]byte("PROXY TCP6 ::1 ::1 1 2\r\nrest"))
	f.Add(v2Header(f, "198.51.100.7:1"))
	f.Add(v2Header(f, "[2001:db8::7]:4711"))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHeader(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		if h.Len > len(b) || h.Len > MaxHeader || (h.Len == 0 && h.Client.IsValid()) {
			t.Fatalf("header %+v of %d bytes", h, len(b))
		}
	})
}

// FuzzFromHeaders: no header makes the walk panic, and a peer not trusted
// is always its own client.
func FuzzFromHeaders(f *testing.F) {
	tr := mustParse(f, "10.0.0.0/8")
	f.Add([]byte("for=192.0.2.60;proto=http"), []byte("1.2.3.4, 10.0.0.9"), true)
	f.Add([]byte(""), []byte("[::1]:80,unknown"), false)
	f.Fuzz(func(t *testing.T, fwd, xff []byte, trusted bool) {
		peer := netip.MustParseAddr("203.0.113.1")
		if trusted {
			peer = netip.MustParseAddr("10.0.0.1")
		}
		var fl [][]byte
		if len(fwd) > 0 {
			fl = [][]byte{fwd}
		}
		got := tr.FromHeaders(peer, fl, [][]byte{xff})
		if !trusted && got != peer {
			t.Fatalf("untrusted peer's headers believed: %v", got)
		}
		if !got.IsValid() {
			t.Fatal("no client")
		}
	})
}

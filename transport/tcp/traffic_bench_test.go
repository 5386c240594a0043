package tcp

import (
	"net"
	"strings"
	"testing"

	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers/builtin"
	"github.com/panjf2000/gnet/v2"
)

// fakeConn is the part of gnet.Conn that OnTraffic uses, over a plain
// inbound buffer; what it writes is counted and dropped.
type fakeConn struct {
	gnet.Conn // nil: any other method panics
	ctx       any
	in        []byte
	written   int
}

func (f *fakeConn) Context() any                { return f.ctx }
func (f *fakeConn) SetContext(ctx any)          { f.ctx = ctx }
func (f *fakeConn) RemoteAddr() net.Addr        { return fakeAddr }
func (f *fakeConn) Peek(int) ([]byte, error)    { return f.in, nil }
func (f *fakeConn) OutboundBuffered() int       { return 0 }
func (f *fakeConn) Write(b []byte) (int, error) { f.written += len(b); return len(b), nil }
func (f *fakeConn) Close() error                { return nil }
func (f *fakeConn) InboundBuffered() int        { return len(f.in) }
func (f *fakeConn) Discard(n int) (int, error) {
	if n <= 0 || n >= len(f.in) {
		n = len(f.in)
	}
	f.in = f.in[n:]
	return n, nil
}

var fakeAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}

const (
	benchInit = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}` + "\n"
	benchEcho = `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello world"}}}` + "\n"
	benchPing = `{"jsonrpc":"2.0","id":7,"method":"ping"}` + "\n"
)

// trafficServer returns a server (not listening) and an opened, initialized
// fake connection on it.
func trafficServer(tb testing.TB, opts Options) (*Server, *fakeConn) {
	tb.Helper()
	eng := engine.New(engine.Options{})
	tb.Cleanup(func() { _ = eng.Shutdown(tb.Context()) })
	if err := builtin.Install("bench", eng.Registry(), builtin.Env{}); err != nil {
		tb.Fatal(err)
	}
	s := New(eng, opts)
	fc := &fakeConn{}
	if _, a := s.onOpen(fc); a != gnet.None {
		tb.Fatal("OnOpen refused the connection")
	}
	fc.in = []byte(benchInit)
	if s.onTraffic(fc) != gnet.None || fc.written == 0 {
		tb.Fatal("initialize not answered")
	}
	return s, fc
}

// BenchmarkOnTraffic is one read holding one message: the TCP hot path
// from the inbound buffer to the written answer. Echo is a tools/call run
// inline on the event loop; ping is the cheapest request.
func BenchmarkOnTraffic(b *testing.B) {
	for _, bc := range []struct{ name, msg string }{{"echo", benchEcho}, {"ping", benchPing}} {
		b.Run(bc.name, func(b *testing.B) {
			s, fc := trafficServer(b, Options{})
			frame := []byte(bc.msg)
			b.ReportAllocs()
			for b.Loop() {
				fc.in = frame
				if s.onTraffic(fc) != gnet.None {
					b.Fatal("closed")
				}
			}
		})
	}
}

// BenchmarkOnTrafficPartial is a read ending in a partial message, then
// the read that completes it.
func BenchmarkOnTrafficPartial(b *testing.B) {
	s, fc := trafficServer(b, Options{})
	frame := []byte(benchPing + benchPing)
	cut := len(benchPing) + 20
	b.ReportAllocs()
	for b.Loop() {
		fc.in = frame[:cut]
		s.onTraffic(fc)
		fc.in = frame[len(benchPing):] // the rest, as gnet would present it
		if s.onTraffic(fc) != gnet.None {
			b.Fatal("closed")
		}
	}
}

// TestOnTrafficAllocs: the transport's part of the hot path allocates
// nothing: OnTraffic allocates what engine.HandleFrame does for the same
// message, and nothing for a ping.
func TestOnTrafficAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items")
	}
	for _, msg := range []string{benchEcho, benchPing} {
		s, fc := trafficServer(t, Options{})
		frame := []byte(msg)
		k := fc.ctx.(*conn)
		var out []byte
		engine := testing.AllocsPerRun(200, func() {
			out = s.eng.Conn(k.sess).HandleFrame(frame[:len(frame)-1], out[:0])
		})
		transport := testing.AllocsPerRun(200, func() {
			fc.in = frame
			s.onTraffic(fc)
		})
		if transport > engine {
			t.Errorf("%s: OnTraffic allocates %.1f times per read, HandleFrame %.1f", msg, transport, engine)
		}
		if msg == benchPing && transport != 0 {
			t.Errorf("a ping allocates %.1f times per read", transport)
		}
	}
}

// BenchmarkOnTrafficBigMessage is the event loop's share of a 4 MiB
// message arriving 64 KiB a read, gnet presenting each read after what is
// left unconsumed (as Peek does). Served from gnet's buffer, every read
// re-copied and re-scanned the message so far (quadratic); assembled, each
// byte is handled once. The message itself is decoded on the worker pool.
func BenchmarkOnTrafficBigMessage(b *testing.B) {
	s, fc := trafficServer(b, Options{})
	msg := []byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1,"message":"` + strings.Repeat("x", 4<<20-1024) + `"}}` + "\n")
	const read = 64 << 10
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		fc.in = fc.in[:0]
		for off := 0; off < len(msg); off += read {
			fc.in = append(fc.in, msg[off:min(off+read, len(msg))]...)
			if s.onTraffic(fc) != gnet.None {
				b.Fatal("closed")
			}
		}
		if len(fc.in) != 0 {
			b.Fatal("message not consumed")
		}
	}
}

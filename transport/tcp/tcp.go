// Package tcp serves MCP over raw TCP on a gnet v2 reactor: one event loop
// per core by default, newline-delimited or Content-Length framed JSON-RPC.
//
// Each connection is one session. Inbound bytes are framed and dispatched on
// the event loop without copying (engine.HandleFrame); cheap answers are
// written back in the same loop iteration, in one write per read. Handler
// answers arrive from the worker pool through the connection's Sink, which
// queues them with AsyncWrite; outbound bytes are bounded per connection,
// and a client that stops reading is closed as a slow consumer.
//
// The server listens and accepts with the standard library, in one
// goroutine, and hands each connection to gnet's loops (gnet's own
// acceptor stops the engine on EMFILE): accept errors back off and retry,
// never stopping the listener. Connections are admitted by a
// netlimit.Limiter (Options.Conns) that other transports may share.
//
// No byte, client or load pattern holds resources for long: a message
// must arrive whole within ReadTimeout, an idle connection is closed after
// IdleTimeout, MaxBuffered bounds the bytes of partial messages held
// across connections and MaxOutboundTotal the bytes queued for clients
// (the biggest holders are cut first; both budgets may be shared with the
// HTTP transport). One sweeper goroutine enforces them all from
// per-connection atomics the event loops keep; no connection has a timer
// or goroutine of its own, and the hot path gains only a few atomic loads.
// Every connection the server closes is logged with one sentinel cause
// (ErrSlowConsumer, ErrTooLarge, ErrFraming, ErrReadTimeout,
// ErrIdleTimeout, ErrBufferBudget, ErrOutboundBudget, ErrTooManyConns);
// over a limit, the
// client first gets a JSON-RPC -32000 error whose data names it, as
// {"limit":"read-timeout"}.
package tcp

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/internal/lograte"
	"github.com/mcpedge/mcpedge/session"
	"github.com/mcpedge/mcpedge/transport/netkit"
	"github.com/mcpedge/mcpedge/transport/netlimit"
	"github.com/mcpedge/mcpedge/transport/proxied"
	"github.com/mcpedge/mcpedge/transport/tlsconf"
	"github.com/panjf2000/gnet/v2"
)

// Options configure a Server. The zero value serves newline framing on
// 127.0.0.1:7400 with one loop per core, a 30 s read timeout, a 5 min idle
// timeout, DefaultMaxBuffered and no connection limit.
type Options struct {
	// Addr is host:port to listen on; empty means 127.0.0.1:7400. A
	// "tcp4://", "tcp6://" or "unix://" prefix picks another network.
	Addr string
	// Loops is the number of event loops; <= 0 means one per core.
	Loops int
	// Framer frames messages; nil means newline-delimited JSON.
	Framer codec.Framer
	// MaxOutbound bounds the bytes queued for one connection; a client that
	// lets more pile up is closed as a slow consumer. <= 0 means 8 MiB.
	MaxOutbound int
	// Conns, when not nil, admits connections: it bounds them in total and
	// per client address, and may be shared with other transports (it is
	// safe for concurrent use). A connection over a limit is answered with a
	// JSON-RPC -32000 error whose data names the limit
	// ({"limit":"max-conns"} or {"limit":"max-conns-per-ip"}) and closed.
	Conns *netlimit.Limiter
	// MaxConns bounds open connections when Conns is nil; <= 0 means no
	// limit. Deprecated: give Conns (netlimit.New(max, perIP)).
	MaxConns int
	// ReusePort sets SO_REUSEPORT (several processes on one port).
	// SO_REUSEADDR is always set, so that a restart can bind at once even
	// while closed connections linger in TIME_WAIT.
	ReusePort bool
	// ReadTimeout bounds how long a message may take to arrive whole: a
	// connection holding part of a message, or opened and yet to complete
	// its first message, for longer is closed with ErrReadTimeout (after a
	// -32000 error with data {"limit":"read-timeout"}). 0 means 30 s; < 0
	// means none.
	ReadTimeout time.Duration
	// IdleTimeout closes connections with no traffic either way, nothing
	// buffered and no request in flight for this long, with
	// ErrIdleTimeout. 0 means 5 min; < 0 means none.
	IdleTimeout time.Duration
	// MaxBuffered bounds the bytes of partial messages (received, not yet
	// complete) held across all connections. Past it, the connections
	// holding the most are closed first, with ErrBufferBudget, until the
	// total is back within it. It counts the memory held: the bytes left in
	// gnet's inbound buffer, or the capacity of the buffer a big message is
	// assembled in. 0 means DefaultMaxBuffered(); < 0 means none. Ignored
	// when Buffered is set.
	MaxBuffered int64
	// Buffered, when not nil, is the budget of partial inbound bytes,
	// shared with other transports (the HTTP transport's request bodies
	// being read): the biggest holders of all are cut first. nil means a
	// budget of MaxBuffered bytes for this transport alone.
	Buffered *netlimit.Budget
	// MaxOutboundTotal bounds the bytes queued for clients across all
	// connections, counted as retained: the capacity of the answers queued
	// and the bytes in gnet's outbound buffers. Past it, the connections
	// holding the most are closed first, with ErrOutboundBudget, until the
	// total is back within it (MaxOutbound bounds each connection). 0 means
	// netlimit.DefaultMaxOutboundTotal(); < 0 means none. Ignored when
	// Outbound is set.
	MaxOutboundTotal int64
	// Outbound, when not nil, is the budget of queued outbound bytes,
	// shared with other transports (the HTTP transport's SSE streams and
	// answers being written). nil means a budget of MaxOutboundTotal bytes
	// for this transport alone.
	Outbound *netlimit.Budget

	// TLS, when set, serves every connection over TLS 1.2 or later
	// (tls.go), with the configuration in effect at its handshake (the
	// HTTP transport's may be the same, reloaded together), mutual TLS
	// when it requires client certificates. A handshake must complete
	// within ReadTimeout; plain text is answered with a JSON-RPC error in
	// plain text and closed (ErrNotTLS). nil serves plain TCP.
	TLS *tlsconf.Config

	// TrustedProxies are the peers whose PROXY protocol header (v1 or v2)
	// names the client of their connections (proxy.go): the address the
	// connection limits count, the session's, the logs'. A PROXY header
	// from any other peer closes its connection (ErrProxyHeader). nil
	// trusts nobody.
	TrustedProxies *proxied.Trusted
}

// DefaultAddr is where the TCP transport listens by default.
const DefaultAddr = "127.0.0.1:7400"

// Defaults of the timeouts.
const (
	DefaultReadTimeout = 30 * time.Second
	DefaultIdleTimeout = 5 * time.Minute
)

// Sentinel errors: the logged cause of every connection the server
// closes, each carrying its codec.CloseReason.
var (
	ErrSlowConsumer = codec.ReasonSlowConsumer.Err("tcp: slow consumer: outbound bytes over the limit")
	// ErrTooLarge is codec.ErrTooLarge, the one error of a message over
	// the size limit.
	ErrTooLarge = codec.ErrTooLarge
	ErrFraming  = codec.ReasonFraming.Err("tcp: malformed frame header")
	// ErrTooManyConns is netlimit.ErrTooManyConns: the cause of a
	// connection refused at accept (netlimit.ErrTooManyConnsPerIP the
	// other's).
	ErrTooManyConns = netlimit.ErrTooManyConns
	ErrReadTimeout  = codec.ReasonReadTimeout.Err("tcp: read timeout: message incomplete")
	ErrIdleTimeout  = codec.ReasonIdleTimeout.Err("tcp: idle timeout")
	ErrPanic        = codec.ReasonPanic.Err("tcp: panic while reading the connection")

	// ErrBufferBudget and ErrOutboundBudget wrap netlimit.ErrBufferBudget
	// and netlimit.ErrOutboundBudget: the connection held the most of
	// MaxBuffered or MaxOutboundTotal when the total went over it.
	ErrBufferBudget   = fmt.Errorf("tcp: buffered partial messages over the budget: %w", netlimit.ErrBufferBudget)
	ErrOutboundBudget = fmt.Errorf("tcp: queued outbound bytes over the budget: %w", netlimit.ErrOutboundBudget)
)

// limitOf names the limit behind a cause in the -32000 error sent before
// the close; "" sends nothing.
func limitOf(cause error) (limit, msg string) {
	switch cause {
	case ErrReadTimeout:
		return "read-timeout", "read timeout: message incomplete"
	case ErrIdleTimeout:
		return "idle-timeout", "idle timeout"
	case ErrBufferBudget:
		return "max-buffered", "server buffer budget exceeded"
	case ErrOutboundBudget:
		return "max-outbound-total", "server outbound budget exceeded"
	}
	return "", ""
}

// Server is the TCP transport. Serve it with ListenAndServe; stop it with
// Shutdown (a front door runs it as a netkit.Transport). Its methods are
// safe for concurrent use.
type Server struct {
	eng    *engine.Server
	opts   Options
	framer codec.Framer
	log    *slog.Logger
	limit  *netlimit.Limiter
	cobs   engine.ConnObserver // nil: none

	ready     chan struct{}
	readyOnce sync.Once
	addr      atomic.Pointer[net.Addr]

	mu         sync.Mutex
	stopping   bool
	started    bool
	noAccept   bool // StopAccepting was called
	acc        *netkit.Acceptor
	cli        *gnet.Client
	quit       chan struct{} // closed by Shutdown
	acceptDone chan struct{} // closed when the accept loop ends
	stopped    chan struct{} // closed when everything has stopped
	bg         sync.WaitGroup
	drain      netkit.Drainer
	enrolling  chan struct{}  // a slot per enrolment under way
	tlsConf    *tls.Config    // Options.TLS's listener configuration; nil: plain TCP
	tlsWG      sync.WaitGroup // TLS connections' readers
	enrollLogs logLimit
	warns      *lograte.Limiter // bad-input warnings, per client address

	conns  atomic.Int64
	ids    atomic.Uint64
	table  table
	epoch  time.Time
	clock  atomic.Int64     // see now
	inb    *netlimit.Budget // partial-message bytes (MaxBuffered), maybe shared
	outb   *netlimit.Budget // queued outbound bytes (MaxOutboundTotal), maybe shared
	detach [2]func()        // the sources attached to inb and outb
}

var _ netkit.Transport = (*Server)(nil)

// New returns a TCP transport serving eng.
func New(eng *engine.Server, opts Options) *Server {
	if opts.Addr == "" {
		opts.Addr = DefaultAddr
	}
	if opts.Loops <= 0 {
		opts.Loops = runtime.NumCPU()
	}
	if opts.MaxOutbound <= 0 {
		opts.MaxOutbound = 8 << 20
	}
	if opts.ReadTimeout == 0 {
		opts.ReadTimeout = DefaultReadTimeout
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.MaxBuffered == 0 {
		opts.MaxBuffered = DefaultMaxBuffered()
	}
	if opts.MaxOutboundTotal == 0 {
		opts.MaxOutboundTotal = netlimit.DefaultMaxOutboundTotal()
	}
	inb, outb := opts.Buffered, opts.Outbound
	if inb == nil {
		inb = netlimit.NewBudget(opts.MaxBuffered)
	}
	if outb == nil {
		outb = netlimit.NewBudget(opts.MaxOutboundTotal)
	}
	limit := opts.Conns
	if limit == nil && opts.MaxConns > 0 {
		limit = netlimit.New(opts.MaxConns, 0)
	}
	f := opts.Framer
	if f == nil {
		f = codec.NewlineFramer{MaxSize: eng.Options().MaxMessage}
	}
	s := &Server{
		eng: eng, opts: opts, framer: f, log: eng.Logger(), limit: limit, cobs: eng.ConnObserver(),
		ready: make(chan struct{}), quit: make(chan struct{}), acceptDone: make(chan struct{}),
		stopped: make(chan struct{}), epoch: time.Now(), inb: inb, outb: outb,
		enrolling: make(chan struct{}, 4*opts.Loops), warns: lograte.New(0, 0, 0),
	}
	s.detach = [2]func(){inb.Attach(bufferSource{s}), outb.Attach(outboundSource{s})}
	if opts.TLS != nil {
		s.tlsConf = opts.TLS.Listener() // no ALPN: MCP over TLS is the port's only protocol
	}
	return s
}

// Addr waits until the server listens and returns its address (useful with
// port 0), or nil if it failed to start or ctx ended first.
func (s *Server) Addr(ctx context.Context) net.Addr {
	select {
	case <-s.ready:
	case <-ctx.Done():
		return nil
	}
	if p := s.addr.Load(); p != nil {
		return *p
	}
	return nil
}

// Conns returns the number of open connections.
func (s *Server) Conns() int64 { return s.conns.Load() }

// Buffered returns the bytes of partial messages held across connections
// (of every transport sharing Options.Buffered).
func (s *Server) Buffered() int64 { return s.inb.Total() }

// Outbound returns the bytes queued for clients across connections (of
// every transport sharing Options.Outbound).
func (s *Server) Outbound() int64 { return s.outb.Total() }

// Budgets returns the budgets of partial inbound bytes and of queued
// outbound bytes the server counts in (Options.Buffered and Outbound, or
// its own).
func (s *Server) Budgets() (buffered, outbound *netlimit.Budget) { return s.inb, s.outb }

// conn is one connection's state: the session, its Sink, and what the
// sweeper reads. The atomics are written on the connection's event loop
// (and pending by Send) and read by the sweeper.
type conn struct {
	s      *Server
	id     uint64
	ip     netip.Addr // admitted by s.limit under this address
	c      wire       // a gnet.Conn, or a TLS connection's tlsWire
	remote net.Addr   // c.RemoteAddr, kept: gnet clears it on close, racing with Send
	sess   *session.Session
	slot   int // index in s.table's shard, under its lock

	// The PROXY header (proxy.go): pp says what the first bytes may hold
	// (read on the event loop only); client is the client a trusted
	// proxy's header named, under which s.limit then counts the
	// connection.
	pp     uint8
	client atomic.Pointer[netip.AddrPort]

	opened   atomic.Bool
	closed   atomic.Bool           // closing or closed: Send refuses, the sweeper skips
	reason   atomic.Pointer[error] // why the server closed it
	pending  atomic.Int64          // bytes queued by Send, not yet handed to the socket
	partial  atomic.Int64          // memory held by an incomplete message: in gnet's inbound buffer, or acc's capacity
	held     atomic.Int64          // outbound memory: the capacity of buffers queued by Send, and gout
	gout     atomic.Int64          // gnet's outbound buffer as last read on the event loop (syncOut)
	since    atomic.Int64          // s.exactNow() when the awaited message began; 0: none awaited
	lastSeen atomic.Int64          // s.now() at the last traffic

	// A message left partial past assembleAbove bytes is assembled here,
	// out of gnet's buffer (assemble); only the event loop touches these.
	acc     []byte
	scanned int // bytes of acc known to hold no newline (newline framing)
}

// assembleAbove is the size of a partial message past which the
// connection assembles it in a buffer of its own. Left in gnet's buffer,
// a 4 MiB message arriving 64 KiB a read is copied (Peek) and scanned
// again on every read: quadratic work on the event loop, which stalls its
// other connections. Assembled, each byte is copied and scanned once.
const assembleAbove = 64 << 10

// wire is what a connection is written and closed through: a gnet.Conn,
// or a TLS connection's tlsWire (tls.go), which behaves as one: writes
// queued from any goroutine and flushed in order, Close after them.
type wire interface {
	AsyncWrite(b []byte, cb gnet.AsyncCallback) error
	AsyncWritev(bs [][]byte, cb gnet.AsyncCallback) error
	Write(b []byte) (int, error) // by the connection's reader only
	Close() error
	OutboundBuffered() int
	InboundBuffered() int
	Fd() int
}

// exec runs f where the connection is read (its event loop, or a TLS
// connection's reader), between reads: what f reads of the connection's
// buffers is not changing under it.
func (k *conn) exec(f func()) error {
	if w, ok := k.c.(*tlsWire); ok {
		return w.exec(f)
	}
	return k.c.(gnet.Conn).EventLoop().Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
		f()
		return nil
	}))
}

// addr is the client's address: the one a trusted proxy's PROXY header
// named, else the peer's.
func (k *conn) addr() netip.Addr {
	if c := k.client.Load(); c != nil {
		return c.Addr()
	}
	return k.ip
}

// who is the client's address and port, for the logs.
func (k *conn) who() net.Addr {
	if c := k.client.Load(); c != nil {
		return net.TCPAddrFromAddrPort(*c)
	}
	return k.remote
}

// markClosing records that the server closes k for cause and logs it,
// once; it reports whether this call did.
func (k *conn) markClosing(cause error) bool {
	if !k.closed.CompareAndSwap(false, true) {
		return false
	}
	k.reason.Store(&cause)
	switch cause {
	case ErrTooLarge, ErrFraming, ErrReadTimeout, ErrSlowConsumer, ErrBufferBudget, ErrOutboundBudget, ErrPanic:
		// Bad input or a bad client: a warning, rate-limited per address so
		// that a flood of garbage does not become a flood of logs.
		k.s.warns.Warn(k.s.log, k.addr(), "closing connection", "remote", k.who(), "session", k.sess.ID(), "cause", cause)
	}
	return true
}

// closeWith closes k for cause, once: it logs the cause, sends the client
// a -32000 error naming the limit where there is one, and closes. Safe
// from any goroutine (gnet.Conn.AsyncWrite and Close are).
func (k *conn) closeWith(cause error) {
	if !k.markClosing(cause) {
		return
	}
	if limit, msg := limitOf(cause); limit != "" {
		line := codec.AppendError(nil, nil, codec.CodeServerBusy, msg, []byte(`{"limit":"`+limit+`"}`))
		_ = k.c.AsyncWrite(k.s.framer.AppendFrame(nil, line), nil) // queued before the close, flushed by it
	}
	_ = k.c.Close()
}

// CloseSink implements session.Closer: the engine ended the session, so
// the connection ends with it.
func (k *conn) CloseSink(cause error) { k.closeWith(cause) }

// events is the server's gnet.EventHandler, unexported so that gnet's
// callbacks are not part of Server's API.
type events struct {
	gnet.BuiltinEventEngine
	s *Server
}

func (e *events) OnOpen(c gnet.Conn) ([]byte, gnet.Action)   { return e.s.onOpen(c) }
func (e *events) OnClose(c gnet.Conn, err error) gnet.Action { return e.s.onClose(c, err) }
func (e *events) OnTraffic(c gnet.Conn) gnet.Action          { return e.s.onTraffic(c) }

// onOpen is gnet's OnOpen. The connection was admitted and its
// conn made by the accept loop (enroll).
func (s *Server) onOpen(c gnet.Conn) ([]byte, gnet.Action) {
	k, ok := c.Context().(*conn)
	if !ok { // not enrolled by the accept loop: a test's fake connection
		k = &conn{s: s, id: s.ids.Add(1), remote: c.RemoteAddr(), slot: -1}
		c.SetContext(k)
	}
	k.c = c
	s.open(k)
	return nil, gnet.None
}

// open starts serving k, whatever carries it (gnet, TLS): its session,
// and its entry in the table the sweeper reads.
func (s *Server) open(k *conn) {
	k.sess = s.eng.Open(k).Session()
	k.sess.SetRemote(k.ip)
	k.sess.Transport = "tcp"
	if s.cobs != nil {
		s.cobs.ConnOpened("tcp")
	}
	k.lastSeen.Store(s.now())
	k.since.Store(s.exactNow()) // the first message is awaited
	s.conns.Add(1)
	s.table.add(k)
	k.opened.Store(true)
	s.log.Debug("tcp connection opened", "remote", k.who(), "session", k.sess.ID())
}

// onClose is gnet's OnClose.
func (s *Server) onClose(c gnet.Conn, err error) gnet.Action {
	k, ok := c.Context().(*conn)
	if !ok {
		return gnet.None
	}
	s.closed(k, err)
	return gnet.None
}

// closed ends k's session and releases what it held, once its
// connection has closed (err: the carrier's cause, if the server did not
// close it).
func (s *Server) closed(k *conn, err error) {
	s.conns.Add(-1)
	s.table.remove(k)
	s.inb.Add(-k.partial.Swap(0))
	k.closed.Store(true)
	// gnet frees its outbound buffer with the connection; the buffers
	// Send queued are released by their callbacks, which gnet calls
	// (with an error) for every write still queued.
	if g := k.gout.Swap(0); g != 0 {
		k.held.Add(-g)
		s.outb.Add(-g)
	}
	s.limit.Release(k.addr())
	cause := err
	if r := k.reason.Load(); r != nil {
		cause = *r
	} else if cause == nil {
		cause = session.ErrClosed
	}
	if s.cobs != nil {
		s.cobs.ConnClosed("tcp", cause)
	}
	s.log.Debug("tcp connection closed", "remote", k.who(), "session", k.sess.ID(), "reason", cause)
	s.eng.Conn(k.sess).Close(fmt.Errorf("tcp: connection closed: %w", cause))
}

// onTraffic is gnet's OnTraffic. It frames every complete message
// in the inbound buffer, dispatches each, and writes the immediate answers
// in one write. The inbound buffer is not retained; what is left of a
// partial message stays in gnet's, and is recorded for the sweeper.
//
// A panic in the transport's own code (the engine contains its own) closes
// this connection alone, logged and counted by the engine: gnet would let
// it end the process.
func (s *Server) onTraffic(c gnet.Conn) (action gnet.Action) {
	k, ok := c.Context().(*conn)
	if !ok {
		return gnet.Close
	}
	defer func() {
		if p := recover(); p != nil {
			s.eng.ReportPanic(p, "tcp: OnTraffic", k.sess)
			k.markClosing(ErrPanic)
			action = gnet.Close
		}
	}()
	buf, _ := c.Peek(-1)
	hdr := 0
	if k.pp != ppNone { // the first bytes: a PROXY header? (proxy.go)
		var done bool
		if hdr, done, action = k.proxyHeader(buf); !done || action != gnet.None {
			k.track(len(buf), false)
			return action
		}
		buf = buf[hdr:]
	}
	// Pooled for the length of this call only, so an idle connection
	// holds no output buffer.
	scratch, out := codec.GetBuffer(), codec.GetBuffer()
	defer codec.PutBuffer(scratch)
	defer codec.PutBuffer(out)
	consumed, action := s.consume(k, buf, scratch, out)
	if consumed += hdr; consumed > 0 {
		// Discard(0) would drop everything buffered: a partial frame must
		// stay for the next read.
		_, _ = c.Discard(consumed)
	}
	if len(out.B) > 0 {
		k.write(out.B)
	}
	ob := c.OutboundBuffered()
	if ob != 0 || k.gout.Load() != 0 {
		k.syncOut(ob)
	}
	if action == gnet.None && ob > s.opts.MaxOutbound {
		k.markClosing(ErrSlowConsumer)
		return gnet.Close
	}
	return action
}

// consume serves what was read, buf (gnet's inbound buffer, or a TLS
// connection's): every complete message is dispatched, the immediate
// answers appended to out, and a message left partial past assembleAbove
// moved to k.acc. It returns the bytes of buf consumed, and publishes
// what is left for the sweeper. Whoever reads k calls it, one read at a
// time.
func (s *Server) consume(k *conn, buf []byte, scratch, out *codec.Buffer) (consumed int, action gnet.Action) {
	var rest int
	var framed bool
	if k.acc != nil {
		action, framed = s.assemble(k, buf, scratch, out)
		consumed, rest = len(buf), len(k.acc)
	} else {
		consumed, action = s.serveFrames(k, buf, scratch, out)
		framed, rest = consumed > 0, len(buf)-consumed
		if action == gnet.None && rest > assembleAbove {
			k.acc = append(make([]byte, 0, 2*rest), buf[consumed:]...)
			k.scanned = rest // the framer found no end in it
			consumed = len(buf)
		}
	}
	if k.acc != nil {
		rest = cap(k.acc) // what it holds is what it retains
	}
	k.track(rest, framed)
	if s.cobs != nil {
		s.cobs.Bytes("tcp", consumed, len(out.B))
	}
	return consumed, action
}

// writeChunk is the most handed to gnet in one write. gnet copies what the
// socket does not take into its outbound buffer: a ring that grows to fit
// one write, and is pooled at that size when the connection closes, then
// pieces rounded up to a power of two. Handed 64 KiB at a time, it holds
// little more than what is queued, whatever the size of the answers.
const writeChunk = 64 << 10

// write writes b to k, on k's event loop, in pieces of writeChunk. A
// write that fails closes the connection (OnClose marks k closed): gnet
// would write the next piece to its descriptor all the same.
func (k *conn) write(b []byte) {
	for len(b) > writeChunk {
		_, _ = k.c.Write(b[:writeChunk])
		if k.closed.Load() {
			return
		}
		b = b[writeChunk:]
	}
	_, _ = k.c.Write(b)
}

// chunks splits b into pieces of writeChunk for AsyncWritev.
func chunks(b []byte) [][]byte {
	bs := make([][]byte, 0, (len(b)+writeChunk-1)/writeChunk)
	for len(b) > writeChunk {
		bs = append(bs, b[:writeChunk])
		b = b[writeChunk:]
	}
	return append(bs, b)
}

// syncOut records, on k's event loop, that gnet's outbound buffer holds ob
// bytes, in the connection's outbound bytes and the budget.
func (k *conn) syncOut(ob int) {
	n := int64(ob)
	if d := n - k.gout.Swap(n); d != 0 {
		k.held.Add(d)
		k.s.outb.Add(d)
	}
}

// serveFrames serves every complete frame at the start of buf, appending
// the immediate answers to out, and returns the bytes consumed. A stream
// that cannot be framed is answered and closed (action gnet.Close).
func (s *Server) serveFrames(k *conn, buf []byte, scratch, out *codec.Buffer) (consumed int, action gnet.Action) {
	for consumed < len(buf) {
		frame, n, err := s.framer.Next(buf[consumed:])
		if err != nil {
			return len(buf), s.framingError(k, err, out)
		}
		if n == 0 {
			break
		}
		consumed += n
		if len(frame) == 0 {
			continue
		}
		scratch.B = s.eng.Conn(k.sess).HandleFrame(frame, scratch.B[:0])
		if len(scratch.B) > 0 {
			out.B = s.framer.AppendFrame(out.B, scratch.B)
		}
	}
	return consumed, gnet.None
}

// assemble adds what was read, buf, to the big message being assembled in
// k.acc, and serves it once complete, with whatever followed it. It
// reports whether a frame was completed. k.acc is nil again once nothing
// partial is left; a small partial message after the big one stays in it.
func (s *Server) assemble(k *conn, buf []byte, scratch, out *codec.Buffer) (gnet.Action, bool) {
	k.acc = append(k.acc, buf...)
	end := len(k.acc)
	if _, nl := s.framer.(codec.NewlineFramer); nl {
		i := bytes.IndexByte(k.acc[k.scanned:], '\n')
		if i < 0 {
			k.scanned = len(k.acc)
			if len(k.acc) > s.eng.Options().MaxMessage+1 { // +1: a final '\r' may be the delimiter's
				k.acc = nil
				return s.framingError(k, codec.ErrTooLarge, out), false
			}
			return gnet.None, false
		}
		end = k.scanned + i + 1 // frame whole: the framer scans it once more
	}
	consumed, action := s.serveFrames(k, k.acc[:end], scratch, out)
	if action != gnet.None {
		k.acc = nil
		return action, false
	}
	if consumed == 0 { // Content-Length framing: the body is still short
		k.scanned = 0
		return gnet.None, false
	}
	// Serve what followed the big message, then keep only what is left of
	// it, in a buffer of its size: the big one is not held.
	n, action := s.serveFrames(k, k.acc[consumed:], scratch, out)
	left := k.acc[consumed+n:]
	k.acc, k.scanned = nil, 0
	if action == gnet.None && len(left) > 0 {
		k.acc = append([]byte(nil), left...)
	}
	return action, true
}

// track publishes, after a read, what the sweeper needs: the time of the
// traffic, and the bytes and start of a partial message left behind
// (framed says a message was completed in this read, so the partial one,
// if any, began in it). A few atomic loads; stores only on change.
func (k *conn) track(rest int, framed bool) {
	s := k.s
	now := s.now()
	if k.lastSeen.Load() != now {
		k.lastSeen.Store(now)
	}
	r := int64(rest)
	if old := k.partial.Load(); r != old {
		k.partial.Store(r)
		s.inb.Add(r - old) // over the budget, it wakes the sweeper
	}
	switch {
	case r > 0 && (framed || k.since.Load() == 0):
		k.since.Store(s.exactNow())
	case r == 0 && framed && k.since.Load() != 0:
		k.since.Store(0)
	}
}

// framingError answers a stream that cannot be framed and closes it: the
// bad bytes cannot be skipped reliably. out holds the answers already
// due for this read; the error goes after them.
func (s *Server) framingError(k *conn, err error, out *codec.Buffer) gnet.Action {
	cause, msg := ErrFraming, "parse error: malformed frame"
	if errors.Is(err, codec.ErrTooLarge) {
		cause, msg = ErrTooLarge, "parse error: message exceeds the size limit"
	}
	k.markClosing(cause)
	e := codec.AppendError(nil, nil, codec.CodeParseError, msg, nil)
	out.B = s.framer.AppendFrame(out.B, e)
	_, _ = k.c.Write(out.B)
	out.B = out.B[:0]
	return gnet.Close
}

// Send implements session.Sink: it frames b and queues it on the
// connection's event loop. It takes ownership of b. Safe for concurrent use.
func (k *conn) Send(b *codec.Buffer) error {
	if k.closed.Load() {
		codec.PutBuffer(b)
		return session.ErrClosed
	}
	if _, nl := k.s.framer.(codec.NewlineFramer); nl {
		b.B = append(b.B, '\n')
	} else {
		f := codec.GetBuffer()
		f.B = k.s.framer.AppendFrame(f.B, b.B)
		codec.PutBuffer(b)
		b = f
	}
	return k.queue(b, false)
}

// queue hands b, framed, to the connection's writer, counted in the
// connection's outbound bytes and the budget until written. It takes
// ownership of b. inline is a TLS connection's reader queuing its own
// answers, which it then writes itself (tlsWire.push).
func (k *conn) queue(b *codec.Buffer, inline bool) error {
	n, size := int64(len(b.B)), int64(cap(b.B))
	if k.pending.Add(n) > int64(k.s.opts.MaxOutbound) {
		k.pending.Add(-n)
		codec.PutBuffer(b)
		k.closeWith(ErrSlowConsumer)
		return session.ErrSlowConsumer
	}
	if now := k.s.now(); k.lastSeen.Load() != now {
		k.lastSeen.Store(now) // outbound traffic keeps a connection from idling out
	}
	k.held.Add(size)
	k.s.outb.Add(size) // over the budget, it wakes the sweeper
	done := func(c gnet.Conn, err error) error {
		k.pending.Add(-n)
		k.held.Add(-size)
		k.s.outb.Add(-size)
		codec.PutBuffer(b)
		if err == nil && c != nil {
			ob := c.OutboundBuffered()
			k.syncOut(ob)
			if ob > k.s.opts.MaxOutbound {
				k.closeWith(ErrSlowConsumer)
			}
		}
		return nil
	}
	var err error
	switch {
	case inline:
		err = k.c.(*tlsWire).push(pending{b: b.B, cb: done}, true)
	case len(b.B) > writeChunk:
		err = k.c.AsyncWritev(chunks(b.B), done)
	default:
		err = k.c.AsyncWrite(b.B, done)
	}
	if err != nil {
		k.pending.Add(-n)
		k.held.Add(-size)
		k.s.outb.Add(-size)
		codec.PutBuffer(b)
		return fmt.Errorf("tcp: write: %w", err)
	}
	if k.s.cobs != nil {
		k.s.cobs.Bytes("tcp", 0, int(n))
	}
	return nil
}

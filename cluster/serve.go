package cluster

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/nats-io/nats.go"
	"github.com/valyala/fasthttp"
)

// The owner's side of forwarding: a request another node forwarded is
// served by this node's own HTTP handler, on a fasthttp.RequestCtx whose
// connection is a tunnelConn, and its answer sent back frame by frame.

// errCancelled is what a tunnel's writes return once the client of the
// forwarding node went away.
var errCancelled = errors.New("cluster: the forwarding node's client went away")

// Serve makes the node serve the requests other nodes forward to it with
// h, this node's HTTP handler (mcphttp.Server.Handler). Until it is
// called they are answered 503. Safe to call again to replace h.
func (n *Node) Serve(h fasthttp.RequestHandler) {
	n.handler.Store(&h)
	n.startPendingTicker()
}

// onForwarded takes a request another node forwarded through NATS.
func (n *Node) onForwarded(m *nats.Msg) {
	if m.Reply == "" {
		n.badMessage("forwarded request without reply subject", m.Data)
		return
	}
	t := n.getTunnel()
	t.key.reply = m.Reply
	n.serveRequest(t, m.Data)
}

// serveRequest serves a forwarded request, data, whose answer goes back
// through t (over NATS, or a direct link): on a worker, since its handler
// may wait on a tool. Over MaxForwarded, or before Serve, it is answered
// 503.
func (n *Node) serveRequest(t *tunnelConn, data []byte) {
	hp := n.handler.Load()
	n.tunMu.Lock()
	if hp == nil || n.closed.Load() || n.serving.Load() >= int64(n.opts.MaxForwarded) {
		n.tunMu.Unlock()
		n.stats.servedRefused.Add(1)
		t.refuse(fasthttp.StatusServiceUnavailable, "Service Unavailable: node "+n.name+" is not taking forwarded requests now")
		n.putTunnel(t)
		return
	}
	n.serving.Add(1)
	n.serveWG.Add(1)
	t.started = time.Now()
	n.tunnels[t.key] = t
	n.stats.served.Add(1)
	// Handed on under tunMu, where closed was checked: the pending ticker
	// closes jobs under it once the node is closed (endWorkers).
	j := job{h: *hp, t: t, data: data}
	select {
	case n.jobs <- j: // an idle worker takes it
	default:
		go n.worker(j)
	}
	n.tunMu.Unlock()
}

// job is a forwarded request for a worker.
type job struct {
	h    fasthttp.RequestHandler
	t    *tunnelConn
	data []byte
}

// worker serves j, then the forwarded requests that come while it is
// idle. Workers live on between requests so that each request does not
// start a goroutine whose stack grows anew to the depth of an HTTP
// handler (copying it costed a tenth of a forwarded request's CPU). An
// idle worker exits when the pending ticker finds that no request was
// forwarded here for a whole tick (retireIdle): a timer per worker,
// reset for every request, cost about 5% of a forwarded call. It waits
// on jobs alone, where an empty job retires it and its close ends it: a
// select over jobs and two channels that say stop locked and queued on
// all three for every request.
func (n *Node) worker(j job) {
	for {
		n.serveForwarded(j.h, j.t, j.data)
		var ok bool
		if j, ok = <-n.jobs; !ok || j.t == nil {
			return
		}
	}
}

// retireIdle ends every idle worker: each empty job one takes ends it.
func (n *Node) retireIdle() {
	n.tunMu.Lock() // see serveRequest
	defer n.tunMu.Unlock()
	for !n.closed.Load() {
		select {
		case n.jobs <- job{}:
		default:
			return
		}
	}
}

// endWorkers ends the workers once the node is closed and its requests
// served (or Shutdown stopped waiting for them: each worker ends when its
// request does). Nothing is handed on after: serveRequest checks closed,
// and sends, under tunMu.
func (n *Node) endWorkers() {
	<-n.workersStop
	n.tunMu.Lock()
	close(n.jobs)
	n.tunMu.Unlock()
}

// refusal is the answer frame of a forwarded request refused with status
// and a JSON-RPC error.
func refusal(status int, msg string) []byte {
	b := appendFrameStart(nil, frWhole, 0)
	b = appendUvarint(b, status)
	b = appendStr(appendStr(b, "Content-Type"), "application/json")
	b = appendStr(appendStr(b, "Retry-After"), "1")
	b = endHeaders(b)
	return codec.AppendError(b, nil, codec.CodeInternalError, msg, nil)
}

// serveForwarded serves one forwarded request with h and sends its answer.
func (n *Node) serveForwarded(h fasthttp.RequestHandler, t *tunnelConn, data []byte) {
	defer n.serveWG.Done()
	defer n.serving.Add(-1)
	defer n.dropTunnel(t)

	req, ok := decodeRequest(data, t.mem.hdrs[:0])
	t.mem.hdrs = req.headers
	if !ok {
		n.badMessage("forwarded request", data)
		t.refuse(fasthttp.StatusBadRequest, "Bad Request: a forwarded request did not parse")
		return
	}
	ctx := n.ctxs.Get().(*fasthttp.RequestCtx)
	defer func() {
		ctx.Request.Reset()
		ctx.Response.Reset()
		ctx.ResetUserValues()
		n.ctxs.Put(ctx)
	}()
	t.setRemote(req.remote)
	ctx.Init2(t, nopLogger{}, false)
	ctx.Request.Header.SetMethodBytes(req.method)
	ctx.Request.SetRequestURIBytes(req.uri)
	for _, kv := range req.headers {
		ctx.Request.Header.AddBytesKV(kv[0], kv[1])
	}
	ctx.Request.SetBodyRaw(req.body)

	h(ctx)

	if ctx.Response.IsBodyStream() {
		t.head(ctx, true)
		if err := ctx.Response.BodyWriteTo(t); err != nil {
			t.send(frFailed, []byte(err.Error()))
			return
		}
		t.send(frEnd, nil)
		return
	}
	body := ctx.Response.Body()
	if !t.whole(ctx, body) {
		t.head(ctx, false)
		_, _ = t.Write(body)
		t.send(frEnd, nil)
	}
}

// request is a decoded forwarded request; its slices alias the message.
type request struct {
	remote, method, uri []byte
	headers             [][2][]byte
	body                []byte
}

// decodeRequest decodes the wire form of a forwarded request, its
// headers onto hdrs.
func decodeRequest(data []byte, hdrs [][2][]byte) (req request, ok bool) {
	r := reader{b: data}
	if r.byte() != reqMagic {
		return req, false
	}
	req.remote = r.bytes()
	req.method = r.bytes()
	req.uri = r.bytes()
	if r.bad || len(req.method) == 0 || len(req.uri) == 0 {
		return req, false
	}
	req.headers = r.headers(hdrs, 1024)
	req.body = r.b
	return req, !r.bad
}

// setRemote sets the address RemoteAddr reports, from its text b,
// without allocating: the tunnel's own TCPAddr is reused.
func (t *tunnelConn) setRemote(b []byte) {
	t.addr = net.TCPAddr{}
	ap, err := netip.ParseAddrPort(unsafe.String(unsafe.SliceData(b), len(b)))
	if err != nil {
		return
	}
	a := ap.Addr()
	if a.Is4() {
		ip := a.As4()
		t.addr.IP = append(t.ip[:0], ip[:]...)
	} else {
		ip := a.As16()
		t.addr.IP = append(t.ip[:0], ip[:]...)
		t.addr.Zone = a.Zone()
	}
	t.addr.Port = int(ap.Port())
}

// dropTunnel forgets t once its answer is sent: nothing finds it any
// more, its writes fail, and its memory is recycled.
func (n *Node) dropTunnel(t *tunnelConn) {
	n.tunMu.Lock()
	delete(n.tunnels, t.key)
	n.tunMu.Unlock()
	n.putTunnel(t)
}

// tunnelMem is what a tunnel holds that the next one reuses: the
// request's bytes, its headers, the frame buffer. The tunnelConn itself
// is made per request: the transport may keep the connection of a
// request (a stream's, a large answer's, to cut it) a moment after the
// request ended, and what it does to an old tunnel must not reach a new
// request.
type tunnelMem struct {
	req  *codec.Buffer // the request's bytes, read from a link; nil for NATS
	hdrs [][2][]byte   // the request's headers (decodeRequest)
	buf  []byte        // the frame being sent
}

var tunnelMems = sync.Pool{New: func() any { return new(tunnelMem) }}

// getTunnel returns a new tunnel of n, with recycled memory.
func (n *Node) getTunnel() *tunnelConn {
	return &tunnelConn{n: n, mem: tunnelMems.Get().(*tunnelMem)}
}

// putTunnel ends t: its request is answered (or refused) and no table
// holds it. Its writes fail from now on, and its memory is recycled.
func (n *Node) putTunnel(t *tunnelConn) {
	t.aborted.Store(true)
	t.mu.Lock()
	m := t.mem
	t.mem, t.headSent = nil, true
	t.mu.Unlock()
	if m == nil {
		return
	}
	if m.req != nil {
		codec.PutBuffer(m.req)
		m.req = nil
	}
	clear(m.hdrs[:cap(m.hdrs)])
	m.hdrs, m.buf = m.hdrs[:0], m.buf[:0]
	if cap(m.buf) > 64<<10 {
		m.buf = nil
	}
	tunnelMems.Put(m)
}

// tunKey names a tunnel in n.tunnels: its link and number on it, or its
// NATS reply subject.
type tunKey struct {
	link  *linkConn
	id    uint64
	reply string
}

// onCancel takes a forwarding node's word that the client of a request
// went away: the tunnel's next write fails, which ends its stream as a
// disconnect does.
func (n *Node) onCancel(m *nats.Msg) {
	n.tunMu.Lock()
	if t := n.tunnels[tunKey{reply: string(m.Data)}]; t != nil {
		n.stats.cancelled.Add(1)
		t.abort()
	}
	n.tunMu.Unlock()
}

// abortTunnels fails the writes of every tunnel, at Close.
func (n *Node) abortTunnels() {
	n.tunMu.Lock()
	for _, t := range n.tunnels {
		t.abort()
	}
	n.tunMu.Unlock()
}

// startPendingTicker starts, once, the goroutine that tells forwarding
// nodes that their requests are still being served: every third of
// ForwardTimeout, each tunnel that has not sent its head yet sends a
// pending frame. One ticker serves every tunnel, so a forwarded request
// costs no timer; it also retires the idle workers after a tick without
// a forwarded request.
func (n *Node) startPendingTicker() {
	n.tickOnce.Do(func() {
		every := n.opts.ForwardTimeout / 3
		n.tickStop = make(chan struct{})
		go func() {
			tk := time.NewTicker(every)
			defer tk.Stop()
			served := n.stats.served.Load()
			for {
				select {
				case <-n.tickStop:
					n.endWorkers()
					return
				case now := <-tk.C:
					if s := n.stats.served.Load(); s == served {
						n.retireIdle() // nothing came for a whole tick
					} else {
						served = s
					}
					n.tunMu.Lock() // held: a tunnel out of the table is recycled
					for _, t := range n.tunnels {
						if now.Sub(t.started) >= every {
							t.pending()
						}
					}
					n.tunMu.Unlock()
				}
			}
		}()
	})
}

// tunnelConn is the connection of a forwarded request's RequestCtx:
// what the handler writes to it (a streamed body) goes to the forwarding
// node as data frames. Reads find nothing: the request is read already.
type tunnelConn struct {
	n       *Node
	key     tunKey      // in n.tunnels: the link and the request's number on it, or the NATS reply subject
	addr    net.TCPAddr // RemoteAddr
	ip      [16]byte    // addr.IP's bytes
	started time.Time
	aborted atomic.Bool

	mu       sync.Mutex
	seq      uint64
	headSent bool
	mem      *tunnelMem    // recycled by putTunnel, then nil
	gone     chan struct{} // made by PeerGone, closed by abort
	goneDone bool          // gone is closed
}

// abort fails the tunnel's writes and tells the transport, which watches
// PeerGone, that the client went away: the request it serves is
// cancelled, its stream ended, at once.
func (t *tunnelConn) abort() {
	t.aborted.Store(true)
	t.mu.Lock()
	if t.gone != nil && !t.goneDone {
		close(t.gone)
		t.goneDone = true
	}
	t.mu.Unlock()
}

// PeerGone is closed when the forwarding node's client went away (or
// this node closes): the transport's connection watch (internal/connwatch)
// waits on it as it would on a socket. Made when first asked for: a
// request answered at once never is.
func (t *tunnelConn) PeerGone() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.gone == nil {
		t.gone = make(chan struct{})
		if t.aborted.Load() {
			close(t.gone)
			t.goneDone = true
		}
	}
	return t.gone
}

// send publishes a frame of kind with payload.
func (t *tunnelConn) send(kind byte, payload []byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sendLocked(kind, payload)
}

func (t *tunnelConn) sendLocked(kind byte, payload []byte) error {
	m := t.mem
	if m == nil {
		return errCancelled // the request ended
	}
	m.buf = appendFrameStart(m.buf[:0], kind, t.seq)
	t.seq++
	m.buf = append(m.buf, payload...)
	return t.emit(m.buf)
}

// emit sends an answer frame to the forwarding node: on the link the
// request came on, or on its NATS reply subject.
func (t *tunnelConn) emit(b []byte) error {
	if t.key.link != nil {
		return t.key.link.write(lkAnswer, t.key.id, b)
	}
	return t.n.nc.Publish(t.key.reply, b)
}

// pending sends a pending frame unless the head is out.
func (t *tunnelConn) pending() {
	t.mu.Lock()
	if !t.headSent {
		_ = t.sendLocked(frPending, nil)
	}
	t.mu.Unlock()
}

// appendHead appends the status and headers of ctx's response.
func appendHead(dst []byte, ctx *fasthttp.RequestCtx) []byte {
	dst = appendUvarint(dst, ctx.Response.StatusCode())
	for k, v := range ctx.Response.Header.All() {
		dst = appendHeader(dst, k, v)
	}
	return endHeaders(dst)
}

// head sends the head frame of an answer whose body follows.
func (t *tunnelConn) head(ctx *fasthttp.RequestCtx, stream bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.mem
	if m == nil {
		return
	}
	t.headSent = true
	m.buf = appendFrameStart(m.buf[:0], frHead, t.seq)
	t.seq++
	m.buf = appendHead(m.buf, ctx)
	if stream {
		m.buf = append(m.buf, 1)
	} else {
		m.buf = append(m.buf, 0)
	}
	_ = t.emit(m.buf)
}

// whole sends the answer in one frame, if it fits in one.
func (t *tunnelConn) whole(ctx *fasthttp.RequestCtx, body []byte) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.mem
	if m == nil {
		return true // the request ended: nothing more is sent
	}
	m.buf = appendFrameStart(m.buf[:0], frWhole, t.seq)
	m.buf = appendHead(m.buf, ctx)
	if len(m.buf)+len(body) > t.n.maxFrame {
		return false
	}
	t.seq++
	t.headSent = true
	m.buf = append(m.buf, body...)
	_ = t.emit(m.buf)
	return true
}

// refuse answers the forwarded request with status and a JSON-RPC error.
func (t *tunnelConn) refuse(status int, msg string) {
	t.mu.Lock()
	t.headSent = true
	t.mu.Unlock()
	_ = t.emit(refusal(status, msg))
}

// Write sends p as data frames, each at most the cluster's frame size. It
// fails once the forwarding node's client went away (or the node
// closes), or the connection's write deadline was set in the past (the
// transport aborting the stream).
func (t *tunnelConn) Write(p []byte) (int, error) {
	if t.aborted.Load() {
		return 0, errCancelled
	}
	max := t.n.maxFrame - 16
	k := 0
	for len(p) > 0 {
		c := p
		if len(c) > max {
			c = c[:max]
		}
		if err := t.send(frData, c); err != nil {
			return k, err
		}
		k += len(c)
		p = p[len(c):]
	}
	return k, nil
}

// Read reports the end of the stream: a forwarded request's body was read
// already, and no second request follows on a tunnel.
func (t *tunnelConn) Read([]byte) (int, error) { return 0, errCancelled }

// Close does nothing: the tunnel ends with its request.
func (t *tunnelConn) Close() error { return nil }

// LocalAddr is a placeholder: the request came through the cluster.
func (t *tunnelConn) LocalAddr() net.Addr { return &net.TCPAddr{} }

// RemoteAddr is the client's address, as the forwarding node saw it.
func (t *tunnelConn) RemoteAddr() net.Addr { return &t.addr }

// SetDeadline implements net.Conn; see SetWriteDeadline.
func (t *tunnelConn) SetDeadline(d time.Time) error { return t.SetWriteDeadline(d) }

// SetReadDeadline does nothing: nothing is read.
func (t *tunnelConn) SetReadDeadline(time.Time) error { return nil }

// SetWriteDeadline aborts the tunnel's writes when d is in the past (the
// transport cutting a stream off); other deadlines are the forwarding
// node's to enforce.
func (t *tunnelConn) SetWriteDeadline(d time.Time) error {
	if !d.IsZero() && time.Until(d) < 0 {
		t.aborted.Store(true)
	}
	return nil
}

// nopLogger is the fasthttp logger of forwarded requests' contexts.
type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

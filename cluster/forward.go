package cluster

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/internal/connwatch"
	"github.com/nats-io/nats.go"
	"github.com/valyala/fasthttp"
)

// The sending side of forwarding: a request for a session (or task) that
// another node owns is sent to it and its answer relayed.

// Errors a relayed stream ends with.
var (
	ErrStreamLost = errors.New("cluster: relayed stream lost a frame")
	ErrOwnerGone  = errors.New("cluster: owner of the stream went silent")
	ErrOwnerFail  = errors.New("cluster: owner ended the stream with an error")
	errNoOwner    = errors.New("cluster: no node answers for the owner")
	errClientGone = errors.New("cluster: the client went away")
)

// writeTimeout bounds each write of a relayed stream to its client.
const writeTimeout = 30 * time.Second

// forward is one request in flight to its owner: the frames of its answer
// arrive on ch, in order (seq), from the reply subscription.
type forward struct {
	n     *Node
	token uint64
	reply string
	subj  []byte // reply's bytes, built in place
	owner string
	reqID []byte    // the raw JSON id of the request, when known: for the errors it is answered with
	link  *linkConn // the direct link the request went on, nil for NATS
	// A resumption: the stream it resumes, whose request id the kept
	// events tell (the first may come after the GET: asked again when
	// needed).
	evSID string
	evKey evKey
	ch    chan []byte // a nil message: nobody answers for the owner
	timer *time.Timer // the answer's deadline, set once poked (arm)
	born  uint64      // Node.sweeps when registered (sweepForwards)
	poked bool        // the sweeper filed its poke (under pendMu)
	lost  atomic.Bool // a frame did not fit in ch: the answer is broken
	next  uint64      // the seq expected next
	hdrs  [][2][]byte
	ended bool // the owner completed the answer

	// A relayed stream's events are checked (checkEvents) before they
	// reach the client: sse parses them; tail holds the start of an event
	// that a frame cut, of which the first tailOff bytes were let through.
	checkSSE bool // the stream is an identity-coded event stream
	sse      codec.SSEParser
	tail     []byte
	tailOff  int
}

var forwards = sync.Pool{New: func() any { return &forward{ch: make(chan []byte, 256)} }}

// Route answers ctx by forwarding it to the node that owns id (a session
// id, or a 2026-07-28 task id), when that is another node; it reports
// whether it did. It is mcphttp.Options.Route. A request whose owner no
// node answers for (a node that left, or a forged id) is not forwarded:
// the caller serves it, and answers 404 for the session it does not know.
// Requests another node forwarded here are never forwarded again.
func (n *Node) Route(ctx *fasthttp.RequestCtx, id []byte) bool {
	owner := engine.SessionNode(id)
	if len(owner) == 0 || string(owner) == n.name || !validName(owner) {
		return false
	}
	if _, ok := ctx.Conn().(*tunnelConn); ok || n.closed.Load() {
		return false
	}
	return n.forward(ctx, string(owner), nil)
}

// forward sends ctx's request to owner and answers ctx with what comes
// back. It returns false, having answered nothing, when nobody answers for
// owner. reqID is the raw JSON id of the request when the caller knows it
// (a resumption: the id of the stream's request), else it is read from a
// POST's body when an error needs it.
func (n *Node) forward(ctx *fasthttp.RequestCtx, owner string, reqID []byte) bool {
	return n.forwardResume(ctx, owner, reqID, "", evKey{}, nil)
}

// forwardResume is forward for a resumption of stream k of session sid
// (sid "": any other request), or of the direct message dm (nil: the
// whole request), traced when the node has a Tracer (trace.go).
func (n *Node) forwardResume(ctx *fasthttp.RequestCtx, owner string, reqID []byte, sid string, k evKey, dm *direct) bool {
	if n.opts.Tracer != nil {
		return n.tracedForward(ctx, owner, func(tr *forwardTrace) bool {
			return n.forwardTraced(ctx, owner, reqID, sid, k, tr, dm)
		})
	}
	return n.forwardTraced(ctx, owner, reqID, sid, k, nil, dm)
}

// again is what forwardOnce leaves to do: nothing, or send the request
// again, through NATS or whole.
type again uint8

const (
	againNot   again = iota
	againNATS        // a GET whose link went down before any answer: nothing was answered, and a GET may be sent twice
	againWhole       // a direct message the owner did not serve so: nothing was done there
)

// forwardTraced is forwardResume carrying trace context tr instead of
// the client's (nil: the client's).
func (n *Node) forwardTraced(ctx *fasthttp.RequestCtx, owner string, reqID []byte, sid string, k evKey, tr *forwardTrace, dm *direct) bool {
	if dm != nil && tr != nil && tr.end != 0 {
		dm = nil // the trace context is in the body: the whole request carries the forward's
	}
	done, a := n.forwardOnce(ctx, owner, reqID, true, sid, k, tr, dm)
	if a == againWhole {
		done, a = n.forwardOnce(ctx, owner, reqID, true, sid, k, tr, nil)
	}
	if a == againNATS {
		done, _ = n.forwardOnce(ctx, owner, reqID, false, sid, k, tr, nil)
	}
	return done
}

// forwardOnce is forward, on the direct link to owner when useLink and
// there is one, as the direct message dm when it is one and there is a
// link (direct.go).
func (n *Node) forwardOnce(ctx *fasthttp.RequestCtx, owner string, reqID []byte, useLink bool, sid string, k evKey, tr *forwardTrace, dm *direct) (done bool, more again) {
	f := n.sendDirect(ctx, owner, useLink, tr, dm)
	sentDirect := f != nil
	if f == nil {
		var ok bool
		if f, ok = n.send(ctx, owner, reqID, useLink, tr); !ok {
			return true, againNot // answered: refused
		}
	}
	if reqID != nil {
		f.reqID = append(f.reqID[:0], reqID...)
	}
	f.evSID, f.evKey = sid, k
	n.stats.forwarded.Add(1)
	// A forward waits on its channel alone while it is young: no timer is
	// set, no clock read, for a request answered at once. Once it has
	// waited probeIn, the node's sweeper files a poke with it
	// (sweepForwards), and it asks whether its owner is there at all
	// (NATS may deliver the first message after a node left to the route
	// it left by, and drop it, rather than answer "no responders"; the
	// probe, a later message, gets the true answer), watches its client,
	// and sets its timer for the answer's deadline, which the owner's
	// frames push back by moving deadline, not the timer: the timer, when
	// it fires early, is set again for what is left.
	var deadline time.Time // zero: ForwardTimeout after the request went
	probeIn := n.probeIn()
	var timerC <-chan time.Time // the deadline's, once poked
	var probed chan bool
	var gone chan struct{} // the client went away (watched once slow)
	var w *connwatch.Watcher
	heard := false
	var body []byte   // an answer too large for one frame, gathered
	var headCT []byte // and its content type
	for {
		var m []byte
		if timerC == nil {
			m = <-f.ch
		} else {
			got := false
			select {
			case now := <-timerC:
				if left := deadline.Sub(now); left > 0 {
					f.timer.Reset(left) // frames came meanwhile
					continue
				}
				n.unregister(f)
				n.cancel(f)
				n.stats.forwardTimeouts.Add(1)
				ctx.Response.Reset()
				failID(ctx, fasthttp.StatusGatewayTimeout, codec.CodeInternalError,
					"Gateway Timeout: node "+owner+" did not answer within "+n.opts.ForwardTimeout.String()+"; the request may still be served there and is not retried", requestID(ctx, reqID))
				return true, againNot
			case <-gone:
				n.unregister(f)
				n.cancel(f)
				ctx.SetConnectionClose()
				return true, againNot
			case alive := <-probed:
				probed = nil
				if !alive && !heard {
					n.unregister(f)
					n.stats.forwardNoOwner.Add(1)
					return false, againNot
				}
			case m = <-f.ch:
				got = true
			}
			if !got {
				continue
			}
		}
		if isPoke(m) {
			if timerC != nil {
				continue
			}
			now := time.Now()
			if deadline.IsZero() {
				deadline = now.Add(n.opts.ForwardTimeout - probeIn)
			}
			timerC = f.arm(max(deadline.Sub(now), time.Nanosecond)).C
			if !heard {
				p := make(chan bool, 1)
				probed = p
				go func() { p <- n.ping(owner) }()
			}
			// A slow answer: watch the client, as the owner's transport
			// would, so that one gone away cancels the request there.
			g := make(chan struct{})
			gone = g
			w = connwatch.Watch(ctx.Conn(), func() { close(g) })
			defer w.Stop()
			continue
		}
		if m == nil {
			n.unregister(f)
			n.stats.forwardNoOwner.Add(1)
			return false, againNot
		}
		if isNodeGone(m) {
			n.unregister(f)
			ctx.Response.Reset()
			failID(ctx, fasthttp.StatusBadGateway, codec.CodeInternalError,
				"Bad Gateway: node "+owner+", which served the request, left the cluster; the request may or may not have been served", requestID(ctx, reqID))
			return true, againNot
		}
		if len(m) == 0 && !heard && ctx.IsGet() {
			n.unregister(f) // its link went down (linkLost)
			return false, againNATS
		}
		heard = true
		fr, ok := f.frame(m)
		if !ok {
			n.unregister(f)
			n.cancel(f)
			ctx.Response.Reset()
			failID(ctx, fasthttp.StatusBadGateway, codec.CodeInternalError,
				"Bad Gateway: the answer of node "+owner+" was lost in transit; the request may have been served", requestID(ctx, reqID))
			return true, againNot
		}
		switch fr.kind {
		case frPending:
			deadline = time.Now().Add(n.opts.ForwardTimeout)
		case frWhole:
			if !checkBody(bodyType(&fr), fr.body) {
				n.badMessage("answer body", fr.body)
				n.unregister(f)
				badAnswer(ctx, owner)
				return true, againNot
			}
			setHead(ctx, &fr)
			ctx.Response.SetBody(fr.body)
			f.ended = true
			n.unregister(f)
			return true, againNot
		case frHead:
			headCT = bodyType(&fr) // aliases m, which nothing reuses
			if len(headCT) > 0 && &headCT[0] == &ctCompressed[0] {
				n.badMessage("answer encoding", m)
				n.unregister(f)
				n.cancel(f)
				badAnswer(ctx, owner)
				return true, againNot
			}
			setHead(ctx, &fr)
			f.checkSSE = bytes.EqualFold(headCT, ctSSE)
			if fr.stream {
				if len(f.reqID) == 0 {
					f.reqID = append(f.reqID[:0], requestID(ctx, nil)...)
				}
				ctx.Response.ImmediateHeaderFlush = true
				f.stopTimers() // the relay has its own
				ctx.SetBodyStream(&relay{f: f, conn: ctx.Conn()}, -1)
				return true, againNot
			}
			deadline = time.Now().Add(n.opts.ForwardTimeout)
		case frData:
			body = append(body, fr.body...)
			deadline = time.Now().Add(n.opts.ForwardTimeout)
		case frEnd:
			if !checkBody(headCT, body) {
				n.badMessage("answer body", body)
				n.unregister(f)
				ctx.Response.Reset()
				badAnswer(ctx, owner)
				return true, againNot
			}
			ctx.Response.SetBodyRaw(body)
			f.ended = true
			n.unregister(f)
			return true, againNot
		case frDirect, frNotDirect:
			if !sentDirect || len(fr.body) > 0 && !validJSON(fr.body) {
				n.badMessage("answer body", m) // a direct answer to a whole request is garbage too
				n.unregister(f)
				badAnswer(ctx, owner)
				return true, againNot
			}
			f.ended = true
			n.unregister(f)
			if fr.kind == frNotDirect {
				return false, againWhole // nothing was done there: the whole request goes
			}
			dm.w.WriteDirect(ctx, fr.status, fr.retry, fr.body)
			return true, againNot
		default: // frFailed
			n.unregister(f)
			ctx.Response.Reset()
			failID(ctx, fasthttp.StatusBadGateway, codec.CodeInternalError,
				"Bad Gateway: node "+owner+" failed while answering: "+string(fr.body), requestID(ctx, reqID))
			return true, againNot
		}
	}
}

// send sends ctx's request whole to owner: on the direct link to owner
// when useLink and there is one, else through NATS; with tr, carrying its
// trace context. It returns the forward its answer comes to, or false
// when it answered ctx itself (refused: too large, or the cluster is out
// of reach).
func (n *Node) send(ctx *fasthttp.RequestCtx, owner string, reqID []byte, useLink bool, tr *forwardTrace) (*forward, bool) {
	b := codec.GetBuffer()
	b.B = appendRequest(b.B[:0], ctx, tr)
	if len(b.B) > n.maxFrame {
		codec.PutBuffer(b)
		n.stats.forwardRefused.Add(1)
		failID(ctx, fasthttp.StatusRequestEntityTooLarge, codec.CodeInvalidRequest,
			"Request Entity Too Large: over the cluster's message limit of "+strconv.Itoa(n.maxFrame)+" bytes", requestID(ctx, reqID))
		return nil, false
	}
	if n.cutOff() {
		// Cut off from the cluster (no NATS connection, or no route to
		// any peer): the owner may well be alive, so the session is not
		// declared lost (404). Nor is the request buffered for the
		// reconnect: it would reach its owner after its client had given
		// up on it.
		codec.PutBuffer(b)
		n.stats.forwardRefused.Add(1)
		ctx.Response.Header.Set("Retry-After", "1")
		failID(ctx, fasthttp.StatusServiceUnavailable, codec.CodeInternalError,
			"Service Unavailable: this node has lost the cluster and cannot reach node "+owner+"; retry", requestID(ctx, reqID))
		return nil, false
	}
	var lc *linkConn
	if useLink {
		lc = n.linkTo(owner)
	}
	f := n.register(owner, lc)
	var err error
	if lc != nil {
		if err = lc.write(lkRequest, f.token, b.B); err != nil {
			n.unregister(f) // the link went down meanwhile: NATS, then
			f = n.register(owner, nil)
		}
	}
	if f.link == nil {
		err = n.nc.PublishRequest(n.prefix+".http."+owner, f.reply, b.B)
	} else {
		n.stats.forwardedLink.Add(1)
	}
	codec.PutBuffer(b)
	if err != nil {
		n.unregister(f)
		n.stats.forwardRefused.Add(1)
		ctx.Response.Header.Set("Retry-After", "1")
		failID(ctx, fasthttp.StatusServiceUnavailable, codec.CodeInternalError,
			"Service Unavailable: cannot reach node "+owner+": "+err.Error(), requestID(ctx, reqID))
		return nil, false
	}
	return f, true
}

// probeAfter is how long a forwarded request waits for its first frame
// before it checks that its owner is there (at most half ForwardTimeout).
const probeAfter = 250 * time.Millisecond

// probeIn is how long a forward waits before it checks that its owner is
// there, watches its client, and sets its timer.
func (n *Node) probeIn() time.Duration { return min(probeAfter, n.opts.ForwardTimeout/2) }

// pokeFrame is what the sweeper files with a forward that has waited
// probeIn: told apart from any frame by its address.
var pokeFrame = []byte{1}

func isPoke(m []byte) bool { return len(m) == 1 && &m[0] == &pokeFrame[0] }

// sweepForwards pokes, every half probeIn, each forward in flight that
// has waited probeIn (between that and one and a half times it), once,
// until the node closes: so that a forward answered at once costs no
// timer (forwardOnce). A forward is born at the sweep count of its
// register; three sweeps later, it has waited at least two, probeIn.
func (n *Node) sweepForwards() {
	tk := time.NewTicker(n.probeIn() / 2)
	defer tk.Stop()
	for {
		select {
		case <-n.workersStop:
			return
		case <-tk.C:
		}
		t := n.sweeps.Add(1)
		n.pendMu.Lock()
		for _, f := range n.pending {
			if !f.poked && t-f.born >= 3 {
				select {
				case f.ch <- pokeFrame:
					f.poked = true
				default: // full: the next sweep
				}
			}
		}
		n.pendMu.Unlock()
	}
}

// ping reports whether owner answers on its ping subject: false when no
// node subscribes for it (it left), true otherwise, a timeout included.
func (n *Node) ping(owner string) bool {
	_, err := n.nc.Request(n.prefix+".ping."+owner, nil, n.opts.ForwardTimeout)
	return !errors.Is(err, nats.ErrNoResponders)
}

// cutOff reports, cheaply, what Ready reports: no NATS connection, or no
// route to any peer (routes are counted every routePoll).
func (n *Node) cutOff() bool {
	if !n.nc.IsConnected() {
		return true
	}
	if n.unrouted.Load() { // maybe stale: count (rare, so the lock is fine)
		unrouted := n.srv.NumRoutes() == 0
		n.unrouted.Store(unrouted)
		return unrouted
	}
	return false
}

// arm returns f's timer, set to fire after d.
func (f *forward) arm(d time.Duration) *time.Timer {
	if f.timer == nil {
		f.timer = time.NewTimer(d)
	} else {
		f.timer.Reset(d)
	}
	return f.timer
}

// stopTimers stops f's timer, if it has one.
func (f *forward) stopTimers() {
	if f.timer != nil {
		f.timer.Stop()
	}
}

// frame parses the next frame of f's answer, checking its order.
func (f *forward) frame(m []byte) (frame, bool) {
	if f.lost.Load() {
		return frame{}, false
	}
	fr, ok := parseFrame(m, f.hdrs)
	if !ok {
		f.n.badMessage("reply", m)
		return fr, false
	}
	f.hdrs = fr.headers
	if fr.seq != f.next {
		return fr, false
	}
	f.next++
	return fr, true
}

// badAnswer answers ctx 502 for an answer of owner that failed its checks.
func badAnswer(ctx *fasthttp.RequestCtx, owner string) {
	failID(ctx, fasthttp.StatusBadGateway, codec.CodeInternalError,
		"Bad Gateway: the answer of node "+owner+" did not pass the cluster's checks; the request may have been served", requestID(ctx, nil))
}

// setHead sets the status and headers of an answer.
func setHead(ctx *fasthttp.RequestCtx, fr *frame) {
	ctx.SetStatusCode(fr.status)
	for _, kv := range fr.headers {
		ctx.Response.Header.AddBytesKV(kv[0], kv[1])
	}
}

// failID answers ctx with status and a JSON-RPC error for the request of
// raw JSON id (nil: none known, "id":null).
func failID(ctx *fasthttp.RequestCtx, status, code int, msg string, id []byte) {
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	b := codec.AppendError(nil, id, code, msg, nil)
	ctx.SetBody(b)
}

// requestID returns known, or the id of the JSON-RPC request a POST's
// body carries; nil when there is none (a notification, a GET, a batch).
func requestID(ctx *fasthttp.RequestCtx, known []byte) []byte {
	if known != nil || !ctx.IsPost() {
		return known
	}
	body := ctx.Request.Body()
	raw, ok, err := codec.ObjectField(body, "id")
	if err != nil || !ok || !validRequestID(raw) {
		return nil
	}
	if _, ok, _ := codec.ObjectField(body, "method"); !ok {
		return nil // an answer of the client's: no error is due to it
	}
	return raw
}

// nodeGone is the message failForwards files with a forward whose owner
// was lost: told apart from any frame by its address.
var nodeGone = []byte{0}

func isNodeGone(m []byte) bool { return len(m) == 1 && &m[0] == &nodeGone[0] }

// failForwards ends every forward in flight to node, which is gone: a
// JSON answer still awaited is answered 502, a relayed stream ends with
// an error for its request (relay.nextData).
func (n *Node) failForwards(node string) {
	n.pendMu.Lock()
	defer n.pendMu.Unlock()
	for _, f := range n.pending {
		if f.owner != node {
			continue
		}
		select {
		case f.ch <- nodeGone:
		default:
			f.lost.Store(true)
		}
	}
}

// register makes a forward to owner, sent on link lc (nil: NATS), and
// files it under a new token. The
// token is random, not a count: an answer is taken only on its request's
// reply subject, so a client of the NATS deployment that may publish on
// the cluster's subjects but not read the requests cannot guess where to
// send a forged one.
func (n *Node) register(owner string, lc *linkConn) *forward {
	f := forwards.Get().(*forward)
	f.n, f.owner, f.link = n, owner, lc
	f.next, f.ended = 0, false
	f.lost.Store(false)
	f.hdrs = f.hdrs[:0]
	f.checkSSE = false
	f.sse.Reset()
	f.tail, f.tailOff = f.tail[:0], 0
	n.pendMu.Lock()
	for {
		f.token = rand.Uint64()
		if f.token != 0 && n.pending[f.token] == nil {
			break
		}
	}
	f.born, f.poked = n.sweeps.Load(), false
	n.pending[f.token] = f
	n.pendMu.Unlock()
	if lc == nil { // on a link, the token is all the answer needs
		f.subj = strconv.AppendUint(append(f.subj[:0], n.replyPrefix...), f.token, 36)
		f.reply = string(f.subj)
	}
	return f
}

// unregister removes f from the table and recycles it: frames still in
// flight for it find nothing.
func (n *Node) unregister(f *forward) {
	n.pendMu.Lock()
	_, ok := n.pending[f.token]
	delete(n.pending, f.token)
	n.pendMu.Unlock()
	if !ok {
		return // failPending took it
	}
	for len(f.ch) > 0 { // nothing is filed for f any more (onReply)
		<-f.ch
	}
	f.stopTimers()
	f.reply = ""
	f.hdrs = f.hdrs[:0]
	f.reqID = f.reqID[:0]
	f.link = nil
	f.evSID, f.evKey = "", evKey{}
	if cap(f.tail) > 64<<10 {
		f.tail = nil
	}
	forwards.Put(f)
}

// cancel tells f's owner that nobody waits for the answer any more.
func (n *Node) cancel(f *forward) {
	if f.ended {
		return
	}
	if f.link != nil {
		_ = f.link.write(lkCancel, f.token, nil)
		return
	}
	_ = n.nc.Publish(n.prefix+".cancel."+f.owner, []byte(f.reply))
}

// onReply files a frame of an answer with its forward. It never blocks: a
// frame that does not fit breaks the answer (the stream is cut and the
// client resumes it).
func (n *Node) onReply(m *nats.Msg) {
	tok, ok := token(m.Subject, n.replyPrefix)
	if !ok {
		n.badMessage("reply subject", []byte(m.Subject))
		return
	}
	data := m.Data
	if len(data) == 0 {
		if m.Header.Get("Status") != "503" {
			n.badMessage("reply", data)
			return
		}
		data = nil // no responders: nobody subscribes for the owner
	}
	n.fileReply(tok, data)
}

// fileReply files a frame of an answer with the forward of token tok,
// which came on NATS or on a direct link. It never blocks: a frame that
// does not fit breaks the answer. Filed under the table's lock, as
// unregister takes it out: a frame that comes late never reaches the
// forward once it is recycled for another request.
func (n *Node) fileReply(tok uint64, data []byte) {
	n.pendMu.Lock()
	if f := n.pending[tok]; f != nil { // else answered, timed out or cut already
		select {
		case f.ch <- data:
		default:
			f.lost.Store(true)
		}
	}
	n.pendMu.Unlock()
}

// failPending ends every forward in flight, at Close.
func (n *Node) failPending() {
	n.pendMu.Lock()
	defer n.pendMu.Unlock()
	for tok, f := range n.pending {
		f.lost.Store(true)
		select {
		case f.ch <- []byte{frFailed, 0}:
		default:
		}
		delete(n.pending, tok)
	}
}

// badMessage counts a message from NATS that did not parse, or did not
// pass its checks, and logs it at a bounded rate (badBurst at once, then
// one a second, each line saying how many were suppressed before it): a
// flood of garbage on the cluster's subjects costs a counter, not the
// disk.
func (n *Node) badMessage(what string, b []byte) {
	n.stats.badMessages.Add(1)
	if !n.log.Enabled(context.Background(), slog.LevelWarn) {
		return
	}
	ok, suppressed := n.badWarns.Allow(netip.Addr{})
	if !ok {
		return
	}
	if len(b) > 64 {
		b = b[:64]
	}
	args := []any{"what", what, "head", strconv.Quote(string(b))}
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	n.log.Warn("cluster: dropped a message that does not parse or pass its checks", args...)
}

// appendRequest appends the wire form of ctx's request; with tr, its
// trace context is tr's (the traceparent header, and the body's).
func appendRequest(dst []byte, ctx *fasthttp.RequestCtx, tr *forwardTrace) []byte {
	dst = append(dst, reqMagic)
	dst = appendAddr(dst, ctx.RemoteAddr())
	dst = appendBytes(dst, ctx.Method())
	dst = appendBytes(dst, ctx.Request.Header.RequestURI())
	for k, v := range ctx.Request.Header.All() {
		if tr != nil && bytes.EqualFold(k, hdrTraceParent) {
			continue
		}
		dst = appendHeader(dst, k, v)
	}
	if tr != nil {
		dst = appendStr(appendBytes(dst, hdrTraceParent), tr.parent)
	}
	return appendBody(endHeaders(dst), ctx, tr)
}

// appendAddr appends the text of address a, as a's String would write
// it, without allocating for a TCP address.
func appendAddr(dst []byte, a net.Addr) []byte {
	ta, ok := a.(*net.TCPAddr)
	var ip netip.Addr
	if ok {
		ip, ok = netip.AddrFromSlice(ta.IP)
	}
	if !ok {
		return appendStr(dst, a.String())
	}
	ap := netip.AddrPortFrom(ip.Unmap().WithZone(ta.Zone), uint16(ta.Port))
	k := len(dst)
	dst = ap.AppendTo(append(dst, 0))
	if l := len(dst) - k - 1; l < 0x80 { // its length fits the byte kept for it
		dst[k] = byte(l)
		return dst
	}
	return appendStr(dst[:k], a.String())
}

// relay is the body of a forwarded answer that streams (SSE): it writes
// the owner's data frames to the client as they come. When the client
// goes away first, the owner is told (cancel), which ends the stream there
// as a disconnect would.
type relay struct {
	f        *forward
	conn     net.Conn
	rbuf     []byte
	done     bool
	fail     error
	timer    *time.Timer
	watch    *connwatch.Watcher
	gone     chan struct{} // closed when the client goes away
	linkDown bool          // the link the stream came on went down
}

// SupportsBodyWriteTo tells fasthttp to write the stream with WriteTo.
func (r *relay) SupportsBodyWriteTo() bool { return true }

// WriteTo writes the stream to w until the owner ends it, it breaks, or
// the client is gone.
func (r *relay) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for {
		data, err := r.nextData()
		if err != nil {
			return n, err
		}
		if data == nil {
			return n, nil
		}
		if r.conn != nil {
			_ = r.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
		}
		k, err := w.Write(data)
		n += int64(k)
		if err != nil {
			return n, err
		}
	}
}

// Read is WriteTo for readers that pull.
func (r *relay) Read(p []byte) (int, error) {
	for len(r.rbuf) == 0 {
		data, err := r.nextData()
		if err != nil {
			return 0, err
		}
		if data == nil {
			return 0, io.EOF
		}
		r.rbuf = data
	}
	k := copy(p, r.rbuf)
	r.rbuf = r.rbuf[k:]
	return k, nil
}

// nextData waits for the next data frame: nil, nil at the stream's end.
func (r *relay) nextData() ([]byte, error) {
	if r.done || r.fail != nil {
		return nil, r.fail
	}
	f := r.f
	idle := f.n.opts.StreamIdle
	if r.timer == nil {
		r.timer = time.NewTimer(idle)
		// The stream waits on its owner, not on the client: watch the
		// client, so that one gone away ends the stream (and cancels it at
		// the owner) at once rather than at the next write.
		r.gone = make(chan struct{})
		gone := r.gone
		r.watch = connwatch.Watch(r.conn, func() { close(gone) })
	} else {
		r.timer.Reset(idle)
	}
	for {
		select {
		case <-r.gone:
			r.fail = errClientGone
			return nil, r.fail
		case m := <-f.ch:
			if m == nil {
				r.fail = errNoOwner
				f.n.stats.streamsCut.Add(1)
				return nil, r.fail
			}
			if isPoke(m) {
				continue // the sweeper's, for the forward's start: the relay has its own timer
			}
			if isNodeGone(m) {
				// The node writing the stream is gone: the request it
				// served gets an error, and the stream ends, rather than
				// waiting out StreamIdle.
				r.done, f.ended = true, true
				f.n.stats.streamsCut.Add(1)
				if len(f.reqID) == 0 && f.evSID != "" {
					f.reqID = append(f.reqID[:0], f.n.events.requestOf(f.evSID, f.evKey)...)
				}
				if f.checkSSE && len(f.reqID) > 0 {
					b := codec.AppendError(nil, f.reqID, codec.CodeInternalError,
						"node "+f.owner+", which served this request, left the cluster; it may or may not have completed", nil)
					return codec.AppendSSEEvent(nil, "", "", b), nil
				}
				return nil, nil
			}
			if len(m) == 0 && !r.linkDown {
				// The link it came on went down: its node may be gone.
				// Ask, and wait for the verdict: gone, the stream ends
				// with an error for its request (nodeGone); alive, it is
				// cut, and the client resumes it there.
				r.linkDown = true
				n, owner := f.n, f.owner
				go func() {
					if !n.ping(owner) {
						n.markDead(owner, "its link went down, and no subscriber for it")
					}
				}()
				r.timer.Reset(n.deadAfter() + n.opts.Heartbeat)
				continue
			}
			if r.linkDown {
				continue // nothing comes on a link that went down
			}
			fr, ok := f.frame(m)
			if !ok {
				r.fail = ErrStreamLost
				f.n.stats.streamsCut.Add(1)
				return nil, r.fail
			}
			switch fr.kind {
			case frData:
				if !f.checkSSE {
					return fr.body, nil
				}
				data, ok := f.checkEvents(fr.body)
				if !ok {
					f.n.badMessage("relayed event", fr.body)
					r.fail = ErrStreamLost
					f.n.stats.streamsCut.Add(1)
					return nil, r.fail
				}
				if len(data) == 0 {
					r.timer.Reset(idle) // an event's start: the rest comes next
					continue
				}
				return data, nil
			case frEnd:
				r.done, f.ended = true, true
				return nil, nil
			case frFailed:
				f.ended = true
				r.fail = ErrOwnerFail
				return nil, r.fail
			}
			// frPending and heads are not expected here; ignore them.
		case <-r.timer.C:
			r.fail = ErrOwnerGone
			if r.linkDown {
				r.fail = ErrStreamLost
			}
			f.n.stats.streamsCut.Add(1)
			return nil, r.fail
		}
	}
}

// Close releases the relay when fasthttp is done with it: a stream that
// did not reach its end is cancelled at the owner.
func (r *relay) Close() error {
	if r.timer != nil {
		r.timer.Stop()
	}
	r.watch.Stop()
	r.watch = nil
	f := r.f
	if f == nil {
		return nil
	}
	n := f.n
	if !f.ended {
		n.cancel(f)
	}
	n.unregister(f)
	r.f, r.conn, r.rbuf = nil, nil, nil
	return nil
}

package gateway

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/client"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
)

// A muxConn is one connection to an upstream over a byte stream (a stdio
// child, a TCP connection, a legacy HTTP+SSE stream) that every request
// routed to it shares: the requests of many downstream sessions go out
// with ids of the connection's own, and their answers, progress, logs and
// server-to-client requests are routed back by those ids.
//
// An id is a slot of the connection's table of calls and the slot's
// generation: (gen << 16) | slot. The table is bounded (max-inflight);
// its slots are reused, so a late or forged answer (a generation that is
// not the slot's, a slot that is free) is recognised and dropped. Calls
// and their wake-up channels are pooled: forwarding a call allocates
// nothing once warm. A sweeper (one per upstream) times calls out; no
// call has a timer of its own.
type muxConn struct {
	u    *upstream
	p    *pool
	idx  int // in its pool
	era  era
	conn client.Conn
	proc *child // stdio

	mu       sync.Mutex
	calls    []*call  // by slot; nil when free
	gens     []uint16 // by slot
	free     []uint16
	nPeers   int              // calls for downstream requests
	tasks    map[string]*call // 2025 tasks this connection's calls created: upstream task id → call
	relays   map[string]*relay
	parked   []parked      // server requests naming a task whose creation is not answered yet
	awaiting int           // task-augmented calls not answered yet
	ended    error         // why the connection ended; nil while up
	endedCh  chan struct{} // closed when it ended

	ready    atomic.Bool
	inflight atomic.Int32
	pending  atomic.Int32 // relays running
	info     *initInfo    // the handshake's outcome, set before ready

	statePre []byte // 2026-07-28: the requestState prefix naming this connection

	legacy    bool              // the legacy HTTP+SSE transport: session revisions only, no probe
	httpProbe *quietInbound     // HTTP, session pool: the 2026-07-28 pipe server/discover went on (era.go)
	xin       map[string]*xcall // input requests of translated calls waiting for their client, by the upstream's id (c.mu)

	notes tokenBucket // the upstream's notifications
}

var messages = sync.Pool{New: func() any { return new(codec.Message) }}

// era is the protocol generation a connection speaks.
type era uint8

const (
	sessionEra   era = iota // 2024-11-05 to 2025-11-25: initialize, then requests
	statelessEra            // 2026-07-28: each request on its own
)

func (e era) String() string {
	if e == statelessEra {
		return "2026-07-28"
	}
	return "session"
}

// initInfo is what the upstream told of itself.
type initInfo struct {
	version      string
	serverInfo   mcp.Implementation
	caps         mcp.ServerCapabilities
	instructions string
}

// call is one request in flight on a connection.
type call struct {
	c    *muxConn
	slot uint16
	id   uint64
	idb  [20]byte // id, digits
	idn  uint8

	done chan struct{} // the answer came, the call failed, or the downstream request ended

	mu       sync.Mutex // guards everything below against the reader
	peer     handlers.Peer
	waiting  bool
	out      []byte // dst with the result appended, by the reader
	errObj   []byte // an error answer's error object (a copy)
	fail     error  // the call failed without an answer
	deadline int64  // monotonic nanoseconds
	relays   []*relay
	task     string // the upstream 2025 task whose messages reach this call (under c.mu)
	x        *xcall // a call translated for a 2026-07-28 client (down.go); set before it is sent
	// taskFromAnswer: a task-augmented call, whose answer names the task
	// (set before the call is sent, read by the reader).
	taskFromAnswer bool
	wg             sync.WaitGroup
}

// done has room for the two wake-ups: the answer (or failure) and the
// downstream context's end.
var calls = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 2)} }}

func (cl *call) idBytes() []byte { return cl.idb[:cl.idn] }

// newMuxConn returns a connection not yet connected.
func newMuxConn(p *pool, idx int) *muxConn {
	n := p.u.cfg.MaxInflight
	c := &muxConn{
		u: p.u, p: p, idx: idx, era: p.era,
		calls:   make([]*call, n),
		gens:    make([]uint16, n),
		free:    make([]uint16, n),
		endedCh: make(chan struct{}),
	}
	for i := range c.free {
		c.free[i] = uint16(n - 1 - i)
	}
	c.statePre = appendStatePrefix(nil, idx)
	c.notes.init(p.u.g.opts.NotifyRate)
	return c
}

// Errors of a connection.
var errSlotsFull = errors.New("too many calls in flight")

// begin takes a slot for a call on behalf of peer (nil for the gateway's
// own requests), whose answer is to be appended to dst.
func (c *muxConn) begin(peer handlers.Peer, dst []byte, timeout time.Duration) (*call, error) {
	cl := calls.Get().(*call)
	c.mu.Lock()
	if c.ended != nil {
		err := c.ended
		c.mu.Unlock()
		calls.Put(cl)
		return nil, err
	}
	if len(c.free) == 0 {
		c.mu.Unlock()
		calls.Put(cl)
		return nil, errSlotsFull
	}
	slot := c.free[len(c.free)-1]
	c.free = c.free[:len(c.free)-1]
	c.gens[slot]++
	cl.c, cl.slot = c, slot
	cl.id = uint64(c.gens[slot])<<16 | uint64(slot)
	cl.idn = uint8(len(strconv.AppendUint(cl.idb[:0], cl.id, 10)))
	cl.peer, cl.waiting, cl.out, cl.fail = peer, true, dst, nil
	cl.errObj = cl.errObj[:0]
	cl.deadline = nanotime() + int64(timeout)
	c.calls[slot] = cl
	if peer != nil {
		c.nPeers++
	}
	c.mu.Unlock()
	c.inflight.Add(1)
	return cl, nil
}

// end frees cl's slot. A relay of cl still running is cancelled and
// waited for: the downstream request's Peer is valid until its handler
// returns, which is after end.
func (c *muxConn) end(cl *call) {
	cl.mu.Lock()
	cl.waiting = false
	for len(cl.done) > 0 { // wake-ups not taken: the answer's, the context's
		<-cl.done
	}
	relays := cl.relays
	cl.relays = nil
	peer := cl.peer
	cl.peer = nil
	cl.x = nil
	cl.mu.Unlock()
	for _, r := range relays {
		r.cancel(errCallEnded)
	}
	cl.wg.Wait()
	c.mu.Lock()
	c.calls[cl.slot] = nil
	c.free = append(c.free, cl.slot)
	if peer != nil {
		c.nPeers--
	}
	if cl.task != "" {
		if c.tasks[cl.task] == cl {
			delete(c.tasks, cl.task)
		}
		cl.task = ""
	}
	if cl.taskFromAnswer {
		c.awaiting--
		cl.taskFromAnswer = false
	}
	c.mu.Unlock()
	c.inflight.Add(-1)
	cl.out, cl.c = nil, nil
	if cap(cl.errObj) > 4<<10 {
		cl.errObj = nil
	}
	calls.Put(cl)
}

var errCallEnded = errors.New("the call it belongs to ended")

// emptyParams are the params of a request without any that gets a trace
// context.
var emptyParams = []byte("{}")

// send writes one message to the upstream.
func (c *muxConn) send(b []byte) error {
	return c.conn.Send(context.Background(), b)
}

// wait waits for cl's answer, ctx or its deadline, and returns dst (given
// to begin) with the result appended, or the error. It does not end cl.
func (c *muxConn) wait(ctx context.Context, cl *call) ([]byte, error) {
	if dn, ok := ctx.(engine.DoneNotifier); ok {
		// The engine's request context signals its end on cl.done too:
		// no channel made per call.
		dn.NotifyDone(cl.done)
		<-cl.done
		dn.StopNotify()
	} else {
		select {
		case <-cl.done:
		case <-ctx.Done():
		}
	}
	cl.mu.Lock()
	ended := cl.waiting // woken by the context, not by an answer
	cl.waiting = false
	out, errObj, fail := cl.out, cl.errObj, cl.fail
	cl.mu.Unlock()
	if ended {
		// The downstream request ended (the client cancelled it, went
		// away, or its session closed): so does the upstream call.
		cause := context.Cause(ctx)
		if cause == nil {
			cause = context.Canceled
		}
		c.cancelUpstream(cl, cause)
		return nil, cause
	}
	if fail != nil {
		if errors.Is(fail, errTimedOut) {
			c.cancelUpstream(cl, fail)
		}
		return nil, fail
	}
	if len(errObj) > 0 {
		return nil, c.u.upstreamError(errObj)
	}
	return out, nil
}

// cancelUpstream tells the upstream to stop working on cl.
func (c *muxConn) cancelUpstream(cl *call, cause error) {
	b := codec.GetBuffer()
	b.B = append(b.B[:0], `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`...)
	b.B = append(b.B, cl.idBytes()...)
	if cause != nil {
		b.B = append(b.B, `,"reason":`...)
		b.B = codec.AppendString(b.B, cause.Error())
	}
	b.B = append(b.B, "}}"...)
	_ = c.send(b.B)
	codec.PutBuffer(b)
	if sc, ok := c.conn.(streamCanceler); ok && c.era == statelessEra {
		sc.cancelStream(cl.idBytes())
	}
}

// do forwards x and appends its result to dst.
func (c *muxConn) do(ctx context.Context, x *exchange, dst []byte) ([]byte, error) {
	cl, err := c.start(x, dst)
	if err != nil {
		return dst, err
	}
	out, err := c.wait(ctx, cl)
	c.end(cl)
	out, task, err := c.result(out, len(dst), err)
	if task != nil {
		// A task the upstream created (2026-07-28): its tasks methods go
		// to this connection, for the caller that created it only.
		c.u.g.noteTask(string(task), c.u, c.p, c.idx, engine.TaskOwnerOf(x.peer))
	}
	return out, err
}

// start sends x on a new call, whose answer is to be appended to dst.
func (c *muxConn) start(x *exchange, dst []byte) (*call, error) {
	cl, err := c.begin(x.peer, dst, c.u.cfg.Timeout)
	if err != nil {
		return nil, err // errSlotsFull: the caller may try another connection
	}
	if x.xc != nil {
		cl.mu.Lock()
		cl.x = x.xc
		cl.mu.Unlock()
	}
	if x.linkTask != "" {
		c.linkTask(cl, x.linkTask)
	}
	if x.fp.addTask {
		cl.taskFromAnswer = true
		c.mu.Lock()
		c.awaiting++
		c.mu.Unlock()
	}
	b := codec.GetBuffer()
	b.B = append(b.B[:0], `{"jsonrpc":"2.0","id":`...)
	b.B = append(b.B, cl.idBytes()...)
	b.B = append(b.B, `,"method":"`...)
	b.B = append(b.B, x.method...)
	b.B = append(b.B, '"')
	fp := x.fp
	if x.peer != nil {
		traceOf(&fp, x.peer) // trace.go
	}
	if params := x.params; len(params) > 0 || fp.traceParent != "" {
		if len(params) == 0 {
			params = emptyParams
		}
		b.B = append(b.B, `,"params":`...)
		if fp.token != nil {
			fp.token = cl.idBytes()
		}
		b.B = appendParams(b.B, params, &fp)
	}
	b.B = append(b.B, '}')
	err = c.send(b.B)
	codec.PutBuffer(b)
	if err != nil {
		c.end(cl)
		return nil, c.u.connError(err)
	}
	return cl, nil
}

// result checks the answer of a call (its result at out[start:]) and
// completes a 2026-07-28 one; task is the id of the task it created
// (2026-07-28), nil when none.
func (c *muxConn) result(out []byte, start int, err error) (_ []byte, task []byte, _ error) {
	if err != nil {
		return out[:min(start, len(out))], nil, err
	}
	if len(out) < start || (len(out) > start && out[start] != '{') {
		return out[:min(start, len(out))], nil, c.u.garbage("a result that is not an object")
	}
	if c.era == statelessEra {
		out, task = statelessResult(out, start, c.statePre)
	}
	return out, task, nil
}

// internal sends a request of the gateway's own (the handshake, lists,
// subscriptions) and returns its result, a copy.
func (c *muxConn) internal(ctx context.Context, method string, params []byte) ([]byte, error) {
	cl, err := c.begin(nil, nil, c.u.cfg.Timeout)
	if err != nil {
		return nil, c.u.connError(err)
	}
	b := codec.AppendRequest(nil, cl.idBytes(), method, params)
	if err := c.send(b); err != nil {
		c.end(cl)
		return nil, c.u.connError(err)
	}
	out, err := c.wait(ctx, cl)
	c.end(cl)
	return out, err
}

// notify sends a notification to the upstream.
func (c *muxConn) notify(method string, params []byte) error {
	return c.send(codec.AppendNotification(nil, method, params))
}

// Message implements client.Inbound: one message from the upstream, on
// the connection's read goroutine. msg is valid during the call only.
func (c *muxConn) Message(msg []byte) {
	// Pooled: a local one escapes through Decode, and HTTP delivers
	// messages from several goroutines.
	m := messages.Get().(*codec.Message)
	defer func() {
		m.Reset()
		messages.Put(m)
	}()
	if err := codec.Decode(msg, m); err != nil {
		c.u.stats.garbage.Add(1)
		if id, ok := parseID(m.ID); ok {
			// An invalid answer to a call of ours: that call fails.
			c.failCall(id, c.u.garbage("an invalid message: "+err.Error()))
			return
		}
		c.u.warnGarbage(msg, err)
		return
	}
	switch m.Kind {
	case codec.KindResponse, codec.KindError:
		c.answer(m)
	case codec.KindRequest:
		c.serverRequest(m)
	case codec.KindNotification:
		c.notification(m)
	}
}

// parseID reads an id the gateway issued: a decimal number.
func parseID(raw []byte) (uint64, bool) {
	if len(raw) == 0 || len(raw) > 20 {
		return 0, false
	}
	var v uint64
	for _, ch := range raw {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		v = v*10 + uint64(ch-'0')
	}
	return v, true
}

// lookup returns the call with id, nil when none is in flight (c.mu
// held).
func (c *muxConn) lookup(id uint64) *call {
	slot := id & 0xffff
	if slot >= uint64(len(c.calls)) || uint64(c.gens[slot]) != id>>16 {
		return nil
	}
	return c.calls[slot]
}

// answer delivers an answer to its call.
func (c *muxConn) answer(m *codec.Message) {
	id, ok := parseID(m.ID)
	var cl *call
	var unpark []parked
	defer func() {
		for i := range unpark {
			c.serverRequest(unpark[i].msg())
		}
	}()
	if ok {
		c.mu.Lock()
		cl = c.lookup(id)
		if cl != nil {
			if cl.taskFromAnswer && m.Kind == codec.KindResponse {
				// A 2025 task-augmented call: the task's messages
				// (related-task) reach this call until the call that waits
				// for its result takes them over.
				if tid := createdTask(m.Result); tid != "" {
					cl.task = tid
					if c.tasks == nil {
						c.tasks = map[string]*call{}
					}
					c.tasks[tid] = cl
					unpark = c.unparkLocked(tid)
				}
			}
			cl.mu.Lock()
		}
		c.mu.Unlock()
	}
	if cl == nil {
		c.u.stats.unknownIDs.Add(1)
		c.u.warn("answer to an id the gateway did not send, or no longer waits for", "id", string(m.ID))
		return
	}
	if cl.waiting {
		if m.Kind == codec.KindError {
			cl.errObj = append(cl.errObj[:0], m.Error...)
		} else {
			cl.out = append(cl.out, m.Result...)
		}
		cl.waiting = false
		cl.done <- struct{}{}
	}
	cl.mu.Unlock()
}

// failCall fails the call with id, if it is in flight.
func (c *muxConn) failCall(id uint64, err error) {
	c.mu.Lock()
	cl := c.lookup(id)
	if cl != nil {
		cl.mu.Lock()
	}
	c.mu.Unlock()
	if cl == nil {
		return
	}
	if cl.waiting {
		cl.fail, cl.waiting = err, false
		cl.done <- struct{}{}
	}
	cl.mu.Unlock()
}

// parked is a server-to-client request that names a 2025 task whose
// creating call has not been answered yet: the task's first messages may
// come before that answer. It is relayed when the answer names the task,
// refused when the call's timeout passes first.
type parked struct {
	task, method string
	id, params   []byte
	deadline     int64
}

func (p *parked) msg() *codec.Message {
	return &codec.Message{Kind: codec.KindRequest, ID: p.id, Method: p.method, Params: p.params}
}

// unparkLocked takes the parked requests of task (c.mu held).
func (c *muxConn) unparkLocked(task string) []parked {
	var out []parked
	keep := c.parked[:0]
	for _, p := range c.parked {
		if p.task == task {
			out = append(out, p)
		} else {
			keep = append(keep, p)
		}
	}
	c.parked = keep
	return out
}

// createdTask returns the task id of a CreateTaskResult (2025-11-25).
func createdTask(res []byte) string {
	task, ok, err := codec.ObjectField(res, "task")
	if err != nil || !ok {
		return ""
	}
	id, ok, err := codec.ObjectField(task, "taskId")
	if err != nil || !ok {
		return ""
	}
	s, err := codec.StringValue(id)
	if err != nil {
		return ""
	}
	return string(s)
}

// linkTask has the upstream's messages naming the 2025 task id
// (related-task) reach cl, the call waiting on that task.
func (c *muxConn) linkTask(cl *call, id string) {
	c.mu.Lock()
	if c.tasks == nil {
		c.tasks = map[string]*call{}
	}
	cl.task = id
	c.tasks[id] = cl
	c.mu.Unlock()
}

// Closed implements client.Inbound: the connection ended. Every call in
// flight fails, naming the upstream and the cause.
func (c *muxConn) Closed(err error) {
	if err == nil || errors.Is(err, client.ErrClosed) {
		err = errStopped
	}
	c.ready.Store(false)
	c.mu.Lock()
	if c.ended != nil {
		c.mu.Unlock()
		return
	}
	c.ended = c.u.unavailable(err)
	var live []*call
	for _, cl := range c.calls {
		if cl != nil {
			live = append(live, cl)
		}
	}
	relays := c.relays
	c.relays = nil
	c.mu.Unlock()
	for _, cl := range live {
		cl.mu.Lock()
		if cl.waiting {
			cl.fail, cl.waiting = c.ended, false
			cl.done <- struct{}{}
		}
		cl.mu.Unlock()
	}
	for _, r := range relays {
		r.cancel(c.ended)
	}
	close(c.endedCh)
	c.p.changed()
	// The calls held for 2026-07-28 clients' input end with it: their
	// retries get -32602.
	go c.u.g.dropHeld(c, c.ended)
}

var errStopped = errors.New("connection closed")

// sweep fails the calls past their deadline.
func (c *muxConn) sweep(now int64) {
	c.mu.Lock()
	var stale []parked
	keep := c.parked[:0]
	for _, p := range c.parked {
		if p.deadline < now {
			stale = append(stale, p)
		} else {
			keep = append(keep, p)
		}
	}
	c.parked = keep
	var late []*call
	for _, cl := range c.calls {
		if cl != nil && cl.deadline < now {
			late = append(late, cl)
		}
	}
	c.mu.Unlock()
	for _, p := range stale {
		c.respond(p.id, nil, codec.NewError(codec.CodeInvalidRequest, "gateway: "+p.method+" names a task no call of this connection created"))
	}
	for _, cl := range late {
		cl.mu.Lock()
		if cl.waiting && cl.deadline < now {
			cl.fail, cl.waiting = c.u.timedOut(), false
			cl.done <- struct{}{}
		}
		cl.mu.Unlock()
	}
}

// close ends the connection.
func (c *muxConn) close() {
	if c.conn != nil {
		_ = c.conn.Close()
	}
	if c.proc != nil {
		c.proc.stop()
	}
}

// single returns the one call of a downstream request in flight, nil
// when there are none or several (c.mu held).
func (c *muxConn) single() *call {
	if c.nPeers != 1 {
		return nil
	}
	for _, cl := range c.calls {
		if cl != nil && cl.peer != nil {
			return cl
		}
	}
	return nil
}

// handshake opens the session (initialize) or checks that the upstream
// speaks 2026-07-28 (server/discover). A connection of the session pool
// asks server/discover first, and speaks 2026-07-28 when the upstream
// names no session revision (era.go).
func (c *muxConn) handshake(ctx context.Context) error {
	if c.era == sessionEra && !c.legacy {
		d, stateless, sessions, err := c.probe(ctx, nil)
		if err != nil {
			return err
		}
		c.u.speaks(stateless, sessions)
		if !sessions {
			if c.httpProbe != nil {
				c.httpProbe.adopted.Store(true)
			}
			c.era = statelessEra
			c.info = &initInfo{version: mcp.Version20260728, caps: d.Capabilities, instructions: d.Instructions}
			return c.listen()
		}
		if c.httpProbe != nil {
			probe := c.conn
			c.conn = newHTTPPipe(c.u.http, c, sessionEra, c.u.cfg.MaxInflight)
			c.httpProbe = nil
			_ = probe.Close()
		}
	} else if c.legacy {
		c.u.speaks(false, true)
	}
	if c.era == statelessEra {
		res, err := c.internal(ctx, mcp.MethodServerDiscover, statelessMeta)
		if err != nil {
			return fmt.Errorf("server/discover: %w", err)
		}
		var d mcp.DiscoverResult
		if err := codec.Unmarshal(res, &d); err != nil {
			return fmt.Errorf("server/discover: %w", err)
		}
		ok := false
		for _, v := range d.SupportedVersions {
			ok = ok || v == mcp.Version20260728
		}
		if !ok {
			return errNoStateless
		}
		c.info = &initInfo{version: mcp.Version20260728, caps: d.Capabilities, instructions: d.Instructions}
		// 2026-07-28 announces list changes on a listen stream: the
		// gateway keeps one open on each connection, for as long as it
		// lives.
		return c.listen()
	}
	res, err := c.internal(ctx, mcp.MethodInitialize, initializeParams)
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	var ir mcp.InitializeResult
	if err := codec.Unmarshal(res, &ir); err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	c.info = &initInfo{version: ir.ProtocolVersion, serverInfo: ir.ServerInfo, caps: ir.Capabilities, instructions: ir.Instructions}
	if err := c.notify(mcp.NotificationInitialized, nil); err != nil {
		return err
	}
	if ir.Capabilities.Logging != nil {
		// Every log message comes; each downstream session gets those at
		// or above its own level (Peer.Log).
		if _, err := c.internal(ctx, mcp.MethodLoggingSetLevel, []byte(`{"level":"debug"}`)); err != nil {
			c.u.warn("logging/setLevel refused", "err", err)
		}
	}
	return nil
}

// listen opens a subscriptions/listen stream for the list changes.
func (c *muxConn) listen() error {
	cl, err := c.begin(nil, nil, time.Duration(math.MaxInt64-nanotime()))
	if err != nil {
		return err
	}
	params := withStatelessMeta([]byte(`{"notifications":{"toolsListChanged":true,"promptsListChanged":true,"resourcesListChanged":true}}`))
	return c.send(codec.AppendRequest(nil, cl.idBytes(), mcp.MethodSubscriptionsListen, params))
}

// withStatelessMeta returns the params object p with the gateway's own
// 2026-07-28 _meta added.
func withStatelessMeta(p []byte) []byte {
	meta := statelessMeta[1 : len(statelessMeta)-1] // "_meta":{...}
	if len(p) <= 2 {
		return append(append([]byte("{"), meta...), '}')
	}
	out := append([]byte(nil), p[:len(p)-1]...)
	out = append(out, ',')
	out = append(out, meta...)
	return append(out, '}')
}

var errNoStateless = errors.New("the upstream does not speak 2026-07-28")

// clientCaps are the capabilities the gateway declares upstream: all
// that a downstream client may have (a request for one the client lacks
// is refused by the engine's Peer, and the refusal relayed), and the
// related-request link.
const clientCaps = `{"roots":{"listChanged":true},"sampling":{"context":{},"tools":{}},"elicitation":{"form":{},"url":{}},"experimental":{"` + mcp.MetaRelatedRequest + `":{}}}`

var initializeParams = []byte(`{"protocolVersion":"` + mcp.Version20251125 + `","capabilities":` + clientCaps + `,"clientInfo":{"name":"mcpedge-gateway","version":"` + client.Version + `"}}`)

var statelessMeta = []byte(`{"_meta":{"` + mcp.MetaProtocolVersion + `":"` + mcp.Version20260728 + `","` + mcp.MetaClientCapabilities + `":` + clientCaps + `,"` + mcp.MetaClientInfo + `":{"name":"mcpedge-gateway","version":"` + client.Version + `"}}}`)

// nanotime is a monotonic clock in nanoseconds.
func nanotime() int64 { return int64(time.Since(epoch)) }

var epoch = time.Now()

// tokenBucket bounds the rate of an upstream's notifications.
type tokenBucket struct {
	mu     sync.Mutex
	rate   float64
	tokens float64
	last   int64
}

func (b *tokenBucket) init(rate float64) {
	b.rate, b.tokens, b.last = rate, rate, nanotime()
}

// allow takes a token; it reports false when none is left.
func (b *tokenBucket) allow() bool {
	if b.rate <= 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := nanotime()
	b.tokens = min(b.rate, b.tokens+float64(now-b.last)/1e9*b.rate)
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

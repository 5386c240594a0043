package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
)

// Down: a 2026-07-28 client's request over a connection of the session
// revisions (an upstream that speaks nothing newer).
//
// The request goes upstream without what 2026-07-28 adds to it (the
// protocol's _meta keys, inputResponses, requestState; a legacy task
// param), over the shared session connection, whose log level is debug:
// the engine's Peer passes on only the log messages at or above the
// request's logLevel, and none without one. A server-to-client request
// the upstream sends during a tools/call, prompts/get or resources/read
// (sampling, elicitation, roots) is an input request of the client's:
// the requests of one moment (those that come within inputGather of the
// first) are answered with an InputRequiredResult, the upstream call is
// held (held.go), and the client's retry, whatever node of a cluster it
// reaches, answers them with its inputResponses and goes on waiting: for
// the result, or the next round. An input request the client did not
// declare the capability for is refused to the upstream (-32021); should
// the call then fail, the client is told which capability it lacked.
//
// A tools/call that the engine runs as a task of the tasks extension
// (the client declared it; the tool supports tasks: RawOptions.Tasks) is
// run upstream as a 2025-11-25 task: the engine's task is the client's
// (tasks/get, tasks/update, tasks/cancel), its inputs relayed from the
// upstream's requests about its task. A tool whose upstream decides when
// its work becomes a task (mcp.MetaDeferTask) first gathers its inputs in
// rounds, and becomes a task once a round is answered.

// inputGather is how long after an upstream's first input request the
// gateway waits for more before it answers the round: a handler asking
// for several inputs at once sends them together.
const inputGather = 20 * time.Millisecond

// xcall modes.
const (
	xmRounds int32 = iota // input requests become input rounds
	xmRelay               // relayed to the Peer (a started task's: tasks/update answers them)
	xmRefuse              // refused (methods without input rounds)
)

// xcall is a call translated for a 2026-07-28 client.
type xcall struct {
	u      *upstream
	c      *muxConn
	cl     *call  // the upstream call the client's answer comes from (a task's: its tasks/result)
	method string // the client's request
	name   string
	digest string
	owner  string
	caps   mcp.ClientCapabilities
	mode   atomic.Int32
	kick   chan struct{}

	// The request being served, while its handler runs (bind): its Peer
	// and params. (Not the exchange itself, which would then escape to
	// the heap on every call.)
	reqPeer   handlers.Peer
	reqParams []byte

	mu       sync.Mutex
	inputs   []*xinput
	keys     map[string]bool
	refused  string                     // the capabilities last refused to the upstream (a ClientCapabilities object)
	pre      map[string]json.RawMessage // answers given before they were asked for, by key
	rounds   int
	ended    bool
	utask    string // task mode: the upstream's 2025-11-25 task
	creating *call  // task mode: the call that created it
}

// xinput is an input request of the upstream waiting for its client.
type xinput struct {
	key, method string
	id          []byte // the upstream's id for its request
	params      []byte
}

// supportsRounds reports the methods an InputRequiredResult may answer.
func supportsRounds(method string) bool {
	switch method {
	case mcp.MethodToolsCall, mcp.MethodPromptsGet, mcp.MethodResourcesRead:
		return true
	}
	return false
}

func (u *upstream) newXcall(c *muxConn, x *exchange) *xcall {
	// x's strings alias the request's buffer, which is reused once the
	// handler returns: the call outlives it when held.
	xc := &xcall{u: u, c: c, method: strings.Clone(x.method), name: strings.Clone(x.name), kick: make(chan struct{}, 1)}
	if caps := x.peer.ClientCapabilities(); caps != nil {
		xc.caps = *caps
	}
	if !supportsRounds(x.method) {
		xc.mode.Store(xmRefuse)
	}
	return xc
}

// bind notes, before xc is first held, whose it is and which request it
// answers (the handler's Peer and params are valid then): the state it
// is held under binds the retry to both.
func (xc *xcall) bind() {
	if xc.owner == "" {
		xc.owner = engine.PeerOwner(xc.reqPeer)
	}
	if xc.digest == "" {
		xc.digest = engine.RequestDigest(xc.method, xc.reqParams)
	}
}

// down serves x, a 2026-07-28 request, over c, a connection of the
// session revisions, appending its result to dst.
func (u *upstream) down(ctx context.Context, c *muxConn, x *exchange, dst []byte) ([]byte, error) {
	if requestStateOf(x.params) != nil {
		// Every state this path issues names a held call (forward
		// resumes those): any other was not issued here.
		return dst, stateError
	}
	params, err := downParams(x.params)
	if err != nil {
		return dst, err
	}
	// Answers given with the first request are used when the upstream
	// asks for them (a stateless server would run the handler with
	// them).
	pre, err := inputResponses(x.params)
	if err != nil {
		return dst, err
	}
	y := *x
	y.params = params
	y.fp.stateless, y.fp.linkCap = false, false
	xc := u.newXcall(c, x)
	xc.pre = pre
	xc.reqPeer, xc.reqParams = x.peer, x.params
	y.xc = xc
	if tid, started := engine.PeerTask(x.peer); tid != "" && x.method == mcp.MethodToolsCall && u.m.taskSupport(x.name) != "" {
		return xc.runTask(ctx, &y, dst, started)
	}
	cl, err := c.start(&y, nil)
	if err != nil {
		return dst, err // errSlotsFull: forward tries another connection
	}
	xc.cl = cl
	return xc.serve(ctx, x.peer, dst)
}

// resumeDown serves a retry of x whose requestState st names a held
// call: the inputs it answers go upstream, and the call goes on.
func (u *upstream) resumeDown(ctx context.Context, x *exchange, st string, dst []byte) ([]byte, error) {
	h, err := u.g.resume(x.peer, x.method, x.name, x.params, st)
	if err != nil {
		return dst, err
	}
	xc := h.xc
	answers, err := inputResponses(x.params)
	if err != nil {
		// The retry is malformed: the call stays held for a good one.
		if herr := u.g.rehold(h); herr != nil {
			xc.abort(u.heldLimit())
		}
		return dst, err
	}
	xc.reqPeer, xc.reqParams = x.peer, x.params
	xc.attach(x.peer)
	xc.answer(answers)
	if tid, started := engine.PeerTask(x.peer); xc.utask != "" && tid != "" && !started && !xc.pending() {
		// A deferred task whose round is answered: from here on it is the
		// client's task, and the upstream's requests are the task's
		// inputs.
		xc.startTask(x.peer)
	}
	return xc.serve(ctx, x.peer, dst)
}

// runTask runs a tools/call the engine made a task (started, or deferred)
// as a 2025-11-25 task upstream.
func (xc *xcall) runTask(ctx context.Context, y *exchange, dst []byte, started bool) ([]byte, error) {
	c, u := xc.c, xc.u
	y.fp.addTask = true
	if started {
		xc.mode.Store(xmRelay)
	}
	cl, err := c.start(y, nil)
	if err != nil {
		return dst, u.connError(err)
	}
	created, err := c.wait(ctx, cl)
	if created, _, err = c.result(created, 0, err); err != nil { // a session connection: no 2026-07-28 task
		c.end(cl)
		return dst, err
	}
	id := createdTask(created)
	if id == "" {
		c.end(cl)
		return dst, u.garbage("a task-augmented call without a task")
	}
	deferred := false
	if meta, ok, _ := codec.ObjectField(created, "_meta"); ok {
		v, ok, _ := codec.ObjectField(meta, mcp.MetaDeferTask)
		deferred = ok && string(v) == "true"
	}
	// The call waiting for the task's result takes its messages over; the
	// creating call ends with the xcall.
	params := append(codec.AppendString([]byte(`{"taskId":`), id), '}')
	r := exchange{peer: y.peer, method: mcp.MethodTasksResult, params: params, linkTask: id, xc: xc}
	rcl, err := c.start(&r, nil)
	if err != nil {
		c.end(cl)
		return dst, u.connError(err)
	}
	xc.mu.Lock()
	xc.cl, xc.creating, xc.utask = rcl, cl, id
	xc.mu.Unlock()
	if !started && !deferred {
		xc.startTask(y.peer)
	}
	return xc.serve(ctx, y.peer, dst)
}

// startTask makes the engine's deferred task of peer the client's: the
// client gets its CreateTaskResult, and the upstream's requests are
// relayed to the task from now.
func (xc *xcall) startTask(peer handlers.Peer) {
	if !handlers.StartTask(peer) {
		return // an input is unanswered, or the engine is draining: rounds go on
	}
	xc.mode.Store(xmRelay)
	xc.mu.Lock()
	queued := xc.inputs
	xc.inputs = nil
	xc.mu.Unlock()
	for _, in := range queued {
		xc.c.forgetInput(in)
		xc.c.relayInput(xc.cl, in)
	}
}

// event is what ended a wait of an xcall.
type event uint8

const (
	evAnswer event = iota
	evInput
	evCancel
)

// serve waits for xc's answer, or its inputs, for peer's request.
func (xc *xcall) serve(ctx context.Context, peer handlers.Peer, dst []byte) ([]byte, error) {
	for {
		switch xc.wait(ctx) {
		case evAnswer:
			return xc.finish(dst)
		case evCancel:
			cause := context.Cause(ctx)
			if cause == nil {
				cause = context.Canceled
			}
			xc.abort(cause)
			return dst, cause
		case evInput:
			if xc.mode.Load() == xmRelay {
				// Became a task meanwhile: its inputs are relayed.
				xc.mu.Lock()
				queued := xc.inputs
				xc.inputs = nil
				xc.mu.Unlock()
				for _, in := range queued {
					xc.c.forgetInput(in)
					xc.c.relayInput(xc.cl, in)
				}
				continue
			}
			return xc.inputRequired(dst)
		}
	}
}

// wait waits for the answer, the context's end, or input requests (then
// inputGather more, for those sent together).
func (xc *xcall) wait(ctx context.Context) event {
	var gather <-chan time.Time
	for {
		if gather == nil && xc.pending() {
			t := time.NewTimer(inputGather)
			defer t.Stop()
			gather = t.C
		}
		select {
		case <-xc.cl.done:
			return evAnswer
		case <-xc.kick:
		case <-gather:
			return evInput
		case <-ctx.Done():
			return evCancel
		}
	}
}

// pending reports input requests waiting for the client.
func (xc *xcall) pending() bool {
	xc.mu.Lock()
	defer xc.mu.Unlock()
	return len(xc.inputs) > 0
}

// finish ends xc with the upstream's answer, appended to dst.
func (xc *xcall) finish(dst []byte) ([]byte, error) {
	cl := xc.cl
	cl.mu.Lock()
	cl.waiting = false
	out, fail := cl.out, cl.fail
	errObj := bytes.Clone(cl.errObj)
	cl.mu.Unlock()
	xc.mu.Lock()
	refused, task := xc.refused, xc.utask
	xc.mu.Unlock()
	xc.end()
	u := xc.u
	switch {
	case fail != nil:
		return dst, fail
	case len(errObj) > 0:
		if refused != "" {
			e := engine.MissingCapability(refused)
			e.Message += ": the upstream asked for input this client did not declare the capability for"
			return dst, e
		}
		return dst, u.upstreamError(errObj)
	case len(out) == 0 || out[0] != '{':
		return dst, u.garbage("a result that is not an object")
	}
	if task != "" {
		// The result of tasks/result names the upstream's task: the
		// engine names its own.
		if meta, ok, err := codec.ObjectField(out, "_meta"); err == nil && ok && len(meta) > 1 && meta[0] == '{' {
			if e, ok := dropKey(out, meta, relatedTaskKey); ok {
				return splice(dst, out, []edit{e}), nil
			}
		}
	}
	return append(dst, out...), nil
}

// inputRequired answers the round: an InputRequiredResult naming every
// input the upstream waits for, and the call held for the retry.
func (xc *xcall) inputRequired(dst []byte) ([]byte, error) {
	u := xc.u
	xc.mu.Lock()
	if xc.rounds >= u.g.opts.MaxRounds {
		xc.mu.Unlock()
		e := &codec.Error{Code: codec.CodeServerBusy, Message: "upstream " + strconv.Quote(u.cfg.Name) + ": more than " + strconv.Itoa(u.g.opts.MaxRounds) + " input rounds",
			Data: codec.RawJSON(`{"limit":"upstream-input-rounds","upstream":` + strconv.Quote(u.cfg.Name) + `}`)}
		xc.abort(e)
		return dst, e
	}
	xc.rounds++
	if xc.reqPeer != nil {
		xc.bind()
	}
	b := append([]byte(nil), `{"resultType":"input_required","inputRequests":{`...)
	for i, in := range xc.inputs {
		if i > 0 {
			b = append(b, ',')
		}
		b = codec.AppendString(b, in.key)
		b = append(b, `:{"method":`...)
		b = codec.AppendString(b, in.method)
		if len(in.params) > 0 {
			b = append(b, `,"params":`...)
			b = append(b, in.params...)
		}
		b = append(b, '}')
	}
	xc.mu.Unlock()
	st, err := u.g.hold(xc)
	if err != nil {
		e := u.heldLimit()
		xc.abort(e)
		return dst, e
	}
	xc.detach()
	b = append(b, `},"requestState":`...)
	b = codec.AppendString(b, st)
	b = append(b, '}')
	return append(dst, b...), nil
}

// detachedPeer stands for the client of a held call: what the upstream
// sends meanwhile (progress, log messages) has nowhere to go.
type detachedPeer struct{}

var errDetached = errors.New("gateway: the client is gathering input (held call)")

func (detachedPeer) SessionID() string                           { return "" }
func (detachedPeer) ProtocolVersion() string                     { return mcp.Version20260728 }
func (detachedPeer) ClientInfo() mcp.Implementation              { return mcp.Implementation{} }
func (detachedPeer) ClientCapabilities() *mcp.ClientCapabilities { return &mcp.ClientCapabilities{} }
func (detachedPeer) Progress(float64, float64, string) error     { return nil }
func (detachedPeer) Log(string, string, any) error               { return nil }
func (detachedPeer) CloseStream()                                {}
func (detachedPeer) CreateMessage(context.Context, *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	return nil, errDetached
}
func (detachedPeer) Elicit(context.Context, *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	return nil, errDetached
}
func (detachedPeer) ListRoots(context.Context) (*mcp.ListRootsResult, error) { return nil, errDetached }

// detach leaves the held call without a client: its request's Peer is
// gone once the handler returns.
func (xc *xcall) detach() {
	xc.reqPeer, xc.reqParams = nil, nil
	for _, cl := range xc.calls() {
		cl.mu.Lock()
		cl.peer = detachedPeer{}
		cl.mu.Unlock()
	}
}

// attach gives the held call the retry's Peer, and its timeout back.
func (xc *xcall) attach(peer handlers.Peer) {
	for _, cl := range xc.calls() {
		cl.mu.Lock()
		cl.peer = peer
		cl.mu.Unlock()
	}
	xc.setDeadline(nanotime() + int64(xc.u.cfg.Timeout))
}

// calls returns the upstream calls of xc.
func (xc *xcall) calls() []*call {
	xc.mu.Lock()
	defer xc.mu.Unlock()
	if xc.creating != nil {
		return []*call{xc.cl, xc.creating}
	}
	return []*call{xc.cl}
}

// setDeadline sets when the sweeper times xc's calls out.
func (xc *xcall) setDeadline(at int64) {
	calls := xc.calls()
	xc.c.mu.Lock()
	for _, cl := range calls {
		cl.mu.Lock()
		cl.deadline = at
		cl.mu.Unlock()
	}
	xc.c.mu.Unlock()
}

// answer sends the client's answers to the inputs they name upstream.
func (xc *xcall) answer(answers map[string]json.RawMessage) {
	if len(answers) == 0 {
		return
	}
	xc.mu.Lock()
	var done []*xinput
	keep := xc.inputs[:0]
	for _, in := range xc.inputs {
		if _, ok := answers[in.key]; ok {
			done = append(done, in)
		} else {
			keep = append(keep, in)
		}
	}
	xc.inputs = keep
	// The others may answer what the upstream asks next.
	for k, v := range answers {
		if !slices.ContainsFunc(done, func(in *xinput) bool { return in.key == k }) {
			if xc.pre == nil {
				xc.pre = map[string]json.RawMessage{}
			}
			if len(xc.pre) < maxPreAnswers {
				xc.pre[k] = v
			}
		}
	}
	xc.mu.Unlock()
	for _, in := range done {
		xc.c.forgetInput(in)
		xc.c.respond(in.id, answers[in.key], nil)
	}
}

// maxPreAnswers bounds the answers an xcall keeps for inputs not asked
// for yet.
const maxPreAnswers = 64

// abort ends xc without its answer: the upstream's pending requests get
// cause, its call (and task) is cancelled.
func (xc *xcall) abort(cause error) {
	xc.mu.Lock()
	inputs := xc.inputs
	xc.inputs = nil
	task := xc.utask
	xc.mu.Unlock()
	e := codec.AsError(cause)
	for _, in := range inputs {
		xc.c.forgetInput(in)
		xc.c.respond(in.id, nil, e)
	}
	xc.c.cancelUpstream(xc.cl, cause)
	if task != "" {
		u := xc.u
		ctx, cancel := context.WithTimeout(u.ctx, u.cfg.Timeout)
		_, _ = xc.c.internal(ctx, mcp.MethodTasksCancel, append(codec.AppendString([]byte(`{"taskId":`), task), '}'))
		cancel()
	}
	xc.end()
}

// end frees xc's upstream calls, once.
func (xc *xcall) end() {
	xc.mu.Lock()
	if xc.ended {
		xc.mu.Unlock()
		return
	}
	xc.ended = true
	inputs := xc.inputs
	xc.inputs = nil
	cl, creating := xc.cl, xc.creating
	xc.mu.Unlock()
	for _, in := range inputs {
		xc.c.forgetInput(in)
	}
	xc.c.end(cl)
	if creating != nil {
		xc.c.end(creating)
	}
}

// inputRequest takes a server-to-client request of the upstream for xc's
// client, on the connection's read goroutine: an input of the round (or
// refused when the client cannot answer it).
func (c *muxConn) inputRequest(xc *xcall, method string, m *codec.Message) {
	if xc.mode.Load() == xmRefuse {
		c.respond(m.ID, nil, codec.NewError(codec.CodeInvalidRequest, "gateway: the client's request ("+xc.method+", "+mcp.Version20260728+") cannot carry "+method))
		return
	}
	if req := missingCapability(&xc.caps, method, m.Params); req != "" {
		xc.mu.Lock()
		xc.refused = req
		xc.mu.Unlock()
		e := engine.MissingCapability(req)
		e.Message = "gateway: the client (" + mcp.Version20260728 + ") did not declare the capability " + method + " needs"
		c.respond(m.ID, nil, e)
		return
	}
	if c.pending.Add(1) > int32(c.u.g.opts.MaxPending) {
		c.pending.Add(-1)
		c.u.stats.unrouted.Add(1)
		c.respond(m.ID, nil, &codec.Error{Code: codec.CodeServerBusy, Message: "gateway: too many server-to-client requests pending on this connection", Data: codec.RawJSON(`{"limit":"upstream-max-pending"}`)})
		return
	}
	key := inputKeyOf(m.Params)
	params := stripParamsLinks(bytes.Clone(m.Params))
	in := &xinput{method: method, id: bytes.Clone(m.ID), params: params}
	xc.mu.Lock()
	if xc.ended {
		xc.mu.Unlock()
		c.pending.Add(-1)
		c.respond(m.ID, nil, codec.NewError(codec.CodeInvalidRequest, "gateway: the client request "+method+" belongs to has ended"))
		return
	}
	if xc.keys == nil {
		xc.keys = map[string]bool{}
	}
	in.key = xc.uniqueKey(key, method)
	if ans, ok := xc.pre[in.key]; ok {
		delete(xc.pre, in.key)
		xc.mu.Unlock()
		c.pending.Add(-1)
		c.respond(m.ID, ans, nil)
		return
	}
	xc.inputs = append(xc.inputs, in)
	xc.mu.Unlock()
	c.mu.Lock()
	if c.xin == nil {
		c.xin = map[string]*xcall{}
	}
	c.xin[string(in.id)] = xc
	c.mu.Unlock()
	select {
	case xc.kick <- struct{}{}:
	default:
	}
}

// uniqueKey returns the key of an input (xc.mu held): the one the
// upstream named (mcp.MetaInputKey), else the method's short name and
// rank, made unique within the call.
func (xc *xcall) uniqueKey(key, method string) string {
	if key == "" {
		short := method
		switch method {
		case mcp.MethodElicitationCreate:
			short = "elicitation"
		case mcp.MethodSamplingCreateMessage:
			short = "sampling"
		case mcp.MethodRootsList:
			short = "roots"
		}
		key = short + "-1"
	}
	base := key
	for n := 2; xc.keys[key]; n++ {
		key = base + "-" + strconv.Itoa(n)
	}
	xc.keys[key] = true
	return key
}

// forgetInput drops an input from the connection's table.
func (c *muxConn) forgetInput(in *xinput) {
	c.mu.Lock()
	_, ok := c.xin[string(in.id)]
	delete(c.xin, string(in.id))
	c.mu.Unlock()
	if ok {
		c.pending.Add(-1)
	}
}

// inputCancelled drops the input the upstream cancelled
// (notifications/cancelled); it reports whether id was one.
func (c *muxConn) inputCancelled(id []byte) bool {
	c.mu.Lock()
	xc := c.xin[string(id)]
	c.mu.Unlock()
	if xc == nil {
		return false
	}
	xc.mu.Lock()
	var gone *xinput
	keep := xc.inputs[:0]
	for _, in := range xc.inputs {
		if bytes.Equal(in.id, id) {
			gone = in
		} else {
			keep = append(keep, in)
		}
	}
	xc.inputs = keep
	xc.mu.Unlock()
	if gone != nil {
		c.forgetInput(gone)
	}
	return true
}

// relayInput relays an input request to cl's Peer (a started task's), as
// serverRequest does.
func (c *muxConn) relayInput(cl *call, in *xinput) {
	params := in.params
	if in.key != "" {
		params = withMetaString(params, mcp.MetaInputKey, in.key)
	}
	c.serverRequest(&codec.Message{Kind: codec.KindRequest, ID: in.id, Method: in.method, Params: withRelatedCall(params, cl)})
}

// missingCapability returns the ClientCapabilities object a request of
// the upstream needs and caps lacks, "" when caps has it (the engine's
// rules for its own handlers' requests).
func missingCapability(caps *mcp.ClientCapabilities, method string, params []byte) string {
	switch method {
	case mcp.MethodElicitationCreate:
		if caps.Elicitation == nil {
			return `{"elicitation":{}}`
		}
		mode, _, _ := codec.ObjectField(params, "mode")
		if string(mode) == `"url"` {
			if caps.Elicitation.URL == nil {
				return `{"elicitation":{"url":{}}}`
			}
		} else if caps.Elicitation.URL != nil && caps.Elicitation.Form == nil {
			return `{"elicitation":{"form":{}}}`
		}
	case mcp.MethodSamplingCreateMessage:
		if caps.Sampling == nil {
			return `{"sampling":{}}`
		}
		if caps.Sampling.Tools == nil {
			_, tools, _ := codec.ObjectField(params, "tools")
			_, choice, _ := codec.ObjectField(params, "toolChoice")
			if tools || choice {
				return `{"sampling":{"tools":{}}}`
			}
		}
	case mcp.MethodRootsList:
		if caps.Roots == nil {
			return `{"roots":{}}`
		}
	}
	return ""
}

// inputKeyOf returns the input key an upstream's request names
// (mcp.MetaInputKey), "" when none.
func inputKeyOf(params []byte) string {
	meta, ok, err := codec.ObjectField(params, "_meta")
	if err != nil || !ok || len(meta) < 2 || meta[0] != '{' {
		return ""
	}
	raw, ok, err := codec.ObjectField(meta, mcp.MetaInputKey)
	if err != nil || !ok {
		return ""
	}
	s, err := codec.StringValue(raw)
	if err != nil || len(s) == 0 || len(s) > 256 {
		return ""
	}
	return string(s)
}

// inputResponses reads a retry's inputResponses: an object of results
// (objects). Anything else is -32602.
func inputResponses(params []byte) (map[string]json.RawMessage, error) {
	raw, ok, err := codec.ObjectField(params, "inputResponses")
	if err != nil {
		return nil, codec.NewError(codec.CodeInvalidParams, "invalid params: "+err.Error())
	}
	if !ok || string(raw) == "null" {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if len(raw) == 0 || raw[0] != '{' || codec.Unmarshal(raw, &m) != nil {
		return nil, codec.NewError(codec.CodeInvalidParams, "invalid params: inputResponses must be an object of results, by the keys of inputRequests")
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if v := bytes.TrimSpace(m[k]); len(v) == 0 || v[0] != '{' {
			return nil, codec.NewError(codec.CodeInvalidParams, "invalid params: inputResponses["+strconv.Quote(k)+"] must be a result object")
		}
	}
	return m, nil
}

// The members of a 2026-07-28 request the session revisions do not have.
var (
	downTop  = []string{"inputResponses", "requestState", "task"}
	downMeta = []string{mcp.MetaProtocolVersion, mcp.MetaClientCapabilities, mcp.MetaClientInfo, mcp.MetaLogLevel}
)

// downParams returns params without what 2026-07-28 adds to a request (a
// copy): the protocol's _meta keys, inputResponses, requestState, and a
// legacy task param (2026-07-28 ignores it; the gateway adds its own
// when the upstream runs the call as a task). One pass over the members;
// a _meta left empty goes.
func downParams(params []byte) ([]byte, error) {
	if len(params) == 0 {
		return nil, nil
	}
	out := make([]byte, 0, len(params))
	bad := false
	out, ok := filterObject(out, params, func(key, val []byte, dst []byte) ([]byte, bool) {
		switch string(key) {
		case "inputResponses", "requestState", "task":
			return dst, false
		case "_meta":
			if len(val) < 2 || val[0] != '{' {
				return dst, true
			}
			start := len(dst)
			dst = append(dst, `"_meta":`...)
			inner := len(dst)
			var ok bool
			dst, ok = filterObject(dst, val, func(k, _ []byte, d []byte) ([]byte, bool) {
				return d, !slices.Contains(downMeta, string(k))
			})
			if !ok {
				bad = true
				return dst[:start], false
			}
			if empty(dst[inner:]) {
				return dst[:start], false
			}
			return dst, false // written already
		}
		return dst, true
	})
	if !ok || bad {
		return nil, codec.NewError(codec.CodeInvalidParams, "invalid params: params must be an object")
	}
	return out, nil
}

// filterObject appends the object obj to dst with the members keep
// refuses left out: keep gets each member's key (unquoted, raw) and value
// and dst as it is, and returns dst, and whether to copy the member as it
// is (keep may append a member of its own instead, and return false). It
// reports false when obj is not an object it can read.
func filterObject(dst, obj []byte, keep func(key, val, dst []byte) ([]byte, bool)) ([]byte, bool) {
	i := codec.SkipWS(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return dst, false
	}
	dst = append(dst, '{')
	open := len(dst)
	i = codec.SkipWS(obj, i+1)
	for i < len(obj) && obj[i] != '}' {
		if obj[i] == ',' {
			i = codec.SkipWS(obj, i+1)
			continue
		}
		ks := i
		ke := codec.SkipValue(obj, i)
		if ke < 0 || ke-ks < 2 || obj[ks] != '"' {
			return dst, false
		}
		j := codec.SkipWS(obj, ke)
		if j >= len(obj) || obj[j] != ':' {
			return dst, false
		}
		vs := codec.SkipWS(obj, j+1)
		if vs >= len(obj) || obj[vs] == '}' || obj[vs] == ',' {
			return dst, false
		}
		ve := codec.SkipValue(obj, vs)
		if ve < 0 {
			return dst, false
		}
		mark := len(dst)
		if len(dst) > open {
			dst = append(dst, ',')
		}
		before := len(dst)
		var copyIt bool
		dst, copyIt = keep(obj[ks+1:ke-1], obj[vs:ve], dst)
		switch {
		case copyIt:
			dst = append(dst, obj[ks:ve]...)
		case len(dst) == before:
			dst = dst[:mark] // left out: no comma
		}
		i = codec.SkipWS(obj, ve)
	}
	if i >= len(obj) {
		return dst, false
	}
	return append(dst, '}'), true
}

// dropMetaKey removes key from the _meta of the params object p.
func dropMetaKey(p []byte, key string) []byte {
	meta, ok, err := codec.ObjectField(p, "_meta")
	if err != nil || !ok || len(meta) < 2 || meta[0] != '{' {
		return p
	}
	if e, ok := dropKey(p, meta, key); ok {
		return splice(nil, p, []edit{e})
	}
	return p
}

// stripParamsLinks removes the link keys and the input key from the
// _meta of the params object p, and a _meta left empty.
func stripParamsLinks(p []byte) []byte {
	meta, ok, err := codec.ObjectField(p, "_meta")
	if err != nil || !ok || len(meta) < 2 || meta[0] != '{' {
		return p
	}
	m := stripLinks(meta)
	at := offset(p, meta)
	if m == nil {
		if e, ok := dropKey(p, p, "_meta"); ok {
			return splice(nil, p, []edit{e})
		}
		return p
	}
	return splice(nil, p, []edit{{at: at, end: at + len(meta), with: m}})
}

// withMetaString returns the params object p with _meta[key] = value.
func withMetaString(p []byte, key, value string) []byte {
	member := codec.AppendString([]byte(nil), key)
	member = append(member, ':')
	member = codec.AppendString(member, value)
	return withMetaMember(p, member)
}

// withRelatedCall returns p with _meta naming cl (related-request), so
// that serverRequest links it to cl.
func withRelatedCall(p []byte, cl *call) []byte {
	member := append([]byte(`"`+mcp.MetaRelatedRequest+`":{"requestId":`), cl.idBytes()...)
	return withMetaMember(dropMetaKey(p, mcp.MetaRelatedRequest), append(member, '}'))
}

// withMetaMember returns the object p with member ("key":value) added to
// its _meta, which it gets when it has none (a copy).
func withMetaMember(p, member []byte) []byte {
	if len(p) < 2 || p[0] != '{' {
		p = []byte("{}")
	}
	if meta, ok, err := codec.ObjectField(p, "_meta"); err == nil && ok && len(meta) >= 2 && meta[0] == '{' {
		at := offset(p, meta) + 1
		with := member
		if !empty(meta) {
			with = append(bytes.Clone(member), ',')
		}
		return splice(nil, p, []edit{{at: at, end: at, with: with}})
	}
	with := append([]byte(`"_meta":{`), member...)
	with = append(with, '}')
	at := codec.SkipWS(p, 0) + 1
	if !empty(p) {
		with = append(with, ',')
	}
	return splice(nil, p, []edit{{at: at, end: at, with: with}})
}

package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
)

// Up: a session's request (2024-11-05 to 2025-11-25) over a connection
// of 2026-07-28 (an upstream that speaks nothing older).
//
// The gateway answers the session's initialize itself, from what the
// upstream's server/discover told (the capabilities of the lists it
// mirrors, the instructions), and sends each request statelessly, its
// _meta made of the session's declarations: its capabilities (with the
// related-request link, and the tasks extension for a task's call), its
// client info, and the log level it set (logging/setLevel; debug when it
// set none: the engine's Peer passes on only what the session asked for).
// An InputRequiredResult becomes the server-to-client requests it lists,
// sent to the session through the request's Peer; their answers go back
// in the retry, with the requestState, until the upstream answers with a
// result, within Options.MaxRounds rounds. A call the engine runs as a
// 2025-11-25 task is a task of the upstream's tasks extension: polled
// with tasks/get, its inputs answered with tasks/update, cancelled with
// tasks/cancel. The sessions' resource subscriptions are one
// subscriptions/listen stream on the upstream's first connection
// (listenSet), opened again when the URIs change.

// up serves x, a request of a session, over c, a connection of
// 2026-07-28, appending its result to dst.
func (u *upstream) up(ctx context.Context, c *muxConn, x *exchange, dst []byte) ([]byte, error) {
	tid, _ := engine.PeerTask(x.peer)
	taskMode := tid != "" && x.method == mcp.MethodToolsCall && u.m.taskSupport(x.name) != ""
	meta, err := upMeta(x.peer, taskMode)
	if err != nil {
		return dst, err
	}
	base, err := withUpMeta(x.params, meta)
	if err != nil {
		return dst, err
	}
	y := *x
	y.fp.stateless, y.fp.linkCap, y.fp.addTask = false, false, false
	params := base
	for round := 0; ; round++ {
		y.params = params
		res, err := c.roundTrip(ctx, &y)
		if err != nil {
			if round > 0 && errors.Is(err, errSlotsFull) {
				err = u.connError(err) // the retry must go to this connection
			}
			return dst, err
		}
		switch resultType(res) {
		case mcp.ResultInputRequired:
			if round >= u.g.opts.MaxRounds {
				return dst, u.roundsExceeded()
			}
			var ir struct {
				InputRequests map[string]mcp.InputRequest `json:"inputRequests"`
				RequestState  *string                     `json:"requestState"`
			}
			if codec.Unmarshal(res, &ir) != nil {
				return dst, u.garbage("a malformed InputRequiredResult")
			}
			answers, err := u.askSession(ctx, x.peer, ir.InputRequests)
			if err != nil {
				return dst, err
			}
			if params, err = withInputs(base, answers, ir.RequestState); err != nil {
				return dst, err
			}
		case "task":
			if !taskMode {
				return dst, u.garbage("a task the gateway did not declare the tasks extension for")
			}
			return u.pollTask(ctx, c, x.peer, meta, res, dst)
		default:
			return appendUpResult(dst, res), nil
		}
	}
}

// roundTrip sends x on c and returns its result (a copy), without what
// result adds for a 2026-07-28 client (the gateway consumes it).
func (c *muxConn) roundTrip(ctx context.Context, x *exchange) ([]byte, error) {
	cl, err := c.start(x, nil)
	if err != nil {
		return nil, err
	}
	out, err := c.wait(ctx, cl)
	c.end(cl)
	if err != nil {
		return nil, err
	}
	if len(out) == 0 || out[0] != '{' {
		return nil, c.u.garbage("a result that is not an object")
	}
	return out, nil
}

// askSession asks peer's client for each input the upstream requested,
// in the order of their keys, and returns the answers by key.
func (u *upstream) askSession(ctx context.Context, peer handlers.Peer, reqs map[string]mcp.InputRequest) (map[string]json.RawMessage, error) {
	keys := make([]string, 0, len(reqs))
	for k := range reqs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	answers := make(map[string]json.RawMessage, len(keys))
	for _, k := range keys {
		in := reqs[k]
		switch in.Method {
		case mcp.MethodElicitationCreate, mcp.MethodSamplingCreateMessage, mcp.MethodRootsList:
		default:
			return nil, u.garbage("an input request of an unknown method " + strconv.Quote(in.Method))
		}
		params := []byte(in.Params)
		if len(params) == 0 {
			params = []byte("{}")
		}
		res, err := relayTo(handlers.WithInputKey(ctx, k), peer, in.Method, params, u.g)
		if err != nil {
			if errors.Is(err, engine.ErrCapability) {
				e := engine.MissingCapability(capabilityOf(in.Method))
				e.Message = "upstream " + strconv.Quote(u.cfg.Name) + " asked for " + in.Method + ", which this client did not declare the capability for"
				return nil, e
			}
			if e, ok := errors.AsType[*codec.Error](err); ok {
				return nil, e
			}
			return nil, codec.NewError(codec.CodeInternalError, "gateway: "+in.Method+": "+err.Error())
		}
		answers[k] = res
	}
	return answers, nil
}

// capabilityOf is the ClientCapabilities object an input method needs.
func capabilityOf(method string) string {
	switch method {
	case mcp.MethodElicitationCreate:
		return `{"elicitation":{}}`
	case mcp.MethodSamplingCreateMessage:
		return `{"sampling":{}}`
	}
	return `{"roots":{}}`
}

// roundsExceeded is the error of a call past Options.MaxRounds.
func (u *upstream) roundsExceeded() *codec.Error {
	return &codec.Error{Code: codec.CodeServerBusy, Message: "upstream " + strconv.Quote(u.cfg.Name) + ": more than " + strconv.Itoa(u.g.opts.MaxRounds) + " input rounds",
		Data: codec.RawJSON(`{"limit":"upstream-input-rounds","upstream":` + strconv.Quote(u.cfg.Name) + `}`)}
}

// upMeta returns the members of a 2026-07-28 request's _meta (without
// braces) made of peer's session: its capabilities (with the
// related-request link, and the tasks extension for a task's call), its
// client info and its log level.
func upMeta(peer handlers.Peer, tasks bool) ([]byte, error) {
	var caps mcp.ClientCapabilities
	if c := peer.ClientCapabilities(); c != nil {
		caps = *c
	}
	caps.Tasks = nil // 2025-11-25's; the extension replaces it
	cb, err := codec.Marshal(&caps)
	if err != nil {
		return nil, err
	}
	if e := linkCapEdit(cb, cb); e.with != nil {
		cb = splice(nil, cb, []edit{e})
	}
	if tasks {
		cb = withExtension(cb, mcp.ExtensionTasks)
	}
	info, err := codec.Marshal(peer.ClientInfo())
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, 128+len(cb)+len(info))
	b = append(b, `"`+mcp.MetaProtocolVersion+`":"`+mcp.Version20260728+`","`+mcp.MetaClientCapabilities+`":`...)
	b = append(b, cb...)
	b = append(b, `,"`+mcp.MetaClientInfo+`":`...)
	b = append(b, info...)
	if lv := engine.PeerLogLevel(peer); lv != "" {
		b = append(b, `,"`+mcp.MetaLogLevel+`":`...)
		b = codec.AppendString(b, lv)
	}
	return b, nil
}

// withExtension returns the ClientCapabilities object caps declaring the
// extension id.
func withExtension(caps []byte, id string) []byte {
	member := append(codec.AppendString(nil, id), `:{}`...)
	if ext, ok, err := codec.ObjectField(caps, "extensions"); err == nil && ok && len(ext) >= 2 && ext[0] == '{' {
		if _, has, _ := codec.ObjectField(ext, id); has {
			return caps
		}
		at := offset(caps, ext) + 1
		if !empty(ext) {
			member = append(member, ',')
		}
		return splice(nil, caps, []edit{{at: at, end: at, with: member}})
	}
	with := append([]byte(`"extensions":{`), member...)
	with = append(with, '}')
	at := codec.SkipWS(caps, 0) + 1
	if !empty(caps) {
		with = append(with, ',')
	}
	return splice(nil, caps, []edit{{at: at, end: at, with: with}})
}

// upKeys are the _meta keys the gateway sets on a 2026-07-28 request: a
// session's own params may not carry them.
var upKeys = []string{mcp.MetaProtocolVersion, mcp.MetaClientCapabilities, mcp.MetaClientInfo, mcp.MetaLogLevel}

// withUpMeta returns params (a session request's) with meta's members
// first in its _meta, and without a 2025-11-25 task param or input
// members of its own (a copy).
func withUpMeta(params, meta []byte) ([]byte, error) {
	p := bytes.TrimSpace(params)
	if len(p) == 0 || string(p) == "null" {
		p = []byte("{}")
	}
	var own []byte // the client's own _meta, less the gateway's keys
	rest, ok := filterObject(make([]byte, 0, len(p)), p, func(key, val, dst []byte) ([]byte, bool) {
		switch string(key) {
		case "inputResponses", "requestState", "task":
			return dst, false
		case "_meta":
			if len(val) >= 2 && val[0] == '{' {
				var ok bool
				if own, ok = filterObject(nil, val, func(k, _, d []byte) ([]byte, bool) {
					return d, !slices.Contains(upKeys, string(k))
				}); !ok {
					own = nil
				}
			}
			return dst, false
		}
		return dst, true
	})
	if !ok {
		return nil, codec.NewError(codec.CodeInvalidParams, "invalid params: params must be an object")
	}
	out := make([]byte, 0, len(rest)+len(meta)+len(own)+16)
	out = append(out, `{"_meta":{`...)
	out = append(out, meta...)
	if len(own) > 2 && !empty(own) {
		out = append(out, ',')
		out = append(out, own[1:len(own)-1]...)
	}
	out = append(out, '}')
	if empty(rest) {
		return append(out, '}'), nil
	}
	out = append(out, ',')
	return append(out, rest[1:]...), nil
}

// withMetaObject returns the object p (the gateway's own: known to be
// one) with "_meta":{members} first.
func withMetaObject(p, members []byte) []byte {
	with := append([]byte(`"_meta":{`), members...)
	with = append(with, '}')
	at := codec.SkipWS(p, 0) + 1
	if !empty(p) {
		with = append(with, ',')
	}
	return splice(nil, p, []edit{{at: at, end: at, with: with}})
}

// withInputs returns base (a request's params) with the retry's
// inputResponses and requestState, echoed as the upstream gave it.
func withInputs(base []byte, answers map[string]json.RawMessage, state *string) ([]byte, error) {
	ir, err := codec.Marshal(answers)
	if err != nil {
		return nil, err
	}
	with := append([]byte(`"inputResponses":`), ir...)
	if state != nil {
		with = append(with, `,"requestState":`...)
		with = codec.AppendString(with, *state)
	}
	at := codec.SkipWS(base, 0) + 1
	if !empty(base) {
		with = append(with, ',')
	}
	return splice(nil, base, []edit{{at: at, end: at, with: with}}), nil
}

// appendUpResult appends a 2026-07-28 result for a session: without
// resultType and the upstream's identity (its _meta serverInfo).
func appendUpResult(dst, res []byte) []byte {
	var eb [2]edit
	edits := eb[:0]
	if e, ok := dropKey(res, res, "resultType"); ok {
		edits = append(edits, e)
	}
	if meta, ok, err := codec.ObjectField(res, "_meta"); err == nil && ok && len(meta) > 1 && meta[0] == '{' {
		if e, ok := dropKey(res, meta, mcp.MetaServerInfo); ok {
			edits = append(edits, e)
		}
	}
	sortEdits(edits)
	return splice(dst, res, edits)
}

// Poll intervals of an upstream task: what it suggests, within these.
const (
	minTaskPoll = 20 * time.Millisecond
	maxTaskPoll = 5 * time.Second
)

// pollTask follows the upstream task created (a CreateTaskResult) for a
// 2025-11-25 task of the engine's, on c, until it ends: its inputs asked
// of peer's session and answered with tasks/update, a downstream
// cancellation sent as tasks/cancel. It appends the task's result.
func (u *upstream) pollTask(ctx context.Context, c *muxConn, peer handlers.Peer, meta, created, dst []byte) ([]byte, error) {
	var ct struct {
		TaskID         string `json:"taskId"`
		PollIntervalMs int64  `json:"pollIntervalMs"`
	}
	if codec.Unmarshal(created, &ct) != nil || ct.TaskID == "" {
		return dst, u.garbage("a CreateTaskResult without a taskId")
	}
	every := min(max(time.Duration(ct.PollIntervalMs)*time.Millisecond, minTaskPoll), maxTaskPoll)
	if ct.PollIntervalMs <= 0 {
		every = 500 * time.Millisecond
	}
	idParams := withMetaObject(append(codec.AppendString([]byte(`{"taskId":`), ct.TaskID), '}'), meta)
	cancelTask := func() {
		cctx, cancel := context.WithTimeout(u.ctx, u.cfg.Timeout)
		_, _ = c.internal(cctx, mcp.MethodTasksCancel, idParams)
		cancel()
	}
	t := time.NewTimer(0)
	defer t.Stop()
	asked := map[string]bool{}
	for {
		select {
		case <-ctx.Done():
			cancelTask()
			return dst, context.Cause(ctx)
		case <-t.C:
		}
		res, err := c.internal(ctx, mcp.MethodTasksGet, idParams)
		if err != nil {
			if ctx.Err() != nil {
				cancelTask()
				return dst, context.Cause(ctx)
			}
			return dst, err
		}
		var task struct {
			Status        string                      `json:"status"`
			Result        codec.RawJSON               `json:"result"`
			Error         codec.RawJSON               `json:"error"`
			InputRequests map[string]mcp.InputRequest `json:"inputRequests"`
		}
		if codec.Unmarshal(res, &task) != nil {
			return dst, u.garbage("a malformed tasks/get result")
		}
		switch task.Status {
		case mcp.TaskCompleted:
			if len(task.Result) == 0 || task.Result[0] != '{' {
				return dst, u.garbage("a completed task without a result")
			}
			return appendUpResult(dst, task.Result), nil
		case mcp.TaskFailed:
			if len(task.Error) > 0 {
				return dst, u.upstreamError(task.Error)
			}
			return dst, codec.NewError(codec.CodeInternalError, "upstream "+strconv.Quote(u.cfg.Name)+": the task failed")
		case mcp.TaskCancelled:
			return dst, codec.NewError(codec.CodeInternalError, "upstream "+strconv.Quote(u.cfg.Name)+": the task was cancelled")
		case mcp.TaskInputRequired:
			fresh := map[string]mcp.InputRequest{}
			for k, in := range task.InputRequests {
				if !asked[k] {
					fresh[k] = in
				}
			}
			if len(fresh) > 0 {
				if len(asked) >= u.g.opts.MaxRounds*8 {
					cancelTask()
					return dst, u.roundsExceeded()
				}
				answers, err := u.askSession(ctx, peer, fresh)
				if err != nil {
					cancelTask()
					return dst, err
				}
				for k := range fresh {
					asked[k] = true
				}
				ir, _ := codec.Marshal(answers)
				p := append(codec.AppendString([]byte(`{"taskId":`), ct.TaskID), `,"inputResponses":`...)
				p = append(append(p, ir...), '}')
				if _, err := c.internal(ctx, mcp.MethodTasksUpdate, withMetaObject(p, meta)); err != nil {
					cancelTask()
					return dst, err
				}
				t.Reset(0)
				continue
			}
		}
		t.Reset(every)
	}
}

// The sessions' resource subscriptions on an upstream of 2026-07-28 only:
// one subscriptions/listen stream on the session pool's first connection,
// naming every URI subscribed (at most Options.MaxListenURIs), opened
// again (the old one cancelled) a little after the set changes.
type upListen struct {
	mu      sync.Mutex
	cur     *call    // the stream open, nil when none
	on      *muxConn // its connection
	uris    []string // what it names
	pending bool     // a reopening is scheduled
}

// listenSoon schedules the stream's reopening.
func (u *upstream) listenSoon() {
	l := &u.listen
	l.mu.Lock()
	if l.pending {
		l.mu.Unlock()
		return
	}
	l.pending = true
	l.mu.Unlock()
	time.AfterFunc(listDebounce, func() {
		l.mu.Lock()
		l.pending = false
		l.mu.Unlock()
		if u.ctx.Err() == nil {
			u.relisten()
		}
	})
}

// relisten opens the stream for the URIs subscribed now, and cancels the
// one it replaces.
func (u *upstream) relisten() {
	c := u.session.conn(0)
	var uris []string
	g := u.g
	g.subMu.Lock()
	for uri := range g.subs {
		uris = append(uris, uri)
	}
	g.subMu.Unlock()
	sort.Strings(uris)
	mine := uris[:0]
	for _, uri := range uris {
		if g.owner(uri) == u {
			mine = append(mine, uri)
		}
	}
	if len(mine) > g.opts.MaxListenURIs {
		u.warn("more resource URIs subscribed than a listen stream names; the rest get no updates", "max", g.opts.MaxListenURIs, "subscribed", len(mine))
		mine = mine[:g.opts.MaxListenURIs]
	}
	l := &u.listen
	l.mu.Lock()
	defer l.mu.Unlock()
	if c != nil && c == l.on && slicesEqual(mine, l.uris) {
		return
	}
	if l.cur != nil {
		l.on.cancelUpstream(l.cur, errors.New("resubscribing"))
		l.on.end(l.cur)
		l.cur, l.on, l.uris = nil, nil, nil
	}
	if c == nil || c.era != statelessEra || len(mine) == 0 {
		return
	}
	filter, _ := codec.Marshal(struct {
		N mcp.SubscriptionFilter `json:"notifications"`
	}{mcp.SubscriptionFilter{ResourceSubscriptions: mine}})
	cl, err := c.openListen(filter)
	if err != nil {
		u.warn("subscriptions/listen not opened", "err", err)
		return
	}
	l.cur, l.on, l.uris = cl, c, append([]string(nil), mine...)
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// openListen opens a subscriptions/listen stream with filter (params
// without _meta) and returns its call, which lives until cancelled or
// the connection ends.
func (c *muxConn) openListen(filter []byte) (*call, error) {
	cl, err := c.begin(nil, nil, time.Duration(1<<62-nanotime()))
	if err != nil {
		return nil, err
	}
	if err := c.send(codec.AppendRequest(nil, cl.idBytes(), mcp.MethodSubscriptionsListen, withStatelessMeta(filter))); err != nil {
		c.end(cl)
		return nil, err
	}
	return cl, nil
}

// resultType returns a result's resultType, "" when it has none.
func resultType(res []byte) string {
	v, ok, err := codec.ObjectField(res, "resultType")
	if err != nil || !ok {
		return ""
	}
	s, err := codec.StringValue(v)
	if err != nil {
		return ""
	}
	return string(s)
}

package gateway

import (
	"bytes"
	"context"
	"errors"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
)

// Relays: what an upstream sends during a call, besides its answer, goes
// to the downstream request that caused it, through that request's Peer,
// which works in both eras (a server-to-client request becomes an
// InputRequiredResult in a 2026-07-28 request). Over a connection many
// downstream sessions share, a message names the call it belongs to in
// one of these ways, tried in this order:
//
//  1. _meta["io.github.mcpedge/related-request"].requestId: the id of the
//     gateway's request that caused it. mcpedge adds it to the messages
//     of a request whose client declared the key among its experimental
//     capabilities, as the gateway does (exact).
//  2. _meta["io.modelcontextprotocol/related-task"].taskId: a 2025-11-25
//     task the gateway waits on (exact).
//  3. progress: its progressToken, which the gateway sets to the id of
//     its own request (exact).
//  4. Only one downstream request is in flight on the connection: it is
//     that one's (exact).
//
// Otherwise the message cannot be placed: a server-to-client request is
// refused to the upstream with an error saying why, and a log message is
// dropped (and counted), never delivered to a session it may not belong
// to. share = "session" gives each downstream session a connection of its
// own, where rule 4 always holds.

// relay is an upstream's server-to-client request being relayed.
type relay struct {
	id     []byte // the upstream's id for it, raw
	ctx    context.Context
	cancel context.CancelCauseFunc
}

var (
	relatedTaskKey = "io.modelcontextprotocol/related-task"
	linkKeys       = []string{mcp.MetaRelatedRequest, relatedTaskKey}
	stripKeys      = []string{mcp.MetaRelatedRequest, relatedTaskKey, mcp.MetaInputKey}
)

// linked returns the call a message with params belongs to, by rules 1,
// 2 and 4 above, and whether the message named one (rules 1 and 2) that
// is no longer in flight.
func (c *muxConn) linked(params []byte) (cl *call, gone bool) {
	cl, gone, _ = c.linkedTask(params)
	return cl, gone
}

// linkedTask is linked, also returning the task id the message named
// when that task is not known (yet).
func (c *muxConn) linkedTask(params []byte) (cl *call, gone bool, unknownTask []byte) {
	var reqID uint64
	var task []byte
	named := false
	if meta, ok, err := codec.ObjectField(params, "_meta"); err == nil && ok && len(meta) > 1 && meta[0] == '{' {
		var v [2][]byte
		if codec.ObjectFields(meta, linkKeys, v[:]) == nil {
			if v[0] != nil {
				if raw, ok, err := codec.ObjectField(v[0], "requestId"); err == nil && ok {
					reqID, named = parseID(raw)
				}
			}
			if !named && v[1] != nil {
				if raw, ok, err := codec.ObjectField(v[1], "taskId"); err == nil && ok {
					if s, err := codec.StringValue(raw); err == nil {
						task, named = s, true
					}
				}
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case named && task != nil:
		cl = c.tasks[string(task)]
	case named:
		cl = c.lookup(reqID)
	default:
		cl = c.single()
	}
	if named && task != nil && cl == nil {
		unknownTask = task
	}
	if cl != nil && cl.peer == nil {
		cl = nil // the gateway's own request
	}
	return cl, named && cl == nil, unknownTask
}

// serverRequest relays a request from the upstream to the downstream
// client whose request caused it, and its answer back.
func (c *muxConn) serverRequest(m *codec.Message) {
	var method string // a constant: m.Method aliases the reader's buffer
	switch m.Method {
	case mcp.MethodPing:
		c.respond(m.ID, []byte("{}"), nil)
		return
	case mcp.MethodElicitationCreate:
		method = mcp.MethodElicitationCreate
	case mcp.MethodSamplingCreateMessage:
		method = mcp.MethodSamplingCreateMessage
	case mcp.MethodRootsList:
		method = mcp.MethodRootsList
	default:
		c.respond(m.ID, nil, codec.NewError(codec.CodeMethodNotFound, "method not found: "+m.Method))
		return
	}
	cl, gone, task := c.linkedTask(m.Params)
	if cl == nil && task != nil && c.park(task, method, m) {
		return
	}
	if cl != nil {
		cl.mu.Lock()
		xc := cl.x
		cl.mu.Unlock()
		if xc != nil && xc.mode.Load() != xmRelay {
			c.inputRequest(xc, method, m) // a 2026-07-28 client's input round (down.go)
			return
		}
	}
	if cl == nil && !gone && method == mcp.MethodRootsList && c.p.sess != "" {
		// A connection of one downstream session's own (share =
		// "session") may ask for its roots at any time: that session's.
		c.sessionRoots(m.ID)
		return
	}
	if cl == nil {
		c.u.stats.unrouted.Add(1)
		msg := "gateway: cannot tell which client request " + method + " belongs to: several are in flight on this connection and it names none (_meta " + mcp.MetaRelatedRequest + " or " + relatedTaskKey + ")"
		if gone {
			msg = "gateway: the client request " + method + " belongs to has ended, or its session is gone"
		}
		c.respond(m.ID, nil, codec.NewError(codec.CodeInvalidRequest, msg))
		return
	}
	if c.pending.Add(1) > int32(c.u.g.opts.MaxPending) {
		c.pending.Add(-1)
		c.u.stats.unrouted.Add(1)
		c.respond(m.ID, nil, &codec.Error{Code: codec.CodeServerBusy, Message: "gateway: too many server-to-client requests pending on this connection", Data: codec.RawJSON(`{"limit":"upstream-max-pending"}`)})
		return
	}
	r := &relay{id: bytes.Clone(m.ID)}
	r.ctx, r.cancel = context.WithCancelCause(context.Background())
	cl.mu.Lock()
	peer := cl.peer // set until the call ends, its answer come or not
	if peer == nil {
		cl.mu.Unlock()
		c.pending.Add(-1)
		r.cancel(nil)
		c.respond(m.ID, nil, codec.NewError(codec.CodeInvalidRequest, "gateway: the client request "+method+" belongs to has ended"))
		return
	}
	cl.relays = append(cl.relays, r)
	cl.wg.Add(1)
	cl.mu.Unlock()
	c.mu.Lock()
	if c.relays == nil {
		c.relays = map[string]*relay{}
	}
	c.relays[string(r.id)] = r
	c.mu.Unlock()
	params := bytes.Clone(m.Params)
	go c.runRelay(cl, peer, r, method, params, inputKeyOf(params))
}

// sessionRoots answers the upstream's roots/list (id), asked outside any
// call on the connection of one downstream session, with that session's
// roots.
func (c *muxConn) sessionRoots(id []byte) {
	g := c.u.g
	sess, ok := g.srv.Sessions().Get(c.p.sess)
	if !ok {
		c.respond(id, nil, codec.NewError(codec.CodeInvalidRequest, "gateway: the session of this connection is gone"))
		return
	}
	if sess.ClientCapabilities().Roots == nil {
		c.respond(id, nil, codec.NewError(codec.CodeInvalidRequest, "gateway: the client did not declare the roots capability"))
		return
	}
	if c.pending.Add(1) > int32(g.opts.MaxPending) {
		c.pending.Add(-1)
		c.respond(id, nil, &codec.Error{Code: codec.CodeServerBusy, Message: "gateway: too many server-to-client requests pending on this connection", Data: codec.RawJSON(`{"limit":"upstream-max-pending"}`)})
		return
	}
	id = bytes.Clone(id)
	go func() {
		defer c.pending.Add(-1)
		ctx, cancel := context.WithTimeout(c.u.ctx, c.u.cfg.Timeout)
		defer cancel()
		res, err := g.srv.CallClient(ctx, sess, nil, mcp.MethodRootsList, nil)
		if err != nil {
			c.respond(id, nil, relayError(mcp.MethodRootsList, err))
			return
		}
		c.respond(id, res, nil)
	}()
}

// park holds a request naming task while a task-augmented call awaits
// its answer (which may name that task); it reports false when there is
// none, or too many are parked.
func (c *muxConn) park(task []byte, method string, m *codec.Message) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.awaiting == 0 || len(c.parked) >= c.u.g.opts.MaxPending {
		return false
	}
	c.parked = append(c.parked, parked{task: string(task), method: method, id: bytes.Clone(m.ID), params: bytes.Clone(m.Params), deadline: nanotime() + int64(c.u.cfg.Timeout)})
	return true
}

// runRelay asks the downstream client and answers the upstream.
func (c *muxConn) runRelay(cl *call, peer handlers.Peer, r *relay, method string, params []byte, key string) {
	defer cl.wg.Done()
	defer func() {
		c.mu.Lock()
		delete(c.relays, string(r.id))
		c.mu.Unlock()
		c.pending.Add(-1)
		r.cancel(nil)
	}()
	ctx := r.ctx
	if key != "" {
		// A 2026-07-28 task's input keeps the key the upstream named.
		ctx = handlers.WithInputKey(ctx, key)
	}
	res, err := relayTo(ctx, peer, method, params, c.u.g)
	if r.ctx.Err() != nil && errors.Is(context.Cause(r.ctx), errCancelledUpstream) {
		return // the upstream cancelled it: no answer is due
	}
	if err != nil {
		c.respond(r.id, nil, relayError(method, err))
		return
	}
	c.respond(r.id, res, nil)
}

var errCancelledUpstream = errors.New("the upstream cancelled its request")

// relayTo asks peer what method asks, with params, and returns the
// result encoded.
func relayTo(ctx context.Context, peer handlers.Peer, method string, params []byte, g *Gateway) ([]byte, error) {
	switch method {
	case mcp.MethodElicitationCreate:
		var p mcp.ElicitParams
		if err := decodeParams(params, &p); err != nil {
			return nil, err
		}
		p.Meta = stripLinks(p.Meta)
		res, err := peer.Elicit(ctx, &p)
		if err != nil {
			return nil, err
		}
		if p.Mode == "url" && p.ElicitationID != "" {
			g.noteElicitation(p.ElicitationID, peer.SessionID())
		}
		return codec.Marshal(res)
	case mcp.MethodSamplingCreateMessage:
		var p mcp.CreateMessageParams
		if err := decodeParams(params, &p); err != nil {
			return nil, err
		}
		p.Meta = stripLinks(p.Meta)
		res, err := peer.CreateMessage(ctx, &p)
		if err != nil {
			return nil, err
		}
		return codec.Marshal(res)
	default: // roots/list
		res, err := peer.ListRoots(ctx)
		if err != nil {
			return nil, err
		}
		return codec.Marshal(res)
	}
}

func decodeParams(params []byte, v any) error {
	if len(params) == 0 {
		return codec.NewError(codec.CodeInvalidParams, "invalid params: missing")
	}
	if err := codec.Unmarshal(params, v); err != nil {
		return codec.NewError(codec.CodeInvalidParams, "invalid params: "+err.Error())
	}
	return nil
}

// stripLinks removes the link keys from a _meta object: they name the
// gateway's requests and the upstream's tasks, which mean nothing
// downstream. An object left empty is dropped.
func stripLinks(meta []byte) []byte {
	if len(meta) < 2 || meta[0] != '{' {
		return meta
	}
	for _, k := range stripKeys {
		if e, ok := dropKey(meta, meta, k); ok {
			meta = splice(nil, meta, []edit{e})
		}
	}
	if len(bytes.TrimSpace(meta[1:len(meta)-1])) == 0 {
		return nil
	}
	return meta
}

// relayError is the error answered to the upstream for a relay that
// failed.
func relayError(method string, err error) *codec.Error {
	switch {
	case errors.Is(err, engine.ErrInputRequired):
		return codec.NewError(codec.CodeInternalError, "gateway: the client's request is stateless (2026-07-28) and cannot take "+method+" now")
	case errors.Is(err, engine.ErrCapability):
		if e, ok := errors.AsType[*codec.Error](err); ok {
			return e
		}
		return codec.NewError(codec.CodeInvalidRequest, "gateway: the client did not declare the capability "+method+" needs")
	}
	if e, ok := errors.AsType[*codec.Error](err); ok {
		return e
	}
	return codec.NewError(codec.CodeInternalError, "gateway: "+method+": "+err.Error())
}

// respond answers a request of the upstream.
func (c *muxConn) respond(id, result []byte, e *codec.Error) {
	b := codec.GetBuffer()
	if e != nil {
		b.B = codec.AppendErrorObject(b.B[:0], id, e)
	} else {
		b.B = codec.AppendResult(b.B[:0], id, result)
	}
	_ = c.send(b.B)
	codec.PutBuffer(b)
}

// notification handles a notification from the upstream.
func (c *muxConn) notification(m *codec.Message) {
	if !c.notes.allow() {
		c.u.stats.dropped.Add(1)
		c.u.warn("notifications over the rate limit dropped", "method", m.Method)
		return
	}
	switch m.Method {
	case mcp.NotificationProgress:
		c.progress(m.Params)
	case mcp.NotificationMessage:
		c.log(m.Params)
	case mcp.NotificationResourceUpdated:
		var p struct {
			URI string `json:"uri"`
		}
		if codec.Unmarshal(m.Params, &p) == nil && p.URI != "" {
			c.u.g.resourceUpdated(p.URI)
		}
	case mcp.NotificationToolListChanged:
		c.u.listChanged(handlers.ListTools, c)
	case mcp.NotificationResourceListChanged:
		c.u.listChanged(handlers.ListResources, c)
	case mcp.NotificationPromptListChanged:
		c.u.listChanged(handlers.ListPrompts, c)
	case mcp.NotificationCancelled:
		raw, ok, err := codec.ObjectField(m.Params, "requestId")
		if err != nil || !ok {
			return
		}
		if c.inputCancelled(raw) {
			return
		}
		c.mu.Lock()
		r := c.relays[string(raw)]
		c.mu.Unlock()
		if r != nil {
			r.cancel(errCancelledUpstream)
		}
	case mcp.NotificationElicitationComplete:
		var p struct {
			ID string `json:"elicitationId"`
		}
		if codec.Unmarshal(m.Params, &p) == nil && p.ID != "" {
			c.u.g.elicitationComplete(p.ID)
		}
	}
}

// progress relays progress to the call whose id is its token.
func (c *muxConn) progress(params []byte) {
	var p struct {
		Token    codec.RawJSON `json:"progressToken"`
		Progress float64       `json:"progress"`
		Total    float64       `json:"total"`
		Message  string        `json:"message"`
	}
	if codec.Unmarshal(params, &p) != nil {
		return
	}
	id, ok := parseID(p.Token)
	if !ok {
		return
	}
	c.mu.Lock()
	cl := c.lookup(id)
	if cl != nil {
		cl.mu.Lock()
	}
	c.mu.Unlock()
	if cl == nil {
		return
	}
	if cl.peer != nil {
		_ = cl.peer.Progress(p.Progress, p.Total, p.Message)
	}
	cl.mu.Unlock()
}

// log relays a log message to the call it belongs to; one that belongs
// to none known is dropped.
func (c *muxConn) log(params []byte) {
	var p struct {
		Level  string        `json:"level"`
		Logger string        `json:"logger"`
		Data   codec.RawJSON `json:"data"`
	}
	if codec.Unmarshal(params, &p) != nil || mcp.LogLevelIndex(p.Level) < 0 {
		return
	}
	cl, _ := c.linked(params)
	if cl == nil {
		c.u.stats.unrouted.Add(1)
		return
	}
	cl.mu.Lock()
	if cl.peer != nil {
		if p.Data == nil {
			p.Data = codec.RawJSON("null")
		}
		_ = cl.peer.Log(p.Level, p.Logger, p.Data)
	}
	cl.mu.Unlock()
}

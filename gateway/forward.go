package gateway

import (
	"context"
	"errors"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
)

// The raw handlers of the mirrored items: each forwards its request to
// the upstream, with only the names and the progress token rewritten,
// and appends the upstream's result as it came.

// keepToken asks appendParams to put the call's id as the progress token
// of a request that has one.
var keepToken = []byte{}

// toolHandler serves the upstream's tools.
func (u *upstream) toolHandler(ctx context.Context, req *handlers.RawRequest, dst []byte) ([]byte, error) {
	x := exchange{peer: req.Peer, method: req.Method, name: req.Name, params: req.Params}
	x.fp.name = u.m.toolName(req.Name)
	x.fp.token = keepToken
	if u.m.names.Load().taskRequired[req.Name] && req.Peer.ProtocolVersion() != mcp.Version20260728 && !u.statelessOnly() {
		return u.callAsTask(ctx, &x, dst)
	}
	return u.forward(ctx, &x, dst)
}

// promptHandler serves the upstream's prompts and their completions.
func (u *upstream) promptHandler(ctx context.Context, req *handlers.RawRequest, dst []byte) ([]byte, error) {
	x := exchange{peer: req.Peer, method: req.Method, name: req.Name, params: req.Params}
	if req.Method == mcp.MethodCompletionComplete {
		x.fp.refName = u.m.promptName(req.Name)
	} else {
		x.fp.name = u.m.promptName(req.Name)
	}
	x.fp.token = keepToken
	return u.forward(ctx, &x, dst)
}

// resourceHandler serves the upstream's resources, and the completions
// of its templates.
func (u *upstream) resourceHandler(ctx context.Context, req *handlers.RawRequest, dst []byte) ([]byte, error) {
	x := exchange{peer: req.Peer, method: req.Method, name: req.Name, params: req.Params, fp: forwardParams{token: keepToken}}
	return u.forward(ctx, &x, dst)
}

// callAsTask calls a tool the upstream runs only as a task (2025-11-25,
// execution.taskSupport "required"). The engine already runs the
// downstream call as a task of its own (the client asked for one: the
// tool is listed as requiring it); the gateway makes the upstream call a
// task-augmented one, then waits for its result with tasks/result, on
// the same connection. The upstream's messages about the task (its
// elicitations, with related-task) reach the downstream task's Peer. A
// downstream cancellation cancels the upstream task.
func (u *upstream) callAsTask(ctx context.Context, x *exchange, dst []byte) ([]byte, error) {
	start := u.callBegin()
	out, err := u.runAsTask(ctx, x, dst)
	return out, u.callEnd(ctx, start, err)
}

func (u *upstream) runAsTask(ctx context.Context, x *exchange, dst []byte) ([]byte, error) {
	p, err := u.poolFor(x.peer)
	if err != nil {
		return dst, err
	}
	c, err := p.pick(ctx)
	if err != nil {
		return dst, err
	}
	x.fp.addTask = true
	cl, err := c.start(x, nil)
	if err != nil {
		return dst, u.connError(err)
	}
	created, err := c.wait(ctx, cl)
	if created, _, err = c.result(created, 0, err); err != nil {
		c.end(cl)
		return dst, err
	}
	id := createdTask(created)
	if id == "" {
		c.end(cl)
		return dst, u.garbage("a task-augmented call without a task")
	}
	// The call waiting for the task's result takes its messages over;
	// the creating call, with the relays it began, ends after it: none
	// is refused or cut in between.
	defer c.end(cl)
	params := append(codec.AppendString([]byte(`{"taskId":`), id), '}')
	y := exchange{peer: x.peer, method: mcp.MethodTasksResult, params: params, linkTask: id}
	start := len(dst)
	wait, err := c.start(&y, dst)
	if err != nil {
		return dst, u.connError(err)
	}
	out, err := c.wait(ctx, wait)
	c.end(wait)
	out, _, err = c.result(out, start, err)
	if err != nil {
		if ctx.Err() != nil {
			cctx, cancel := context.WithTimeout(u.ctx, u.cfg.Timeout)
			_, _ = c.internal(cctx, mcp.MethodTasksCancel, params)
			cancel()
		}
		return dst, err
	}
	// The result names the upstream's task in its _meta: the engine names
	// its own.
	if meta, ok, err := codec.ObjectField(out[start:], "_meta"); err == nil && ok && len(meta) > 1 && meta[0] == '{' {
		if e, ok := dropKey(out[start:], meta, relatedTaskKey); ok {
			res := append([]byte(nil), out[start:]...)
			out = splice(out[:start], res, []edit{e})
		}
	}
	return out, nil
}

// foreignTask serves tasks/get, tasks/update and tasks/cancel of
// 2026-07-28 for the tasks an upstream created: at the connection whose
// call created the task, for the caller that created it. Anyone else is
// answered as for an id never issued.
func (g *Gateway) foreignTask(ctx context.Context, req *handlers.RawRequest, dst []byte) ([]byte, error) {
	r, ok := g.task(req.Name, engine.TaskOwnerOf(req.Peer))
	if !ok {
		return dst, engine.ErrTaskNotFound
	}
	u := r.u
	c := r.p.conn(r.conn)
	if c == nil {
		return dst, u.unavailable(errors.New("the connection that created the task has ended"))
	}
	x := exchange{peer: req.Peer, method: req.Method, params: req.Params, fp: forwardParams{stateless: true, linkCap: true}}
	start := u.callBegin()
	out, err := c.do(ctx, &x, dst)
	if err != nil {
		return dst, u.connError(u.callEnd(ctx, start, err))
	}
	u.callEnd(ctx, start, nil)
	return out, nil
}

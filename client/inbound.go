package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
)

// SamplingHandler answers sampling/createMessage.
type SamplingHandler func(ctx context.Context, req *ServerRequest, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error)

// ElicitationHandler answers elicitation/create.
type ElicitationHandler func(ctx context.Context, req *ServerRequest, p *mcp.ElicitParams) (*mcp.ElicitResult, error)

// RootsHandler answers roots/list.
type RootsHandler func(ctx context.Context, req *ServerRequest) (*mcp.ListRootsResult, error)

// ServerRequest is a request the server sent to the client. Its fields are
// the client's own copies. A handler that returned ErrReplyLater answers it
// later, from any goroutine, with Reply or Fail.
type ServerRequest struct {
	// ID is the request's raw JSON id; Method and Params its content.
	ID     codec.RawJSON
	Method string
	Params codec.RawJSON

	l       *link
	ctx     context.Context
	cancel  context.CancelCauseFunc
	replied atomic.Bool
}

// answerTimeout bounds sending the answer to a server request.
const answerTimeout = 30 * time.Second

// Context returns the request's context: cancelled when the server
// cancels the request or the connection ends.
func (r *ServerRequest) Context() context.Context { return r.ctx }

// Reply answers the request with result (marshalled to JSON; nil means
// {}). Only the first of Reply and Fail is sent: later ones return
// ErrAlreadyReplied.
func (r *ServerRequest) Reply(result any) error {
	var raw []byte
	if result != nil {
		var err error
		if raw, err = marshalParams(result); err != nil {
			return r.Fail(fmt.Errorf("client: encoding the answer: %w", err))
		}
	}
	if !r.replied.CompareAndSwap(false, true) {
		return ErrAlreadyReplied
	}
	b := codec.GetBuffer()
	b.B = codec.AppendResult(b.B, r.ID, raw)
	return r.send(b)
}

// Fail answers the request with an error: a *codec.Error keeps its code,
// anything else is an internal error.
func (r *ServerRequest) Fail(err error) error {
	if !r.replied.CompareAndSwap(false, true) {
		return ErrAlreadyReplied
	}
	b := codec.GetBuffer()
	b.B = codec.AppendErrorObject(b.B, r.ID, codec.AsError(err))
	return r.send(b)
}

func (r *ServerRequest) send(b *codec.Buffer) error {
	defer codec.PutBuffer(b)
	r.l.srv.Delete(string(r.ID))
	r.cancel(ErrAlreadyReplied)
	if r.l.dead.Load() {
		return fmt.Errorf("client: answering %s: %w", r.Method, r.l.cause)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), answerTimeout)
	defer cancel()
	return r.l.conn.Send(ctx, b.B)
}

// Message implements Inbound: it routes one message from the server.
func (l *link) Message(msg []byte) {
	if l.dead.Load() {
		return
	}
	m := messages.Get().(*codec.Message)
	defer messages.Put(m)
	if err := codec.Decode(msg, m); err != nil {
		l.kill(fmt.Errorf("%w: malformed message from the server: %w", ErrProtocol, err))
		return
	}
	switch m.Kind {
	case codec.KindResponse:
		l.resolve(m.ID, m.Result, nil)
	case codec.KindError:
		l.resolve(m.ID, nil, m.Error)
	case codec.KindNotification:
		l.notification(m.Method, m.Params)
	case codec.KindRequest:
		l.serverRequest(m)
	}
}

// messages recycles the envelopes Message decodes into (they escape to
// the heap through the decoder).
var messages = sync.Pool{New: func() any { return new(codec.Message) }}

// resolve delivers an answer. Answers to calls with a progress callback
// go through the dispatch goroutine, behind the progress notifications
// that preceded them.
func (l *link) resolve(id, result, errObj []byte) {
	if l.nprogress.Load() > 0 {
		if n, err := strconv.ParseInt(string(id), 10, 64); err == nil {
			if _, ok := l.progress.Load(n); ok {
				id, result, errObj := clone(id), clone(result), clone(errObj)
				l.c.enqueue(func() { l.resolveNow(id, result, errObj) })
				return
			}
		}
	}
	l.resolveNow(id, result, errObj)
}

func (l *link) resolveNow(id, result, errObj []byte) {
	if err := l.tracker.Resolve(id, result, errObj); err != nil {
		// A late answer (its call timed out or was cancelled), a second
		// answer, or an id never sent: nobody waits for it.
		l.c.log.Debug("answer dropped", "id", string(id), "err", err)
	}
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}

// notification routes a notification to the callbacks, on the dispatch
// goroutine.
//
// method and params alias the reader's buffer, which the next read reuses:
// both are copied before anything is handed to the dispatch goroutine.
func (l *link) notification(method string, params []byte) {
	c := l.c
	method, params = strings.Clone(method), clone(params)
	switch method {
	case mcp.NotificationProgress:
		var p mcp.ProgressParams
		if err := codec.Unmarshal(params, &p); err != nil {
			c.log.Debug("bad progress notification", "err", err)
			return
		}
		if l.nprogress.Load() > 0 {
			if n, err := strconv.ParseInt(string(trimQuotes(p.ProgressToken)), 10, 64); err == nil {
				if f, ok := l.progress.Load(n); ok {
					total := 0.0
					if p.Total != nil {
						total = *p.Total
					}
					c.enqueue(func() { f(p.Progress, total, p.Message) })
					return
				}
			}
		}
		c.enqueue(func() {
			if c.opts.OnProgress != nil {
				c.opts.OnProgress(&p)
			}
			c.generic(method, params)
		})
	case mcp.NotificationCancelled:
		var p mcp.CancelledParams
		if err := codec.Unmarshal(params, &p); err == nil {
			if r, ok := l.srv.Load(string(p.RequestID)); ok {
				r.cancel(ErrServerCancelled)
			}
		}
		c.enqueue(func() {
			if c.opts.OnCancelled != nil {
				c.opts.OnCancelled(&p)
			}
			c.generic(method, params)
		})
	default:
		sub := l.subscription(params)
		c.enqueue(func() {
			c.onNotification(method, params)
			if sub != nil {
				sub.deliver(method, params)
			}
		})
	}
}

func trimQuotes(b []byte) []byte {
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' {
		return b[1 : len(b)-1]
	}
	return b
}

// onNotification runs the callbacks of the remaining notifications.
func (c *Client) onNotification(method string, params []byte) {
	o := &c.opts
	switch method {
	case mcp.NotificationToolListChanged:
		c.tools.Store(nil)
		if o.OnToolListChanged != nil {
			o.OnToolListChanged()
		}
	case mcp.NotificationResourceListChanged:
		if o.OnResourceListChanged != nil {
			o.OnResourceListChanged()
		}
	case mcp.NotificationPromptListChanged:
		if o.OnPromptListChanged != nil {
			o.OnPromptListChanged()
		}
	case mcp.NotificationResourceUpdated:
		var p mcp.ResourceUpdatedParams
		if err := codec.Unmarshal(params, &p); err != nil {
			c.log.Debug("bad resources/updated notification", "err", err)
			break
		}
		c.mu.Lock()
		fns := c.subs[p.URI]
		c.mu.Unlock()
		for _, f := range fns {
			f(p.URI)
		}
		if o.OnResourceUpdated != nil {
			o.OnResourceUpdated(p.URI)
		}
	case mcp.NotificationMessage:
		if o.OnLog != nil {
			var p mcp.LoggingMessageParams
			if err := codec.Unmarshal(params, &p); err != nil {
				c.log.Debug("bad log notification", "err", err)
				break
			}
			o.OnLog(&p)
		}
	}
	c.generic(method, params)
}

func (c *Client) generic(method string, params []byte) {
	if c.opts.OnNotification != nil {
		c.opts.OnNotification(method, params)
	}
}

// serverRequest starts serving a request from the server on a goroutine of
// its own.
func (l *link) serverRequest(m *codec.Message) {
	// m aliases the reader's buffer: everything kept is copied.
	r := &ServerRequest{ID: clone(m.ID), Method: strings.Clone(m.Method), Params: clone(m.Params), l: l}
	r.ctx, r.cancel = context.WithCancelCause(l.c.bgCtx)
	l.srv.Store(string(r.ID), r)
	go l.c.serve(l, r)
}

func (c *Client) serve(l *link, r *ServerRequest) {
	<-l.connSet
	res, err := c.answer(r)
	switch {
	case errors.Is(err, ErrReplyLater):
		return
	case err != nil:
		err = r.Fail(err)
	default:
		err = r.Reply(res)
	}
	if err != nil && !errors.Is(err, ErrAlreadyReplied) {
		c.log.Debug("answer to server request not sent", "method", r.Method, "err", err)
	}
}

// answer runs the handler of a server request (or of an input request of
// 2026-07-28) and returns its result.
func (c *Client) answer(r *ServerRequest) (res any, err error) {
	switch r.Method {
	case mcp.MethodPing:
		res = struct{}{}
	case mcp.MethodSamplingCreateMessage:
		if c.opts.OnSampling == nil {
			err = notFound(r.Method)
			break
		}
		var p mcp.CreateMessageParams
		if err = decodeRequest(r, &p); err == nil {
			var out *mcp.CreateMessageResult
			if out, err = c.opts.OnSampling(r.ctx, r, &p); err == nil {
				res, err = nonNil(out)
			}
		}
	case mcp.MethodElicitationCreate:
		if c.opts.OnElicitation == nil {
			err = notFound(r.Method)
			break
		}
		var p mcp.ElicitParams
		if err = decodeRequest(r, &p); err == nil {
			var out *mcp.ElicitResult
			if out, err = c.opts.OnElicitation(r.ctx, r, &p); err == nil {
				res, err = nonNil(out)
			}
		}
	case mcp.MethodRootsList:
		if c.opts.OnRoots == nil {
			err = notFound(r.Method)
			break
		}
		var out *mcp.ListRootsResult
		if out, err = c.opts.OnRoots(r.ctx, r); err == nil {
			if out != nil && out.Roots == nil {
				out.Roots = []mcp.Root{}
			}
			res, err = nonNil(out)
		}
	default:
		err = notFound(r.Method)
	}
	return res, err
}

// nonNil turns a handler's nil result into an error.
func nonNil[T any](v *T) (any, error) {
	if v == nil {
		return nil, errors.New("client: the handler returned no result")
	}
	return v, nil
}

func notFound(method string) error {
	return &codec.Error{Code: codec.CodeMethodNotFound, Message: "method not found: " + method}
}

func decodeRequest(r *ServerRequest, v any) error {
	if len(r.Params) == 0 {
		return &codec.Error{Code: codec.CodeInvalidParams, Message: "invalid params: missing"}
	}
	if err := codec.Unmarshal(r.Params, v); err != nil {
		return &codec.Error{Code: codec.CodeInvalidParams, Message: "invalid params: " + err.Error()}
	}
	return nil
}

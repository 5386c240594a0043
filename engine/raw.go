package engine

import (
	"errors"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/internal/bytesconv"
	"github.com/mcpedge/mcpedge/mcp"
)

// Raw handlers (handlers.RawHandler) answer with their result already
// encoded: a proxy's tools, resources, prompts and completions. The
// engine finds the handler once per request (rawRoute), hands it the
// params as they came, and appends its bytes as the result: no decode,
// no re-encode, no check of its own of the request or the result. In a
// 2026-07-28 request the result is completed as any other (statelessTail:
// resultType, the server's identity, cache hints), once; the handler's
// server owns the input rounds (inputResponses and requestState pass
// through) and decides whether a tools/call becomes a task.

// rawRoute returns the raw handler that serves r, nil when none does; the
// name it serves is left in r.raw.Name. It looks once per request.
func (s *Server) rawRoute(r *request) handlers.RawHandler {
	if r.rawSet {
		return r.rawH
	}
	r.rawSet = true
	if !s.reg.HasRaw() {
		return nil
	}
	var h handlers.RawHandler
	var name string
	switch r.msg.Method {
	case mcp.MethodToolsCall:
		if r.tool.ok || r.tool.scan(r.msg.Params) {
			name = bytesconv.B2S(r.tool.name)
			h, _ = s.reg.RawTool(name)
		}
	case mcp.MethodResourcesRead:
		if uri, ok := routeField(r.msg.Params, "uri"); ok && uri != "" {
			name = uri
			h, _ = s.reg.RawResource(uri)
		}
	case mcp.MethodPromptsGet:
		if n, ok := routeField(r.msg.Params, "name"); ok && n != "" {
			name = n
			h, _ = s.reg.RawPrompt(n)
		}
	case mcp.MethodCompletionComplete:
		if ref, found, err := codec.ObjectField(r.msg.Params, "ref"); err == nil && found {
			typ, _ := routeField(ref, "type")
			key := "name"
			if typ == "ref/resource" {
				key = "uri"
			}
			if n, ok := routeField(ref, key); ok && n != "" {
				name = n
				h, _ = s.reg.RawCompletion(typ, n)
			}
		}
	case mcp.MethodTasksGet, mcp.MethodTasksUpdate, mcp.MethodTasksCancel:
		// Queued here only when the engine holds no such task
		// (foreignTask).
		if r.stateless.on {
			if id, ok := routeField(r.msg.Params, "taskId"); ok && id != "" {
				name = id
				h = s.reg.ForeignTasks()
			}
		}
	}
	r.rawH, r.raw.Name = h, name
	return h
}

// serveRaw runs h for r, appending its result to dst.
func (s *Server) serveRaw(r *request, h handlers.RawHandler, name string, dst []byte) ([]byte, error) {
	r.raw = handlers.RawRequest{Peer: r, Method: r.msg.Method, Name: name, Params: r.msg.Params}
	if r.stateless.on && r.msg.Method == mcp.MethodResourcesRead {
		r.hint, r.hintSet = s.reg.ResourceCacheHint(name), true
	}
	out, err := h(r.ctx, &r.raw, dst)
	r.raw = handlers.RawRequest{Name: name}
	if err != nil {
		if r.stateless.on && r.msg.Method == mcp.MethodResourcesRead {
			// 2026-07-28: a resource not found is invalid params.
			if e, ok := errors.AsType[*codec.Error](err); ok && e.Code == codec.CodeResourceNotFound {
				return dst, &codec.Error{Code: codec.CodeInvalidParams, Message: e.Message, Data: e.Data}
			}
		}
		return dst, err
	}
	if len(out) < len(dst) {
		return dst, errRawResult
	}
	return out, nil
}

// errRawResult answers a raw handler that returned less than it was given.
var errRawResult = &codec.Error{Code: codec.CodeInternalError, Message: "internal error: a raw handler returned no result"}

// foreignTask reports whether a 2026-07-28 tasks/get, tasks/update or
// tasks/cancel names a task this engine does not hold while a raw
// handler serves such tasks (handlers.Registry.SetForeignTasks): the
// request then goes to that handler, on the worker pool.
func (s *Server) foreignTask(m *codec.Message) bool {
	if !s.reg.HasRaw() || s.reg.ForeignTasks() == nil {
		return false
	}
	id, ok := routeField(m.Params, "taskId")
	return ok && id != "" && !s.tasks.has(id)
}

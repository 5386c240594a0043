package handlers

import (
	"context"
	"fmt"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/yosida95/uritemplate/v3"
)

// Raw items. A raw tool, resource, resource template or prompt is served
// by a RawHandler that answers with its result already encoded: the
// engine passes the bytes on as the result, without decoding or
// re-encoding them, and runs none of its own checks of the request (the
// input schema, required prompt arguments) or of the result (the output
// schema). Its descriptor is listed as given. This is what a proxy needs:
// an item served elsewhere, whose server checks the request and encodes
// the answer. Registering raw items is registering data, so misuse is an
// error, never a panic, as for every registration.

// RawRequest is a request served by a RawHandler.
//
// Like CallToolRequest, it is the handler's until it returns, no longer:
// Name and Params alias the message, which the engine reuses once the
// answer is written (see CallToolRequest's Lifetime section).
type RawRequest struct {
	Peer Peer
	// Method is the request's method: tools/call, resources/read,
	// prompts/get, completion/complete, or one of the tasks methods for
	// the handler set with SetForeignTasks.
	Method string
	// Name is what the request names: the tool's or the prompt's name,
	// the resource's URI, for completion/complete the reference's name or
	// URI, for the tasks methods the task id.
	Name string
	// Params are the request's params, raw JSON as the client sent them
	// (nil when absent), inputResponses, requestState, task and _meta
	// included.
	Params []byte
}

// RawHandler serves a request with its result already encoded: it appends
// the result, one JSON object, to dst and returns the extended slice. A
// returned error is answered as a JSON-RPC error: a *codec.Error
// (errors.As) with its code and data, any other with -32603, and for a
// raw tool too (a raw tool's handler encodes its isError results itself).
type RawHandler func(ctx context.Context, req *RawRequest, dst []byte) ([]byte, error)

// RawOptions tune a raw item.
type RawOptions struct {
	// Completions has the handler of a raw prompt or resource template
	// serve completion/complete for it too (req.Method tells which), and
	// the server then advertises completions.
	Completions bool
	// Upstream names the server that serves a raw tool when this one is
	// a gateway (ToolOptions.Upstream: the tool's metrics say which).
	Upstream string
	// Tasks, for a raw tool, has the engine decide whether a 2026-07-28
	// call becomes a task of the tasks extension, as for its own tools
	// (by the descriptor's execution.taskSupport and the client's
	// declaration), and run it so: for a handler whose server does not
	// speak the extension (a gateway in front of an older server).
	// Without it the handler's server decides, and the engine passes its
	// CreateTaskResult on (SetForeignTasks).
	Tasks bool
	// DeferTask, with Tasks, runs a 2026-07-28 call of a tool that
	// supports tasks as a plain request until its handler calls
	// StartTask (ToolOptions.DeferTask).
	DeferTask bool
}

// rawDesc checks that desc is one JSON object and returns the string
// member key of it, decoding desc into v (for the registry's own use:
// task support, listed names).
func rawDesc(desc []byte, key string, v any) (string, error) {
	i := codec.SkipWS(desc, 0)
	if i == len(desc) || desc[i] != '{' {
		return "", fmt.Errorf("descriptor is not a JSON object")
	}
	raw, found, err := codec.ObjectField(desc, key)
	if err != nil {
		return "", fmt.Errorf("descriptor: %w", err)
	}
	if !found {
		return "", fmt.Errorf("descriptor has no %q", key)
	}
	s, err := codec.StringValue(raw)
	if err != nil || len(s) == 0 {
		return "", fmt.Errorf("descriptor's %q is not a non-empty string", key)
	}
	if err := codec.Unmarshal(desc, v); err != nil {
		return "", fmt.Errorf("descriptor: %w", err)
	}
	return string(s), nil
}

// AddRawTool registers a tool served by h, replacing (in place) a tool of
// the same name. desc is its descriptor, the JSON object tools/list
// shows, listed as given; its name is desc's "name", and its task support
// (execution.taskSupport) applies as for any tool. The arguments are not
// validated against its input schema: h's server does that. A desc that
// is not a JSON object with a non-empty name, or a nil h, yields an error
// wrapping ErrInvalidTool. Safe for concurrent use.
//
// Of opts (at most one), Upstream, Tasks and DeferTask apply to a tool.
func (r *Registry) AddRawTool(desc []byte, h RawHandler, opts ...RawOptions) error {
	ro, err := oneOption(opts)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidTool, err)
	}
	var t mcp.Tool
	name, err := rawDesc(desc, "name", &t)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidTool, err)
	}
	if h == nil {
		return fmt.Errorf("%w %q: nil handler", ErrInvalidTool, name)
	}
	t.Name = name
	to := ToolOptions{Upstream: ro.Upstream}
	if t.Execution != nil {
		switch t.Execution.TaskSupport {
		case "", mcp.TaskForbidden, mcp.TaskOptional, mcp.TaskRequired:
			to.TaskSupport = t.Execution.TaskSupport
		default:
			return fmt.Errorf("%w %q: unknown task support %q", ErrInvalidTool, name, t.Execution.TaskSupport)
		}
	}
	hp, err := mcp.ParseHeaderParams(t.InputSchema)
	if err != nil {
		return fmt.Errorf("%w %q: input schema: %w", ErrInvalidTool, name, err)
	}
	to.DeferTask = ro.Tasks && ro.DeferTask
	e := &toolEntry{tool: &t, raw: h, opts: to, headers: hp, rawTasks: ro.Tasks}
	enc := append([]byte(nil), desc...)
	r.update(ListTools, func(s *snapshot) bool {
		s.tools = s.tools.with(name, enc, e)
		s.raw = true
		return true
	})
	return nil
}

// AddRawResource registers a resource read by h, replacing (in place) a
// resource of the same URI; desc is the resource as resources/list shows
// it, with its "uri". Errors wrap ErrInvalidResource. Safe for concurrent
// use.
func (r *Registry) AddRawResource(desc []byte, h RawHandler) error {
	var res mcp.Resource
	uri, err := rawDesc(desc, "uri", &res)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidResource, err)
	}
	if h == nil {
		return fmt.Errorf("%w %q: nil handler", ErrInvalidResource, uri)
	}
	res.URI = uri
	e := &resourceEntry{res: &res, raw: h}
	enc := append([]byte(nil), desc...)
	r.update(ListResources, func(s *snapshot) bool {
		s.resources = s.resources.with(uri, enc, e)
		s.raw = true
		return true
	})
	return nil
}

// AddRawResourceTemplate registers a resource template (RFC 6570) whose
// URIs h reads, replacing (in place) a template with the same
// uriTemplate; desc is the template as resources/templates/list shows it.
// With o.Completions, h also completes its variables. Errors wrap
// ErrInvalidTemplate. Safe for concurrent use.
func (r *Registry) AddRawResourceTemplate(desc []byte, h RawHandler, o RawOptions) error {
	var t mcp.ResourceTemplate
	tmpl, err := rawDesc(desc, "uriTemplate", &t)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidTemplate, err)
	}
	if h == nil {
		return fmt.Errorf("%w %q: nil handler", ErrInvalidTemplate, tmpl)
	}
	ut, err := uritemplate.New(tmpl)
	if err != nil {
		return fmt.Errorf("%w %q: %w", ErrInvalidTemplate, tmpl, err)
	}
	t.URITemplate = tmpl
	e := &templateEntry{tmpl: &t, t: ut, re: ut.Regexp(), raw: h, completes: o.Completions}
	enc := append([]byte(nil), desc...)
	r.update(ListResources, func(s *snapshot) bool {
		s.templates = s.templates.with(tmpl, enc, e)
		s.raw = true
		return true
	})
	return nil
}

// AddRawPrompt registers a prompt served by h, replacing (in place) a
// prompt of the same name; desc is the prompt as prompts/list shows it.
// Its required arguments are not checked: h's server does that. With
// o.Completions, h also completes its arguments. Errors wrap
// ErrInvalidPrompt. Safe for concurrent use.
func (r *Registry) AddRawPrompt(desc []byte, h RawHandler, o RawOptions) error {
	var p mcp.Prompt
	name, err := rawDesc(desc, "name", &p)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidPrompt, err)
	}
	if h == nil {
		return fmt.Errorf("%w %q: nil handler", ErrInvalidPrompt, name)
	}
	p.Name = name
	e := &promptEntry{prompt: &p, raw: h, completes: o.Completions}
	enc := append([]byte(nil), desc...)
	r.update(ListPrompts, func(s *snapshot) bool {
		s.prompts = s.prompts.with(name, enc, e)
		s.raw = true
		return true
	})
	return nil
}

// SetForeignTasks sets h to serve tasks/get, tasks/update and tasks/cancel
// of 2026-07-28 for the task ids the server does not hold itself (tasks a
// raw tool's server created, whose CreateTaskResult its handler passed
// on); nil removes it. Without one, such ids are unknown tasks. Safe for
// concurrent use.
func (r *Registry) SetForeignTasks(h RawHandler) {
	r.update(0, func(s *snapshot) bool {
		s.foreignTasks = h
		s.raw = s.raw || h != nil
		return true
	})
}

// ForeignTasks returns the handler SetForeignTasks set, or nil.
// Lock-free.
func (r *Registry) ForeignTasks() RawHandler { return r.snap.Load().foreignTasks }

// HasRaw reports whether a raw item or a foreign tasks handler was ever
// registered: until then, the engine looks for none. Lock-free.
func (r *Registry) HasRaw() bool { return r.snap.Load().raw }

// RawTool returns the handler of the raw tool name. Lock-free and
// allocation-free.
func (r *Registry) RawTool(name string) (RawHandler, bool) {
	e, ok := r.snap.Load().tools.get(name)
	if !ok || e.v.raw == nil {
		return nil, false
	}
	return e.v.raw, true
}

// RawToolTasks reports whether the engine decides whether a 2026-07-28
// call of the raw tool name becomes a task (RawOptions.Tasks).
// Lock-free.
func (r *Registry) RawToolTasks(name string) bool {
	e, ok := r.snap.Load().tools.get(name)
	return ok && e.v.raw != nil && e.v.rawTasks
}

// CallRawTool calls the raw tool of req's name with req's params as
// they are, and returns its result bytes (nil, false when the tool is
// not raw): a task of the engine's running a raw tool for a 2026-07-28
// request keeps what the handler answered (an InputRequiredResult among
// others) and passes its params on whole (inputResponses, requestState).
func (r *Registry) CallRawTool(ctx context.Context, req *RawRequest) ([]byte, bool, error) {
	e, ok := r.snap.Load().tools.get(req.Name)
	if !ok || e.v.raw == nil {
		return nil, false, nil
	}
	out, err := e.v.raw(ctx, req, nil)
	return out, true, err
}

// RawPrompt returns the handler of the raw prompt name. Lock-free.
func (r *Registry) RawPrompt(name string) (RawHandler, bool) {
	e, ok := r.snap.Load().prompts.get(name)
	if !ok || e.v.raw == nil {
		return nil, false
	}
	return e.v.raw, true
}

// RawResource returns the handler reading uri when it is raw: the
// resource registered under uri, else the first template matching it, as
// ReadResource chooses. Lock-free.
func (r *Registry) RawResource(uri string) (RawHandler, bool) {
	s := r.snap.Load()
	if e, ok := s.resources.get(uri); ok {
		return e.v.raw, e.v.raw != nil
	}
	for _, it := range s.templates.items {
		if e := it.v; e.re.MatchString(uri) && e.t.Match(uri) != nil {
			return e.raw, e.raw != nil
		}
	}
	return nil, false
}

// RawCompletion returns the handler completing the reference of type ref
// ("ref/prompt" or "ref/resource") named name when it is that of a raw
// prompt or template registered with RawOptions.Completions. Lock-free.
func (r *Registry) RawCompletion(ref, name string) (RawHandler, bool) {
	s := r.snap.Load()
	switch ref {
	case refPrompt:
		if e, ok := s.prompts.get(name); ok && e.v.completes {
			return e.v.raw, true
		}
	case refResource:
		if e, ok := s.templates.get(name); ok && e.v.completes {
			return e.v.raw, true
		}
	}
	return nil, false
}

// hasRawCompletions reports whether a raw item completes.
func (s *snapshot) hasRawCompletions() bool {
	for _, it := range s.prompts.items {
		if it.v.completes {
			return true
		}
	}
	for _, it := range s.templates.items {
		if it.v.completes {
			return true
		}
	}
	return false
}

// callRawTool serves a raw tool through the typed API (Registry.CallTool,
// which the engine's tasks use): the params are encoded from req, and the
// result decoded.
func callRawTool(ctx context.Context, h RawHandler, req *CallToolRequest) (*mcp.CallToolResult, error) {
	p := *req.Params
	p.Task = nil
	params, err := codec.Marshal(&p)
	if err != nil {
		return nil, fmt.Errorf("handlers: tool %s: encoding params: %w", p.Name, err)
	}
	raw := RawRequest{Peer: req.Peer, Method: mcp.MethodToolsCall, Name: p.Name, Params: params}
	b, err := h(ctx, &raw, nil)
	if err != nil {
		return nil, err
	}
	res := new(mcp.CallToolResult)
	if err := codec.Unmarshal(b, res); err != nil {
		return nil, &codec.Error{Code: codec.CodeInternalError, Message: "tool " + p.Name + ": result: " + err.Error()}
	}
	return res, nil
}

// rawTyped serves a raw resource, prompt or completion through the typed
// API: params is the request's params encoded, and the result is decoded
// into res.
func rawTyped(ctx context.Context, h RawHandler, peer Peer, method, name string, params, res any) error {
	b, err := codec.Marshal(params)
	if err != nil {
		return fmt.Errorf("handlers: %s %s: encoding params: %w", method, name, err)
	}
	raw := RawRequest{Peer: peer, Method: method, Name: name, Params: b}
	out, err := h(ctx, &raw, nil)
	if err != nil {
		return err
	}
	if err := codec.Unmarshal(out, res); err != nil {
		return &codec.Error{Code: codec.CodeInternalError, Message: method + " " + name + ": result: " + err.Error()}
	}
	return nil
}

package handlers

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"unsafe"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
)

// defaultInputSchema is the input schema of a tool registered without one:
// any object.
const defaultInputSchema = `{"type":"object"}`

// toolEntry is a registered tool.
type toolEntry struct {
	tool *mcp.Tool
	h    ToolHandler
	raw  RawHandler // a raw tool (AddRawTool): h, in and out are nil
	in   *schema
	out  *schema // nil without an output schema
	opts ToolOptions
	// headers are the arguments mirrored into Mcp-Param-* headers
	// (x-mcp-header), nil when none.
	headers []HeaderParam
	// rawTasks: the engine decides a raw tool's 2026-07-28 tasks
	// (RawOptions.Tasks).
	rawTasks bool
}

// ToolOptions tune how a tool is run. The zero value suits any handler;
// fields may be added (cache hints, for one), so set them by name.
type ToolOptions struct {
	// NonBlocking declares that the handler only computes: it returns in
	// microseconds, never waits on I/O, locks held long, or its client
	// (no CreateMessage, Elicit or ListRoots). The engine may then run it
	// on the transport's event loop instead of handing it to the worker
	// pool, which saves a goroutine hand-off and a separate write per call.
	NonBlocking bool

	// TaskSupport, when set, is the tool's execution.taskSupport
	// (mcp.TaskForbidden, mcp.TaskOptional or mcp.TaskRequired): whether
	// clients may, or must, call it as a task. It is written into the
	// descriptor served by tools/list; a tool whose Execution already says
	// otherwise is an error. Empty leaves the descriptor as it is (no
	// execution means forbidden).
	TaskSupport string

	// DeferTask, for a tool with TaskSupport optional or required called
	// in a 2026-07-28 request whose client declared the tasks extension,
	// has the engine not make the call a task at once: the handler runs
	// as a plain request, whose inputs are gathered in multi round-trip
	// rounds (InputRequiredResult), until it calls StartTask; the call is
	// then answered with a CreateTaskResult and the handler runs on as
	// the task. A handler that returns without calling StartTask is
	// answered with its result.
	DeferTask bool

	// RequiredScopes are the OAuth scopes a caller must hold to call the
	// tool. The registry only stores them: the engine's authorization
	// (engine.Options.Authorize, its AuthorizeTool) enforces them before
	// the tool runs, reading them with Registry.ToolOptionsOf.
	RequiredScopes []string

	// Upstream names the server that serves the tool when this one is a
	// gateway in front of others (package gateway sets it); empty for a
	// tool served here. The registry only stores it: the metrics label the
	// tool's series with it (admin: mcpedge_tool_calls_total{upstream}).
	Upstream string
}

// ToolOptionsOf returns the options a tool was registered with. Their
// slices are the Registry's own: they must not be modified. Lock-free.
func (r *Registry) ToolOptionsOf(name string) (ToolOptions, bool) {
	e, ok := r.snap.Load().tools.get(name)
	if !ok {
		return ToolOptions{}, false
	}
	return e.v.opts, true
}

// oneOption returns the single options value of a variadic options
// argument: the zero value when none was given.
func oneOption[O any](opts []O) (O, error) {
	var o O
	switch len(opts) {
	case 0:
		return o, nil
	case 1:
		return opts[0], nil
	}
	return o, fmt.Errorf("%d options values given, want at most one", len(opts))
}

// AddTool registers a tool, replacing (in place, keeping its list position)
// a tool of the same name. opts, at most one value, tune how it is run. A
// tool without an InputSchema accepts any object: its schema is
// {"type":"object"}. InputSchema and OutputSchema are compiled once, as
// JSON Schema draft 2020-12 unless their $schema names another draft;
// $defs and local $ref work, references to other documents do not. They
// are served to clients as given, less insignificant whitespace.
//
// An empty name, a nil handler, a schema that is not a valid JSON Schema
// object, an invalid x-mcp-header annotation in the input schema (see
// ToolHeaderParams), or invalid options yield an error wrapping ErrInvalidTool, and
// nothing is registered. The Registry keeps a copy of *t; slices t refers
// to must not be modified afterwards. Safe for concurrent use.
func (r *Registry) AddTool(t *mcp.Tool, h ToolHandler, opts ...ToolOptions) error {
	if t == nil || t.Name == "" {
		return fmt.Errorf("%w: empty name", ErrInvalidTool)
	}
	o, err := oneOption(opts)
	if err != nil {
		return fmt.Errorf("%w %q: %w", ErrInvalidTool, t.Name, err)
	}
	return r.AddToolWith(t, h, o)
}

// AddToolWith is AddTool with exactly one options value.
func (r *Registry) AddToolWith(t *mcp.Tool, h ToolHandler, o ToolOptions) error {
	if t == nil || t.Name == "" {
		return fmt.Errorf("%w: empty name", ErrInvalidTool)
	}
	if h == nil {
		return fmt.Errorf("%w %q: nil handler", ErrInvalidTool, t.Name)
	}
	tool := *t
	if o.TaskSupport != "" {
		switch o.TaskSupport {
		case mcp.TaskForbidden, mcp.TaskOptional, mcp.TaskRequired:
		default:
			return fmt.Errorf("%w %q: unknown task support %q", ErrInvalidTool, t.Name, o.TaskSupport)
		}
		if ex := tool.Execution; ex != nil && ex.TaskSupport != "" && ex.TaskSupport != o.TaskSupport {
			return fmt.Errorf("%w %q: task support %q in the options, %q in the tool's execution", ErrInvalidTool, t.Name, o.TaskSupport, ex.TaskSupport)
		}
		ex := mcp.ToolExecution{}
		if tool.Execution != nil {
			ex = *tool.Execution
		}
		ex.TaskSupport = o.TaskSupport
		tool.Execution = &ex
	}
	o.RequiredScopes = slices.Clone(o.RequiredScopes)
	raw := tool.InputSchema
	if len(raw) == 0 {
		raw = codec.RawJSON(defaultInputSchema)
	}
	in, err := compileSchema(raw)
	if err != nil {
		return fmt.Errorf("%w %q: input schema: %w", ErrInvalidTool, t.Name, err)
	}
	tool.InputSchema = in.raw
	hp, err := mcp.ParseHeaderParams(in.raw)
	if err != nil {
		return fmt.Errorf("%w %q: input schema: %w", ErrInvalidTool, t.Name, err)
	}
	var out *schema
	if len(tool.OutputSchema) > 0 {
		if out, err = compileSchema(tool.OutputSchema); err != nil {
			return fmt.Errorf("%w %q: output schema: %w", ErrInvalidTool, t.Name, err)
		}
		tool.OutputSchema = out.raw
	}
	tool.Meta = slices.Clone(tool.Meta)
	enc, err := codec.Marshal(&tool)
	if err != nil {
		return fmt.Errorf("%w %q: %w", ErrInvalidTool, t.Name, err)
	}
	e := &toolEntry{tool: &tool, h: h, in: in, out: out, opts: o, headers: hp}
	r.update(ListTools, func(s *snapshot) bool {
		s.tools = s.tools.with(tool.Name, enc, e)
		return true
	})
	return nil
}

// RemoveTools removes the named tools and returns how many it removed. Safe
// for concurrent use.
func (r *Registry) RemoveTools(names ...string) int {
	var n int
	r.update(ListTools, func(s *snapshot) bool {
		s.tools, n = s.tools.without(names)
		return n > 0
	})
	return n
}

// EachTool calls fn with the name and options of every registered tool,
// in registration order, as one snapshot of the Registry holds them (a
// change during the walk is not seen). fn must not modify the options'
// slices. Lock-free and safe for concurrent use.
func (r *Registry) EachTool(fn func(name string, o ToolOptions)) {
	for _, e := range r.snap.Load().tools.items {
		fn(e.v.tool.Name, e.v.opts)
	}
}

// Tool returns the registered tool of that name. The *mcp.Tool is the
// Registry's own: it must not be modified. Lock-free and safe for
// concurrent use.
func (r *Registry) Tool(name string) (*mcp.Tool, bool) {
	e, ok := r.snap.Load().tools.get(name)
	if !ok {
		return nil, false
	}
	return e.v.tool, true
}

// CallTool serves tools/call.
//
// An unknown tool is a *codec.Error with code -32602. Absent or null
// arguments are {} (req.Params.Arguments is set so). Arguments that fail the
// input schema are not a protocol error (MCP 2025-11-25, SEP-1303): the
// answer is a result with isError set whose text describes the failure, so
// the model can correct its call; the handler does not run.
//
// A handler's error becomes a result with isError set whose text is the
// error's message, as in the go-sdk: the model sees what went wrong. Two
// kinds are returned as is, to be answered as JSON-RPC errors: one that is,
// or wraps, a *codec.Error (errors.As), and the error of ctx once ctx has
// ended (errors.Is its Err or its Cause): the request was cancelled, the
// tool did not fail. When the tool has an output
// schema and the result is not an error result, structuredContent must be
// present and valid, else CallTool returns a *codec.Error with code -32603.
// A nil result is an empty one. A handler panic is not recovered. Safe for
// concurrent use.
func (r *Registry) CallTool(ctx context.Context, req *CallToolRequest) (*mcp.CallToolResult, error) {
	if req == nil || req.Params == nil {
		return nil, &codec.Error{Code: codec.CodeInvalidParams, Message: "missing params"}
	}
	p := req.Params
	te, ok := r.snap.Load().tools.get(p.Name)
	if !ok {
		return nil, notFound(ListNameTools, p.Name)
	}
	e := te.v
	if e.raw != nil {
		return callRawTool(ctx, e.raw, req)
	}
	if i := codec.SkipWS(p.Arguments, 0); i == len(p.Arguments) || string(p.Arguments[i:]) == "null" {
		p.Arguments = codec.RawJSON("{}")
	}
	if err := e.in.validate(p.Arguments); err != nil {
		return mcp.ErrorResult("invalid arguments for tool " + p.Name + ": " + describe(err)), nil
	}
	res, err := e.h(ctx, req)
	if err != nil {
		return toolError(ctx, err)
	}
	if res == nil {
		res = &mcp.CallToolResult{Content: []mcp.Content{}}
	}
	if e.out != nil && !res.IsError {
		if len(res.StructuredContent) == 0 {
			return nil, &codec.Error{Code: codec.CodeInternalError,
				Message: "tool " + p.Name + " has an output schema but returned no structured content"}
		}
		if err := e.out.validate(res.StructuredContent); err != nil {
			return nil, &codec.Error{Code: codec.CodeInternalError,
				Message: "tool " + p.Name + " returned structured content that does not match its output schema: " + describe(err)}
		}
	}
	return res, nil
}

// toolError turns a tool handler's error into its answer: a *codec.Error,
// or the error of the request's context once it has ended, stays an error;
// anything else is a result with isError set.
func toolError(ctx context.Context, err error) (*mcp.CallToolResult, error) {
	var ce *codec.Error
	if errors.As(err, &ce) {
		return nil, err
	}
	if cerr := ctx.Err(); cerr != nil && (errors.Is(err, cerr) || errors.Is(err, context.Cause(ctx))) {
		return nil, err
	}
	return mcp.ErrorResult(err.Error()), nil
}

// ToolHandlerFor serves tools/call for a tool registered with AddTool[In,
// Out]: in holds the decoded arguments. See AddTool for how its result,
// out and error are answered.
type ToolHandlerFor[In, Out any] func(ctx context.Context, req *CallToolRequest, in In) (*mcp.CallToolResult, Out, error)

// AddTool registers a tool whose arguments decode into In and whose
// structured result is Out.
//
// When t.InputSchema is empty it is inferred from In with
// github.com/google/jsonschema-go; likewise t.OutputSchema from Out when Out
// encodes as a JSON object (a struct, a pointer to one, a map with string
// keys), since MCP output schemas describe objects. In must be such a type.
//
// Arguments are validated against the input schema, then decoded into In
// with codec.UnmarshalNoCopy: In's strings alias the message, valid until h
// returns (see CallToolRequest's Lifetime section); h copies what it keeps. Arguments that fail either step never reach h: the
// answer is a result with isError set describing the failure (MCP
// 2025-11-25, SEP-1303), so the model can correct its call.
//
// When h returns a nil result, the result is built from out: one text
// content holding its JSON, and the same JSON as structuredContent when it
// is an object. When h returns a result without structuredContent and the
// tool has an output schema, structuredContent is set from out. An error
// from h is answered as Registry.CallTool says: a result with isError set,
// unless it is a *codec.Error.
//
// opts, at most one value, are the tool's options, as for
// Registry.AddTool. Misuse yields an error wrapping ErrInvalidTool and
// registers nothing: a nil tool or handler, an In that does not encode as
// an object, a schema that cannot be inferred, or anything Registry.AddTool
// rejects. Safe for concurrent use.
func AddTool[In, Out any](r *Registry, t *mcp.Tool, h ToolHandlerFor[In, Out], opts ...ToolOptions) error {
	if t == nil || t.Name == "" {
		return fmt.Errorf("%w: empty name", ErrInvalidTool)
	}
	if h == nil {
		return fmt.Errorf("%w %q: nil handler", ErrInvalidTool, t.Name)
	}
	o, err := oneOption(opts)
	if err != nil {
		return fmt.Errorf("%w %q: %w", ErrInvalidTool, t.Name, err)
	}
	if inT := reflect.TypeFor[In](); !objectKind(inT) {
		return fmt.Errorf("%w %q: input type %v is not a struct, struct pointer or map with string keys", ErrInvalidTool, t.Name, inT)
	}
	tool := *t
	if len(tool.InputSchema) == 0 {
		if tool.InputSchema, err = inferSchema(t.Name, "input", reflect.TypeFor[In]()); err != nil {
			return err
		}
	}
	if outT := reflect.TypeFor[Out](); len(tool.OutputSchema) == 0 && objectKind(outT) {
		if tool.OutputSchema, err = inferSchema(t.Name, "output", outT); err != nil {
			return err
		}
	}
	fillStructured := len(tool.OutputSchema) > 0
	name := tool.Name
	// Decoded arguments are pooled: a flat In decodes without allocating,
	// its strings aliasing the message (see CallToolRequest's Lifetime).
	ins := sync.Pool{New: func() any { return new(In) }}
	flat := newFlatDecoder(reflect.TypeFor[In]()) // nil unless In is a flat struct
	return r.AddToolWith(&tool, func(ctx context.Context, req *CallToolRequest) (*mcp.CallToolResult, error) {
		in := ins.Get().(*In)
		defer func() {
			var zero In
			*in = zero
			ins.Put(in)
		}()
		if flat == nil || !flat.decode(req.Params.Arguments, unsafe.Pointer(in)) {
			var zero In
			*in = zero
			if err := codec.UnmarshalNoCopy(req.Params.Arguments, in); err != nil {
				return mcp.ErrorResult("invalid arguments for tool " + name + ": " + err.Error()), nil
			}
		}
		res, out, err := h(ctx, req, *in)
		if err != nil {
			return nil, err
		}
		if res != nil && (res.IsError || len(res.StructuredContent) > 0 || !fillStructured) {
			return res, nil
		}
		b, err := codec.Marshal(out)
		if err != nil {
			return nil, fmt.Errorf("handlers: tool %s: encoding result: %w", name, err)
		}
		isObject := len(b) > 0 && b[0] == '{'
		if res != nil {
			if isObject {
				res.StructuredContent = b
			}
			return res, nil
		}
		res = &mcp.CallToolResult{Content: []mcp.Content{}}
		if string(b) != "null" {
			res.Content = append(res.Content, mcp.Content{Type: mcp.ContentText, Text: string(b)})
		}
		if isObject {
			res.StructuredContent = b
		}
		return res, nil
	}, o)
}

// objectKind reports whether values of t encode as JSON objects.
func objectKind(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Struct:
		return true
	case reflect.Pointer:
		return t.Elem().Kind() == reflect.Struct
	case reflect.Map:
		return t.Key().Kind() == reflect.String
	}
	return false
}

// inferSchema returns the JSON Schema of t (of the struct a pointer type
// points to, so that the schema's type is "object").
func inferSchema(tool, what string, t reflect.Type) (codec.RawJSON, error) {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	s, err := jsonschema.ForType(t, nil)
	if err != nil {
		return nil, fmt.Errorf("%w %q: inferring %s schema from %v: %w", ErrInvalidTool, tool, what, t, err)
	}
	b, err := codec.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("%w %q: encoding %s schema: %w", ErrInvalidTool, tool, what, err)
	}
	return b, nil
}

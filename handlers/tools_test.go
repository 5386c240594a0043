package handlers

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func echoTool(ctx context.Context, req *CallToolRequest) (*mcp.CallToolResult, error) {
	return mcp.TextResult(string(req.Params.Arguments)), nil
}

// requireCodeErr asserts err is a *codec.Error with code and a message
// containing msg.
func requireCodeErr(t *testing.T, err error, code int, msg string) *codec.Error {
	t.Helper()
	var ce *codec.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, code, ce.Code)
	assert.Contains(t, ce.Message, msg)
	return ce
}

func toolsPage(t *testing.T, r *Registry, cursor string) mcp.ListToolsResult {
	t.Helper()
	b, err := r.ListPage(ListNameTools, cursor)
	require.NoError(t, err)
	var res mcp.ListToolsResult
	require.NoError(t, codec.Unmarshal(b, &res), string(b))
	return res
}

func TestAddToolErrors(t *testing.T) {
	tests := []struct {
		name string
		tool *mcp.Tool
		h    ToolHandler
	}{
		{"nil tool", nil, echoTool},
		{"empty name", &mcp.Tool{}, echoTool},
		{"nil handler", &mcp.Tool{Name: "t"}, nil},
		{"input not JSON", &mcp.Tool{Name: "t", InputSchema: codec.RawJSON(`{"type":`)}, echoTool},
		{"input not an object", &mcp.Tool{Name: "t", InputSchema: codec.RawJSON(`true`)}, echoTool},
		{"input bad keyword value", &mcp.Tool{Name: "t", InputSchema: codec.RawJSON(`{"type":5}`)}, echoTool},
		{"input bad pattern", &mcp.Tool{Name: "t", InputSchema: codec.RawJSON(`{"type":"string","pattern":"("}`)}, echoTool},
		{"input external ref", &mcp.Tool{Name: "t", InputSchema: codec.RawJSON(`{"$ref":"https://example.com/s.json"}`)}, echoTool},
		{"input dangling local ref", &mcp.Tool{Name: "t", InputSchema: codec.RawJSON(`{"$ref":"#/$defs/missing"}`)}, echoTool},
		{"input draft-07 tuple under 2020-12", &mcp.Tool{Name: "t", InputSchema: codec.RawJSON(`{"type":"object","properties":{"p":{"items":[{"type":"string"}]}}}`)}, echoTool},
		{"output bad", &mcp.Tool{Name: "t", OutputSchema: codec.RawJSON(`{"type":"nope"}`)}, echoTool},
		{"bad meta", &mcp.Tool{Name: "t", Meta: mcp.Meta(`{`)}, echoTool},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRegistry(Options{})
			err := r.AddTool(tt.tool, tt.h)
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInvalidTool)
			assert.Equal(t, 0, r.Len(ListNameTools))
		})
	}
}

func TestAddToolDefaultSchemaAndCopy(t *testing.T) {
	r := NewRegistry(Options{})
	in := &mcp.Tool{Name: "t", Description: "first"}
	require.NoError(t, r.AddTool(in, echoTool))
	in.Description = "changed after registration"

	got, ok := r.Tool("t")
	require.True(t, ok)
	assert.Equal(t, "first", got.Description)
	assert.Equal(t, defaultInputSchema, string(got.InputSchema))
	page := toolsPage(t, r, "")
	require.Len(t, page.Tools, 1)
	assert.Equal(t, `{"type":"object"}`, string(page.Tools[0].InputSchema))
	assert.Equal(t, "first", page.Tools[0].Description)

	_, ok = r.Tool("missing")
	assert.False(t, ok)
}

func TestSchemaPassthrough(t *testing.T) {
	const in = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"pos":{"type":"integer","minimum":1}},"properties":{"n":{"$ref":"#/$defs/pos"},"s":{"type":"string","description":"a \"quoted\" text\\n with spaces, <html> & \u00e9 é \u2028 \ud83d\ude00"}},"required":["n"],"additionalProperties":false}`
	const out = `{"type":"object","properties":{"sum":{"type":"number"}},"required":["sum"],"additionalProperties":false}`
	pretty := "{\n  \"type\": \"object\",\n  \"properties\": {\"a b\": {\"const\": \"x  y\"}}\n}"

	r := NewRegistry(Options{})
	require.NoError(t, r.AddTool(&mcp.Tool{Name: "exact", InputSchema: codec.RawJSON(in), OutputSchema: codec.RawJSON(out)}, echoTool))
	require.NoError(t, r.AddTool(&mcp.Tool{Name: "pretty", InputSchema: codec.RawJSON(pretty)}, echoTool))

	b, err := r.ListPage(ListNameTools, "")
	require.NoError(t, err)
	page := string(b)
	assert.Contains(t, page, `"inputSchema":`+in)
	assert.Contains(t, page, `"outputSchema":`+out)
	assert.Contains(t, page, `"inputSchema":{"type":"object","properties":{"a b":{"const":"x  y"}}}`)
	assert.NotContains(t, page, "\n")

	tool, ok := r.Tool("exact")
	require.True(t, ok)
	assert.Equal(t, in, string(tool.InputSchema))
	assert.Equal(t, out, string(tool.OutputSchema))
}

func TestCallTool(t *testing.T) {
	const sumSchema = `{"type":"object","$defs":{"num":{"type":"number"}},"properties":{"a":{"$ref":"#/$defs/num"},"b":{"$ref":"#/$defs/num"}},"required":["a","b"],"additionalProperties":false}`
	const outSchema = `{"type":"object","properties":{"sum":{"type":"number"}},"required":["sum"]}`
	const draft7 = `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"pair":{"type":"array","items":[{"type":"string"},{"type":"number"}]}}}`

	structured := func(sc string, isErr bool) ToolHandler {
		return func(ctx context.Context, req *CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{}, StructuredContent: codec.RawJSON(sc), IsError: isErr}, nil
		}
	}
	errBoom := errors.New("boom")

	tests := []struct {
		name    string
		tool    mcp.Tool
		h       ToolHandler
		call    string // tool called; tool.Name when empty
		args    string
		wantErr int    // JSON-RPC code, 0 for none
		errMsg  string // in the error message
		isError bool   // result is a tool error
		text    string // in the first content's text
		ran     bool   // handler ran
	}{
		{name: "unknown tool", tool: mcp.Tool{Name: "echo"}, h: echoTool, call: "nope", wantErr: codec.CodeInvalidParams, errMsg: "unknown tool: nope"},
		{name: "absent arguments are {}", tool: mcp.Tool{Name: "echo"}, h: echoTool, args: "", text: "{}", ran: true},
		{name: "null arguments are {}", tool: mcp.Tool{Name: "echo"}, h: echoTool, args: "null", text: "{}", ran: true},
		{name: "default schema rejects array", tool: mcp.Tool{Name: "echo"}, h: echoTool, args: "[1]", isError: true, text: "want object"},
		{name: "valid arguments", tool: mcp.Tool{Name: "sum", InputSchema: codec.RawJSON(sumSchema)}, h: echoTool, args: `{"a":1,"b":2.5}`, text: `{"a":1,"b":2.5}`, ran: true},
		{name: "wrong type", tool: mcp.Tool{Name: "sum", InputSchema: codec.RawJSON(sumSchema)}, h: echoTool, args: `{"a":"x","b":2}`, isError: true, text: "at '/a'"},
		{name: "missing required", tool: mcp.Tool{Name: "sum", InputSchema: codec.RawJSON(sumSchema)}, h: echoTool, args: `{"a":1}`, isError: true, text: "missing property 'b'"},
		{name: "additional property", tool: mcp.Tool{Name: "sum", InputSchema: codec.RawJSON(sumSchema)}, h: echoTool, args: `{"a":1,"b":2,"c":3}`, isError: true, text: "additional properties 'c' not allowed"},
		{name: "absent arguments fail required", tool: mcp.Tool{Name: "sum", InputSchema: codec.RawJSON(sumSchema)}, h: echoTool, isError: true, text: "missing properties"},
		{name: "draft-07 tuple valid", tool: mcp.Tool{Name: "d7", InputSchema: codec.RawJSON(draft7)}, h: echoTool, args: `{"pair":["x",1]}`, text: `{"pair":["x",1]}`, ran: true},
		{name: "draft-07 tuple invalid", tool: mcp.Tool{Name: "d7", InputSchema: codec.RawJSON(draft7)}, h: echoTool, args: `{"pair":[1,"x"]}`, isError: true, text: "at '/pair/0'"},
		{name: "handler error is a tool error", tool: mcp.Tool{Name: "e"}, h: func(context.Context, *CallToolRequest) (*mcp.CallToolResult, error) { return nil, errBoom }, isError: true, text: "boom", ran: true},
		{name: "wrapped handler error is a tool error", tool: mcp.Tool{Name: "e"}, h: func(context.Context, *CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, fmt.Errorf("fetching: %w", errBoom)
		}, isError: true, text: "fetching: boom", ran: true},
		{name: "wrapped codec error keeps code", tool: mcp.Tool{Name: "e"}, h: func(context.Context, *CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, fmt.Errorf("auth: %w", &codec.Error{Code: codec.CodeInvalidRequest, Message: "not allowed"})
		}, wantErr: codec.CodeInvalidRequest, errMsg: "not allowed", ran: true},
		{name: "handler codec error keeps code", tool: mcp.Tool{Name: "e"}, h: func(context.Context, *CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, &codec.Error{Code: codec.CodeURLElicitationNeeded, Message: "go there"}
		}, wantErr: codec.CodeURLElicitationNeeded, errMsg: "go there", ran: true},
		{name: "output valid", tool: mcp.Tool{Name: "o", OutputSchema: codec.RawJSON(outSchema)}, h: structured(`{"sum":3}`, false), ran: true},
		{name: "output missing", tool: mcp.Tool{Name: "o", OutputSchema: codec.RawJSON(outSchema)}, h: echoTool, wantErr: codec.CodeInternalError, errMsg: "no structured content", ran: true},
		{name: "output invalid", tool: mcp.Tool{Name: "o", OutputSchema: codec.RawJSON(outSchema)}, h: structured(`{"sum":"three"}`, false), wantErr: codec.CodeInternalError, errMsg: "does not match its output schema: at '/sum'", ran: true},
		{name: "output unchecked on error result", tool: mcp.Tool{Name: "o", OutputSchema: codec.RawJSON(outSchema)}, h: structured(``, true), isError: true, ran: true},
		{name: "nil result is empty", tool: mcp.Tool{Name: "n"}, h: func(context.Context, *CallToolRequest) (*mcp.CallToolResult, error) { return nil, nil }, ran: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRegistry(Options{})
			var ran atomic.Bool
			h := tt.h
			require.NoError(t, r.AddTool(&tt.tool, func(ctx context.Context, req *CallToolRequest) (*mcp.CallToolResult, error) {
				ran.Store(true)
				return h(ctx, req)
			}))
			name := tt.call
			if name == "" {
				name = tt.tool.Name
			}
			params := &mcp.CallToolParams{Name: name}
			if tt.args != "" {
				params.Arguments = codec.RawJSON(tt.args)
			}
			res, err := r.CallTool(context.Background(), &CallToolRequest{Params: params})
			assert.Equal(t, tt.ran, ran.Load(), "handler ran")
			if tt.wantErr != 0 {
				requireCodeErr(t, codec.AsError(err), tt.wantErr, tt.errMsg)
				assert.Nil(t, res)
				return
			}
			require.NoError(t, err)
			require.NotNil(t, res)
			assert.Equal(t, tt.isError, res.IsError)
			if tt.text != "" {
				require.NotEmpty(t, res.Content)
				assert.Contains(t, res.Content[0].Text, tt.text)
			}
		})
	}
}

func TestCallToolMissingParams(t *testing.T) {
	r := NewRegistry(Options{})
	_, err := r.CallTool(context.Background(), &CallToolRequest{})
	requireCodeErr(t, err, codec.CodeInvalidParams, "missing params")
}

type addIn struct {
	A    float64  `json:"a" jsonschema:"first addend"`
	B    float64  `json:"b"`
	Tags []string `json:"tags,omitempty"`
}

type addOut struct {
	Sum float64 `json:"sum"`
}

func TestTypedAddTool(t *testing.T) {
	r := NewRegistry(Options{})
	require.NoError(t, AddTool(r, &mcp.Tool{Name: "add"}, func(ctx context.Context, req *CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
		return nil, addOut{Sum: in.A + in.B}, nil
	}))
	require.NoError(t, AddTool(r, &mcp.Tool{Name: "addptr"}, func(ctx context.Context, req *CallToolRequest, in *addIn) (*mcp.CallToolResult, *addOut, error) {
		return mcp.TextResult("own text"), &addOut{Sum: in.A + in.B}, nil
	}))
	require.NoError(t, AddTool(r, &mcp.Tool{Name: "map"}, func(ctx context.Context, req *CallToolRequest, in map[string]any) (*mcp.CallToolResult, any, error) {
		return nil, map[string]any{"keys": len(in)}, nil
	}))
	require.NoError(t, AddTool(r, &mcp.Tool{Name: "str"}, func(ctx context.Context, req *CallToolRequest, in map[string]string) (*mcp.CallToolResult, string, error) {
		return nil, in["s"] + "!", nil
	}))
	require.NoError(t, AddTool(r, &mcp.Tool{Name: "nothing"}, func(ctx context.Context, req *CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
		return nil, nil, nil
	}))
	// A given input schema looser than In: decoding, not validation, fails.
	require.NoError(t, AddTool(r, &mcp.Tool{Name: "loose", InputSchema: codec.RawJSON(`{"type":"object"}`)}, func(ctx context.Context, req *CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
		t.Error("handler ran with undecodable arguments")
		return nil, addOut{}, nil
	}))
	require.NoError(t, AddTool(r, &mcp.Tool{Name: "fails"}, func(ctx context.Context, req *CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
		return nil, addOut{}, &codec.Error{Code: codec.CodeInvalidParams, Message: "no"}
	}))
	require.NoError(t, AddTool(r, &mcp.Tool{Name: "plainfail"}, func(ctx context.Context, req *CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
		return nil, addOut{}, errors.New("disk full")
	}))

	t.Run("inferred schemas", func(t *testing.T) {
		add, ok := r.Tool("add")
		require.True(t, ok)
		var in map[string]any
		require.NoError(t, codec.Unmarshal(add.InputSchema, &in))
		assert.Equal(t, "object", in["type"])
		assert.ElementsMatch(t, []any{"a", "b"}, in["required"])
		assert.Equal(t, "first addend", in["properties"].(map[string]any)["a"].(map[string]any)["description"])
		var out map[string]any
		require.NoError(t, codec.Unmarshal(add.OutputSchema, &out))
		assert.Equal(t, "object", out["type"])
		assert.Equal(t, []any{"sum"}, out["required"])

		ptr, _ := r.Tool("addptr")
		assert.JSONEq(t, string(add.InputSchema), string(ptr.InputSchema))
		assert.JSONEq(t, string(add.OutputSchema), string(ptr.OutputSchema))

		m, _ := r.Tool("map")
		assert.Empty(t, m.OutputSchema, "no output schema inferred from any")
		s, _ := r.Tool("str")
		assert.Empty(t, s.OutputSchema, "no output schema inferred from a non-object")
		loose, _ := r.Tool("loose")
		assert.Equal(t, `{"type":"object"}`, string(loose.InputSchema))
	})

	tests := []struct {
		name       string
		tool, args string
		wantErr    int
		isError    bool
		text       string
		structured string
	}{
		{name: "decoded and built", tool: "add", args: `{"a":1,"b":2}`, text: `{"sum":3}`, structured: `{"sum":3}`},
		{name: "bad JSON type fails validation", tool: "add", args: `{"a":"1","b":2}`, isError: true, text: "at '/a'"},
		{name: "missing field fails validation", tool: "add", args: `{"a":1}`, isError: true, text: "missing property 'b'"},
		{name: "unknown field fails validation", tool: "add", args: `{"a":1,"b":2,"c":3}`, isError: true, text: "additional properties 'c'"},
		{name: "pointer input, own result gets structured content", tool: "addptr", args: `{"a":2,"b":2}`, text: "own text", structured: `{"sum":4}`},
		{name: "map input, any output", tool: "map", args: `{"x":1,"y":2}`, text: `{"keys":2}`, structured: `{"keys":2}`},
		{name: "string output has no structured content", tool: "str", args: `{"s":"hi"}`, text: `"hi!"`},
		{name: "nil any output is empty", tool: "nothing", args: `{}`},
		{name: "decode failure is a tool error", tool: "loose", args: `{"a":"one"}`, isError: true, text: "invalid arguments for tool loose"},
		{name: "handler codec error is a JSON-RPC error", tool: "fails", args: `{"a":1,"b":2}`, wantErr: codec.CodeInvalidParams},
		{name: "handler error is a tool error", tool: "plainfail", args: `{"a":1,"b":2}`, isError: true, text: "disk full"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := r.CallTool(context.Background(), &CallToolRequest{Params: &mcp.CallToolParams{Name: tt.tool, Arguments: codec.RawJSON(tt.args)}})
			if tt.wantErr != 0 {
				requireCodeErr(t, err, tt.wantErr, "")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.isError, res.IsError)
			if tt.text == "" {
				assert.Empty(t, res.Content)
			} else {
				require.Len(t, res.Content, 1)
				assert.Contains(t, res.Content[0].Text, tt.text)
			}
			assert.Equal(t, tt.structured, string(res.StructuredContent))
		})
	}
}

func TestTypedAddToolErrors(t *testing.T) {
	type withChan struct {
		C chan int `json:"c"`
	}
	tests := []struct {
		name string
		add  func(r *Registry) error
		msg  string
	}{
		{"scalar input", func(r *Registry) error {
			return AddTool(r, &mcp.Tool{Name: "x"}, func(context.Context, *CallToolRequest, int) (*mcp.CallToolResult, any, error) { return nil, nil, nil })
		}, "input type int"},
		{"slice input", func(r *Registry) error {
			return AddTool(r, &mcp.Tool{Name: "x"}, func(context.Context, *CallToolRequest, []string) (*mcp.CallToolResult, any, error) {
				return nil, nil, nil
			})
		}, "input type []string"},
		{"uninferable input", func(r *Registry) error {
			return AddTool(r, &mcp.Tool{Name: "x"}, func(context.Context, *CallToolRequest, withChan) (*mcp.CallToolResult, any, error) {
				return nil, nil, nil
			})
		}, "inferring input schema"},
		{"uninferable output", func(r *Registry) error {
			return AddTool(r, &mcp.Tool{Name: "x"}, func(context.Context, *CallToolRequest, addIn) (*mcp.CallToolResult, withChan, error) {
				return nil, withChan{}, nil
			})
		}, "inferring output schema"},
		{"empty name", func(r *Registry) error {
			return AddTool(r, &mcp.Tool{}, func(context.Context, *CallToolRequest, addIn) (*mcp.CallToolResult, any, error) { return nil, nil, nil })
		}, "empty name"},
		{"nil tool", func(r *Registry) error {
			return AddTool(r, nil, func(context.Context, *CallToolRequest, addIn) (*mcp.CallToolResult, any, error) { return nil, nil, nil })
		}, "empty name"},
		{"two options", func(r *Registry) error {
			return AddTool(r, &mcp.Tool{Name: "x"}, func(context.Context, *CallToolRequest, addIn) (*mcp.CallToolResult, any, error) { return nil, nil, nil },
				ToolOptions{}, ToolOptions{NonBlocking: true})
		}, "at most one"},
		{"bad task support", func(r *Registry) error {
			return AddTool(r, &mcp.Tool{Name: "x"}, func(context.Context, *CallToolRequest, addIn) (*mcp.CallToolResult, any, error) { return nil, nil, nil },
				ToolOptions{TaskSupport: "sometimes"})
		}, "unknown task support"},
		{"conflicting task support", func(r *Registry) error {
			return AddTool(r, &mcp.Tool{Name: "x", Execution: &mcp.ToolExecution{TaskSupport: mcp.TaskRequired}},
				func(context.Context, *CallToolRequest, addIn) (*mcp.CallToolResult, any, error) { return nil, nil, nil },
				ToolOptions{TaskSupport: mcp.TaskOptional})
		}, "task support"},
		{"nil handler", func(r *Registry) error {
			return AddTool[addIn, any](r, &mcp.Tool{Name: "x"}, nil)
		}, "nil handler"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRegistry(Options{})
			err := tt.add(r)
			require.ErrorIs(t, err, ErrInvalidTool)
			assert.Contains(t, err.Error(), tt.msg)
			assert.Equal(t, 0, r.Len(ListNameTools))
		})
	}
}

// TestCallToolCancelled checks that a handler that gives up on its ended
// context gets a JSON-RPC error: the request was cancelled, the tool did not
// fail.
func TestCallToolCancelled(t *testing.T) {
	r := NewRegistry(Options{})
	require.NoError(t, r.AddTool(&mcp.Tool{Name: "wait"}, func(ctx context.Context, _ *CallToolRequest) (*mcp.CallToolResult, error) {
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}))
	require.NoError(t, r.AddTool(&mcp.Tool{Name: "wrapped"}, func(ctx context.Context, _ *CallToolRequest) (*mcp.CallToolResult, error) {
		<-ctx.Done()
		return nil, fmt.Errorf("waiting: %w", ctx.Err())
	}))
	require.NoError(t, r.AddTool(&mcp.Tool{Name: "other"}, func(ctx context.Context, _ *CallToolRequest) (*mcp.CallToolResult, error) {
		<-ctx.Done()
		return nil, errors.New("gave up")
	}))
	gone := errors.New("client gone")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(gone)
	call := func(name string) (*mcp.CallToolResult, error) {
		return r.CallTool(ctx, &CallToolRequest{Params: &mcp.CallToolParams{Name: name}})
	}
	_, err := call("wait")
	assert.ErrorIs(t, err, gone)
	_, err = call("wrapped")
	assert.ErrorIs(t, err, context.Canceled)
	res, err := call("other")
	require.NoError(t, err)
	assert.True(t, res.IsError, "an error of its own is the tool's")
}

func TestToolOptions(t *testing.T) {
	r := NewRegistry(Options{})
	scopes := []string{"files:read", "files:write"}
	require.NoError(t, AddTool(r, &mcp.Tool{Name: "typed"}, func(context.Context, *CallToolRequest, addIn) (*mcp.CallToolResult, any, error) {
		return nil, nil, nil
	}, ToolOptions{NonBlocking: true, TaskSupport: mcp.TaskOptional, RequiredScopes: scopes}))
	scopes[0] = "changed after registration"
	require.NoError(t, r.AddTool(&mcp.Tool{Name: "plain"}, echoTool))
	require.NoError(t, r.AddTool(&mcp.Tool{Name: "with", Execution: &mcp.ToolExecution{TaskSupport: mcp.TaskRequired}}, echoTool,
		ToolOptions{TaskSupport: mcp.TaskRequired}))
	require.Error(t, r.AddTool(&mcp.Tool{Name: "two"}, echoTool, ToolOptions{}, ToolOptions{}))

	o, ok := r.ToolOptionsOf("typed")
	require.True(t, ok)
	assert.True(t, o.NonBlocking)
	assert.Equal(t, []string{"files:read", "files:write"}, o.RequiredScopes)
	typed, _ := r.Tool("typed")
	require.NotNil(t, typed.Execution)
	assert.Equal(t, mcp.TaskOptional, typed.Execution.TaskSupport)
	assert.Contains(t, toolsPageRaw(t, r), `"execution":{"taskSupport":"optional"}`)

	o, ok = r.ToolOptionsOf("plain")
	require.True(t, ok)
	assert.Zero(t, o.NonBlocking)
	assert.Empty(t, o.RequiredScopes)
	plain, _ := r.Tool("plain")
	assert.Nil(t, plain.Execution)
	with, _ := r.Tool("with")
	assert.Equal(t, mcp.TaskRequired, with.Execution.TaskSupport)
	_, ok = r.ToolOptionsOf("two")
	assert.False(t, ok)
}

func toolsPageRaw(t *testing.T, r *Registry) string {
	t.Helper()
	b, err := r.ListPage(ListNameTools, "")
	require.NoError(t, err)
	return string(b)
}

func TestReplaceAndRemoveTools(t *testing.T) {
	r := NewRegistry(Options{})
	for _, n := range []string{"a", "b", "c"} {
		require.NoError(t, r.AddTool(&mcp.Tool{Name: n, Description: "v1"}, echoTool))
	}
	require.NoError(t, r.AddTool(&mcp.Tool{Name: "b", Description: "v2"}, echoTool))
	page := toolsPage(t, r, "")
	require.Len(t, page.Tools, 3)
	assert.Equal(t, []string{"a", "b", "c"}, []string{page.Tools[0].Name, page.Tools[1].Name, page.Tools[2].Name})
	assert.Equal(t, "v2", page.Tools[1].Description)

	assert.Equal(t, 2, r.RemoveTools("a", "zz", "c", "a"))
	assert.Equal(t, 0, r.RemoveTools("a"))
	assert.Equal(t, 1, r.Len(ListNameTools))
	_, ok := r.Tool("a")
	assert.False(t, ok)
	_, err := r.CallTool(context.Background(), &CallToolRequest{Params: &mcp.CallToolParams{Name: "a"}})
	requireCodeErr(t, err, codec.CodeInvalidParams, "unknown tool: a")

	// Re-adding a removed tool appends it.
	require.NoError(t, r.AddTool(&mcp.Tool{Name: "a"}, echoTool))
	page = toolsPage(t, r, "")
	require.Len(t, page.Tools, 2)
	assert.Equal(t, "b", page.Tools[0].Name)
	assert.Equal(t, "a", page.Tools[1].Name)
}

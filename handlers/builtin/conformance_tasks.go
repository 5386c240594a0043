package builtin

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
)

// The fixtures of the conformance suite's tasks-* scenarios (the tasks
// extension of 2026-07-28, SEP-2663). In the sessions of older revisions
// they are ordinary tools (task-augmented there when the client asks).

const (
	greetSchema       = `{"type":"object","properties":{"name":{"type":"string","description":"Who to greet"}},"required":["name"]}`
	slowComputeSchema = `{"type":"object","properties":{"seconds":{"type":"number","description":"How long to compute, in seconds"},"label":{"type":"string","description":"A label echoed in the result"}}}`
	filenameSchema    = `{"type":"object","properties":{"filename":{"type":"string","description":"The file to delete"}},"required":["filename"]}`
	confirmSchema     = `{"type":"object","properties":{"confirm":{"type":"boolean","description":"Confirm the deletion"}},"required":["confirm"]}`
	nameConfirmSchema = `{"type":"object","properties":{"name":{"type":"string","description":"A name"},"confirm":{"type":"boolean","description":"Confirm"}},"required":["name"]}`
	taskNameSchema    = `{"type":"object","properties":{"name":{"type":"string","description":"Your name"}},"required":["name"]}`

	// maxSlowCompute bounds slow_compute's seconds.
	maxSlowCompute = 10 * time.Minute
)

// conformanceTasks installs the tasks fixtures.
func conformanceTasks(r *handlers.Registry) error {
	optional := handlers.ToolOptions{TaskSupport: mcp.TaskOptional}
	tools := []struct {
		name, desc, schema string
		h                  handlers.ToolHandler
		o                  handlers.ToolOptions
	}{
		{"greet", "Greets by name, at once (never a task)", greetSchema, toolGreet, handlers.ToolOptions{}},
		{"slow_compute", "Computes for the given seconds, as a task when the client supports tasks", slowComputeSchema, toolSlowCompute, optional},
		{"failing_job", "A job that must run as a task and ends with a tool error after a second", noArgs, toolFailingJob, handlers.ToolOptions{TaskSupport: mcp.TaskRequired}},
		{"protocol_error_job", "A job that ends with a protocol error (a failed task)", noArgs, toolProtocolErrorJob, optional},
		{"confirm_delete", "Asks the user to confirm deleting a file, then deletes it", filenameSchema, toolConfirmDelete, optional},
		{"multi_input", "Asks the user for two inputs at once", noArgs, toolMultiInput, optional},
		{"test_tool_with_task", "Asks for the user's name, then runs as a task that greets them", noArgs, toolWithTask, handlers.ToolOptions{TaskSupport: mcp.TaskRequired, DeferTask: true}},
	}
	for _, t := range tools {
		if err := r.AddToolWith(&mcp.Tool{Name: t.name, Description: t.desc, InputSchema: codec.RawJSON(t.schema)}, t.h, t.o); err != nil {
			return err
		}
	}
	return nil
}

func toolGreet(_ context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		Name string `json:"name"`
	}
	if len(req.Params.Arguments) > 0 {
		if err := codec.Unmarshal(req.Params.Arguments, &in); err != nil {
			return mcp.ErrorResult("invalid arguments: " + err.Error()), nil
		}
	}
	return mcp.TextResult("Hello, " + in.Name + "!"), nil
}

func toolSlowCompute(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		Seconds float64 `json:"seconds"`
		Label   string  `json:"label"`
	}
	if len(req.Params.Arguments) > 0 {
		if err := codec.Unmarshal(req.Params.Arguments, &in); err != nil {
			return mcp.ErrorResult("invalid arguments: " + err.Error()), nil
		}
	}
	d := min(time.Duration(max(in.Seconds, 0)*float64(time.Second)), maxSlowCompute)
	if err := sleep(ctx, d); err != nil {
		return nil, err
	}
	return mcp.TextResult("Computed " + strconv.Quote(in.Label) + " in " + strconv.FormatFloat(d.Seconds(), 'g', -1, 64) + "s"), nil
}

func toolFailingJob(ctx context.Context, _ *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
	if err := sleep(ctx, time.Second); err != nil {
		return nil, err
	}
	return mcp.ErrorResult("failing_job failed, as it always does"), nil
}

func toolProtocolErrorJob(ctx context.Context, _ *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
	if err := sleep(ctx, 200*time.Millisecond); err != nil {
		return nil, err
	}
	return nil, codec.NewError(codec.CodeInternalError, "protocol_error_job failed with a protocol error, as it always does")
}

// elicitForm asks for a form and decodes its content into v; it returns
// the action.
func elicitForm(ctx context.Context, req *handlers.CallToolRequest, message, schema string, v any) (string, error) {
	res, err := req.Peer.Elicit(ctx, &mcp.ElicitParams{Message: message, RequestedSchema: codec.RawJSON(schema)})
	if err != nil {
		return "", err
	}
	if len(res.Content) > 0 {
		_ = codec.Unmarshal(res.Content, v)
	}
	return res.Action, nil
}

func toolConfirmDelete(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		Filename string `json:"filename"`
	}
	if len(req.Params.Arguments) > 0 {
		if err := codec.Unmarshal(req.Params.Arguments, &in); err != nil {
			return mcp.ErrorResult("invalid arguments: " + err.Error()), nil
		}
	}
	var ans struct {
		Confirm bool `json:"confirm"`
	}
	action, err := elicitForm(ctx, req, "Delete "+in.Filename+"?", confirmSchema, &ans)
	if err != nil {
		return mcp.ErrorResult("elicitation failed: " + err.Error()), nil
	}
	if action != "accept" || !ans.Confirm {
		return mcp.TextResult("Kept " + in.Filename + " (action " + action + ")"), nil
	}
	return mcp.TextResult("Deleted " + in.Filename), nil
}

// toolMultiInput asks for its two inputs at once: a task waits for both.
func toolMultiInput(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
	type answer struct {
		Name    string `json:"name"`
		Confirm bool   `json:"confirm"`
	}
	var (
		wg   sync.WaitGroup
		ans  [2]answer
		errs [2]error
	)
	for i := range ans {
		wg.Go(func() {
			n := strconv.Itoa(i + 1)
			kctx := handlers.WithInputKey(ctx, "multi_input-"+n)
			_, errs[i] = elicitForm(kctx, req, "Input "+n+" of 2: a name", nameConfirmSchema, &ans[i])
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return mcp.ErrorResult("elicitation failed: " + err.Error()), nil
		}
	}
	return mcp.TextResult("Received " + ans[0].Name + " and " + ans[1].Name), nil
}

// toolWithTask gathers the user's name in multi round-trip rounds, before
// it becomes a task (handlers.StartTask), then greets them from the task.
func toolWithTask(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
	var ans struct {
		Name string `json:"name"`
	}
	action, err := elicitForm(handlers.WithInputKey(ctx, "user_name"), req, "What is your name?", taskNameSchema, &ans)
	if err != nil {
		return mcp.ErrorResult("elicitation failed: " + err.Error()), nil
	}
	if action != "accept" {
		return mcp.TextResult("No name given (action " + action + ")"), nil
	}
	handlers.StartTask(req.Peer)
	if err := sleep(ctx, 200*time.Millisecond); err != nil {
		return nil, err
	}
	return mcp.TextResult("Hello, " + ans.Name + "! (greeted from a task)"), nil
}

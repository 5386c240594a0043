package builtin

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
)

// The fixtures the conformance suite 0.2.0 (MCP 2026-07-28) asks for
// beside those of 0.1.16: the stateless server (server-stateless), multi
// round-trip requests (input-required-result-*), x-mcp-header parameters
// (http-custom-header-server-validation); caching and
// sep-2164-resource-not-found use the 0.1.16 resources.
//
// The handlers ask for client input with the Peer calls of every era: in
// a 2026-07-28 request a missing input becomes an InputRequiredResult, in
// an older session it is a server-to-client request. Input keys are the
// ones the suite documents (handlers.WithInputKey).
//
// tools/list lists tools in registration order (handlers.Registry), so
// these come after the 0.1.16 tools, test_simple_text stays first (the
// tool http-header-validation calls with empty arguments), and the order
// is the same on every call: the trigger tools re-register their helper
// in place (a replaced item keeps its position) rather than removing and
// adding it.

const (
	nameSchema  = `{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`
	okSchema    = `{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`
	colorSchema = `{"type":"object","properties":{"color":{"type":"string"}},"required":["color"]}`
	ctxSchema   = `{"type":"object","properties":{"context":{"type":"string"}},"required":["context"]}`
	regionArgs  = `{"type":"object","properties":{"region":{"type":"string","description":"Region to route to; mirrored in the Mcp-Param-Region header","x-mcp-header":"Region"}},"required":["region"]}`
)

// The helper tool and prompt the trigger tools change.
const (
	helperTool   = "test_list_changed_helper"
	helperPrompt = "test_list_changed_helper_prompt"
)

func conformance2026(r *handlers.Registry, _ Env) error {
	var toggle struct {
		sync.Mutex
		tool, prompt bool
	}
	addHelperTool := func(alt bool) error {
		desc := "A helper tool that test_trigger_tool_change re-registers"
		if alt {
			desc += " (changed)"
		}
		return r.AddTool(&mcp.Tool{Name: helperTool, Description: desc, InputSchema: codec.RawJSON(noArgs)},
			constResult(mcp.TextResult("helper")))
	}
	addHelperPrompt := func(alt bool) error {
		desc := "A helper prompt that test_trigger_prompt_change re-registers"
		if alt {
			desc += " (changed)"
		}
		return r.AddPrompt(&mcp.Prompt{Name: helperPrompt, Title: "List Changed Helper", Description: desc},
			func(context.Context, *handlers.GetPromptRequest) (*mcp.GetPromptResult, error) {
				return &mcp.GetPromptResult{Messages: []mcp.PromptMessage{userText("helper")}}, nil
			})
	}

	tools := []struct {
		name, desc, schema string
		h                  handlers.ToolHandler
	}{
		{"test_x_mcp_header", "Tests an argument mirrored in an HTTP header (x-mcp-header, SEP-2243)", regionArgs, toolRegion},
		{"test_missing_capability", "Tests a tool that needs the client's sampling capability (-32021 without it)", noArgs, toolMissingCapability},
		{"test_streaming_elicitation", "Tests elicitation within a request: an InputRequiredResult at 2026-07-28, never a request on the response stream", noArgs, toolAskName("user_name")},
		{"test_logging_tool", "Tests log notifications, sent only at the log level the request asks for", noArgs, toolWithLogging},
		{"test_trigger_tool_change", "Changes the tool list (re-registers " + helperTool + "), so that notifications/tools/list_changed is sent", noArgs,
			func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
				toggle.Lock()
				defer toggle.Unlock()
				toggle.tool = !toggle.tool
				if err := addHelperTool(toggle.tool); err != nil {
					return nil, err
				}
				return mcp.TextResult("tool list changed"), nil
			}},
		{"test_trigger_prompt_change", "Changes the prompt list (re-registers " + helperPrompt + "), so that notifications/prompts/list_changed is sent", noArgs,
			func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
				toggle.Lock()
				defer toggle.Unlock()
				toggle.prompt = !toggle.prompt
				if err := addHelperPrompt(toggle.prompt); err != nil {
					return nil, err
				}
				return mcp.TextResult("prompt list changed"), nil
			}},
		{"test_input_required_result_elicitation", "Tests an input-required result asking for elicitation (key user_name)", noArgs, toolAskName("user_name")},
		{"test_input_required_result_sampling", "Tests an input-required result asking for sampling (key capital_question)", noArgs, toolIRSampling},
		{"test_input_required_result_list_roots", "Tests an input-required result asking for the client's roots (key client_roots)", noArgs, toolIRRoots},
		{"test_input_required_result_request_state", "Tests an input-required result with requestState (key confirm)", noArgs, toolConfirm("Request state verified: state-ok")},
		{"test_input_required_result_multiple_inputs", "Tests an input-required result asking for elicitation, sampling and roots at once", noArgs, toolIRMultiple},
		{"test_input_required_result_multi_round", "Tests two rounds of input (keys step1, step2), the first answer carried in requestState", noArgs, toolIRMultiRound},
		{"test_input_required_result_tampered_state", "Tests that a tampered requestState is rejected (key confirm)", noArgs, toolConfirm("Confirmed")},
		{"test_input_required_result_capabilities", "Tests that input requests respect the client's declared capabilities", noArgs, toolIRCapabilities},
	}
	for _, t := range tools {
		if err := r.AddTool(&mcp.Tool{Name: t.name, Description: t.desc, InputSchema: codec.RawJSON(t.schema)}, t.h); err != nil {
			return err
		}
	}
	if err := addHelperTool(false); err != nil {
		return err
	}
	if err := r.AddPrompt(&mcp.Prompt{Name: "test_input_required_result_prompt", Title: "Input Required Prompt",
		Description: "A prompt that asks the client for context first (key user_context)"}, promptIR); err != nil {
		return err
	}
	return addHelperPrompt(false)
}

// inputErr returns err when it is the engine's request for input (the
// engine answers with an InputRequiredResult) or a protocol error (a
// malformed input response, a missing capability), nil otherwise.
func inputErr(err error) error {
	if errors.Is(err, engine.ErrInputRequired) || errors.Is(err, engine.ErrCapability) || codec.AsError(err) != nil {
		return err
	}
	return nil
}

// elicitField elicits one string field under key.
func elicitField(ctx context.Context, p handlers.Peer, key, message, schema, field string) (string, error) {
	res, err := p.Elicit(handlers.WithInputKey(ctx, key), &mcp.ElicitParams{Message: message, RequestedSchema: codec.RawJSON(schema)})
	if err != nil {
		return "", err
	}
	if res.Action != "accept" {
		return "", errors.New("elicitation " + res.Action)
	}
	var c map[string]any
	_ = codec.Unmarshal(res.Content, &c)
	s, _ := c[field].(string)
	return s, nil
}

func toolAskName(key string) handlers.ToolHandler {
	return func(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		name, err := elicitField(ctx, req.Peer, key, "What is your name?", nameSchema, "name")
		if err != nil {
			if e := inputErr(err); e != nil {
				return nil, e
			}
			return mcp.ErrorResult(err.Error()), nil
		}
		return mcp.TextResult("Hello, " + name + "!"), nil
	}
}

func samplingText(text string) []mcp.SamplingMessage {
	c, _ := codec.Marshal(mcp.Content{Type: mcp.ContentText, Text: text})
	return []mcp.SamplingMessage{{Role: "user", Content: c}}
}

// sample asks the client's model under key and returns its text.
func sample(ctx context.Context, p handlers.Peer, key, prompt string, maxTokens int) (string, error) {
	res, err := p.CreateMessage(handlers.WithInputKey(ctx, key), &mcp.CreateMessageParams{Messages: samplingText(prompt), MaxTokens: maxTokens})
	if err != nil {
		return "", err
	}
	var reply struct {
		Text string `json:"text"`
	}
	_ = codec.Unmarshal(res.Content, &reply)
	return reply.Text, nil
}

func roots(ctx context.Context, p handlers.Peer, key string) (string, error) {
	res, err := p.ListRoots(handlers.WithInputKey(ctx, key))
	if err != nil {
		return "", err
	}
	uris := make([]string, len(res.Roots))
	for i, r := range res.Roots {
		uris[i] = r.URI
	}
	return strings.Join(uris, ", "), nil
}

// toolError answers err as inputErr sorts it: a protocol error or a
// request for input as such, anything else as an isError result.
func toolError(err error) (*mcp.CallToolResult, error) {
	if e := inputErr(err); e != nil {
		return nil, e
	}
	return mcp.ErrorResult(err.Error()), nil
}

func toolIRSampling(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
	text, err := sample(ctx, req.Peer, "capital_question", "What is the capital of France?", 100)
	if err != nil {
		return toolError(err)
	}
	return mcp.TextResult("The model answered: " + text), nil
}

func toolIRRoots(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
	list, err := roots(ctx, req.Peer, "client_roots")
	if err != nil {
		return toolError(err)
	}
	return mcp.TextResult("Client roots: " + list), nil
}

func toolConfirm(done string) handlers.ToolHandler {
	return func(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.Peer.Elicit(handlers.WithInputKey(ctx, "confirm"), &mcp.ElicitParams{Message: "Please confirm", RequestedSchema: codec.RawJSON(okSchema)})
		if err != nil {
			return toolError(err)
		}
		return mcp.TextResult(done + " (action=" + res.Action + ")"), nil
	}
}

// toolIRMultiple asks for its three inputs at once, so that one
// InputRequiredResult names them all: in a 2026-07-28 request, and
// through a gateway that turns the server-to-client requests of a session
// into one round for a 2026-07-28 client.
func toolIRMultiple(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
	var (
		wg                   sync.WaitGroup
		name, greeting, list string
		err1, err2, err3     error
	)
	wg.Go(func() { name, err1 = elicitField(ctx, req.Peer, "user_name", "What is your name?", nameSchema, "name") })
	wg.Go(func() { greeting, err2 = sample(ctx, req.Peer, "greeting", "Generate a greeting", 50) })
	wg.Go(func() { list, err3 = roots(ctx, req.Peer, "client_roots") })
	wg.Wait()
	if err := errors.Join(err1, err2, err3); err != nil {
		return toolError(err)
	}
	return mcp.TextResult("name=" + name + ", greeting=" + greeting + ", roots=" + list), nil
}

// toolIRMultiRound asks for step2 only once step1 is answered: the engine
// carries the step1 answer in requestState.
func toolIRMultiRound(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
	name, err := elicitField(ctx, req.Peer, "step1", "Step 1: What is your name?", nameSchema, "name")
	if err != nil {
		return toolError(err)
	}
	color, err := elicitField(ctx, req.Peer, "step2", "Step 2: What is your favorite color?", colorSchema, "color")
	if err != nil {
		return toolError(err)
	}
	return mcp.TextResult(name + "'s favorite color is " + color), nil
}

// toolIRCapabilities asks only for the inputs the client declared the
// capability for.
func toolIRCapabilities(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
	caps := req.Peer.ClientCapabilities()
	if caps == nil {
		caps = &mcp.ClientCapabilities{}
	}
	var errs []error
	var got []string
	if caps.Sampling != nil {
		text, err := sample(ctx, req.Peer, "capital_question", "What is the capital of France?", 100)
		errs = append(errs, err)
		got = append(got, "sampling="+text)
	}
	if caps.Elicitation != nil {
		name, err := elicitField(ctx, req.Peer, "user_name", "What is your name?", nameSchema, "name")
		errs = append(errs, err)
		got = append(got, "name="+name)
	}
	if caps.Roots != nil {
		list, err := roots(ctx, req.Peer, "client_roots")
		errs = append(errs, err)
		got = append(got, "roots="+list)
	}
	if len(got) == 0 {
		return nil, engine.MissingCapability(`{"sampling":{}}`)
	}
	if err := errors.Join(errs...); err != nil {
		return toolError(err)
	}
	return mcp.TextResult("Inputs by capability: " + strings.Join(got, ", ")), nil
}

// toolMissingCapability needs sampling: without the client's capability
// it answers MissingRequiredClientCapabilityError (-32021), in a
// 2026-07-28 request and in a session alike.
func toolMissingCapability(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
	if caps := req.Peer.ClientCapabilities(); caps == nil || caps.Sampling == nil {
		return nil, engine.MissingCapability(`{"sampling":{}}`)
	}
	text, err := sample(ctx, req.Peer, "sampling", "Say hello", 50)
	if err != nil {
		return toolError(err)
	}
	return mcp.TextResult("The model answered: " + text), nil
}

func toolRegion(_ context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		Region string `json:"region"`
	}
	_ = codec.Unmarshal(req.Params.Arguments, &in)
	return mcp.TextResult("Region: " + in.Region), nil
}

func promptIR(ctx context.Context, req *handlers.GetPromptRequest) (*mcp.GetPromptResult, error) {
	c, err := elicitField(ctx, req.Peer, "user_context", "What context should the prompt use?", ctxSchema, "context")
	if err != nil {
		return nil, err
	}
	return &mcp.GetPromptResult{Messages: []mcp.PromptMessage{userText("Answer using this context: " + c)}}, nil
}

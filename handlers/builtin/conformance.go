package builtin

import (
	"context"
	"time"

	"github.com/bytedance/sonic"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
)

// The conformance fixtures' media: a 1x1 red PNG and a minimal WAV.
const (
	ConformancePNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
	ConformanceWAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
)

const (
	noArgs         = `{"type":"object","properties":{}}`
	jsonSchema2020 = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"address":{"$anchor":"addressDef","type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}}}},"properties":{"name":{"type":"string"},"address":{"$ref":"#/$defs/address"},"contactMethod":{"type":"string","enum":["phone","email"]},"phone":{"type":"string"},"email":{"type":"string"}},"allOf":[{"anyOf":[{"required":["phone"]},{"required":["email"]}]}],"if":{"properties":{"contactMethod":{"const":"phone"}},"required":["contactMethod"]},"then":{"required":["phone"]},"else":{"required":["email"]},"additionalProperties":false}`

	sep1034Schema = `{"type":"object","properties":{"name":{"type":"string","description":"User name","default":"John Doe"},"age":{"type":"integer","description":"User age","default":30},"score":{"type":"number","description":"User score","default":95.5},"status":{"type":"string","description":"User status","enum":["active","inactive","pending"],"default":"active"},"verified":{"type":"boolean","description":"Verification status","default":true}},"required":[]}`
	sep1330Schema = `{"type":"object","properties":{"untitledSingle":{"type":"string","description":"Select one option","enum":["option1","option2","option3"]},"titledSingle":{"type":"string","description":"Select one option with titles","oneOf":[{"const":"value1","title":"First Option"},{"const":"value2","title":"Second Option"},{"const":"value3","title":"Third Option"}]},"legacyEnum":{"type":"string","description":"Select one option (legacy)","enum":["opt1","opt2","opt3"],"enumNames":["Option One","Option Two","Option Three"]},"untitledMulti":{"type":"array","description":"Select multiple options","minItems":1,"maxItems":3,"items":{"type":"string","enum":["option1","option2","option3"]}},"titledMulti":{"type":"array","description":"Select multiple options with titles","minItems":1,"maxItems":3,"items":{"anyOf":[{"const":"value1","title":"First Choice"},{"const":"value2","title":"Second Choice"},{"const":"value3","title":"Third Choice"}]}}},"required":[]}`
	userSchema    = `{"type":"object","properties":{"username":{"type":"string","description":"User's response"},"email":{"type":"string","description":"User's email address"}},"required":["username","email"]}`
)

// ConformanceInfo is the server identity the conformance suite's reference
// server uses.
var ConformanceInfo = mcp.Implementation{Name: "mcp-conformance-test-server", Version: "1.0.0"}

// Conformance installs the fixtures the official MCP conformance suite
// (@modelcontextprotocol/conformance 0.1.16) expects of a server, as
// specified in shared/conformance/FIXTURES.md, and those 0.2.0 adds for
// MCP 2026-07-28 (conformance_2026.go).
func Conformance(r *handlers.Registry, env Env) error {
	tools := []struct {
		name, desc, schema string
		h                  handlers.ToolHandler
	}{
		{"test_simple_text", "Tests simple text content response", noArgs, constResult(mcp.TextResult("This is a simple text response for testing."))},
		{"test_image_content", "Tests image content response", noArgs, constResult(&mcp.CallToolResult{Content: []mcp.Content{{Type: mcp.ContentImage, Data: ConformancePNG, MimeType: "image/png"}}})},
		{"test_audio_content", "Tests audio content response", noArgs, constResult(&mcp.CallToolResult{Content: []mcp.Content{{Type: mcp.ContentAudio, Data: ConformanceWAV, MimeType: "audio/wav"}}})},
		{"test_embedded_resource", "Tests embedded resource content response", noArgs, constResult(&mcp.CallToolResult{Content: []mcp.Content{{Type: mcp.ContentResource, Resource: &mcp.ResourceContents{URI: "test://embedded-resource", MimeType: "text/plain", Text: "This is an embedded resource content."}}}})},
		{"test_multiple_content_types", "Tests response with multiple content types (text, image, resource)", noArgs, constResult(&mcp.CallToolResult{Content: []mcp.Content{
			{Type: mcp.ContentText, Text: "Multiple content types test:"},
			{Type: mcp.ContentImage, Data: ConformancePNG, MimeType: "image/png"},
			{Type: mcp.ContentResource, Resource: &mcp.ResourceContents{URI: "test://mixed-content-resource", MimeType: "application/json", Text: `{"test":"data","value":123}`}},
		}})},
		{"test_tool_with_logging", "Tests tool that emits log messages during execution", noArgs, toolWithLogging},
		{"test_tool_with_progress", "Tests tool that reports progress notifications", noArgs, toolWithProgress},
		{"test_error_handling", "Tests error response handling", noArgs, constResult(mcp.ErrorResult("This tool intentionally returns an error for testing"))},
		{"test_sampling", "Tests server-initiated sampling (LLM completion request)", `{"type":"object","properties":{"prompt":{"type":"string","description":"The prompt to send to the LLM"}},"required":["prompt"]}`, toolSampling},
		{"test_elicitation", "Tests server-initiated elicitation (user input request)", `{"type":"object","properties":{"message":{"type":"string","description":"The message to show the user"}},"required":["message"]}`, toolElicitation},
		{"test_elicitation_sep1034_defaults", "Tests elicitation with default values for all primitive types (SEP-1034)", noArgs, elicitWith("Please review and update the form fields with defaults", sep1034Schema)},
		{"test_elicitation_sep1330_enums", "Tests elicitation with enum schema improvements (SEP-1330)", noArgs, elicitWith("Please select options from the enum fields", sep1330Schema)},
		{"json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)", jsonSchema2020, toolJSONSchema},
		{"test_reconnection", "Tests SSE stream disconnection and client reconnection (SEP-1699). Server will close the stream mid-call and send the result after the client reconnects.", noArgs, toolReconnection},
	}
	for _, t := range tools {
		if err := r.AddTool(&mcp.Tool{Name: t.name, Description: t.desc, InputSchema: codec.RawJSON(t.schema)}, t.h); err != nil {
			return err
		}
	}
	if err := conformanceTasks(r); err != nil {
		return err
	}

	statics := []struct {
		res      mcp.Resource
		contents mcp.ResourceContents
	}{
		{mcp.Resource{URI: "test://static-text", Name: "static-text", Title: "Static Text Resource", Description: "A static text resource for testing", MimeType: "text/plain"},
			mcp.ResourceContents{URI: "test://static-text", MimeType: "text/plain", Text: "This is the content of the static text resource."}},
		{mcp.Resource{URI: "test://static-binary", Name: "static-binary", Title: "Static Binary Resource", Description: "A static binary resource (image) for testing", MimeType: "image/png"},
			mcp.ResourceContents{URI: "test://static-binary", MimeType: "image/png", Blob: ConformancePNG}},
		{mcp.Resource{URI: "test://watched-resource", Name: "watched-resource", Title: "Watched Resource", Description: "A resource that auto-updates every 3 seconds", MimeType: "text/plain"},
			mcp.ResourceContents{URI: "test://watched-resource", MimeType: "text/plain", Text: "Watched resource content"}},
	}
	for i := range statics {
		if err := r.AddStaticResource(&statics[i].res, statics[i].contents); err != nil {
			return err
		}
	}
	if err := r.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: "test://template/{id}/data", Name: "template", Title: "Resource Template",
		Description: "A resource template with parameter substitution", MimeType: "application/json",
	}, func(_ context.Context, req *handlers.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		id := req.Vars["id"]
		text := `{"id":` + string(codec.AppendString(nil, id)) + `,"templateTest":true,"data":` + string(codec.AppendString(nil, "Data for ID: "+id)) + `}`
		return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: req.Params.URI, MimeType: "application/json", Text: text}}}, nil
	}); err != nil {
		return err
	}

	prompts := []struct {
		p mcp.Prompt
		h handlers.PromptHandler
	}{
		{mcp.Prompt{Name: "test_simple_prompt", Title: "Simple Test Prompt", Description: "A simple prompt without arguments"},
			func(context.Context, *handlers.GetPromptRequest) (*mcp.GetPromptResult, error) {
				return &mcp.GetPromptResult{Messages: []mcp.PromptMessage{userText("This is a simple prompt for testing.")}}, nil
			}},
		{mcp.Prompt{Name: "test_prompt_with_arguments", Title: "Prompt With Arguments", Description: "A prompt with required arguments", Arguments: []mcp.PromptArgument{
			{Name: "arg1", Description: "First test argument", Required: true},
			{Name: "arg2", Description: "Second test argument", Required: true},
		}}, func(_ context.Context, req *handlers.GetPromptRequest) (*mcp.GetPromptResult, error) {
			a := req.Params.Arguments
			return &mcp.GetPromptResult{Messages: []mcp.PromptMessage{userText("Prompt with arguments: arg1='" + a["arg1"] + "', arg2='" + a["arg2"] + "'")}}, nil
		}},
		{mcp.Prompt{Name: "test_prompt_with_embedded_resource", Title: "Prompt With Embedded Resource", Description: "A prompt that includes an embedded resource", Arguments: []mcp.PromptArgument{
			{Name: "resourceUri", Description: "URI of the resource to embed", Required: true},
		}}, func(_ context.Context, req *handlers.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []mcp.PromptMessage{
				{Role: "user", Content: mcp.Content{Type: mcp.ContentResource, Resource: &mcp.ResourceContents{URI: req.Params.Arguments["resourceUri"], MimeType: "text/plain", Text: "Embedded resource content for testing."}}},
				userText("Please process the embedded resource above."),
			}}, nil
		}},
		{mcp.Prompt{Name: "test_prompt_with_image", Title: "Prompt With Image", Description: "A prompt that includes image content"},
			func(context.Context, *handlers.GetPromptRequest) (*mcp.GetPromptResult, error) {
				return &mcp.GetPromptResult{Messages: []mcp.PromptMessage{
					{Role: "user", Content: mcp.Content{Type: mcp.ContentImage, Data: ConformancePNG, MimeType: "image/png"}},
					userText("Please analyze the image above."),
				}}, nil
			}},
	}
	for i := range prompts {
		if err := r.AddPrompt(&prompts[i].p, prompts[i].h); err != nil {
			return err
		}
	}
	if err := r.AddPromptCompletion("test_prompt_with_arguments", "arg1", prefixCompletion("test", "testValue1", "testing", "paris")); err != nil {
		return err
	}
	if err := r.AddPromptCompletion("test_prompt_with_arguments", "arg2", prefixCompletion("testValue2", "other")); err != nil {
		return err
	}
	if err := r.AddTemplateCompletion("test://template/{id}/data", "id", prefixCompletion("1", "123", "456")); err != nil {
		return err
	}
	return conformance2026(r, env)
}

func userText(text string) mcp.PromptMessage {
	return mcp.PromptMessage{Role: "user", Content: mcp.Content{Type: mcp.ContentText, Text: text}}
}

func constResult(res *mcp.CallToolResult) handlers.ToolHandler {
	return func(context.Context, *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		c := *res // the registry may be served concurrently: hand out a copy
		return &c, nil
	}
}

func prefixCompletion(values ...string) handlers.CompletionHandler {
	return func(_ context.Context, req *handlers.CompleteRequest) (*mcp.CompleteResult, error) {
		out := []string{}
		for _, v := range values {
			if len(v) >= len(req.Params.Argument.Value) && v[:len(req.Params.Argument.Value)] == req.Params.Argument.Value {
				out = append(out, v)
			}
		}
		return &mcp.CompleteResult{Completion: mcp.Completion{Values: out}}, nil
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func toolWithLogging(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
	for i, msg := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
		if i > 0 {
			if err := sleep(ctx, 50*time.Millisecond); err != nil {
				return nil, err
			}
		}
		if err := req.Peer.Log("info", "", msg); err != nil {
			return nil, err
		}
	}
	return mcp.TextResult("Tool with logging executed successfully"), nil
}

func toolWithProgress(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
	var meta struct {
		ProgressToken sonic.NoCopyRawMessage `json:"progressToken"`
	}
	if len(req.Params.Meta) > 0 {
		_ = codec.UnmarshalNoCopy(req.Params.Meta, &meta)
	}
	for i, p := range []float64{0, 50, 100} {
		if i > 0 {
			if err := sleep(ctx, 50*time.Millisecond); err != nil {
				return nil, err
			}
		}
		msg := "Completed step " + string(codec.AppendFloat(nil, p)) + " of 100"
		if err := req.Peer.Progress(p, 100, msg); err != nil {
			return nil, err
		}
	}
	token := string(meta.ProgressToken)
	if len(token) >= 2 && token[0] == '"' {
		var s string
		if codec.Unmarshal(meta.ProgressToken, &s) == nil {
			token = s
		}
	}
	return mcp.TextResult(token), nil
}

func toolSampling(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		Prompt string `json:"prompt"`
	}
	if err := codec.Unmarshal(req.Params.Arguments, &in); err != nil {
		return mcp.ErrorResult("invalid arguments: " + err.Error()), nil
	}
	content, _ := codec.Marshal(mcp.Content{Type: mcp.ContentText, Text: in.Prompt})
	res, err := req.Peer.CreateMessage(ctx, &mcp.CreateMessageParams{
		Messages:  []mcp.SamplingMessage{{Role: "user", Content: content}},
		MaxTokens: 100,
	})
	if err != nil {
		return mcp.ErrorResult("sampling failed: " + err.Error()), nil
	}
	var reply struct {
		Text string `json:"text"`
	}
	_ = codec.Unmarshal(res.Content, &reply)
	return mcp.TextResult("LLM response: " + reply.Text), nil
}

func toolElicitation(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		Message string `json:"message"`
	}
	if err := codec.Unmarshal(req.Params.Arguments, &in); err != nil {
		return mcp.ErrorResult("invalid arguments: " + err.Error()), nil
	}
	return elicit(ctx, req, in.Message, userSchema, "User response: ")
}

func elicitWith(message, schema string) handlers.ToolHandler {
	return func(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		return elicit(ctx, req, message, schema, "Elicitation completed: ")
	}
}

func elicit(ctx context.Context, req *handlers.CallToolRequest, message, schema, prefix string) (*mcp.CallToolResult, error) {
	res, err := req.Peer.Elicit(ctx, &mcp.ElicitParams{Message: message, RequestedSchema: codec.RawJSON(schema)})
	if err != nil {
		return mcp.ErrorResult("elicitation failed: " + err.Error()), nil
	}
	content := string(res.Content)
	if content == "" {
		content = "{}"
	}
	return mcp.TextResult(prefix + "action=" + res.Action + ", content=" + content), nil
}

func toolJSONSchema(_ context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
	args := string(req.Params.Arguments)
	if args == "" {
		args = "{}"
	}
	return mcp.TextResult("JSON Schema 2020-12 tool called with: " + args), nil
}

func toolReconnection(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
	// End the response stream first (SEP-1699): the client reconnects with
	// Last-Event-ID and receives the result by replay.
	if err := sleep(ctx, 50*time.Millisecond); err != nil {
		return nil, err
	}
	req.Peer.CloseStream()
	if err := sleep(ctx, 200*time.Millisecond); err != nil {
		return nil, err
	}
	return mcp.TextResult("Reconnection test completed successfully. If you received this, the client properly reconnected after stream closure."), nil
}

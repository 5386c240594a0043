package engine_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers/builtin"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/require"
)

// The conformance fixtures' multi round-trip requests (2026-07-28),
// served over HandleFrame on a TCP-like session: a 2026-07-28 request
// needs no initialize.

var stateKey = []byte("0123456789abcdef0123456789abcdef")

// statelessConn is a session serving the conformance handler set.
type statelessConn struct {
	conn engine.Conn
	sink *chanSink
	ids  atomic.Int64
}

func newStatelessConn(t *testing.T) *statelessConn {
	t.Helper()
	srv := engine.New(engine.Options{StateKeys: [][]byte{stateKey}})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	require.NoError(t, builtin.Install("conformance", srv.Registry(), builtin.Env{}))
	sink := newChanSink()
	return &statelessConn{conn: srv.Open(sink), sink: sink}
}

const allCaps = `{"sampling":{},"elicitation":{},"roots":{"listChanged":true}}`

// call sends a 2026-07-28 request whose params are params (an object
// without _meta) and caps, and returns the answer.
func (c *statelessConn) call(t *testing.T, method, params, caps string) msg {
	t.Helper()
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":` + caps + `}`
	if params == "" || params == "{}" {
		params = "{" + meta + "}"
	} else {
		params = params[:len(params)-1] + "," + meta + "}"
	}
	id := c.ids.Add(1)
	frame := `{"jsonrpc":"2.0","id":` + strconv.FormatInt(id, 10) + `,"method":"` + method + `","params":` + params + `}`
	out := c.conn.HandleFrame([]byte(frame), nil)
	var m msg
	if len(out) > 0 {
		m = parse(t, out)
	} else {
		for {
			m = c.sink.next(t)
			if m.Method == "" {
				break
			}
		}
	}
	require.Equal(t, strconv.FormatInt(id, 10), string(m.ID), "answer to %s", frame)
	return m
}

// mrtrResult is the part of a result these tests read.
type mrtrResult struct {
	ResultType    string                     `json:"resultType"`
	InputRequests map[string]json.RawMessage `json:"inputRequests"`
	RequestState  string                     `json:"requestState"`
	Content       []mcp.Content              `json:"content"`
	Messages      []mcp.PromptMessage        `json:"messages"`
}

func (m msg) mrtr(t *testing.T) mrtrResult {
	t.Helper()
	require.Nil(t, m.Error, "error answer: %+v", m.Error)
	var r mrtrResult
	require.NoError(t, codec.Unmarshal(m.Result, &r), "result %s", m.Result)
	return r
}

// methods returns the method of each input request, by key.
func (r mrtrResult) methods(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for k, raw := range r.InputRequests {
		var req struct {
			Method string `json:"method"`
		}
		require.NoError(t, codec.Unmarshal(raw, &req))
		out[k] = req.Method
	}
	return out
}

// retry builds the params of a retried call.
func retry(name, responses, state string) string {
	p := `{"name":"` + name + `","arguments":{},"inputResponses":` + responses
	if state != "" {
		p += `,"requestState":"` + state + `"`
	}
	return p + "}"
}

const (
	acceptName = `{"action":"accept","content":{"name":"Alice"}}`
	sampled    = `{"role":"assistant","content":{"type":"text","text":"Paris"},"model":"test-model","stopReason":"endTurn"}`
	rootsAns   = `{"roots":[{"uri":"file:///test/root","name":"Test Root"}]}`
)

func TestConformanceInputRequired(t *testing.T) {
	c := newStatelessConn(t)
	cases := []struct {
		tool      string
		methods   map[string]string
		responses string // inputResponses answering the first round
		want      string // in the final text
	}{
		{"test_input_required_result_elicitation", map[string]string{"user_name": mcp.MethodElicitationCreate}, `{"user_name":` + acceptName + `}`, "Hello, Alice!"},
		{"test_streaming_elicitation", map[string]string{"user_name": mcp.MethodElicitationCreate}, `{"user_name":` + acceptName + `}`, "Hello, Alice!"},
		{"test_input_required_result_sampling", map[string]string{"capital_question": mcp.MethodSamplingCreateMessage}, `{"capital_question":` + sampled + `}`, "Paris"},
		{"test_input_required_result_list_roots", map[string]string{"client_roots": mcp.MethodRootsList}, `{"client_roots":` + rootsAns + `}`, "file:///test/root"},
		{"test_input_required_result_request_state", map[string]string{"confirm": mcp.MethodElicitationCreate}, `{"confirm":{"action":"accept","content":{"ok":true}}}`, "state-ok"},
		{"test_input_required_result_multiple_inputs", map[string]string{"user_name": mcp.MethodElicitationCreate, "greeting": mcp.MethodSamplingCreateMessage, "client_roots": mcp.MethodRootsList},
			`{"user_name":` + acceptName + `,"greeting":` + sampled + `,"client_roots":` + rootsAns + `}`, "name=Alice"},
		{"test_input_required_result_capabilities", map[string]string{"capital_question": mcp.MethodSamplingCreateMessage, "user_name": mcp.MethodElicitationCreate, "client_roots": mcp.MethodRootsList},
			`{"user_name":` + acceptName + `,"capital_question":` + sampled + `,"client_roots":` + rootsAns + `}`, "name=Alice"},
	}
	for _, tc := range cases {
		t.Run(tc.tool, func(t *testing.T) {
			r1 := c.call(t, "tools/call", `{"name":"`+tc.tool+`","arguments":{}}`, allCaps).mrtr(t)
			require.Equal(t, "input_required", r1.ResultType)
			require.Equal(t, tc.methods, r1.methods(t))
			require.NotEmpty(t, r1.RequestState)
			r2 := c.call(t, "tools/call", retry(tc.tool, tc.responses, r1.RequestState), allCaps).mrtr(t)
			require.Equal(t, "complete", r2.ResultType)
			require.NotEmpty(t, r2.Content)
			require.Contains(t, r2.Content[0].Text, tc.want)
		})
	}
}

func TestConformanceInputRequiredMultiRound(t *testing.T) {
	c := newStatelessConn(t)
	const tool = "test_input_required_result_multi_round"
	r1 := c.call(t, "tools/call", `{"name":"`+tool+`","arguments":{}}`, allCaps).mrtr(t)
	require.Equal(t, map[string]string{"step1": mcp.MethodElicitationCreate}, r1.methods(t))
	r2 := c.call(t, "tools/call", retry(tool, `{"step1":`+acceptName+`}`, r1.RequestState), allCaps).mrtr(t)
	require.Equal(t, "input_required", r2.ResultType)
	require.Equal(t, map[string]string{"step2": mcp.MethodElicitationCreate}, r2.methods(t))
	require.NotEqual(t, r1.RequestState, r2.RequestState)
	// The client answers step2 alone: step1 comes back in requestState.
	r3 := c.call(t, "tools/call", retry(tool, `{"step2":{"action":"accept","content":{"color":"blue"}}}`, r2.RequestState), allCaps).mrtr(t)
	require.Equal(t, "complete", r3.ResultType)
	require.Equal(t, "Alice's favorite color is blue", r3.Content[0].Text)
}

func TestConformanceInputRequiredPrompt(t *testing.T) {
	c := newStatelessConn(t)
	r1 := c.call(t, "prompts/get", `{"name":"test_input_required_result_prompt"}`, allCaps).mrtr(t)
	require.Equal(t, "input_required", r1.ResultType)
	require.Equal(t, map[string]string{"user_context": mcp.MethodElicitationCreate}, r1.methods(t))
	r2 := c.call(t, "prompts/get", `{"name":"test_input_required_result_prompt","inputResponses":{"user_context":{"action":"accept","content":{"context":"test context"}}},"requestState":"`+r1.RequestState+`"}`, allCaps).mrtr(t)
	require.Equal(t, "complete", r2.ResultType)
	require.NotEmpty(t, r2.Messages)
	require.Contains(t, r2.Messages[0].Content.Text, "test context")
}

// forge re-signs state with its expiry moved to the past.
func forge(t *testing.T, state string) string {
	t.Helper()
	payload, err := base64.RawURLEncoding.DecodeString(state[:strings.IndexByte(state, '.')])
	require.NoError(t, err)
	var p map[string]any
	require.NoError(t, json.Unmarshal(payload, &p))
	p["e"] = 1
	payload, _ = json.Marshal(p)
	mac := hmac.New(sha256.New, stateKey)
	mac.Write(payload)
	return base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

func TestConformanceInputRequiredBadState(t *testing.T) {
	c := newStatelessConn(t)
	const tool = "test_input_required_result_tampered_state"
	r1 := c.call(t, "tools/call", `{"name":"`+tool+`","arguments":{}}`, allCaps).mrtr(t)
	require.NotEmpty(t, r1.RequestState)
	ok := `{"confirm":{"action":"accept","content":{"ok":true}}}`
	for name, state := range map[string]string{
		"tampered": r1.RequestState + "-TAMPERED",
		"expired":  forge(t, r1.RequestState),
		"garbage":  "not-a-state",
	} {
		t.Run(name, func(t *testing.T) {
			m := c.call(t, "tools/call", retry(tool, ok, state), allCaps)
			require.NotNil(t, m.Error, "result %s", m.Result)
			require.Equal(t, codec.CodeInvalidParams, m.Error.Code)
		})
	}
	t.Run("other request", func(t *testing.T) {
		m := c.call(t, "tools/call", retry("test_input_required_result_request_state", ok, r1.RequestState), allCaps)
		require.NotNil(t, m.Error, "result %s", m.Result)
	})
	t.Run("untampered", func(t *testing.T) {
		r := c.call(t, "tools/call", retry(tool, ok, r1.RequestState), allCaps).mrtr(t)
		require.Equal(t, "complete", r.ResultType)
	})
}

func TestConformanceInputRequiredResponses(t *testing.T) {
	c := newStatelessConn(t)
	const tool = "test_input_required_result_elicitation"
	t.Run("ignore extra", func(t *testing.T) {
		r := c.call(t, "tools/call", retry(tool, `{"user_name":`+acceptName+`,"unknown_extra_key":{"action":"accept","content":{"foo":"bar"}},"another_unexpected":{"action":"accept","content":{"baz":123}}}`, ""), allCaps).mrtr(t)
		require.Equal(t, "complete", r.ResultType)
		require.Equal(t, "Hello, Alice!", r.Content[0].Text)
	})
	t.Run("missing response re-requested", func(t *testing.T) {
		r := c.call(t, "tools/call", retry(tool, `{"wrong_key":{"action":"accept","content":{"data":"wrong"}}}`, ""), allCaps).mrtr(t)
		require.Equal(t, "input_required", r.ResultType)
		require.Contains(t, r.InputRequests, "user_name")
	})
	t.Run("malformed response", func(t *testing.T) {
		m := c.call(t, "tools/call", retry(tool, `{"user_name":12345}`, ""), allCaps)
		require.NotNil(t, m.Error, "result %s", m.Result)
		require.Equal(t, codec.CodeInvalidParams, m.Error.Code)
	})
	t.Run("null responses", func(t *testing.T) {
		r := c.call(t, "tools/call", retry(tool, `null`, ""), allCaps).mrtr(t)
		require.Equal(t, "input_required", r.ResultType)
	})
	t.Run("lists never ask", func(t *testing.T) {
		for _, m := range []string{"tools/list", "prompts/list"} {
			r := c.call(t, m, "{}", allCaps).mrtr(t)
			require.Equal(t, "complete", r.ResultType)
		}
	})
}

func TestConformanceCapabilities(t *testing.T) {
	c := newStatelessConn(t)
	t.Run("only sampling asked of a sampling client", func(t *testing.T) {
		r := c.call(t, "tools/call", `{"name":"test_input_required_result_capabilities","arguments":{}}`, `{"sampling":{}}`).mrtr(t)
		require.Equal(t, "input_required", r.ResultType)
		require.Equal(t, map[string]string{"capital_question": mcp.MethodSamplingCreateMessage}, r.methods(t))
	})
	for _, tc := range []struct{ tool, caps string }{
		{"test_missing_capability", `{}`},
		{"test_missing_capability", `{"elicitation":{}}`},
		{"test_input_required_result_sampling", `{}`},
		{"test_input_required_result_elicitation", `{"sampling":{}}`},
		{"test_input_required_result_capabilities", `{}`},
	} {
		t.Run(tc.tool+" "+tc.caps, func(t *testing.T) {
			m := c.call(t, "tools/call", `{"name":"`+tc.tool+`","arguments":{}}`, tc.caps)
			require.NotNil(t, m.Error, "result %s", m.Result)
			require.Equal(t, mcp.CodeMissingClientCapability, m.Error.Code)
			var data struct {
				Required map[string]json.RawMessage `json:"requiredCapabilities"`
			}
			require.NoError(t, codec.Unmarshal(m.Error.Data, &data))
			require.NotEmpty(t, data.Required)
		})
	}
	t.Run("with sampling", func(t *testing.T) {
		r := c.call(t, "tools/call", `{"name":"test_missing_capability","arguments":{}}`, `{"sampling":{}}`).mrtr(t)
		require.Equal(t, "input_required", r.ResultType)
	})
}

func TestConformanceLoggingTool(t *testing.T) {
	c := newStatelessConn(t)
	// Without a logLevel in _meta: no notifications/message, a result.
	m := c.call(t, "tools/call", `{"name":"test_logging_tool","arguments":{}}`, `{}`)
	require.Equal(t, "complete", m.mrtr(t).ResultType)
	c.sink.none(t, 0)

	// With one: the messages come before the result.
	frame := `{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"test_logging_tool","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"info"}}}`
	require.Empty(t, c.conn.HandleFrame([]byte(frame), nil))
	logs := 0
	for {
		m := c.sink.next(t)
		if m.Method == "" {
			require.Equal(t, "99", string(m.ID))
			break
		}
		require.Equal(t, mcp.NotificationMessage, m.Method)
		logs++
	}
	require.Equal(t, 3, logs)
}

func TestConformanceToolsListOrder(t *testing.T) {
	c := newStatelessConn(t)
	names := func() []string {
		var r struct {
			Tools []mcp.Tool `json:"tools"`
		}
		require.NoError(t, codec.Unmarshal(c.call(t, "tools/list", "{}", allCaps).Result, &r))
		out := make([]string, len(r.Tools))
		for i, tool := range r.Tools {
			out[i] = tool.Name
			require.NotEmpty(t, tool.Description, tool.Name)
			require.Empty(t, tool.OutputSchema, tool.Name)
		}
		return out
	}
	first := names()
	require.Equal(t, "test_simple_text", first[0])
	for _, trigger := range []string{"test_trigger_tool_change", "test_trigger_prompt_change", "test_trigger_tool_change"} {
		require.Nil(t, c.call(t, "tools/call", `{"name":"`+trigger+`","arguments":{}}`, `{}`).Error)
		require.Equal(t, first, names(), "after %s", trigger)
	}
	// The first tool with x-mcp-header is the Region one.
	var r struct {
		Tools []struct {
			Name        string `json:"name"`
			InputSchema struct {
				Properties map[string]map[string]any `json:"properties"`
			} `json:"inputSchema"`
		} `json:"tools"`
	}
	require.NoError(t, codec.Unmarshal(c.call(t, "tools/list", "{}", allCaps).Result, &r))
	found := ""
	for _, tool := range r.Tools {
		for _, p := range tool.InputSchema.Properties {
			if _, ok := p["x-mcp-header"]; ok && found == "" {
				found = tool.Name
				require.Equal(t, "Region", p["x-mcp-header"])
			}
		}
	}
	require.Equal(t, "test_x_mcp_header", found)
	m := c.call(t, "tools/call", `{"name":"test_x_mcp_header","arguments":{"region":"test-default"}}`, `{}`)
	require.Equal(t, "Region: test-default", m.text(t))
	// http-header-validation calls the first tool with empty arguments.
	require.Nil(t, c.call(t, "tools/call", `{"name":"`+first[0]+`","arguments":{}}`, `{}`).Error)
}

package client

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
)

// The 2026-07-28 HTTP binding mirrors parts of a request into headers:
// Mcp-Method, Mcp-Name (params.name or params.uri) and, for a tool whose
// inputSchema marks properties with x-mcp-header, Mcp-Param-{name}.

// maxSafeInt is the largest integer JavaScript holds exactly.
const maxSafeInt = 1<<53 - 1

// headerValue returns v as a header value: as it is when it is plain,
// visible ASCII, in the Base64 sentinel form otherwise.
func headerValue(v string) string {
	safe := v == strings.TrimSpace(v) && !(strings.HasPrefix(v, "=?base64?") && strings.HasSuffix(v, "?="))
	for i := 0; safe && i < len(v); i++ {
		if c := v[i]; (c < 0x20 || c > 0x7e) && c != '\t' {
			safe = false
		}
	}
	if safe {
		return v
	}
	return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(v)) + "?="
}

// filterTools drops, in 2026-07-28, the tools whose x-mcp-header
// annotations are invalid, and records the parameters of the others.
func (c *Client) filterTools(tools []mcp.Tool) []mcp.Tool {
	kept := tools[:0]
	for _, t := range tools {
		hs, err := mcp.ParseHeaderParams(t.InputSchema)
		if err != nil {
			c.log.Warn("tool left out: invalid x-mcp-header", "tool", t.Name, "err", err)
			c.hdrTools.Delete(t.Name)
			continue
		}
		if len(hs) > 0 {
			c.hdrTools.Store(t.Name, hs)
		} else {
			c.hdrTools.Delete(t.Name)
		}
		kept = append(kept, t)
	}
	return kept
}

// toolParams returns a tool's x-mcp-header parameters, known from the
// tools listed.
func (c *Client) toolParams(tool string) []mcp.HeaderParam {
	hs, _ := c.hdrTools.Load(tool)
	return hs
}

// setModernHeaders sets the headers 2026-07-28 requires of the POST of
// msg.
func setModernHeaders(h http.Header, msg []byte, params func(string) []mcp.HeaderParam) {
	var m codec.Message
	if codec.Decode(msg, &m) != nil || m.Method == "" {
		return
	}
	h.Set("Mcp-Method", m.Method)
	var key string
	switch m.Method {
	case mcp.MethodToolsCall, mcp.MethodPromptsGet:
		key = "name"
	case mcp.MethodResourcesRead:
		key = "uri"
	default:
		return
	}
	raw, ok, err := codec.ObjectField(m.Params, key)
	if err != nil || !ok {
		return
	}
	var name string
	if codec.Unmarshal(raw, &name) != nil {
		return
	}
	h.Set("Mcp-Name", headerValue(name))
	if m.Method != mcp.MethodToolsCall || params == nil {
		return
	}
	hs := params(name)
	if len(hs) == 0 {
		return
	}
	args, ok, err := codec.ObjectField(m.Params, "arguments")
	if err != nil || !ok {
		return
	}
	for _, p := range hs {
		if v, ok := argValue(args, p.Path); ok {
			h.Set(p.Header, headerValue(v))
		}
	}
}

// argValue returns the value at path in args as a header would carry it.
func argValue(args []byte, path []string) (string, bool) {
	v := args
	for _, k := range path {
		next, ok, err := codec.ObjectField(v, k)
		if err != nil || !ok {
			return "", false
		}
		v = next
	}
	var x any
	d := json.NewDecoder(strings.NewReader(string(v)))
	d.UseNumber()
	if d.Decode(&x) != nil {
		return "", false
	}
	switch y := x.(type) {
	case string:
		return y, true
	case bool:
		return strconv.FormatBool(y), true
	case json.Number:
		n, err := strconv.ParseInt(y.String(), 10, 64)
		if err != nil || n > maxSafeInt || n < -maxSafeInt {
			return "", false
		}
		return strconv.FormatInt(n, 10), true
	}
	return "", false
}

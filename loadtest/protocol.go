package loadtest

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
)

// The protocol revisions a load run speaks (Config.Protocol).
const (
	// ProtocolSession is the session revision: initialize, then requests
	// on the session it opened (over HTTP, carrying its Mcp-Session-Id).
	ProtocolSession = protocolVersion
	// ProtocolStateless is revision 2026-07-28: no initialize and no
	// session; every request carries the version, the client's
	// capabilities and its identity in params._meta (over HTTP also in
	// MCP-Protocol-Version, with Mcp-Method and Mcp-Name), and every result
	// must say "resultType":"complete".
	ProtocolStateless = mcp.Version20260728
)

// Protocols lists the revisions Config.Protocol takes.
func Protocols() []string { return []string{ProtocolSession, ProtocolStateless} }

// modernMeta is the _meta of every 2026-07-28 request mcpload sends, the
// same identity initialize gives in the session revision.
const modernMeta = `{"` + mcp.MetaProtocolVersion + `":"` + ProtocolStateless + `","` +
	mcp.MetaClientCapabilities + `":{},"` +
	mcp.MetaClientInfo + `":{"name":"mcpload","version":"1"}}`

// removedMethods are the session revision's methods that 2026-07-28 does
// not have: a step calling one is refused before the run.
var removedMethods = []string{"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"}

// modernParams returns the params template tpl with the 2026-07-28 _meta
// as its first member (tpl empty: params holding only _meta). The result
// is still a template: rendering it costs what rendering tpl did, plus a
// constant prefix. A template whose object has a _meta of its own is
// refused, for the request would carry two.
func modernParams(tpl string) (string, error) {
	t := strings.TrimSpace(tpl)
	if t == "" {
		return `{"_meta":` + modernMeta + `}`, nil
	}
	if t[0] != '{' {
		return "", fmt.Errorf("%w: params template %q is not an object", ErrConfig, tpl)
	}
	rest := strings.TrimLeft(t[1:], " \t\r\n")
	if strings.HasPrefix(rest, "}") {
		return `{"_meta":` + modernMeta + rest, nil
	}
	return `{"_meta":` + modernMeta + `,` + rest, nil
}

// modernize turns the mix's steps into 2026-07-28 requests: each params
// template gets the _meta, and a step whose method 2026-07-28 removed, or
// whose params carry a _meta of their own, is refused.
func (m *mix) modernize() error {
	for i := range m.steps {
		st := &m.steps[i]
		for _, r := range removedMethods {
			if st.Method == r {
				return fmt.Errorf("%w: step %q: %s is not a method of protocol %s", ErrConfig, st.Name, r, ProtocolStateless)
			}
		}
		if st.Params != "" {
			var v vars
			v.fill(&rand64{s: 1}, 0, 1)
			if _, has, _ := codec.ObjectField(render(nil, st.params, &v), "_meta"); has {
				return fmt.Errorf("%w: step %q: its params carry a _meta of their own; protocol %s adds mcpload's", ErrConfig, st.Name, ProtocolStateless)
			}
		}
		p, err := modernParams(st.Params)
		if err != nil {
			return err
		}
		st.Params = p
		if st.params, err = compile(p); err != nil {
			return err
		}
		st.modern = true
	}
	return nil
}

// nameParam is the params member that Mcp-Name repeats for method, or ""
// for a method that has none.
func nameParam(method string) string {
	switch method {
	case "tools/call", "prompts/get":
		return "name"
	case "resources/read":
		return "uri"
	}
	return ""
}

// mcpName appends to dst the Mcp-Name header value of a request of method
// with params (SEP-2243): the tool or prompt name, or the resource URI,
// Base64-wrapped as =?base64?...?= when it is not plain printable ASCII
// (or starts or ends with a blank, or looks wrapped already). ok is false
// when the method has no name or params do not hold it as a string.
func mcpName(dst []byte, method string, params []byte) (_ []byte, ok bool) {
	key := nameParam(method)
	if key == "" {
		return dst, false
	}
	raw, found, err := codec.ObjectField(params, key)
	if err != nil || !found {
		return dst, false
	}
	s, err := codec.StringValue(raw)
	if err != nil {
		var v string
		if codec.Unmarshal(raw, &v) != nil {
			return dst, false
		}
		s = []byte(v)
	}
	if !headerSafe(s) {
		dst = append(dst, "=?base64?"...)
		dst = base64.StdEncoding.AppendEncode(dst, s)
		return append(dst, "?="...), true
	}
	return append(dst, s...), true
}

// headerSafe reports whether s goes into a header value as it is.
func headerSafe(s []byte) bool {
	if len(s) == 0 {
		return true
	}
	if s[0] == ' ' || s[0] == '\t' || s[len(s)-1] == ' ' || s[len(s)-1] == '\t' {
		return false
	}
	for _, c := range s {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return !(strings.HasPrefix(string(s), "=?base64?") && strings.HasSuffix(string(s), "?="))
}

package mcp

import (
	"fmt"
	"sort"
	"strings"

	"github.com/mcpedge/mcpedge/codec"
)

// HeaderParam is a tool argument that 2026-07-28 clients on Streamable
// HTTP mirror into a request header, Mcp-Param-<Name>: the property of
// the tool's inputSchema annotated with "x-mcp-header": Name. A client
// sets the header; the server checks that it matches the argument.
type HeaderParam struct {
	// Name is the annotation's value, the header name's suffix.
	Name string
	// Header is the header name, "Mcp-Param-" + Name.
	Header string
	// Path is the chain of properties keys that leads from the arguments
	// object to the argument.
	Path []string
	// Type is the property's type: "string", "integer" or "boolean".
	Type string
}

const xMCPHeader = "x-mcp-header"

// ParseHeaderParams finds the x-mcp-header annotations of a tool's
// inputSchema and checks them (SEP-2243): each value a non-empty HTTP token, unique
// case-insensitively, on a property of type string, integer or boolean
// reachable from the root through properties keys alone. Annotations
// anywhere else make the tool invalid.
func ParseHeaderParams(raw []byte) ([]HeaderParam, error) {
	if !strings.Contains(string(raw), xMCPHeader) {
		return nil, nil
	}
	var doc any
	if err := codec.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	root, _ := doc.(map[string]any)
	var out []HeaderParam
	seen := map[string]string{}
	var walk func(sch map[string]any, path []string) error
	walk = func(sch map[string]any, path []string) error {
		props, _ := sch["properties"].(map[string]any)
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			sub, ok := props[k].(map[string]any)
			if !ok {
				continue
			}
			p := append(path[:len(path):len(path)], k)
			if v, has := sub[xMCPHeader]; has {
				name, ok := v.(string)
				where := strings.Join(p, ".")
				switch {
				case !ok || name == "":
					return fmt.Errorf("%s on %q must be a non-empty string", xMCPHeader, where)
				case !isToken(name):
					return fmt.Errorf("%s %q on %q is not an HTTP field-name token", xMCPHeader, name, where)
				}
				if prev, dup := seen[strings.ToLower(name)]; dup {
					return fmt.Errorf("%s %q on %q repeats the one on %q (names are case-insensitive)", xMCPHeader, name, where, prev)
				}
				seen[strings.ToLower(name)] = where
				typ, _ := sub["type"].(string)
				switch typ {
				case "string", "integer", "boolean":
				default:
					return fmt.Errorf("%s %q on %q: the property's type must be string, integer or boolean, not %v", xMCPHeader, name, where, sub["type"])
				}
				out = append(out, HeaderParam{Name: name, Header: "Mcp-Param-" + name, Path: p, Type: typ})
			}
			if err := walk(sub, p); err != nil {
				return err
			}
		}
		return nil
	}
	if root != nil {
		if err := walk(root, nil); err != nil {
			return nil, err
		}
	}
	if n := countAnnotations(doc, false); n != len(out) {
		return nil, fmt.Errorf("%s must only annotate properties reachable from the schema root through properties keys (%d of %d are not)", xMCPHeader, n-len(out), n)
	}
	return out, nil
}

// countAnnotations counts the x-mcp-header keywords of a schema anywhere
// in it. names is set when v is a map whose keys are names (properties,
// $defs...), not keywords.
func countAnnotations(v any, names bool) int {
	n := 0
	switch v := v.(type) {
	case map[string]any:
		for k, sub := range v {
			if !names && k == xMCPHeader {
				n++
				continue
			}
			switch {
			case names:
				n += countAnnotations(sub, false)
			case k == "properties" || k == "patternProperties" || k == "$defs" || k == "definitions" || k == "dependentSchemas":
				n += countAnnotations(sub, true)
			default:
				n += countAnnotations(sub, false)
			}
		}
	case []any:
		for _, sub := range v {
			n += countAnnotations(sub, false)
		}
	}
	return n
}

// isToken reports whether s is an RFC 9110 token (1*tchar).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

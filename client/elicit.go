package client

import (
	"fmt"

	"github.com/mcpedge/mcpedge/codec"
)

// ElicitationDefaults returns the default of each property of an
// elicitation's requestedSchema that declares one (SEP-1034), keyed by
// property name: what a form pre-fills, and what a client accepting "with
// defaults" answers. Properties without a default are absent.
func ElicitationDefaults(requestedSchema codec.RawJSON) (map[string]any, error) {
	var s struct {
		Properties map[string]struct {
			Default any `json:"default"`
		} `json:"properties"`
	}
	if len(requestedSchema) == 0 {
		return map[string]any{}, nil
	}
	if err := codec.Unmarshal(requestedSchema, &s); err != nil {
		return nil, fmt.Errorf("client: requestedSchema: %w", err)
	}
	out := make(map[string]any, len(s.Properties))
	for name, p := range s.Properties {
		if p.Default != nil {
			out[name] = p.Default
		}
	}
	return out, nil
}

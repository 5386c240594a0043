package handlers

import (
	"context"
	"errors"
	"testing"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestToolHeaderParams(t *testing.T) {
	nop := func(context.Context, *CallToolRequest) (*mcp.CallToolResult, error) { return nil, nil }
	for _, tc := range []struct {
		name, schema string
		want         []HeaderParam // nil with bad set: registration fails
		bad          bool
	}{
		{name: "none", schema: `{"type":"object","properties":{"a":{"type":"string"}}}`},
		{name: "top level", schema: `{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"n":{"type":"integer","x-mcp-header":"N"},"b":{"type":"boolean","x-mcp-header":"Flag_1"}}}`,
			want: []HeaderParam{
				{Name: "Flag_1", Header: "Mcp-Param-Flag_1", Path: []string{"b"}, Type: "boolean"},
				{Name: "N", Header: "Mcp-Param-N", Path: []string{"n"}, Type: "integer"},
				{Name: "Region", Header: "Mcp-Param-Region", Path: []string{"region"}, Type: "string"},
			}},
		{name: "nested", schema: `{"type":"object","properties":{"cfg":{"type":"object","properties":{"zone":{"type":"string","x-mcp-header":"Zone"}}}}}`,
			want: []HeaderParam{{Name: "Zone", Header: "Mcp-Param-Zone", Path: []string{"cfg", "zone"}, Type: "string"}}},
		{name: "property named like the keyword", schema: `{"type":"object","properties":{"x-mcp-header":{"type":"string"}}}`},
		{name: "empty", schema: `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":""}}}`, bad: true},
		{name: "not a string", schema: `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":3}}}`, bad: true},
		{name: "not a token", schema: `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"Re gion"}}}`, bad: true},
		{name: "control character", schema: `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"A\r\nB"}}}`, bad: true},
		{name: "duplicate", schema: `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"Region"},"b":{"type":"string","x-mcp-header":"REGION"}}}`, bad: true},
		{name: "number", schema: `{"type":"object","properties":{"a":{"type":"number","x-mcp-header":"A"}}}`, bad: true},
		{name: "object", schema: `{"type":"object","properties":{"a":{"type":"object","x-mcp-header":"A"}}}`, bad: true},
		{name: "untyped", schema: `{"type":"object","properties":{"a":{"x-mcp-header":"A"}}}`, bad: true},
		{name: "type list", schema: `{"type":"object","properties":{"a":{"type":["string","null"],"x-mcp-header":"A"}}}`, bad: true},
		{name: "under items", schema: `{"type":"object","properties":{"a":{"type":"array","items":{"type":"string","x-mcp-header":"A"}}}}`, bad: true},
		{name: "under anyOf", schema: `{"type":"object","anyOf":[{"properties":{"a":{"type":"string","x-mcp-header":"A"}}}]}`, bad: true},
		{name: "under $defs", schema: `{"type":"object","$defs":{"d":{"type":"string","x-mcp-header":"A"}},"properties":{"a":{"$ref":"#/$defs/d"}}}`, bad: true},
		{name: "on the root", schema: `{"type":"object","x-mcp-header":"A"}`, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRegistry(Options{})
			err := r.AddTool(&mcp.Tool{Name: "t", InputSchema: codec.RawJSON(tc.schema)}, nop)
			if tc.bad {
				require.Error(t, err)
				assert.True(t, errors.Is(err, ErrInvalidTool), err)
				_, ok := r.Tool("t")
				assert.False(t, ok)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, r.ToolHeaderParams("t"))
		})
	}
	assert.Nil(t, NewRegistry(Options{}).ToolHeaderParams("missing"))
}

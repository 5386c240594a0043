package client

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Output check errors.
var (
	ErrUnknownTool  = errors.New("client: tool not in tools/list")
	ErrOutputSchema = errors.New("client: tool result does not match its outputSchema")
)

// toolSet is the tools listed last, by name; output schemas are compiled
// on first use. It is immutable once stored, except for the lazily
// compiled schemas, which sync.Once guards.
type toolSet struct {
	byName map[string]*toolEntry
}

type toolEntry struct {
	tool mcp.Tool
	once sync.Once
	sch  *jsonschema.Schema
	err  error
}

func newToolSet(tools []mcp.Tool) *toolSet {
	s := &toolSet{byName: make(map[string]*toolEntry, len(tools))}
	for _, t := range tools {
		s.byName[t.Name] = &toolEntry{tool: t}
	}
	return s
}

const outputSchemaLoc = "mem:///output-schema.json"

func (e *toolEntry) schema() (*jsonschema.Schema, error) {
	e.once.Do(func() {
		var doc any
		if err := codec.Unmarshal(e.tool.OutputSchema, &doc); err != nil {
			e.err = fmt.Errorf("outputSchema of %s is not JSON: %w", e.tool.Name, err)
			return
		}
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		if err := c.AddResource(outputSchemaLoc, doc); err != nil {
			e.err = err
			return
		}
		e.sch, e.err = c.Compile(outputSchemaLoc)
	})
	return e.sch, e.err
}

// checkOutput validates r.StructuredContent against the tool's
// outputSchema.
func (c *Client) checkOutput(ctx context.Context, name string, r *mcp.CallToolResult) error {
	ts := c.tools.Load()
	if ts == nil || ts.byName[name] == nil {
		if _, err := c.AllTools(ctx); err != nil {
			return fmt.Errorf("client: listing tools for the output check: %w", err)
		}
		ts = c.tools.Load()
	}
	var e *toolEntry
	if ts != nil {
		e = ts.byName[name]
	}
	if e == nil {
		return fmt.Errorf("%w: %s", ErrUnknownTool, name)
	}
	if len(e.tool.OutputSchema) == 0 || r.IsError {
		return nil
	}
	if len(r.StructuredContent) == 0 {
		return fmt.Errorf("%w: %s declares an outputSchema but returned no structuredContent", ErrOutputSchema, name)
	}
	sch, err := e.schema()
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrOutputSchema, name, err)
	}
	var doc any
	if err := codec.Unmarshal(r.StructuredContent, &doc); err != nil {
		return fmt.Errorf("%w: %s: structuredContent is not JSON: %w", ErrOutputSchema, name, err)
	}
	if err := sch.Validate(doc); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrOutputSchema, name, err)
	}
	return nil
}

package handlers

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
)

// promptEntry is a registered prompt.
type promptEntry struct {
	prompt   *mcp.Prompt
	h        PromptHandler
	required []string // names of the required arguments

	raw       RawHandler // a raw prompt (AddRawPrompt): h is nil
	completes bool       // raw: raw completes its arguments
}

// AddPrompt registers a prompt, replacing (in place) a prompt of the same
// name. An empty name, an argument without a name or a nil handler yields
// an error wrapping ErrInvalidPrompt. The Registry keeps a copy of *p. Safe
// for concurrent use.
func (r *Registry) AddPrompt(p *mcp.Prompt, h PromptHandler) error {
	if p == nil || p.Name == "" {
		return fmt.Errorf("%w: empty name", ErrInvalidPrompt)
	}
	if h == nil {
		return fmt.Errorf("%w %q: nil handler", ErrInvalidPrompt, p.Name)
	}
	c := *p
	c.Arguments = slices.Clone(c.Arguments)
	c.Meta = slices.Clone(c.Meta)
	var required []string
	for _, a := range c.Arguments {
		if a.Name == "" {
			return fmt.Errorf("%w %q: argument without a name", ErrInvalidPrompt, p.Name)
		}
		if a.Required {
			required = append(required, a.Name)
		}
	}
	enc, err := codec.Marshal(&c)
	if err != nil {
		return fmt.Errorf("%w %q: %w", ErrInvalidPrompt, p.Name, err)
	}
	e := &promptEntry{prompt: &c, h: h, required: required}
	r.update(ListPrompts, func(s *snapshot) bool {
		s.prompts = s.prompts.with(c.Name, enc, e)
		return true
	})
	return nil
}

// RemovePrompts removes the named prompts and returns how many it removed.
// Safe for concurrent use.
func (r *Registry) RemovePrompts(names ...string) int {
	var n int
	r.update(ListPrompts, func(s *snapshot) bool {
		s.prompts, n = s.prompts.without(names)
		return n > 0
	})
	return n
}

// GetPrompt serves prompts/get. An unknown prompt, or a required argument
// that is absent, yields a *codec.Error with code -32602 naming it. A
// handler's nil result is an empty one. Safe for concurrent use.
func (r *Registry) GetPrompt(ctx context.Context, req *GetPromptRequest) (*mcp.GetPromptResult, error) {
	if req == nil || req.Params == nil {
		return nil, &codec.Error{Code: codec.CodeInvalidParams, Message: "missing params"}
	}
	pe, ok := r.snap.Load().prompts.get(req.Params.Name)
	if !ok {
		return nil, notFound(ListNamePrompts, req.Params.Name)
	}
	e := pe.v
	if e.raw != nil {
		res := new(mcp.GetPromptResult)
		if err := rawTyped(ctx, e.raw, req.Peer, mcp.MethodPromptsGet, req.Params.Name, req.Params, res); err != nil {
			return nil, err
		}
		if res.Messages == nil {
			res.Messages = []mcp.PromptMessage{}
		}
		return res, nil
	}
	var missing []string
	for _, name := range e.required {
		if _, ok := req.Params.Arguments[name]; !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		what := "argument"
		if len(missing) > 1 {
			what = "arguments"
		}
		return nil, &codec.Error{Code: codec.CodeInvalidParams,
			Message: "prompt " + req.Params.Name + ": missing required " + what + ": " + strings.Join(missing, ", ")}
	}
	res, err := e.h(ctx, req)
	if err != nil {
		return nil, err
	}
	if res == nil {
		res = &mcp.GetPromptResult{}
	}
	if res.Messages == nil {
		res.Messages = []mcp.PromptMessage{}
	}
	return res, nil
}

// HasPrompt reports whether a prompt is registered under name. Lock-free.
func (r *Registry) HasPrompt(name string) bool {
	_, ok := r.snap.Load().prompts.get(name)
	return ok
}

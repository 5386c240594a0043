package handlers

import (
	"context"
	"fmt"
	"maps"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
)

// MaxCompletionValues is the most values completion/complete returns.
const MaxCompletionValues = 100

// Completion reference types.
const (
	refPrompt   = "ref/prompt"
	refResource = "ref/resource"
)

// completionKey names one argument of a prompt or one variable of a
// resource template.
type completionKey struct {
	ref      string // "ref/prompt" or "ref/resource"
	name     string // prompt name or URI template
	argument string
}

// AddPromptCompletion registers h to complete argument of the named prompt,
// replacing an earlier handler for it. The handler applies while a prompt
// of that name is registered. An empty prompt or argument name, or a nil
// h, yields an error wrapping ErrInvalidCompletion. Safe for concurrent
// use.
func (r *Registry) AddPromptCompletion(prompt, argument string, h CompletionHandler) error {
	return r.addCompletion(completionKey{refPrompt, prompt, argument}, h)
}

// AddTemplateCompletion registers h to complete variable of the resource
// template uriTemplate, replacing an earlier handler for it. The handler
// applies while that template is registered. An empty template or
// variable, or a nil h, yields an error wrapping ErrInvalidCompletion.
// Safe for concurrent use.
func (r *Registry) AddTemplateCompletion(uriTemplate, variable string, h CompletionHandler) error {
	return r.addCompletion(completionKey{refResource, uriTemplate, variable}, h)
}

func (r *Registry) addCompletion(k completionKey, h CompletionHandler) error {
	if k.name == "" || k.argument == "" {
		return fmt.Errorf("%w: empty name or argument (%q, %q)", ErrInvalidCompletion, k.name, k.argument)
	}
	if h == nil {
		return fmt.Errorf("%w %q %q: nil handler", ErrInvalidCompletion, k.name, k.argument)
	}
	r.update(0, func(s *snapshot) bool {
		s.completions = maps.Clone(s.completions)
		s.completions[k] = h
		return true
	})
	return nil
}

// HasCompletions reports whether any completion handler is registered (the
// server then advertises the completions capability). Safe for concurrent
// use.
func (r *Registry) HasCompletions() bool {
	s := r.snap.Load()
	return len(s.completions) > 0 || (s.raw && s.hasRawCompletions())
}

// Complete serves completion/complete. The reference is a prompt by name
// (ref/prompt) or a resource template, or a static resource, by URI
// (ref/resource); one that is not registered, or another type, yields a
// *codec.Error with code -32602. An argument without a handler completes to
// no values. The answer holds at most MaxCompletionValues values; Total is
// the handler's total when it gave one, else the number of values it
// returned, and HasMore is set when values were left out. Values is never
// nil. Safe for concurrent use.
func (r *Registry) Complete(ctx context.Context, req *CompleteRequest) (*mcp.CompleteResult, error) {
	if req == nil || req.Params == nil {
		return nil, &codec.Error{Code: codec.CodeInvalidParams, Message: "missing params"}
	}
	p := req.Params
	s := r.snap.Load()
	name := p.Ref.Name
	if p.Ref.Type == refResource {
		name = p.Ref.URI
	}
	if h, ok := r.RawCompletion(p.Ref.Type, name); ok {
		res := new(mcp.CompleteResult)
		if err := rawTyped(ctx, h, req.Peer, mcp.MethodCompletionComplete, name, p, res); err != nil {
			return nil, err
		}
		if res.Completion.Values == nil {
			res.Completion.Values = []string{}
		}
		return res, nil
	}
	var k completionKey
	switch p.Ref.Type {
	case refPrompt:
		if _, ok := s.prompts.get(p.Ref.Name); !ok {
			return nil, notFound(ListNamePrompts, p.Ref.Name)
		}
		k = completionKey{refPrompt, p.Ref.Name, p.Argument.Name}
	case refResource:
		if _, ok := s.templates.get(p.Ref.URI); !ok {
			if _, ok := s.resources.get(p.Ref.URI); !ok {
				return nil, notFound(ListNameTemplates, p.Ref.URI)
			}
		}
		k = completionKey{refResource, p.Ref.URI, p.Argument.Name}
	default:
		return nil, &codec.Error{Code: codec.CodeInvalidParams, Message: "invalid completion reference type: " + p.Ref.Type}
	}
	h, ok := s.completions[k]
	if !ok {
		return &mcp.CompleteResult{Completion: mcp.Completion{Values: []string{}}}, nil
	}
	res, err := h(ctx, req)
	if err != nil {
		return nil, err
	}
	var c mcp.Completion
	if res != nil {
		c = res.Completion
	}
	n := len(c.Values)
	total := n
	if c.Total != nil && *c.Total > n {
		total = *c.Total
	}
	out := mcp.Completion{Values: c.Values, Total: &total, HasMore: c.HasMore}
	if n > MaxCompletionValues {
		out.Values = c.Values[:MaxCompletionValues:MaxCompletionValues]
	}
	if out.Values == nil {
		out.Values = []string{}
	}
	if total > len(out.Values) {
		out.HasMore = true
	}
	return &mcp.CompleteResult{Completion: out}, nil
}

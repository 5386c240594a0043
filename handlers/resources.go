package handlers

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/yosida95/uritemplate/v3"
)

// resourceEntry is a registered resource: served by h, or static with its
// contents and its resources/read result encoded once.
type resourceEntry struct {
	res      *mcp.Resource
	h        ResourceHandler
	raw      RawHandler             // a raw resource (AddRawResource)
	contents []mcp.ResourceContents // static only
	result   []byte                 // static only: {"contents":[...]}
	hint     atomic.Pointer[CacheHint]
}

// templateEntry is a registered resource template.
type templateEntry struct {
	tmpl *mcp.ResourceTemplate
	t    *uritemplate.Template
	re   *regexp.Regexp // t's regexp, cached: Template.Regexp takes a lock
	h    ResourceHandler
	hint atomic.Pointer[CacheHint]

	raw       RawHandler // a raw template (AddRawResourceTemplate)
	completes bool       // raw: raw completes its variables
}

// AddResource registers a resource read by h, replacing (in place) a
// resource of the same URI. An empty Name is set to the URI. An empty URI or
// a nil handler yields an error wrapping ErrInvalidResource. The Registry
// keeps a copy of *res. Safe for concurrent use.
func (r *Registry) AddResource(res *mcp.Resource, h ResourceHandler) error {
	if h == nil {
		return fmt.Errorf("%w: nil handler", ErrInvalidResource)
	}
	return r.addResource(res, &resourceEntry{h: h})
}

// AddStaticResource registers a resource with fixed contents, replacing (in
// place) a resource of the same URI. Its resources/read result is encoded
// once, here; StaticResourceResult serves it. Contents without a URI get the
// resource's. An empty Name is set to the URI; an empty URI yields an error
// wrapping ErrInvalidResource. Safe for concurrent use.
func (r *Registry) AddStaticResource(res *mcp.Resource, contents ...mcp.ResourceContents) error {
	if res == nil {
		return fmt.Errorf("%w: nil resource", ErrInvalidResource)
	}
	cs := make([]mcp.ResourceContents, len(contents))
	copy(cs, contents)
	for i := range cs {
		if cs[i].URI == "" {
			cs[i].URI = res.URI
		}
	}
	result, err := codec.Marshal(&mcp.ReadResourceResult{Contents: cs})
	if err != nil {
		return fmt.Errorf("%w %q: encoding contents: %w", ErrInvalidResource, res.URI, err)
	}
	return r.addResource(res, &resourceEntry{contents: cs, result: result})
}

func (r *Registry) addResource(res *mcp.Resource, e *resourceEntry) error {
	if res == nil || res.URI == "" {
		return fmt.Errorf("%w: empty uri", ErrInvalidResource)
	}
	c := *res
	if c.Name == "" {
		c.Name = c.URI
	}
	c.Meta = slices.Clone(c.Meta)
	enc, err := codec.Marshal(&c)
	if err != nil {
		return fmt.Errorf("%w %q: %w", ErrInvalidResource, res.URI, err)
	}
	e.res = &c
	r.update(ListResources, func(s *snapshot) bool {
		s.resources = s.resources.with(c.URI, enc, e)
		return true
	})
	return nil
}

// AddResourceTemplate registers a resource template (RFC 6570), replacing
// (in place) a template with the same URITemplate. resources/read of a URI
// that no static resource has and that the template matches runs h with the
// template's variables in ReadResourceRequest.Vars. An empty Name is set to
// the template. An invalid template or a nil handler yields an error
// wrapping ErrInvalidTemplate. Safe for concurrent use.
func (r *Registry) AddResourceTemplate(t *mcp.ResourceTemplate, h ResourceHandler) error {
	if t == nil || t.URITemplate == "" {
		return fmt.Errorf("%w: empty uriTemplate", ErrInvalidTemplate)
	}
	if h == nil {
		return fmt.Errorf("%w %q: nil handler", ErrInvalidTemplate, t.URITemplate)
	}
	ut, err := uritemplate.New(t.URITemplate)
	if err != nil {
		return fmt.Errorf("%w %q: %w", ErrInvalidTemplate, t.URITemplate, err)
	}
	c := *t
	if c.Name == "" {
		c.Name = c.URITemplate
	}
	c.Meta = slices.Clone(c.Meta)
	enc, err := codec.Marshal(&c)
	if err != nil {
		return fmt.Errorf("%w %q: %w", ErrInvalidTemplate, t.URITemplate, err)
	}
	e := &templateEntry{tmpl: &c, t: ut, re: ut.Regexp(), h: h}
	r.update(ListResources, func(s *snapshot) bool {
		s.templates = s.templates.with(c.URITemplate, enc, e)
		return true
	})
	return nil
}

// RemoveResources removes the resources with the given URIs and returns
// how many it removed. Safe for concurrent use.
func (r *Registry) RemoveResources(uris ...string) int {
	var n int
	r.update(ListResources, func(s *snapshot) bool {
		s.resources, n = s.resources.without(uris)
		return n > 0
	})
	return n
}

// RemoveResourceTemplates removes the templates with the given URI
// templates and returns how many it removed. Safe for concurrent use.
func (r *Registry) RemoveResourceTemplates(uriTemplates ...string) int {
	var n int
	r.update(ListResources, func(s *snapshot) bool {
		s.templates, n = s.templates.without(uriTemplates)
		return n > 0
	})
	return n
}

// ReadResource serves resources/read: a resource registered under the URI
// first, then the templates in registration order, the first that matches.
// A URI nothing serves yields a *codec.Error with code -32002 and data
// {"uri":URI}. The result of a static resource is shared and must not be
// modified; a handler's nil result is an empty one. Safe for concurrent use.
func (r *Registry) ReadResource(ctx context.Context, req *ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	if req == nil || req.Params == nil {
		return nil, &codec.Error{Code: codec.CodeInvalidParams, Message: "missing params"}
	}
	uri := req.Params.URI
	s := r.snap.Load()
	if re, ok := s.resources.get(uri); ok {
		e := re.v
		if e.raw != nil {
			return readRaw(ctx, e.raw, req)
		}
		if e.h == nil {
			return &mcp.ReadResourceResult{Contents: e.contents}, nil
		}
		req.Vars = nil
		return readWith(ctx, e.h, req)
	}
	if it, vals := matchTemplate(s.templates, uri); it != nil {
		if it.v.raw != nil {
			return readRaw(ctx, it.v.raw, req)
		}
		vars := make(map[string]string, len(vals))
		for k, v := range vals {
			vars[k] = strings.Join(v.V, ",")
		}
		req.Vars = vars
		return readWith(ctx, it.v.h, req)
	}
	return nil, notFound(ListNameResources, uri)
}

// matchTemplate returns the first template of s, in registration order,
// that matches uri, and the values of its variables; nil when none does.
func matchTemplate(s *set[*templateEntry], uri string) (*entry[*templateEntry], uritemplate.Values) {
	for _, it := range s.items {
		if !it.v.re.MatchString(uri) {
			continue
		}
		if vals := it.v.t.Match(uri); vals != nil {
			return it, vals
		}
	}
	return nil, nil
}

func readRaw(ctx context.Context, h RawHandler, req *ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	res := new(mcp.ReadResourceResult)
	if err := rawTyped(ctx, h, req.Peer, mcp.MethodResourcesRead, req.Params.URI, req.Params, res); err != nil {
		return nil, err
	}
	if res.Contents == nil {
		res.Contents = []mcp.ResourceContents{}
	}
	return res, nil
}

func readWith(ctx context.Context, h ResourceHandler, req *ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	res, err := h(ctx, req)
	if err != nil {
		return nil, err
	}
	if res == nil {
		res = &mcp.ReadResourceResult{}
	}
	if res.Contents == nil {
		res.Contents = []mcp.ResourceContents{}
	}
	return res, nil
}

// StaticResourceResult returns the encoded JSON result of resources/read
// for a resource registered with AddStaticResource, {"contents":[...]}, and
// false for any other URI. The bytes are shared and immutable and remain
// valid forever. It does not allocate. Lock-free and safe for concurrent
// use.
func (r *Registry) StaticResourceResult(uri string) ([]byte, bool) {
	e, ok := r.snap.Load().resources.get(uri)
	if !ok || e.v.result == nil {
		return nil, false
	}
	return e.v.result, true
}

package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
)

// maxPages bounds the pages a walker follows, against a server whose
// cursors never end.
const maxPages = 10000

// ErrCursorLoop reports a server that handed back a cursor already seen.
var ErrCursorLoop = errors.New("client: list cursor repeats")

// CallRaw sends a request whose params are already JSON (nil for none) and
// returns the raw result, a fresh slice owned by the caller. It is the
// load generator's path: one pooled encode, no reflection.
func (c *Client) CallRaw(ctx context.Context, method string, params []byte) ([]byte, error) {
	return c.request(ctx, method, params, nil)
}

// Call sends a request with params marshalled to JSON (nil, a []byte or
// codec.RawJSON of JSON, or any value) and returns the raw result.
func (c *Client) Call(ctx context.Context, method string, params any) (codec.RawJSON, error) {
	p, err := marshalParams(params)
	if err != nil {
		return nil, err
	}
	return c.request(ctx, method, p, nil)
}

// Notify sends a notification (notifications/roots/list_changed, or any
// other) with params as Call takes them.
func (c *Client) Notify(ctx context.Context, method string, params any) error {
	l, err := c.readyLink()
	if err != nil {
		return err
	}
	p, err := marshalParams(params)
	if err != nil {
		return err
	}
	return l.notify(ctx, method, p)
}

// call is Call decoding the result into out.
func (c *Client) call(ctx context.Context, method string, params, out any, progress ProgressFunc) error {
	p, err := marshalParams(params)
	if err != nil {
		return err
	}
	raw, err := c.request(ctx, method, p, progress)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := codec.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s: %w: decoding the result: %w", method, ErrProtocol, err)
	}
	return nil
}

func marshalParams(v any) ([]byte, error) {
	switch p := v.(type) {
	case nil:
		return nil, nil
	case []byte:
		return p, nil
	case codec.RawJSON:
		return p, nil
	case json.RawMessage:
		return p, nil
	}
	b, err := codec.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("client: encoding params: %w", err)
	}
	return b, nil
}

// Ping checks that the server answers: with ping, or, in 2026-07-28
// (which removed it), with server/discover.
func (c *Client) Ping(ctx context.Context) error {
	_, err := c.request(ctx, c.pingMethod(), nil, nil)
	return err
}

func (c *Client) pingMethod() string {
	if c.modern.Load() != nil {
		return mcp.MethodServerDiscover
	}
	return mcp.MethodPing
}

func listParams(cursor string) any {
	if cursor == "" {
		return nil
	}
	return &mcp.ListParams{Cursor: cursor}
}

// walk follows every cursor of a */list method.
func walk[R any](ctx context.Context, list func(context.Context, string) (*R, error), next func(*R) string) ([]*R, error) {
	var pages []*R
	seen := map[string]bool{}
	cursor := ""
	for range maxPages {
		r, err := list(ctx, cursor)
		if err != nil {
			return pages, err
		}
		pages = append(pages, r)
		cursor = next(r)
		if cursor == "" {
			return pages, nil
		}
		if seen[cursor] {
			return pages, fmt.Errorf("%w: %q", ErrCursorLoop, cursor)
		}
		seen[cursor] = true
	}
	return pages, fmt.Errorf("client: more than %d list pages", maxPages)
}

// ListTools returns one page of tools/list. In 2026-07-28 a tool whose
// x-mcp-header annotations are invalid is left out (and logged), and the
// others' annotations are kept for the headers of CallTool over HTTP.
func (c *Client) ListTools(ctx context.Context, cursor string) (*mcp.ListToolsResult, error) {
	var r mcp.ListToolsResult
	if err := c.call(ctx, mcp.MethodToolsList, listParams(cursor), &r, nil); err != nil {
		return nil, err
	}
	if c.modern.Load() != nil {
		r.Tools = c.filterTools(r.Tools)
	}
	return &r, nil
}

// AllTools returns every tool, following the cursors, and refreshes the
// cache CallTool's output check uses.
func (c *Client) AllTools(ctx context.Context) ([]mcp.Tool, error) {
	all, _, err := c.allTools(ctx)
	return all, err
}

// allTools is AllTools, with how long the list is fresh (freshness).
func (c *Client) allTools(ctx context.Context) ([]mcp.Tool, *time.Duration, error) {
	pages, err := walk(ctx, c.ListTools, func(r *mcp.ListToolsResult) string { return r.NextCursor })
	if err != nil {
		return nil, nil, err
	}
	var all []mcp.Tool
	hints := make([]mcp.Cacheable, len(pages))
	for i, p := range pages {
		all = append(all, p.Tools...)
		hints[i] = p.Cacheable
	}
	c.tools.Store(newToolSet(all))
	return all, freshness(hints), nil
}

// freshness is how long a list of pages with hints is fresh: the shortest
// of their ttlMs (a negative one counts as 0), nil when no page has one
// (an older revision's: fresh until a list_changed says otherwise).
func freshness(hints []mcp.Cacheable) *time.Duration {
	var ttl *time.Duration
	for _, h := range hints {
		if h.TTLMs == nil {
			continue
		}
		d := time.Duration(max(*h.TTLMs, 0)) * time.Millisecond
		if ttl == nil || d < *ttl {
			ttl = &d
		}
	}
	return ttl
}

// ListResources returns one page of resources/list.
func (c *Client) ListResources(ctx context.Context, cursor string) (*mcp.ListResourcesResult, error) {
	var r mcp.ListResourcesResult
	if err := c.call(ctx, mcp.MethodResourcesList, listParams(cursor), &r, nil); err != nil {
		return nil, err
	}
	return &r, nil
}

// AllResources returns every resource, following the cursors.
func (c *Client) AllResources(ctx context.Context) ([]mcp.Resource, error) {
	all, _, err := c.allResources(ctx)
	return all, err
}

func (c *Client) allResources(ctx context.Context) ([]mcp.Resource, *time.Duration, error) {
	pages, err := walk(ctx, c.ListResources, func(r *mcp.ListResourcesResult) string { return r.NextCursor })
	if err != nil {
		return nil, nil, err
	}
	var all []mcp.Resource
	hints := make([]mcp.Cacheable, len(pages))
	for i, p := range pages {
		all = append(all, p.Resources...)
		hints[i] = p.Cacheable
	}
	return all, freshness(hints), nil
}

// ListResourceTemplates returns one page of resources/templates/list.
func (c *Client) ListResourceTemplates(ctx context.Context, cursor string) (*mcp.ListResourceTemplatesResult, error) {
	var r mcp.ListResourceTemplatesResult
	if err := c.call(ctx, mcp.MethodResourcesTemplatesList, listParams(cursor), &r, nil); err != nil {
		return nil, err
	}
	return &r, nil
}

// AllResourceTemplates returns every resource template, following the
// cursors.
func (c *Client) AllResourceTemplates(ctx context.Context) ([]mcp.ResourceTemplate, error) {
	pages, err := walk(ctx, c.ListResourceTemplates, func(r *mcp.ListResourceTemplatesResult) string { return r.NextCursor })
	if err != nil {
		return nil, err
	}
	var all []mcp.ResourceTemplate
	for _, p := range pages {
		all = append(all, p.ResourceTemplates...)
	}
	return all, nil
}

// ListPrompts returns one page of prompts/list.
func (c *Client) ListPrompts(ctx context.Context, cursor string) (*mcp.ListPromptsResult, error) {
	var r mcp.ListPromptsResult
	if err := c.call(ctx, mcp.MethodPromptsList, listParams(cursor), &r, nil); err != nil {
		return nil, err
	}
	return &r, nil
}

// AllPrompts returns every prompt, following the cursors.
func (c *Client) AllPrompts(ctx context.Context) ([]mcp.Prompt, error) {
	all, _, err := c.allPrompts(ctx)
	return all, err
}

func (c *Client) allPrompts(ctx context.Context) ([]mcp.Prompt, *time.Duration, error) {
	pages, err := walk(ctx, c.ListPrompts, func(r *mcp.ListPromptsResult) string { return r.NextCursor })
	if err != nil {
		return nil, nil, err
	}
	var all []mcp.Prompt
	hints := make([]mcp.Cacheable, len(pages))
	for i, p := range pages {
		all = append(all, p.Prompts...)
		hints[i] = p.Cacheable
	}
	return all, freshness(hints), nil
}

// ListTasks returns one page of tasks/list.
func (c *Client) ListTasks(ctx context.Context, cursor string) (*mcp.ListTasksResult, error) {
	var r mcp.ListTasksResult
	if err := c.call(ctx, mcp.MethodTasksList, listParams(cursor), &r, nil); err != nil {
		return nil, err
	}
	return &r, nil
}

// AllTasks returns every task, following the cursors.
func (c *Client) AllTasks(ctx context.Context) ([]mcp.Task, error) {
	pages, err := walk(ctx, c.ListTasks, func(r *mcp.ListTasksResult) string { return r.NextCursor })
	if err != nil {
		return nil, err
	}
	var all []mcp.Task
	for _, p := range pages {
		all = append(all, p.Tasks...)
	}
	return all, nil
}

// CallOption modifies one CallTool.
type CallOption func(*callOpts)

type callOpts struct {
	progress ProgressFunc
	validate bool
	meta     codec.RawJSON
}

// WithProgress asks the server for progress notifications (the request's
// id is the progress token) and delivers them to f, on the dispatch
// goroutine, before the call returns.
func WithProgress(f ProgressFunc) CallOption { return func(o *callOpts) { o.progress = f } }

// WithOutputValidation checks the result's structuredContent against the
// tool's outputSchema, taken from the tools listed last (AllTools is
// called first if the tool is not known). A tool without outputSchema,
// or a result with isError, is not checked.
func WithOutputValidation() CallOption { return func(o *callOpts) { o.validate = true } }

// WithMeta sets the request's _meta (raw JSON object). Do not combine it
// with WithProgress.
func WithMeta(meta codec.RawJSON) CallOption { return func(o *callOpts) { o.meta = meta } }

func toolParams(name string, args any, meta codec.RawJSON, task *mcp.TaskParams) (*mcp.CallToolParams, error) {
	a, err := marshalParams(args)
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolParams{Name: name, Arguments: a, Meta: meta, Task: task}, nil
}

// CallTool calls a tool. args are marshalled as Call's params are. A tool
// that failed is a result with IsError, not an error.
func (c *Client) CallTool(ctx context.Context, name string, args any, opts ...CallOption) (*mcp.CallToolResult, error) {
	var o callOpts
	for _, f := range opts {
		f(&o)
	}
	p, err := toolParams(name, args, o.meta, nil)
	if err != nil {
		return nil, err
	}
	var r mcp.CallToolResult
	if err := c.call(ctx, mcp.MethodToolsCall, p, &r, o.progress); err != nil {
		return nil, err
	}
	if o.validate {
		if err := c.checkOutput(ctx, name, &r); err != nil {
			return &r, err
		}
	}
	return &r, nil
}

// CallToolAsTask calls a tool as a task (2025-11-25): the server answers
// at once with the task, to follow with GetTask and collect with
// ToolTaskResult. ttl <= 0 leaves the lifetime to the server.
func (c *Client) CallToolAsTask(ctx context.Context, name string, args any, ttl time.Duration, opts ...CallOption) (*mcp.CreateTaskResult, error) {
	var o callOpts
	for _, f := range opts {
		f(&o)
	}
	task := &mcp.TaskParams{}
	if ttl > 0 {
		ms := ttl.Milliseconds()
		task.TTL = &ms
	}
	p, err := toolParams(name, args, o.meta, task)
	if err != nil {
		return nil, err
	}
	var r mcp.CreateTaskResult
	if err := c.call(ctx, mcp.MethodToolsCall, p, &r, o.progress); err != nil {
		return nil, err
	}
	return &r, nil
}

// GetTask returns a task's state (tasks/get).
func (c *Client) GetTask(ctx context.Context, taskID string) (*mcp.Task, error) {
	var t mcp.Task
	if err := c.call(ctx, mcp.MethodTasksGet, &mcp.TaskIDParams{TaskID: taskID}, &t, nil); err != nil {
		return nil, err
	}
	return &t, nil
}

// TaskResult waits for a task to end and returns what the original
// request would have returned (tasks/result), raw.
func (c *Client) TaskResult(ctx context.Context, taskID string) (codec.RawJSON, error) {
	return c.Call(ctx, mcp.MethodTasksResult, &mcp.TaskIDParams{TaskID: taskID})
}

// ToolTaskResult is TaskResult for a task started by CallToolAsTask.
func (c *Client) ToolTaskResult(ctx context.Context, taskID string) (*mcp.CallToolResult, error) {
	var r mcp.CallToolResult
	if err := c.call(ctx, mcp.MethodTasksResult, &mcp.TaskIDParams{TaskID: taskID}, &r, nil); err != nil {
		return nil, err
	}
	return &r, nil
}

// CancelTask cancels a task (tasks/cancel) and returns its state.
func (c *Client) CancelTask(ctx context.Context, taskID string) (*mcp.Task, error) {
	var t mcp.Task
	if err := c.call(ctx, mcp.MethodTasksCancel, &mcp.TaskIDParams{TaskID: taskID}, &t, nil); err != nil {
		return nil, err
	}
	return &t, nil
}

// ReadResource reads a resource.
func (c *Client) ReadResource(ctx context.Context, uri string) (*mcp.ReadResourceResult, error) {
	var r mcp.ReadResourceResult
	if err := c.call(ctx, mcp.MethodResourcesRead, &mcp.ReadResourceParams{URI: uri}, &r, nil); err != nil {
		return nil, err
	}
	return &r, nil
}

// Subscribe subscribes to a resource's updates; fn (if not nil) is called
// with the URI on each notifications/resources/updated for it, on the
// dispatch goroutine. Subscriptions are renewed after a reconnection.
//
// 2026-07-28 removed resources/subscribe: there Subscribe fails with
// ErrRemovedInModern (use Listen with ResourceSubscriptions).
func (c *Client) Subscribe(ctx context.Context, uri string, fn func(uri string)) error {
	l, err := c.readyLink()
	if err != nil {
		return fmt.Errorf("%s: %w", mcp.MethodResourcesSubscribe, err)
	}
	if c.modern.Load() != nil {
		return fmt.Errorf("%s: %w: use Listen", mcp.MethodResourcesSubscribe, ErrRemovedInModern)
	}
	if err := c.subscribeOn(ctx, l, uri); err != nil {
		return err
	}
	c.mu.Lock()
	if fn != nil {
		c.subs[uri] = append(c.subs[uri], fn)
	} else if _, ok := c.subs[uri]; !ok {
		c.subs[uri] = nil
	}
	c.mu.Unlock()
	return nil
}

func (c *Client) subscribeOn(ctx context.Context, l *link, uri string) error {
	p, err := codec.Marshal(&mcp.SubscribeParams{URI: uri})
	if err != nil {
		return err
	}
	if _, err := l.call(ctx, mcp.MethodResourcesSubscribe, p, nil, c.opts.RequestTimeout); err != nil {
		return fmt.Errorf("%s: %w", mcp.MethodResourcesSubscribe, err)
	}
	return nil
}

// Unsubscribe ends a subscription and drops its callbacks.
func (c *Client) Unsubscribe(ctx context.Context, uri string) error {
	if c.modern.Load() != nil {
		return fmt.Errorf("%s: %w: close the Listen subscription", mcp.MethodResourcesUnsubscribe, ErrRemovedInModern)
	}
	c.mu.Lock()
	delete(c.subs, uri)
	c.mu.Unlock()
	return c.call(ctx, mcp.MethodResourcesUnsubscribe, &mcp.SubscribeParams{URI: uri}, nil, nil)
}

// GetPrompt gets a prompt with its arguments.
func (c *Client) GetPrompt(ctx context.Context, name string, args map[string]string) (*mcp.GetPromptResult, error) {
	var r mcp.GetPromptResult
	if err := c.call(ctx, mcp.MethodPromptsGet, &mcp.GetPromptParams{Name: name, Arguments: args}, &r, nil); err != nil {
		return nil, err
	}
	return &r, nil
}

// Complete asks for completions of a prompt argument or a template
// variable (completion/complete).
func (c *Client) Complete(ctx context.Context, p *mcp.CompleteParams) (*mcp.CompleteResult, error) {
	var r mcp.CompleteResult
	if err := c.call(ctx, mcp.MethodCompletionComplete, p, &r, nil); err != nil {
		return nil, err
	}
	return &r, nil
}

// SetLogLevel sets the lowest level of the log messages the server sends
// (logging/setLevel). In 2026-07-28, which removed logging/setLevel, it
// sets the level each request asks for from now on (empty: none).
func (c *Client) SetLogLevel(ctx context.Context, level string) error {
	if c.modern.Load() != nil {
		if level != "" && mcp.LogLevelIndex(level) < 0 {
			return fmt.Errorf("%s: invalid log level %q", mcp.MethodLoggingSetLevel, level)
		}
		c.logLevel.Store(&level)
		return nil
	}
	return c.call(ctx, mcp.MethodLoggingSetLevel, &mcp.SetLevelParams{Level: level}, nil, nil)
}

// NotifyRootsListChanged tells the server the client's roots changed.
func (c *Client) NotifyRootsListChanged(ctx context.Context) error {
	return c.Notify(ctx, mcp.NotificationRootsListChanged, nil)
}

// Package mcp holds the Model Context Protocol's wire types (revision
// 2025-11-25, with the fields of earlier revisions), shared by the server
// engine, the handlers and the client. It sits beneath every other layer and
// imports only codec.
//
// Optional fields are pointers or omitempty; lists that the schema requires
// are written as [] even when empty, never null.
package mcp

import (
	"github.com/mcpedge/mcpedge/codec"
)

// Protocol revisions.
const (
	Version20241105 = "2024-11-05"
	Version20250326 = "2025-03-26"
	Version20250618 = "2025-06-18"
	Version20251125 = "2025-11-25"
	Version20260728 = "2026-07-28"

	// LatestVersion is the newest session-based revision served.
	LatestVersion = Version20251125
)

// SessionVersions lists the session-based revisions, newest first.
var SessionVersions = [...]string{Version20251125, Version20250618, Version20250326, Version20241105}

// SupportedVersion reports whether v is a session-based revision mcpedge speaks.
func SupportedVersion(v string) bool {
	for _, s := range SessionVersions {
		if s == v {
			return true
		}
	}
	return false
}

// Meta is a raw "_meta" object, passed through untouched.
type Meta = codec.RawJSON

// Icon is an icon for an implementation, tool, resource or prompt.
type Icon struct {
	Src      string   `json:"src"`
	MimeType string   `json:"mimeType,omitempty"`
	Sizes    []string `json:"sizes,omitempty"`
	Theme    string   `json:"theme,omitempty"`
}

// Implementation names a client or server.
type Implementation struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Version     string `json:"version"`
	Description string `json:"description,omitempty"`
	WebsiteURL  string `json:"websiteUrl,omitempty"`
	Icons       []Icon `json:"icons,omitempty"`
}

// ClientCapabilities are what a client declares in initialize. Each
// capability is raw JSON (nil when absent) so unknown sub-fields survive.
// MetaRelatedRequest is mcpedge's _meta key linking a message a server
// sends during a client request (a server-to-client request, progress, a
// log message) to that request: {"requestId": <the request's id>}. A
// server sends it only to a client that declared the key in its
// capabilities' experimental object, as a proxy multiplexing many
// clients' requests over one connection does, so that each message
// reaches the client whose request caused it. It is the session
// revisions' counterpart of related-task, for requests that are not
// tasks.
const MetaRelatedRequest = "io.github.mcpedge/related-request"

// MetaInputKey is mcpedge's _meta key of a server-to-client request
// (sampling, elicitation, roots) that names the input it asks for, as
// the server's handler named it for 2026-07-28 (the key of an
// InputRequiredResult's inputRequests): a string. A server sends it to a
// client that declared MetaRelatedRequest, so that a proxy turning the
// request into an input request of a 2026-07-28 client keeps its key.
const MetaInputKey = "io.github.mcpedge/input-key"

// MetaDeferTask is mcpedge's _meta key of a 2025-11-25 CreateTaskResult
// (true) telling a client that declared MetaRelatedRequest that the
// tool decides itself when its work becomes a task (2026-07-28's
// deferred tasks): a proxy serving a 2026-07-28 client asks that
// client's inputs in input rounds before it makes the call a task.
const MetaDeferTask = "io.github.mcpedge/defer-task"

type ClientCapabilities struct {
	Roots        *RootsCapability       `json:"roots,omitempty"`
	Sampling     *SamplingCapability    `json:"sampling,omitempty"`
	Elicitation  *ElicitationCapability `json:"elicitation,omitempty"`
	Tasks        codec.RawJSON          `json:"tasks,omitempty"`
	Experimental codec.RawJSON          `json:"experimental,omitempty"`
	Extensions   codec.RawJSON          `json:"extensions,omitempty"`
}

// RootsCapability is the client's roots capability.
type RootsCapability struct {
	ListChanged bool `json:"listChanged,omitempty"`
}

// SamplingCapability is the client's sampling capability.
type SamplingCapability struct {
	Context codec.RawJSON `json:"context,omitempty"`
	Tools   codec.RawJSON `json:"tools,omitempty"`
}

// ElicitationCapability is the client's elicitation capability. An empty
// object (neither mode named) means form mode.
type ElicitationCapability struct {
	Form codec.RawJSON `json:"form,omitempty"`
	URL  codec.RawJSON `json:"url,omitempty"`
}

// ServerCapabilities are what the server advertises.
type ServerCapabilities struct {
	Experimental codec.RawJSON        `json:"experimental,omitempty"`
	Logging      *struct{}            `json:"logging,omitempty"`
	Completions  *struct{}            `json:"completions,omitempty"`
	Prompts      *ListChangedCap      `json:"prompts,omitempty"`
	Resources    *ResourcesCapability `json:"resources,omitempty"`
	Tools        *ListChangedCap      `json:"tools,omitempty"`
	Tasks        *TasksCapability     `json:"tasks,omitempty"`
	// Extensions (2026-07-28) maps extension identifiers to their
	// settings objects.
	Extensions codec.RawJSON `json:"extensions,omitempty"`
}

// ListChangedCap is a capability that may announce list changes.
type ListChangedCap struct {
	ListChanged bool `json:"listChanged,omitempty"`
}

// ResourcesCapability is the server's resources capability.
type ResourcesCapability struct {
	Subscribe   bool `json:"subscribe,omitempty"`
	ListChanged bool `json:"listChanged,omitempty"`
}

// TasksCapability is the tasks capability (2025-11-25).
type TasksCapability struct {
	List     *struct{}         `json:"list,omitempty"`
	Cancel   *struct{}         `json:"cancel,omitempty"`
	Requests *TaskRequestsCaps `json:"requests,omitempty"`
}

// TaskRequestsCaps names the requests that may be task-augmented.
type TaskRequestsCaps struct {
	Tools *struct {
		Call *struct{} `json:"call,omitempty"`
	} `json:"tools,omitempty"`
}

// InitializeParams are the params of initialize.
type InitializeParams struct {
	ProtocolVersion string             `json:"protocolVersion"`
	Capabilities    ClientCapabilities `json:"capabilities"`
	ClientInfo      Implementation     `json:"clientInfo"`
	Meta            Meta               `json:"_meta,omitempty"`
}

// InitializeResult is the result of initialize.
type InitializeResult struct {
	ProtocolVersion string             `json:"protocolVersion"`
	Capabilities    ServerCapabilities `json:"capabilities"`
	ServerInfo      Implementation     `json:"serverInfo"`
	Instructions    string             `json:"instructions,omitempty"`
}

// Annotations hint how content is used.
type Annotations struct {
	Audience     []string `json:"audience,omitempty"`
	Priority     *float64 `json:"priority,omitempty"`
	LastModified string   `json:"lastModified,omitempty"`
}

// ToolAnnotations describe a tool's behaviour to clients.
type ToolAnnotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    *bool  `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool  `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
}

// Task support values of ToolExecution.TaskSupport.
const (
	TaskForbidden = "forbidden"
	TaskOptional  = "optional"
	TaskRequired  = "required"
)

// ToolExecution describes how a tool may be run (2025-11-25).
type ToolExecution struct {
	TaskSupport string `json:"taskSupport,omitempty"`
}

// Tool describes a tool. InputSchema and OutputSchema are raw JSON Schema
// documents, passed to clients untouched.
type Tool struct {
	Name         string           `json:"name"`
	Title        string           `json:"title,omitempty"`
	Description  string           `json:"description,omitempty"`
	InputSchema  codec.RawJSON    `json:"inputSchema"`
	OutputSchema codec.RawJSON    `json:"outputSchema,omitempty"`
	Annotations  *ToolAnnotations `json:"annotations,omitempty"`
	Execution    *ToolExecution   `json:"execution,omitempty"`
	Icons        []Icon           `json:"icons,omitempty"`
	Meta         Meta             `json:"_meta,omitempty"`
}

// TaskParams is the task augmentation of a request (params.task).
type TaskParams struct {
	TTL *int64 `json:"ttl,omitempty"`
}

// CallToolParams are the params of tools/call.
type CallToolParams struct {
	Name      string        `json:"name"`
	Arguments codec.RawJSON `json:"arguments,omitempty"`
	Task      *TaskParams   `json:"task,omitempty"`
	Meta      Meta          `json:"_meta,omitempty"`
}

// CallToolResult is the result of tools/call.
type CallToolResult struct {
	Content           []Content     `json:"content"`
	StructuredContent codec.RawJSON `json:"structuredContent,omitempty"`
	IsError           bool          `json:"isError,omitempty"`
	Meta              Meta          `json:"_meta,omitempty"`
}

// TextResult returns a result with one text content.
func TextResult(text string) *CallToolResult {
	return &CallToolResult{Content: []Content{{Type: ContentText, Text: text}}}
}

// ErrorResult returns a tool-execution error result (isError: true) with
// one text content.
func ErrorResult(text string) *CallToolResult {
	return &CallToolResult{Content: []Content{{Type: ContentText, Text: text}}, IsError: true}
}

// Resource describes a resource.
type Resource struct {
	URI         string       `json:"uri"`
	Name        string       `json:"name"`
	Title       string       `json:"title,omitempty"`
	Description string       `json:"description,omitempty"`
	MimeType    string       `json:"mimeType,omitempty"`
	Size        *int64       `json:"size,omitempty"`
	Annotations *Annotations `json:"annotations,omitempty"`
	Icons       []Icon       `json:"icons,omitempty"`
	Meta        Meta         `json:"_meta,omitempty"`
}

// ResourceTemplate describes a family of resources by an RFC 6570 template.
type ResourceTemplate struct {
	URITemplate string       `json:"uriTemplate"`
	Name        string       `json:"name"`
	Title       string       `json:"title,omitempty"`
	Description string       `json:"description,omitempty"`
	MimeType    string       `json:"mimeType,omitempty"`
	Annotations *Annotations `json:"annotations,omitempty"`
	Icons       []Icon       `json:"icons,omitempty"`
	Meta        Meta         `json:"_meta,omitempty"`
}

// ResourceContents is one item of a resources/read result: text contents
// when Blob is empty, else blob contents (Blob is base64). Its JSON carries
// "text" or "blob", never both.
type ResourceContents struct {
	URI      string `json:"uri"`
	MimeType string `json:"mimeType,omitempty"`
	Text     string `json:"text,omitempty"`
	Blob     string `json:"blob,omitempty"`
	Meta     Meta   `json:"_meta,omitempty"`
}

// MarshalJSON writes "text" (even when empty) for text contents and "blob"
// for blob contents.
func (r ResourceContents) MarshalJSON() ([]byte, error) {
	dst := append(make([]byte, 0, 48+len(r.URI)+len(r.MimeType)+len(r.Text)+len(r.Blob)+len(r.Meta)), `{"uri":`...)
	dst = codec.AppendString(dst, r.URI)
	dst = appendOptString(dst, "mimeType", r.MimeType)
	if r.Blob != "" {
		dst = append(dst, `,"blob":`...)
		dst = codec.AppendString(dst, r.Blob)
	} else {
		dst = append(dst, `,"text":`...)
		dst = codec.AppendString(dst, r.Text)
	}
	if len(r.Meta) > 0 {
		dst = append(dst, `,"_meta":`...)
		dst = append(dst, r.Meta...)
	}
	return append(dst, '}'), nil
}

// ReadResourceParams are the params of resources/read.
type ReadResourceParams struct {
	URI  string `json:"uri"`
	Meta Meta   `json:"_meta,omitempty"`
}

// ReadResourceResult is the result of resources/read.
type ReadResourceResult struct {
	Contents []ResourceContents `json:"contents"`
	Meta     Meta               `json:"_meta,omitempty"`
}

// SubscribeParams are the params of resources/subscribe and unsubscribe.
type SubscribeParams struct {
	URI string `json:"uri"`
}

// PromptArgument describes an argument of a prompt.
type PromptArgument struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
}

// Prompt describes a prompt.
type Prompt struct {
	Name        string           `json:"name"`
	Title       string           `json:"title,omitempty"`
	Description string           `json:"description,omitempty"`
	Arguments   []PromptArgument `json:"arguments,omitempty"`
	Icons       []Icon           `json:"icons,omitempty"`
	Meta        Meta             `json:"_meta,omitempty"`
}

// GetPromptParams are the params of prompts/get.
type GetPromptParams struct {
	Name      string            `json:"name"`
	Arguments map[string]string `json:"arguments,omitempty"`
	Meta      Meta              `json:"_meta,omitempty"`
}

// PromptMessage is one message of a prompt.
type PromptMessage struct {
	Role    string  `json:"role"`
	Content Content `json:"content"`
}

// GetPromptResult is the result of prompts/get.
type GetPromptResult struct {
	Description string          `json:"description,omitempty"`
	Messages    []PromptMessage `json:"messages"`
	Meta        Meta            `json:"_meta,omitempty"`
}

// ListParams are the params of every */list request.
type ListParams struct {
	Cursor string `json:"cursor,omitempty"`
	Meta   Meta   `json:"_meta,omitempty"`
}

// CompleteReference is the ref of completion/complete: a prompt
// ("ref/prompt", Name) or a resource template ("ref/resource", URI).
type CompleteReference struct {
	Type string `json:"type"`
	Name string `json:"name,omitempty"`
	URI  string `json:"uri,omitempty"`
}

// CompleteParams are the params of completion/complete.
type CompleteParams struct {
	Ref      CompleteReference `json:"ref"`
	Argument struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"argument"`
	Context *struct {
		Arguments map[string]string `json:"arguments,omitempty"`
	} `json:"context,omitempty"`
}

// Completion is the completion of completion/complete's result.
type Completion struct {
	Values  []string `json:"values"`
	Total   *int     `json:"total,omitempty"`
	HasMore bool     `json:"hasMore,omitempty"`
}

// CompleteResult is the result of completion/complete.
type CompleteResult struct {
	Completion Completion `json:"completion"`
}

// Logging levels, in increasing severity.
var LogLevels = [...]string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// LogLevelIndex returns the severity index of a level name, or -1.
func LogLevelIndex(level string) int {
	for i, l := range LogLevels {
		if l == level {
			return i
		}
	}
	return -1
}

// SetLevelParams are the params of logging/setLevel.
type SetLevelParams struct {
	Level string `json:"level"`
}

// LoggingMessageParams are the params of notifications/message.
type LoggingMessageParams struct {
	Level  string        `json:"level"`
	Logger string        `json:"logger,omitempty"`
	Data   codec.RawJSON `json:"data"`
}

// ProgressParams are the params of notifications/progress. Token is raw
// JSON: a string or a number, echoed with its type.
type ProgressParams struct {
	ProgressToken codec.RawJSON `json:"progressToken"`
	Progress      float64       `json:"progress"`
	Total         *float64      `json:"total,omitempty"`
	Message       string        `json:"message,omitempty"`
}

// CancelledParams are the params of notifications/cancelled.
type CancelledParams struct {
	RequestID codec.RawJSON `json:"requestId"`
	Reason    string        `json:"reason,omitempty"`
}

// ResourceUpdatedParams are the params of notifications/resources/updated.
type ResourceUpdatedParams struct {
	URI string `json:"uri"`
}

// Root is a client root.
type Root struct {
	URI  string `json:"uri"`
	Name string `json:"name,omitempty"`
	Meta Meta   `json:"_meta,omitempty"`
}

// ListRootsResult is the result of roots/list.
type ListRootsResult struct {
	Roots []Root `json:"roots"`
}

// SamplingMessage is a message of sampling/createMessage. Content is one
// block or, since 2025-11-25, an array of blocks; it is kept raw.
type SamplingMessage struct {
	Role    string        `json:"role"`
	Content codec.RawJSON `json:"content"`
	Meta    Meta          `json:"_meta,omitempty"`
}

// ModelPreferences guide the client's model choice.
type ModelPreferences struct {
	Hints []struct {
		Name string `json:"name,omitempty"`
	} `json:"hints,omitempty"`
	CostPriority         *float64 `json:"costPriority,omitempty"`
	SpeedPriority        *float64 `json:"speedPriority,omitempty"`
	IntelligencePriority *float64 `json:"intelligencePriority,omitempty"`
}

// ToolChoice is sampling's toolChoice (2025-11-25).
type ToolChoice struct {
	Mode string `json:"mode,omitempty"`
}

// CreateMessageParams are the params of sampling/createMessage.
type CreateMessageParams struct {
	Messages         []SamplingMessage `json:"messages"`
	ModelPreferences *ModelPreferences `json:"modelPreferences,omitempty"`
	SystemPrompt     string            `json:"systemPrompt,omitempty"`
	IncludeContext   string            `json:"includeContext,omitempty"`
	Temperature      *float64          `json:"temperature,omitempty"`
	MaxTokens        int               `json:"maxTokens"`
	StopSequences    []string          `json:"stopSequences,omitempty"`
	Metadata         codec.RawJSON     `json:"metadata,omitempty"`
	Tools            []Tool            `json:"tools,omitempty"`
	ToolChoice       *ToolChoice       `json:"toolChoice,omitempty"`
	Task             *TaskParams       `json:"task,omitempty"`
	Meta             Meta              `json:"_meta,omitempty"`
}

// CreateMessageResult is the result of sampling/createMessage.
type CreateMessageResult struct {
	Role       string        `json:"role"`
	Content    codec.RawJSON `json:"content"`
	Model      string        `json:"model"`
	StopReason string        `json:"stopReason,omitempty"`
	Meta       Meta          `json:"_meta,omitempty"`
}

// ElicitParams are the params of elicitation/create: form mode
// (RequestedSchema) or URL mode (Mode "url", URL, ElicitationID).
type ElicitParams struct {
	Mode            string        `json:"mode,omitempty"`
	Message         string        `json:"message"`
	RequestedSchema codec.RawJSON `json:"requestedSchema,omitempty"`
	URL             string        `json:"url,omitempty"`
	ElicitationID   string        `json:"elicitationId,omitempty"`
	Task            *TaskParams   `json:"task,omitempty"`
	Meta            Meta          `json:"_meta,omitempty"`
}

// ElicitResult is the result of elicitation/create.
type ElicitResult struct {
	Action  string        `json:"action"`
	Content codec.RawJSON `json:"content,omitempty"`
	Meta    Meta          `json:"_meta,omitempty"`
}

// Task statuses.
const (
	TaskWorking       = "working"
	TaskInputRequired = "input_required"
	TaskCompleted     = "completed"
	TaskFailed        = "failed"
	TaskCancelled     = "cancelled"
)

// Task is the state of a task (2025-11-25).
type Task struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           *int64 `json:"ttl"`
	PollInterval  *int64 `json:"pollInterval,omitempty"`
}

// CreateTaskResult answers a task-augmented request.
type CreateTaskResult struct {
	Task Task `json:"task"`
	Meta Meta `json:"_meta,omitempty"`
}

// TaskIDParams are the params of tasks/get, tasks/result and tasks/cancel.
type TaskIDParams struct {
	TaskID string `json:"taskId"`
}

// Cacheable is the cache hint of a 2026-07-28 result (caching.mdx):
// ttlMs (nil when absent: a result of an older revision) and cacheScope.
type Cacheable struct {
	TTLMs      *int64 `json:"ttlMs,omitempty"`
	CacheScope string `json:"cacheScope,omitempty"`
}

// ListToolsResult and its siblings are the results of the */list methods.
type ListToolsResult struct {
	Tools      []Tool `json:"tools"`
	NextCursor string `json:"nextCursor,omitempty"`
	Cacheable
}

type ListResourcesResult struct {
	Resources  []Resource `json:"resources"`
	NextCursor string     `json:"nextCursor,omitempty"`
	Cacheable
}

type ListResourceTemplatesResult struct {
	ResourceTemplates []ResourceTemplate `json:"resourceTemplates"`
	NextCursor        string             `json:"nextCursor,omitempty"`
	Cacheable
}

type ListPromptsResult struct {
	Prompts    []Prompt `json:"prompts"`
	NextCursor string   `json:"nextCursor,omitempty"`
	Cacheable
}

type ListTasksResult struct {
	Tasks      []Task `json:"tasks"`
	NextCursor string `json:"nextCursor,omitempty"`
}

// Method names.
const (
	MethodInitialize             = "initialize"
	MethodPing                   = "ping"
	MethodToolsList              = "tools/list"
	MethodToolsCall              = "tools/call"
	MethodResourcesList          = "resources/list"
	MethodResourcesTemplatesList = "resources/templates/list"
	MethodResourcesRead          = "resources/read"
	MethodResourcesSubscribe     = "resources/subscribe"
	MethodResourcesUnsubscribe   = "resources/unsubscribe"
	MethodPromptsList            = "prompts/list"
	MethodPromptsGet             = "prompts/get"
	MethodCompletionComplete     = "completion/complete"
	MethodLoggingSetLevel        = "logging/setLevel"
	MethodTasksGet               = "tasks/get"
	MethodTasksResult            = "tasks/result"
	MethodTasksList              = "tasks/list"
	MethodTasksCancel            = "tasks/cancel"
	MethodSamplingCreateMessage  = "sampling/createMessage"
	MethodElicitationCreate      = "elicitation/create"
	MethodRootsList              = "roots/list"

	NotificationInitialized         = "notifications/initialized"
	NotificationCancelled           = "notifications/cancelled"
	NotificationProgress            = "notifications/progress"
	NotificationMessage             = "notifications/message"
	NotificationResourceUpdated     = "notifications/resources/updated"
	NotificationResourceListChanged = "notifications/resources/list_changed"
	NotificationToolListChanged     = "notifications/tools/list_changed"
	NotificationPromptListChanged   = "notifications/prompts/list_changed"
	NotificationRootsListChanged    = "notifications/roots/list_changed"
	NotificationElicitationComplete = "notifications/elicitation/complete"
	NotificationTaskStatus          = "notifications/tasks/status"
)

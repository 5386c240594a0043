package mcp

import "github.com/mcpedge/mcpedge/codec"

// Revision 2026-07-28, stateless: no sessions; every request carries its
// version, capabilities and client info in params._meta.

// Request and result _meta keys of 2026-07-28.
const (
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	MetaClientInfo         = "io.modelcontextprotocol/clientInfo"
	MetaLogLevel           = "io.modelcontextprotocol/logLevel"
	MetaServerInfo         = "io.modelcontextprotocol/serverInfo"
	MetaSubscriptionID     = "io.modelcontextprotocol/subscriptionId"
	MetaTraceParent        = "traceparent"
	MetaTraceState         = "tracestate"
	MetaBaggage            = "baggage"

	// ExtensionTasks is the tasks extension's identifier in capabilities.
	ExtensionTasks = "io.modelcontextprotocol/tasks"
)

// Methods and notifications of 2026-07-28.
const (
	MethodServerDiscover           = "server/discover"
	MethodSubscriptionsListen      = "subscriptions/listen"
	MethodTasksUpdate              = "tasks/update"
	NotificationSubscriptionsAcked = "notifications/subscriptions/acknowledged"
)

// Result types (Result.resultType).
const (
	ResultComplete      = "complete"
	ResultInputRequired = "input_required"
)

// Error codes of 2026-07-28 (the range -32020..-32099 is the spec's).
const (
	CodeHeaderMismatch             = -32020
	CodeMissingClientCapability    = -32021
	CodeUnsupportedProtocolVersion = -32022
)

// StatelessVersions lists the stateless revisions served, newest first.
var StatelessVersions = [...]string{Version20260728}

// StatelessVersion reports whether v is a stateless revision mcpedge speaks.
func StatelessVersion(v string) bool { return v == Version20260728 }

// AllVersions lists every revision served, newest first: what
// server/discover and UnsupportedProtocolVersionError name.
var AllVersions = [...]string{Version20260728, Version20251125, Version20250618, Version20250326, Version20241105}

// Cache scopes (CacheableResult.cacheScope).
const (
	CachePublic  = "public"
	CachePrivate = "private"
)

// DiscoverResult is the result of server/discover.
type DiscoverResult struct {
	ResultType        string             `json:"resultType"`
	SupportedVersions []string           `json:"supportedVersions"`
	Capabilities      ServerCapabilities `json:"capabilities"`
	Instructions      string             `json:"instructions,omitempty"`
	TTLMs             int64              `json:"ttlMs"`
	CacheScope        string             `json:"cacheScope"`
	Meta              codec.RawJSON      `json:"_meta,omitempty"`
}

// SubscriptionFilter is what a subscriptions/listen stream carries.
type SubscriptionFilter struct {
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
}

// InputRequest is one entry of InputRequiredResult.inputRequests.
type InputRequest struct {
	Method string        `json:"method"`
	Params codec.RawJSON `json:"params,omitempty"`
}

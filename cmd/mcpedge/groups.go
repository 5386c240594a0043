package main

// The groups -h prints the flags in. Every flag registered on the command's
// FlagSet has exactly one row in flagGroups: TestFlagGroups fails for a
// flag without one (add a row where it belongs, in the order -h should
// print it) and for a row that names no flag.

// flagGroup is a heading of -h.
type flagGroup uint8

// The groups, in the order -h prints them.
const (
	groupServer flagGroup = iota
	groupListeners
	groupLimits
	groupAuth
	groupTLS
	groupCluster
	groupGateway
	groupObservability
	numGroups
)

// groupTitles are the groups' headings.
var groupTitles = [numGroups]string{
	groupServer:        "Server",
	groupListeners:     "Listeners",
	groupLimits:        "Limits",
	groupAuth:          "Authorization",
	groupTLS:           "TLS",
	groupCluster:       "Cluster",
	groupGateway:       "Gateway",
	groupObservability: "Observability",
}

// flagGroups places every flag in a group; within a group, -h prints the
// flags in this order.
var flagGroups = []struct {
	flag  string
	group flagGroup
}{
	{"handlers", groupServer},
	{"config", groupServer},
	{"drain", groupServer},
	{"lame-duck", groupServer},
	{"state-key-file", groupServer},
	{"state-ttl", groupServer},
	{"versions", groupServer},
	{"page-size", groupServer},
	{"version", groupServer},

	{"tcp", groupListeners},
	{"http", groupListeners},
	{"http-path", groupListeners},
	{"stdio", groupListeners},
	{"stateless", groupListeners},
	{"framing", groupListeners},
	{"loops", groupListeners},
	{"allowed-hosts", groupListeners},
	{"allowed-origins", groupListeners},
	{"cors-origins", groupListeners},
	{"trusted-proxies", groupListeners},
	{"sse-keepalive", groupListeners},
	{"event-store-bytes", groupListeners},
	{"session-idle", groupListeners},

	{"workers", groupLimits},
	{"max-message", groupLimits},
	{"max-outbound", groupLimits},
	{"max-outbound-total", groupLimits},
	{"max-buffered", groupLimits},
	{"max-conns", groupLimits},
	{"max-conns-per-ip", groupLimits},
	{"max-sessions", groupLimits},
	{"max-sessions-per-ip", groupLimits},
	{"session-init-timeout", groupLimits},
	{"max-inflight", groupLimits},
	{"max-subscriptions", groupLimits},
	{"max-tasks", groupLimits},
	{"max-task-bytes", groupLimits},
	{"max-tasks-per-client", groupLimits},
	{"task-workers", groupLimits},
	{"task-ttl", groupLimits},
	{"task-idle", groupLimits},
	{"rate", groupLimits},
	{"rate-ip", groupLimits},
	{"rate-burst", groupLimits},
	{"rate-subject", groupLimits},
	{"rate-subject-burst", groupLimits},
	{"queue-per-client", groupLimits},
	{"queue-total", groupLimits},
	{"read-timeout", groupLimits},
	{"idle-timeout", groupLimits},
	{"write-timeout", groupLimits},

	{"auth-jwks-url", groupAuth},
	{"auth-issuer", groupAuth},
	{"auth-audience", groupAuth},
	{"auth-scopes", groupAuth},
	{"auth-server", groupAuth},
	{"auth-token-file", groupAuth},
	{"auth-introspection-url", groupAuth},
	{"auth-client-id", groupAuth},
	{"auth-client-secret", groupAuth},
	{"auth-client-secret-file", groupAuth},
	{"auth-max-classes", groupAuth},

	{"tls-cert", groupTLS},
	{"tls-key", groupTLS},
	{"tls-client-ca", groupTLS},
	{"tcp-tls", groupTLS},

	{"node", groupCluster},
	{"cluster-embed", groupCluster},
	{"cluster-routes", groupCluster},
	{"cluster-secret-file", groupCluster},
	{"cluster", groupCluster},
	{"cluster-creds", groupCluster},
	{"cluster-tls-ca", groupCluster},
	{"cluster-tls-cert", groupCluster},
	{"cluster-tls-key", groupCluster},
	{"cluster-name", groupCluster},
	{"cluster-forward-timeout", groupCluster},
	{"cluster-heartbeat", groupCluster},
	{"cluster-record-bytes", groupCluster},
	{"cluster-event-bytes", groupCluster},
	{"cluster-link", groupCluster},

	{"upstream", groupGateway},
	{"upstream-max-message", groupGateway},
	{"upstream-max-pending", groupGateway},
	{"upstream-notify-rate", groupGateway},
	{"upstream-start-timeout", groupGateway},
	{"upstream-hold", groupGateway},
	{"upstream-max-held", groupGateway},
	{"upstream-max-held-per-client", groupGateway},
	{"upstream-max-rounds", groupGateway},
	{"upstream-max-listen-uris", groupGateway},
	{"admin", groupObservability},
	{"log-level", groupObservability},
	{"log-format", groupObservability},
	{"otel-endpoint", groupObservability},
	{"otel-sample", groupObservability},
}

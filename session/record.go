package session

import (
	"context"
	"net/netip"
	"sort"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
)

// A session of a cluster is held by several servers at once: by its home,
// which delivers what is tied to no request (its standalone stream, its
// resource updates, its list changes, its keep-alive pings) and keeps its
// record, and by replicas, which serve its ordinary requests where they
// land. A replica is rebuilt from the session's Record, which the cluster
// shares (package cluster).

// Record is what another server needs of a session to serve its requests:
// everything a request can depend on but what belongs to one server (the
// requests in flight, the server-to-client requests waiting, the streams
// and their events). Its fields are the session's at the time of the
// snapshot.
type Record struct {
	ID         string
	Version    string
	ClientInfo mcp.Implementation
	ClientCaps mcp.ClientCapabilities
	// Ready is set once the client sent notifications/initialized.
	Ready bool
	// LogLevel is the minimum level index of notifications/message, -1
	// when the client set none.
	LogLevel int
	// Subscriptions are the resource URIs the session subscribes to,
	// sorted.
	Subscriptions []string
	// Subject is the authenticated subject the session is bound to, "" for
	// none.
	Subject string
	// Remote is the address of the client that opened the session.
	Remote netip.Addr
}

// Record returns a snapshot of the session's record; subject is the
// subject of its authenticated caller (engine.SubjectOf(s.Auth())), which
// this package cannot name.
func (s *Session) Record(subject string) Record {
	r := Record{
		ID:       s.id,
		LogLevel: s.LogLevel(),
		Subject:  subject,
		Remote:   s.remote,
	}
	if s.Initialized() {
		r.Version, r.ClientInfo, r.ClientCaps = s.version, s.clientInfo, s.clientCaps
	}
	r.Ready = s.State() == StateReady
	s.mu.Lock()
	for uri := range s.subs {
		r.Subscriptions = append(r.Subscriptions, uri)
	}
	s.mu.Unlock()
	sort.Strings(r.Subscriptions)
	return r
}

// Restore returns a session rebuilt from rec, initialized, for a server
// that did not open it: its id, version, client declarations and log
// level are rec's. Its subscriptions are not: whoever delivers them
// subscribes (engine.Server.SubscribeSession). Restore does not bind the
// subject either: the transport that verifies callers does (SetAuth).
// parent bounds the session's context, which Close cancels.
func Restore(parent context.Context, out Sink, rec *Record) *Session {
	s := NewWithID(parent, out, rec.ID)
	s.version = rec.Version
	s.clientInfo = rec.ClientInfo
	s.clientCaps = rec.ClientCaps
	s.remote = rec.Remote
	s.logLevel.Store(int32(rec.LogLevel))
	s.initAt.Store(s.lastActive.Load())
	st := StateInitializing
	if rec.Ready {
		st = StateReady
	}
	s.state.Store(uint32(st))
	return s
}

// SetReplica marks the session as held here for another server, its home
// (see Record): a replica serves requests only, and leaves to the home
// what is tied to no request. Safe for concurrent use.
func (s *Session) SetReplica(on bool) { s.replica.Store(on) }

// Replica reports whether the session is a replica (SetReplica).
func (s *Session) Replica() bool { return s.replica.Load() }

// OnChange registers fn to be called after the session's record changes
// here: initialize, notifications/initialized, the log level, a
// subscription added or removed. One function; a later call replaces it.
// fn runs on the goroutine that made the change, with no lock of the
// session held. Safe for concurrent use.
func (s *Session) OnChange(fn func(*Session)) { s.onChange.Store(&fn) }

// changed calls the OnChange function, if any.
func (s *Session) changed() {
	if fn := s.onChange.Load(); fn != nil {
		(*fn)(s)
	}
}

// Shared holds what a Streamable HTTP transport offers a cluster: the
// sessions it holds, which the cluster asks it to adopt (as their new
// home), to drop, or to cancel a request of. package transport/http's
// Server implements it; package cluster calls it.
type Shared interface {
	// Adopt makes this server the home of the session rec describes:
	// it holds the session from now on (restoring it if it did not),
	// and delivers its subscriptions.
	Adopt(rec *Record)
	// Refresh updates the session rec describes, held here as a replica,
	// to rec: its log level, and whether it is ready.
	Refresh(rec *Record)
	// Touch records that the session id, which this server is the home
	// of, is in use on another server: its idle clock starts again.
	Touch(id string)
	// Drop ends this server's hold on session id with cause, and nothing
	// more: the session may go on elsewhere.
	Drop(id string, cause error)
	// Cancel cancels the request with raw JSON id reqID of session id, if
	// it runs here (notifications/cancelled received by another server).
	Cancel(id string, reqID []byte)
	// ServeDirect serves the message of r, a request of one of its
	// sessions that another server of the cluster received and checked,
	// without its HTTP request: a client's answer to a server-to-client
	// request, a notification, or a request the engine answers at once
	// (engine.AnswersAtOnce). It never waits, so that a cluster link's
	// reader may call it. It reports false, having done nothing, when it
	// cannot serve the message so (the session is not held here, or is
	// bound to another subject; the message is not such a message): the
	// whole request must then be sent. Otherwise the answer goes to
	// to.DirectAnswer with token, before ServeDirect returns or, for a
	// request the engine queued after all, later, from another
	// goroutine. r and what it holds are valid during the call only.
	ServeDirect(r *DirectRequest, to DirectReply, token uint64) bool
}

// DirectRequest is a message served by Shared.ServeDirect, with what the
// HTTP request it came in told.
type DirectRequest struct {
	Session []byte // Mcp-Session-Id
	// Subject is whom the request's credentials name ("" without
	// authorization): it must be the subject the session is bound to.
	Subject string
	Message []byte // one JSON-RPC message
	// Decoded, when not nil, is Message decoded (codec.Decode), its
	// members pointing into Message: the receiver takes it rather than
	// decode Message again.
	Decoded *codec.Message
	// TraceParent and TraceState are the request's W3C trace context
	// headers, nil when it had none.
	TraceParent, TraceState []byte
}

// DirectReply takes the answer of a message served by Shared.ServeDirect:
// the HTTP status its request would have been answered with, the seconds
// of its Retry-After header (0: none), and its JSON body (nil: none, as
// in a 202). body is valid during the call only, which must not block.
type DirectReply interface {
	DirectAnswer(token uint64, status, retryAfter int, body []byte)
}

package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
	"github.com/valyala/fasthttp"
)

// Sessions served where they land (docs/cluster.md, "What is shared and
// what is owned"). A session of revisions 2025-03-26 to 2025-11-25 is
// known to every node by its record (records.go), so the node a request
// lands on serves it itself, holding the session as a replica. What must
// reach one node goes there, and only that (RouteSession):
//
//   - a client's answer to a server-to-client request goes to the node
//     that waits for it, which its id names ("<instance>.<n>");
//   - a change to the record (logging/setLevel, resources/subscribe and
//     resources/unsubscribe) goes to the session's home, its one writer,
//     and so do the standalone stream (GET) and the session's tasks
//     (task-augmented tools/call, tasks/list; tasks/get, tasks/result
//     and tasks/cancel go to the node the task id names);
//   - what the placer binds to the home (Node.SetPlacer, services.go: a
//     gateway's share = "session" upstream, whose connection for the
//     session the home holds, and the client's roots/list_changed that
//     connection is told of) goes there too; a request that needs a
//     service down here (a gateway's pooled upstream) goes to a node
//     that reports it up, when one does;
//   - a resumption (GET with Last-Event-ID) goes to the node that wrote
//     the stream, which the event id names; when it is gone, the events
//     the cluster kept are replayed where the GET landed.
//
// notifications/cancelled is served where it lands and published, so
// that the node running the request cancels it; DELETE ends the session
// where it lands and everywhere (a tombstone on the record subject).
// When a session's home is gone, the live node that rendezvous hashing
// picks takes it over: it publishes the record with itself as the home,
// subscribes to its resources, and holds its standalone stream.

// ErrEndedElsewhere is the cause of a session this node held when it
// ended on another (its client deleted it there, or its home found it
// idle).
var ErrEndedElsewhere = errors.New("cluster: the session ended on another node")

// ErrNoSuchSession is what Restore reports for a session no node knows
// (it wraps engine.ErrUnknownSession); ErrUnavailable for one it cannot
// tell of now (this node is cut off).
var (
	ErrNoSuchSession = fmt.Errorf("cluster: no node knows the session: %w", engine.ErrUnknownSession)
	ErrUnavailable   = errors.New("cluster: cut off from the cluster")
)

// Instance implements mcphttp.Cluster: "<node>.<incarnation>".
func (n *Node) Instance() string { return n.inst }

// Attach gives the node the transport whose sessions it shares: the node
// asks it to adopt sessions it becomes the home of, to drop those that
// end elsewhere, to cancel requests. Call it before serving.
func (n *Node) Attach(h session.Shared) { n.host.Store(&h) }

// shared returns the attached transport, nil before Attach.
func (n *Node) shared() session.Shared {
	if p := n.host.Load(); p != nil {
		return *p
	}
	return nil
}

// RouteSession implements mcphttp.Cluster: it sends a request of session
// sid to the node that must serve it, when that is another node, and
// reports whether it did. The decision, per kind of request, is the
// table in the comment at the top of this file. subject is whom the
// request's credentials name: a message that the owner's engine answers
// at once goes as a direct message on the link (directOf), which the
// owner serves in the session bound to that subject.
func (n *Node) RouteSession(ctx *fasthttp.RequestCtx, sid []byte, m *codec.Message, subject string) bool {
	if n.closed.Load() || !validSessionID(sid) {
		return false
	}
	if _, ok := ctx.Conn().(*tunnelConn); ok {
		// Forwarded here: served here. A request that needs the home,
		// sent here because this node is to take the session over,
		// takes it over first.
		if m == nil || n.homeBound(m) {
			n.claimIfOrphan(sid)
		}
		return false
	}
	if m == nil {
		if !ctx.IsGet() {
			return false // DELETE: ended here, and everywhere
		}
		if last := ctx.Request.Header.Peek("Last-Event-ID"); len(last) > 0 {
			if inst, stream, ok := eventInstance(last); ok {
				node, inc := splitInstance(inst)
				switch {
				case string(node) == n.name && string(inc) == n.inc:
					return false // one of this node's streams
				case n.alive(string(node), string(inc)):
					k := evKey{string(inst), stream}
					if n.forwardResume(ctx, string(node), n.events.requestOf(string(sid), k), string(sid), k, nil) {
						return true
					}
					n.markDead(string(node), "no subscriber for it")
				}
				if stream != 0 {
					return false // its node is gone: replayed here from what was kept
				}
				// The standalone stream of a node that is gone: at the home.
			}
		}
		return n.toHome(ctx, sid, nil, nil)
	}
	var dm direct
	dp := n.directOf(&dm, sid, m, subject)
	switch m.Kind {
	case codec.KindResponse, codec.KindError:
		if p := session.IDPrefix(m.ID); p != nil && !bytes.Equal(p, []byte(n.inst)) {
			node, inc := splitInstance(p)
			if validName(node) && n.alive(string(node), string(inc)) {
				return n.forwardTo(ctx, string(node), nil, dp)
			}
		}
		return false
	case codec.KindNotification:
		if m.Method == mcp.NotificationCancelled {
			n.publishCancel(sid, m.Params)
			return false
		}
		if p := n.svcs.placer.Load(); p != nil {
			// One the placer binds to the home (a gateway relays a
			// client's roots/list_changed to the session's own upstream
			// connections, which live there).
			if home, _ := (*p)(m); home {
				return n.toHome(ctx, sid, nil, dp)
			}
		}
		return false
	case codec.KindRequest:
	default:
		return false
	}
	switch m.Method {
	case mcp.MethodTasksGet, mcp.MethodTasksResult, mcp.MethodTasksCancel:
		if id, ok := taskIDOf(m.Params); ok {
			// The node a task id names, as engine.SessionNode reads it.
			if node, _, ok := strings.Cut(id, "."); ok && node != "" && node != n.name && validName(node) && n.alive(node, "") {
				return n.forwardTo(ctx, node, m.ID, dp)
			}
		}
		return false
	}
	switch home, to := n.place(m); {
	case home:
		return n.toHome(ctx, sid, m.ID, dp)
	case to != "":
		// What it needs is down here and up there (services.go).
		if n.forwardTo(ctx, to, m.ID, dp) {
			return true
		}
		n.markDead(to, "no subscriber for it")
	}
	return false
}

// homeBound reports whether request m of a session is served by the
// session's home: needsHome's, or the placer's (services.go).
func (n *Node) homeBound(m *codec.Message) bool {
	if needsHome(m) {
		return true
	}
	if p := n.svcs.placer.Load(); p != nil {
		home, _ := (*p)(m)
		return home
	}
	return false
}

// needsHome reports whether request m of a session must be served by the
// session's home: it changes the record, or it is about the session's
// tasks, which live at the home.
func needsHome(m *codec.Message) bool {
	if m.Kind != codec.KindRequest {
		return false
	}
	switch m.Method {
	case mcp.MethodLoggingSetLevel, mcp.MethodResourcesSubscribe, mcp.MethodResourcesUnsubscribe, mcp.MethodTasksList:
		return true
	case mcp.MethodToolsCall:
		// A task-augmented call (params.task) becomes a task of the
		// session: a scan for the key, then a look at its value.
		if !bytes.Contains(m.Params, []byte(`"task"`)) {
			return false
		}
		v, ok, err := codec.ObjectField(m.Params, "task")
		return err != nil || ok && string(v) != "null"
	}
	return false
}

// taskIDOf reads params.taskId.
func taskIDOf(params []byte) (string, bool) {
	raw, ok, err := codec.ObjectField(params, "taskId")
	if err != nil || !ok {
		return "", false
	}
	s, err := codec.StringValue(raw)
	if err != nil {
		return "", false
	}
	return string(s), true
}

// eventInstance reads the instance and stream an event id of a cluster
// names ("<instance>.<stream>-<seq>").
func eventInstance(id []byte) (inst []byte, stream uint64, ok bool) {
	i := bytes.LastIndexByte(id, '.')
	if i < 0 || !validInstance(id[:i]) {
		return nil, 0, false
	}
	rest := id[i+1:]
	j := bytes.IndexByte(rest, '-')
	if j <= 0 {
		return nil, 0, false
	}
	var v uint64
	for _, c := range rest[:j] {
		if c < '0' || c > '9' || v > (1<<63)/10 {
			return nil, 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	return id[:i], v, true
}

// toHome sends a request of session sid to its home, when that is another
// node. A home that is gone is replaced first: the live node rendezvous
// hashing picks takes the session over (this one: it adopts it, and the
// request is served here). It returns false when the request is to be
// served here, or the session is unknown (then answered 404 here).
func (n *Node) toHome(ctx *fasthttp.RequestCtx, sid, reqID []byte, dm *direct) bool {
	e, ok, unavailable := n.record(sid)
	if !ok {
		if unavailable {
			n.stats.forwardRefused.Add(1)
			ctx.Response.Header.Set("Retry-After", "1")
			failID(ctx, fasthttp.StatusServiceUnavailable, codec.CodeInternalError,
				"Service Unavailable: this node cannot reach the cluster to find the session; retry", reqID)
			return true
		}
		return false
	}
	for try := 0; try < 2; try++ {
		if e.home == n.name && e.homeInc == n.inc {
			return false
		}
		if n.alive(e.home, e.homeInc) {
			if n.forwardTo(ctx, e.home, reqID, dm) {
				return true
			}
			// Nobody answers for it: it is gone.
			n.markDead(e.home, "no subscriber for it")
		}
		to := n.pick(e.rec.ID)
		if to == n.name {
			n.claim(&e, true)
			return false
		}
		if n.forwardTo(ctx, to, reqID, dm) {
			return true
		}
		n.markDead(to, "no subscriber for it")
		if e, ok = n.recs.get(string(sid)); !ok {
			return false
		}
	}
	return false
}

// forwardTo forwards ctx to node, with the id of the request it carries
// (reqID, when known) for the errors it may be answered with, as the
// direct message dm when it is one (nil: the whole request). It returns
// false when nobody answers for node.
func (n *Node) forwardTo(ctx *fasthttp.RequestCtx, node string, reqID []byte, dm *direct) bool {
	return n.forwardResume(ctx, node, reqID, "", evKey{}, dm)
}

// claimIfOrphan takes session sid over when its home is gone and this
// node is the one to take it.
func (n *Node) claimIfOrphan(sid []byte) {
	e, ok, _ := n.record(sid)
	if !ok || n.alive(e.home, e.homeInc) || n.pick(e.rec.ID) != n.name {
		return
	}
	n.claim(&e, true)
}

// claim makes this node the home of e's session: the record, one revision
// up with this node as its home, is published, and (adopt) the transport
// adopts the session.
func (n *Node) claim(e *entry, adopt bool) {
	ne := &entry{rec: e.rec, rev: e.rev + 1, home: n.name, homeInc: n.inc}
	n.publishRecord(ne)
	n.stats.takenOver.Add(1)
	if h := n.shared(); h != nil && adopt {
		h.Adopt(&ne.rec)
	}
}

// takeOver takes over, among the sessions whose home was node in
// incarnation inc, those rendezvous hashing gives this node.
func (n *Node) takeOver(node, inc string) {
	for _, e := range n.recs.homedBy(node, inc) {
		if n.pick(e.rec.ID) == n.name {
			n.claim(&e, true)
		}
	}
}

// Restore implements mcphttp.Cluster: the record of session sid, and
// whether this node is (now) its home: it is when the record says so, or
// when its home is gone and this node is the one to take it over.
func (n *Node) Restore(sid []byte) (*session.Record, bool, error) {
	e, ok, unavailable := n.record(sid)
	if !ok {
		if unavailable {
			return nil, false, ErrUnavailable
		}
		return nil, false, ErrNoSuchSession
	}
	rec := e.rec
	if e.home == n.name && e.homeInc == n.inc {
		return &rec, true, nil
	}
	if !n.alive(e.home, e.homeInc) && n.known(e.home) && n.pick(rec.ID) == n.name {
		n.claim(&e, false)
		return &rec, true, nil
	}
	return &rec, false, nil
}

// Changed implements mcphttp.Cluster: the record of a session this node
// is the home of changed here; it is published, one revision up.
func (n *Node) Changed(sess *session.Session) {
	rec := sess.Record(engine.SubjectOf(sess.Auth()))
	rev := uint64(1)
	if old, ok := n.recs.get(rec.ID); ok {
		if old.home != n.name || old.homeInc != n.inc {
			// Another node has become its home meanwhile; it writes the
			// record now. This node's hold is dropped when it learns it.
			if newerHome(&old, n) {
				return
			}
		}
		rev = old.rev + 1
	}
	n.publishRecord(&entry{rec: rec, rev: rev, home: n.name, homeInc: n.inc})
}

// newerHome reports whether old names another live home than n.
func newerHome(old *entry, n *Node) bool {
	return n.alive(old.home, old.homeInc)
}

// Used implements mcphttp.Cluster: a replica tells the session's home
// that the session is in use.
func (n *Node) Used(sid string) { n.publishSigned(recUsed, sid, nil) }

// Closed implements mcphttp.Cluster: a session ended here; when it ends
// everywhere, every node forgets it, and ends its own hold.
func (n *Node) Closed(sid string, everywhere bool) {
	if !everywhere {
		return
	}
	n.recs.end(sid)
	n.events.drop(sid)
	n.publishSigned(recEnd, sid, nil)
}

// publishCancel publishes notifications/cancelled of session sid, for the
// node that runs the request.
func (n *Node) publishCancel(sid []byte, params []byte) {
	raw, ok, err := codec.ObjectField(params, "requestId")
	if err != nil || !ok || !validRequestID(raw) {
		return
	}
	n.publishSigned(recCancel, string(sid), raw)
}

// takeRecord stores a record published by another node, and tells the
// transport what changed for the session it holds: a new home (this
// node's hold as home ends, when it was the home), a new log level.
func (n *Node) takeRecord(e *entry) {
	old, stored := n.recs.put(e, n.name, n.opts.RecordBytes)
	if !stored {
		return
	}
	h := n.shared()
	if h == nil {
		return
	}
	wasHome := old != nil && old.home == n.name && old.homeInc == n.inc
	isHome := e.home == n.name && e.homeInc == n.inc
	switch {
	case wasHome && !isHome:
		h.Drop(e.rec.ID, errHomeMoved)
	case isHome && !wasHome:
		h.Adopt(&e.rec)
	default:
		h.Refresh(&e.rec)
	}
}

// errHomeMoved is the cause of a home's hold that ends because another
// node is the home now.
var errHomeMoved = errors.New("cluster: the session's home is another node now")

// sessionNews takes the end of a session, a replica's use of it, or a
// cancellation, from another node.
func (n *Node) sessionNews(kind byte, sid string, reqID []byte) {
	h := n.shared()
	switch kind {
	case recEnd:
		n.recs.end(sid)
		n.events.drop(sid)
		if h != nil {
			h.Drop(sid, ErrEndedElsewhere)
		}
	case recUsed:
		if e, ok := n.recs.get(sid); ok && e.home == n.name && e.homeInc == n.inc && h != nil {
			h.Touch(sid)
		}
	case recCancel:
		if h != nil {
			h.Cancel(sid, reqID)
		}
	}
}

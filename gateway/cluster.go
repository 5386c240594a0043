package gateway

import (
	"encoding/json"
	"errors"
	"maps"
	"strconv"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
)

// The gateway on a node of a cluster (docs/cluster.md, "The gateway in a
// cluster"). Every node runs the same upstreams. A pooled upstream
// (share = "pool:N") serves the calls that land on the node, whichever
// session they belong to. A share = "session" upstream holds one
// connection per downstream session, on the session's home: Place tells
// the cluster to send the requests it serves there. Each node tells the
// others which of its upstreams are up (Health); a node whose pooled
// upstream is down has Place name it, and the cluster forwards the call
// to a node where it is up, or, when none is, the gateway answers it at
// once as unavailable.

// Cluster is what the gateway knows of the other nodes of its cluster
// (package cluster's Node implements it).
type Cluster interface {
	// UpElsewhere reports whether another live node reports the
	// upstream of that name up.
	UpElsewhere(upstream string) bool
	// ServicesChanged tells the other nodes at once that the state of an
	// upstream changed here. It does not block.
	ServicesChanged()
}

// SetCluster makes the gateway a node's of cluster c: a call to a pooled
// upstream down here and on every other node is answered at once (rather
// than after the upstream's timeout), and the others are told when an
// upstream's state changes here. Call it before serving.
func (g *Gateway) SetCluster(c Cluster) {
	if c == nil {
		g.cluster.Store(nil)
		return
	}
	g.cluster.Store(&c)
}

func (g *Gateway) clusterView() Cluster {
	if p := g.cluster.Load(); p != nil {
		return *p
	}
	return nil
}

// nameIndex is a copy of the gateway's claims on served names and its
// upstreams, read without a lock by Place; it is made again, under g.mu,
// on the first read after a change.
type nameIndex struct {
	claims [4]map[string]*upstream
	ups    []*upstream
	bound  bool // an upstream is share = "session"
}

// indexChanged marks the name index stale (g.mu held).
func (g *Gateway) indexChanged() { g.indexStale.Store(true) }

// index returns the name index, current.
func (g *Gateway) index() *nameIndex {
	if g.indexStale.Load() {
		g.mu.Lock()
		if g.indexStale.Swap(false) {
			ix := &nameIndex{ups: append([]*upstream(nil), g.ups...)}
			for k := range g.claims {
				ix.claims[k] = maps.Clone(g.claims[k])
			}
			for _, u := range g.ups {
				ix.bound = ix.bound || u.cfg.Share.Session
			}
			g.names.Store(ix)
		}
		g.mu.Unlock()
	}
	return g.names.Load()
}

// Place tells, for a request m of a session of a cluster, where it is to
// be served (package cluster's Placer): home when it goes to a share =
// "session" upstream, whose connection for the session lives on the
// session's home (and so does the client's roots/list_changed, which
// that connection is told of); down names the pooled upstream it goes to when that
// upstream is down on this node (the cluster sends it to a node where it
// is up). It reads no lock, and allocates nothing but for a name that
// holds a JSON escape.
func (g *Gateway) Place(m *codec.Message) (home bool, down string) {
	switch m.Kind {
	case codec.KindRequest:
	case codec.KindNotification:
		// A client's roots/list_changed is relayed to the session's own
		// upstream connections (RootsListChanged), on its home.
		if m.Method == mcp.NotificationRootsListChanged {
			ix := g.index()
			return ix != nil && ix.bound, ""
		}
		return false, ""
	default:
		return false, ""
	}
	ix := g.index()
	if ix == nil || !ix.bound && g.downs.Load() == 0 {
		return false, ""
	}
	u := ix.target(m)
	if u == nil {
		return false, ""
	}
	if u.cfg.Share.Session {
		return !u.statelessOnly(), ""
	}
	if u.downHere.Load() {
		return false, u.cfg.Name
	}
	return false, ""
}

// target returns the upstream request m goes to, nil for none: a tool's,
// a prompt's, a resource's (or its template's), a completion's.
func (ix *nameIndex) target(m *codec.Message) *upstream {
	switch m.Method {
	case mcp.MethodToolsCall:
		return ix.named(listTool, m.Params, "name")
	case mcp.MethodPromptsGet:
		return ix.named(listPrompt, m.Params, "name")
	case mcp.MethodResourcesRead:
		uri, ok := member(m.Params, "uri")
		if !ok {
			return nil
		}
		return ix.resource(uri)
	case mcp.MethodCompletionComplete:
		ref, ok, err := codec.ObjectField(m.Params, "ref")
		if err != nil || !ok {
			return nil
		}
		typ, _ := member(ref, "type")
		switch string(typ) {
		case "ref/prompt":
			return ix.named(listPrompt, ref, "name")
		case "ref/resource":
			uri, ok := member(ref, "uri")
			if !ok {
				return nil
			}
			if u := ix.claims[listTemplate][string(uri)]; u != nil {
				return u
			}
			return ix.resource(uri)
		}
	}
	return nil
}

// named returns the upstream that serves the item of kind that obj's key
// names.
func (ix *nameIndex) named(kind listKind, obj []byte, key string) *upstream {
	name, ok := member(obj, key)
	if !ok {
		return nil
	}
	return ix.claims[kind][string(name)]
}

// resource returns the upstream serving resource uri, as Gateway.owner
// does.
func (ix *nameIndex) resource(uri []byte) *upstream {
	if u := ix.claims[listResource][string(uri)]; u != nil {
		return u
	}
	if len(ix.ups) == 1 {
		return ix.ups[0]
	}
	s := string(uri)
	for _, u := range ix.ups {
		if (u.cfg.Share.Session || u.downHere.Load()) && u.servesTemplate(s) {
			return u
		}
	}
	return nil
}

// member returns the string value of key in JSON object obj, decoded
// (a copy only when the object's keys or the value hold an escape).
func member(obj []byte, key string) ([]byte, bool) {
	raw, ok, err := codec.ObjectField(obj, key)
	if errors.Is(err, codec.ErrEscaped) {
		var m map[string]json.RawMessage
		if json.Unmarshal(obj, &m) != nil {
			return nil, false
		}
		raw, ok, err = m[key], m[key] != nil, nil
	}
	if err != nil || !ok {
		return nil, false
	}
	v, err := codec.StringValue(raw)
	if err == nil {
		return v, true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return nil, false
	}
	return []byte(s), true
}

// Health calls yield with each upstream's name and whether it is up here
// (a connection of its shared pool ready; for share = "session", the
// mirror's): what the node tells the others (package cluster's
// Node.SetServices).
func (g *Gateway) Health(yield func(name string, up bool) bool) {
	g.mu.Lock()
	ups := append([]*upstream(nil), g.ups...)
	g.mu.Unlock()
	for _, u := range ups {
		if !yield(u.cfg.Name, u.upHere()) {
			return
		}
	}
}

// upHere reports whether a connection of u's shared pool is ready.
func (u *upstream) upHere() bool {
	for i := range u.session.slots {
		if u.session.conn(i) != nil {
			return true
		}
	}
	return false
}

// noteHealth records whether u, pooled, is down here after a connection
// of its shared pool came up or failed, and tells the cluster when that
// changed. An upstream is down here when none of its shared pool's
// connections is ready after one failed: not while it starts.
func (u *upstream) noteHealth(c *muxConn) {
	if c.p != u.session {
		return
	}
	// One at a time: two connections that change at once leave the
	// state of the later reading.
	u.healthMu.Lock()
	if u.retired.Load() {
		u.healthMu.Unlock()
		return
	}
	up := u.upHere()
	if !u.cfg.Share.Session {
		u.setDown(!up)
	}
	changed := u.reportedUp.Swap(up) != up
	u.healthMu.Unlock()
	if cl := u.g.clusterView(); changed && cl != nil {
		cl.ServicesChanged()
	}
}

// setDown sets u's down-here flag, keeping the gateway's count of
// upstreams down here (u.healthMu held).
func (u *upstream) setDown(down bool) {
	if u.downHere.Swap(down) != down {
		if down {
			u.g.downs.Add(1)
		} else {
			u.g.downs.Add(-1)
		}
	}
}

// downEverywhere reports whether a call to u, pooled and with no
// connection ready here, is to be answered at once: u is down here (a
// connection failed), and no other node of the cluster reports it up.
func (u *upstream) downEverywhere() bool {
	if !u.downHere.Load() {
		return false
	}
	cl := u.g.clusterView()
	return cl != nil && !cl.UpElsewhere(u.cfg.Name)
}

// downEverywhereError is the answer to a call downEverywhere refuses.
func (u *upstream) downEverywhereError() *codec.Error {
	msg := "upstream " + strconv.Quote(u.cfg.Name) + " unavailable on every node of the cluster"
	if err := u.lastError(); err != nil {
		msg += ": " + err.Error()
	}
	return &codec.Error{Code: codec.CodeServerBusy, Message: msg, Data: u.data()}
}

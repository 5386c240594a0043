package gateway

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
)

// Held calls. A 2026-07-28 client's call translated over a connection of
// the session revisions stays open upstream while its client gathers the
// input the upstream asked for: the InputRequiredResult's requestState
// names it, and the retry that carries the state resumes it. Each held
// call is a budget an unauthenticated client could take, so:
//
//   - at most Options.MaxHeld are held at once, at most
//     MaxHeldPerClient per client (its subject, else its address); past
//     either the upstream's request gets an error and the client
//     -32000 {"limit":"upstream-held"};
//   - each is held at most HoldTimeout: then the upstream's pending
//     requests get an error, the upstream call is cancelled, and the
//     retry gets -32602;
//   - it is bound to its client (engine.PeerOwner): another client's
//     retry with the same state is answered as for a state never issued,
//     and the call is left alone;
//   - the state is signed with the server's requestState keys
//     (engine.Server.SignState), bound to the request's method, name and
//     params (engine.RequestDigest), to its round (a state is good for
//     one retry) and to an expiry;
//   - it names the node that holds the call ("<node>.~h~…",
//     engine.StateNode), so that in a cluster a retry reaching another
//     node is forwarded here.

// heldTable is the gateway's held calls.
type heldTable struct {
	mu      sync.Mutex
	byID    map[string]*held
	byOwner map[string]int
}

// held is one held call.
type held struct {
	id      string
	xc      *xcall
	owner   string
	round   int
	expires int64 // nanotime
}

// statePayload is what a held call's requestState signs.
type heldState struct {
	ID      string `json:"h"`
	Round   int    `json:"r"`
	Method  string `json:"m"`
	Name    string `json:"n"`
	Digest  string `json:"d"`
	Expires int64  `json:"e"` // Unix seconds
}

// heldMark starts the part of a held call's requestState after the node.
const heldMark = "~h~"

// Errors of held calls.
var (
	errHeldLimit = errors.New("too many upstream calls held for their clients' input")
)

// stateError is the client's answer to a retry whose requestState names
// no call it may resume: the same, whatever the reason, so that nothing
// is learnt of other clients' calls.
var stateError = codec.NewError(codec.CodeInvalidParams, "invalid params: requestState names an upstream call that has ended, timed out, or is not this client's (start the request again without it)")

// heldState reports whether st (a requestState, unquoted) is a held
// call's, and returns the signed token after the mark.
func heldToken(st string) (string, bool) {
	if strings.HasPrefix(st, heldMark) {
		return st[len(heldMark):], true
	}
	if i := strings.IndexByte(st, '.'); i > 0 && strings.HasPrefix(st[i+1:], heldMark) && engine.StateNode([]byte(st)) != nil {
		return st[i+1+len(heldMark):], true
	}
	return "", false
}

// hold keeps xc open for its client's retry and returns the
// requestState that resumes it.
func (g *Gateway) hold(xc *xcall) (string, error) {
	var idb [16]byte
	_, _ = rand.Read(idb[:])
	h := &held{id: base64.RawURLEncoding.EncodeToString(idb[:]), xc: xc, owner: xc.owner, round: xc.rounds,
		expires: nanotime() + int64(g.opts.HoldTimeout)}
	t := &g.held
	t.mu.Lock()
	if len(t.byID) >= g.opts.MaxHeld || t.byOwner[h.owner] >= g.opts.MaxHeldPerClient {
		t.mu.Unlock()
		return "", errHeldLimit
	}
	if t.byID == nil {
		t.byID, t.byOwner = map[string]*held{}, map[string]int{}
	}
	t.byID[h.id] = h
	t.byOwner[h.owner]++
	t.mu.Unlock()
	xc.setDeadline(h.expires)
	payload, _ := json.Marshal(heldState{ID: h.id, Round: h.round, Method: xc.method, Name: xc.name, Digest: xc.digest,
		Expires: time.Now().Add(g.opts.HoldTimeout).Unix() + 1})
	st := heldMark + g.srv.SignState(payload)
	if node := g.srv.NodeID(); node != "" {
		st = node + "." + st
	}
	return st, nil
}

// unheld takes h out of the table (t.mu held).
func (t *heldTable) removeLocked(h *held) {
	delete(t.byID, h.id)
	if t.byOwner[h.owner]--; t.byOwner[h.owner] <= 0 {
		delete(t.byOwner, h.owner)
	}
}

// resume takes the call a retry's requestState st names out of the
// table, for peer's client, for a request of method naming name with
// params. Any failure is stateError (its reason is logged at debug).
func (g *Gateway) resume(peer handlers.Peer, method, name string, params []byte, st string) (*held, error) {
	tok, ok := heldToken(st)
	if !ok {
		return nil, stateError
	}
	fail := func(why string) (*held, error) {
		g.log.Debug("requestState refused", "why", why, "method", method)
		return nil, stateError
	}
	payload, err := g.srv.VerifyState(tok)
	if err != nil {
		return fail("signature")
	}
	var p heldState
	if json.Unmarshal(payload, &p) != nil {
		return fail("malformed")
	}
	if time.Now().Unix() > p.Expires {
		return fail("expired")
	}
	if p.Method != method || p.Name != name || p.Digest != engine.RequestDigest(method, params) {
		return fail("issued for another request")
	}
	owner := engine.PeerOwner(peer)
	t := &g.held
	t.mu.Lock()
	h := t.byID[p.ID]
	switch {
	case h == nil:
		t.mu.Unlock()
		return fail("no such call (ended, timed out, or already resumed)")
	case h.owner != owner:
		t.mu.Unlock()
		return fail("another client's")
	case h.round != p.Round:
		t.mu.Unlock()
		return fail("an earlier round's")
	}
	t.removeLocked(h)
	t.mu.Unlock()
	return h, nil
}

// rehold puts h back, as it was: a retry that could not be served (its
// inputResponses malformed) leaves the call for a good one.
func (g *Gateway) rehold(h *held) error {
	t := &g.held
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.byID) >= g.opts.MaxHeld || t.byOwner[h.owner] >= g.opts.MaxHeldPerClient {
		return errHeldLimit
	}
	t.byID[h.id] = h
	t.byOwner[h.owner]++
	return nil
}

// sweepHeld ends the held calls past their time.
func (g *Gateway) sweepHeld(now int64) {
	t := &g.held
	var late []*held
	t.mu.Lock()
	for _, h := range t.byID {
		if h.expires < now {
			late = append(late, h)
			t.removeLocked(h)
		}
	}
	t.mu.Unlock()
	for _, h := range late {
		h.xc.u.log.Debug("held call expired: its client sent no retry", "method", h.xc.method, "name", h.xc.name)
		h.xc.abort(h.xc.u.holdExpired())
	}
}

// dropHeld ends the held calls of c, whose connection ended, or all
// (c nil, at Close): their retries get -32602.
func (g *Gateway) dropHeld(c *muxConn, cause error) {
	t := &g.held
	var gone []*held
	t.mu.Lock()
	for _, h := range t.byID {
		if c == nil || h.xc.c == c {
			gone = append(gone, h)
			t.removeLocked(h)
		}
	}
	t.mu.Unlock()
	for _, h := range gone {
		h.xc.abort(cause)
	}
}

// heldCount returns the calls held.
func (g *Gateway) heldCount() int {
	g.held.mu.Lock()
	defer g.held.mu.Unlock()
	return len(g.held.byID)
}

// heldOf returns the calls held on u's connections.
func (g *Gateway) heldOf(u *upstream) int {
	g.held.mu.Lock()
	defer g.held.mu.Unlock()
	n := 0
	for _, h := range g.held.byID {
		if h.xc.u == u {
			n++
		}
	}
	return n
}

// sweepHeldLoop runs sweepHeld a few times per HoldTimeout until stop.
func (g *Gateway) sweepHeldLoop(stop <-chan struct{}) {
	tick := min(max(g.opts.HoldTimeout/8, 10*time.Millisecond), time.Second)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			g.sweepHeld(nanotime())
		}
	}
}

// holdExpired is the error the upstream gets for its requests of a held
// call that expired.
func (u *upstream) holdExpired() *codec.Error {
	return &codec.Error{Code: codec.CodeRequestTimeout, Message: "gateway: the client (2026-07-28) did not send its input within " + u.g.opts.HoldTimeout.String(), Data: u.data()}
}

// heldLimit is the client's error when no call may be held.
func (u *upstream) heldLimit() *codec.Error {
	return &codec.Error{Code: codec.CodeServerBusy, Message: "upstream " + strconv.Quote(u.cfg.Name) + ": " + errHeldLimit.Error(),
		Data: codec.RawJSON(`{"limit":"upstream-held","upstream":` + strconv.Quote(u.cfg.Name) + `}`)}
}

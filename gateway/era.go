package gateway

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/client"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
)

// Eras. An upstream speaks the session revisions (2024-11-05 to
// 2025-11-25), 2026-07-28, or both; a downstream client speaks one of
// them per request. Every connection of an upstream's session pool is
// opened as the revision's rules for dual-era clients say
// (versioning.mdx): server/discover first, then initialize unless the
// upstream named no session revision. So the first connection tells
// what the upstream speaks, before its lists are mirrored:
//
//   - both: each era's requests go to connections of their own era and
//     pass through (2026-07-28's to the stateless pool);
//   - the session revisions only: a 2026-07-28 request is translated
//     over the session pool (down.go): its _meta becomes nothing, the
//     upstream's server-to-client requests become input rounds, its
//     tasks the engine's;
//   - 2026-07-28 only ("sessionless"): the session pool's connections
//     speak 2026-07-28; a session's request is translated over them
//     (up.go): sent statelessly with _meta made of the session's
//     declarations, the upstream's input rounds made server-to-client
//     requests, resource subscriptions an upstream listen stream.
//
// A connection that reconnects asks again, so an upstream restarted in
// another era is followed: its connections are made anew, the calls in
// flight on the old ones fail (unavailable), and the calls held between
// input rounds end (their retries get -32602).

// probeTimeout bounds server/discover before initialize: a server of the
// older revisions that ignores the unknown method costs at most this.
const probeTimeout = 10 * time.Second

// probe sends server/discover on c, whose transport is up and which has
// not initialized. It reports what the upstream speaks: stateless
// (2026-07-28 named), sessions (a session revision named, or discover
// refused: an older server). err is set only when the connection failed.
func (c *muxConn) probe(ctx context.Context, via client.Conn) (d *mcp.DiscoverResult, stateless, sessions bool, err error) {
	pctx, cancel := context.WithTimeout(ctx, min(c.u.cfg.Timeout, probeTimeout))
	defer cancel()
	res, err := c.internalVia(pctx, via, mcp.MethodServerDiscover, statelessMeta)
	if c.endedErr() != nil {
		return nil, false, false, c.endedErr()
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, false, false, context.Cause(ctx)
		}
		// Any error, or silence: an older server (or one refusing
		// 2026-07-28 by name, -32022).
		return nil, false, true, nil
	}
	d = new(mcp.DiscoverResult)
	if codec.Unmarshal(res, d) != nil {
		return nil, false, true, nil
	}
	stateless = slices.Contains(d.SupportedVersions, mcp.Version20260728)
	sessions = slices.ContainsFunc(d.SupportedVersions, mcp.SupportedVersion)
	if !stateless && !sessions {
		sessions = true // names nothing this gateway speaks: initialize decides
	}
	return d, stateless, sessions, nil
}

// endedErr returns why c ended, nil while it is up.
func (c *muxConn) endedErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ended
}

// speaks records what an upstream speaks, from a handshake.
func (u *upstream) speaks(stateless, sessions bool) {
	was := u.era.Load()
	now := eraSessions
	switch {
	case stateless && sessions:
		now = eraBoth
	case stateless:
		now = eraStateless
	}
	u.era.Store(now)
	u.noStateless.Store(!stateless)
	if was != eraUnknown && was != now {
		u.log.Warn("the upstream now speaks other protocol revisions; its connections are made anew", "was", was, "now", now)
		// The stateless pool of an upstream that spoke both (or the
		// session pool's connections of either era) reconnect on
		// their own; a stateless pool that gave up is started again.
		u.stateless.reset()
	}
	if now != eraSessions {
		u.stateless.revive()
	}
}

// upstreamEra is what an upstream speaks.
type upstreamEra = int32

const (
	eraUnknown   upstreamEra = iota // no handshake yet
	eraSessions                     // 2024-11-05 to 2025-11-25 only
	eraBoth                         // and 2026-07-28
	eraStateless                    // 2026-07-28 only
)

// eraName names what an upstream speaks (Status.Speaks).
func eraName(e upstreamEra) string {
	switch e {
	case eraSessions:
		return "2025-11-25"
	case eraBoth:
		return "2025-11-25,2026-07-28"
	case eraStateless:
		return "2026-07-28"
	}
	return ""
}

// statelessOnly reports an upstream that speaks 2026-07-28 only.
func (u *upstream) statelessOnly() bool { return u.era.Load() == eraStateless }

// passes2026 reports whether a 2026-07-28 request passes through to the
// upstream as it is (the upstream speaks that revision).
func (u *upstream) passes2026() bool {
	e := u.era.Load()
	return e == eraBoth || e == eraStateless
}

// reset makes the pool's connections anew (their calls fail).
func (p *pool) reset() {
	for _, s := range p.slots {
		if c := s.cur.Load(); c != nil {
			c.close()
		}
	}
}

// revive lets a pool whose handshake found no 2026-07-28 start again on
// its next use.
func (p *pool) revive() {
	for _, s := range p.slots {
		if s.gaveUp.CompareAndSwap(true, false) {
			s.started.Store(false)
		}
	}
}

// quietInbound passes a probe pipe's messages to its muxConn, and its end
// only once the pipe is adopted as the connection's transport: a probe
// pipe dropped must not end the connection.
type quietInbound struct {
	c       *muxConn
	adopted atomic.Bool
}

func (q *quietInbound) Message(b []byte) { q.c.Message(b) }

func (q *quietInbound) Closed(err error) {
	if q.adopted.Load() {
		q.c.Closed(err)
	}
}

// internalVia is internal sent on via (nil: the connection's transport).
func (c *muxConn) internalVia(ctx context.Context, via client.Conn, method string, params []byte) ([]byte, error) {
	if via == nil {
		return c.internal(ctx, method, params)
	}
	cl, err := c.begin(nil, nil, c.u.cfg.Timeout)
	if err != nil {
		return nil, c.u.connError(err)
	}
	b := codec.AppendRequest(nil, cl.idBytes(), method, params)
	if err := via.Send(context.Background(), b); err != nil {
		c.end(cl)
		return nil, c.u.connError(err)
	}
	out, err := c.wait(ctx, cl)
	c.end(cl)
	return out, err
}

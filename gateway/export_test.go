package gateway

import "math"

// HeldCount returns the calls held for their clients' input.
func (g *Gateway) HeldCount() int { return g.heldCount() }

// ExpireHeld ends every held call as its time running out does.
func (g *Gateway) ExpireHeld() { g.sweepHeld(math.MaxInt64) }

// RestartUpstream ends the first connection of upstream name (for stdio,
// its child): it reconnects.
func (g *Gateway) RestartUpstream(name string) {
	if u := g.find(name); u != nil {
		if c := u.session.conn(0); c != nil {
			c.close()
		}
	}
}

// UpstreamEra says what upstream name speaks, as its last handshake told.
func (g *Gateway) UpstreamEra(name string) string {
	if u := g.find(name); u != nil {
		return eraName(u.era.Load())
	}
	return ""
}

func (g *Gateway) find(name string) *upstream {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, u := range g.ups {
		if u.cfg.Name == name {
			return u
		}
	}
	return nil
}

// MarkDown has upstream name count as down here, as its connections
// failing would (a cluster then sends its calls elsewhere).
func (g *Gateway) MarkDown(name string) {
	if u := g.find(name); u != nil {
		u.healthMu.Lock()
		u.setDown(true)
		u.healthMu.Unlock()
	}
}

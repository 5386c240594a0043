package gateway

import (
	"context"
	"slices"
)

// PrepareReload checks a new set of upstreams against the running ones
// and returns the function that applies it: upstreams removed have their
// items withdrawn, those added are started and mirrored, those whose
// connection settings changed are replaced by new ones (which take over
// their items: new calls wait for the new connections), and those whose
// naming changed (prefix, tools.allow, tools.deny, tools.rename; the
// default prefix changes with the number of upstreams) are mirrored
// again; the others are not touched, nor are their sessions and calls.
// An upstream removed or replaced finishes its calls in flight on its
// old connections (at most its timeout), then stops. Every list that
// changes is announced downstream (list_changed, coalesced). An invalid
// configuration is an error and nothing is applied.
func (g *Gateway) PrepareReload(ups []Upstream) (apply func(context.Context), err error) {
	ups = slices.Clone(ups)
	if err := ValidateAll(ups); err != nil {
		return nil, err
	}
	return func(ctx context.Context) { g.reload(ctx, ups) }, nil
}

func (g *Gateway) reload(ctx context.Context, ups []Upstream) {
	g.mu.Lock()
	old := map[string]*upstream{}
	for _, u := range g.ups {
		old[u.cfg.Name] = u
	}
	nOld, nNew := len(g.ups), len(ups)
	var next []*upstream
	var stop, replaced, start, rename []*upstream
	var renamed []Upstream
	for _, cfg := range ups {
		u, ok := old[cfg.Name]
		switch {
		case !ok:
			u = newUpstream(g, cfg)
			g.current(u)
			start = append(start, u)
		case !u.cfg.equal(&cfg):
			nu := newUpstream(g, cfg)
			nu.m.inherit(u.m)
			g.handOver(u, nu)
			g.current(nu)
			replaced = append(replaced, u)
			start = append(start, nu)
			u = nu
		case !u.m.naming().sameNames(&cfg, nOld, nNew):
			rename = append(rename, u)
			renamed = append(renamed, cfg)
		}
		delete(old, cfg.Name)
		next = append(next, u)
	}
	for _, u := range old {
		stop = append(stop, u)
		delete(g.refs, u.cfg.Name)
	}
	g.ups = next
	g.opts.Upstreams = ups
	g.indexChanged()
	g.mu.Unlock()
	for _, u := range stop {
		u.m.clear()
		g.retire(u)
		g.log.Info("upstream removed", "upstream", u.cfg.Name)
	}
	for _, u := range replaced {
		g.retire(u)
		g.log.Info("upstream's connections replaced; the calls in flight finish on the old ones", "upstream", u.cfg.Name)
	}
	for i, u := range rename {
		u.m.renamed(renamed[i])
		g.log.Info("upstream renamed its items", "upstream", u.cfg.Name)
	}
	for _, u := range start {
		u.run()
		g.log.Info("upstream added", "upstream", u.cfg.Name)
	}
	g.mergeInstructions() // those removed, and the prefixes named
	_ = ctx
}

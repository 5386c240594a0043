package gateway

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Status is an upstream's health, as the admin endpoint /upstreams shows
// it and /readyz summarises it.
type Status struct {
	Name      string `json:"name"`
	Transport string `json:"transport"`
	Target    string `json:"target"` // the command line or the URL
	Share     string `json:"share"`
	// State is "ready" (every connection started is up), "degraded"
	// (some are), "down" (none is) or "starting" (none has been up yet).
	State string `json:"state"`
	// Connections are the connections up, Started those started (lazy
	// and 2026-07-28 ones start on demand).
	Connections int `json:"connections"`
	Started     int `json:"started"`
	// Children are the stdio child processes running; ChildrenStarted
	// counts every one ever started (restarts included).
	Children        int    `json:"children"`
	ChildrenStarted uint64 `json:"childrenStarted"`
	InFlight        int    `json:"inFlight"`
	Calls           uint64 `json:"calls"`
	Errors          uint64 `json:"errors"`
	Timeouts        uint64 `json:"timeouts"`
	Restarts        uint64 `json:"restarts"`
	Garbage         uint64 `json:"garbage"`    // messages that were not JSON-RPC
	UnknownIDs      uint64 `json:"unknownIds"` // answers to ids not in flight
	Unrouted        uint64 `json:"unrouted"`   // messages no downstream request could take
	Dropped         uint64 `json:"dropped"`    // notifications over -upstream-notify-rate
	// ErrorsByClass are Errors by class (ErrorClasses), those that
	// occurred.
	ErrorsByClass map[string]uint64 `json:"errorsByClass,omitempty"`
	// Latency counts the calls per bucket of Options.LatencyBuckets, then
	// over the last (not cumulative); LatencySum is their total in
	// seconds. Nil without buckets.
	Latency    []uint64 `json:"-"`
	LatencySum float64  `json:"-"`
	Tools      int      `json:"tools"`
	Resources  int      `json:"resources"`
	Prompts    int      `json:"prompts"`
	// Speaks is what the upstream speaks, as its last handshake told:
	// "2025-11-25" (the session revisions), "2026-07-28", or both
	// (comma-separated); "" before the first. Requests of the other era
	// are translated (docs/gateway.md).
	Speaks string `json:"speaks,omitempty"`
	// Held are the calls held open for 2026-07-28 clients' input.
	Held          int    `json:"held,omitempty"`
	LastFailure   string `json:"lastFailure,omitempty"`
	LastFailureAt string `json:"lastFailureAt,omitempty"` // RFC 3339
}

// Status returns every upstream's health, in configuration order.
func (g *Gateway) Status() []Status {
	g.mu.Lock()
	ups := append([]*upstream(nil), g.ups...)
	g.mu.Unlock()
	out := make([]Status, 0, len(ups))
	for _, u := range ups {
		out = append(out, u.status())
	}
	return out
}

func (u *upstream) status() Status {
	s := Status{Name: u.cfg.Name, Transport: u.cfg.Transport.String(), Share: u.cfg.Share.String()}
	if u.cfg.Transport == Stdio {
		s.Target = strings.Join(append([]string{u.cfg.Command}, u.cfg.Args...), " ")
	} else {
		s.Target = u.cfg.URL
	}
	everUp := false
	for _, p := range u.pools() {
		for _, sl := range p.slots {
			if !sl.started.Load() {
				continue
			}
			s.Started++
			c := sl.cur.Load()
			if c == nil {
				continue
			}
			everUp = true
			if c.ready.Load() {
				s.Connections++
				s.InFlight += int(c.inflight.Load())
				if c.proc != nil {
					s.Children++
				}
			}
		}
	}
	switch {
	case s.Started > 0 && s.Connections == s.Started:
		s.State = "ready"
	case s.Connections > 0:
		s.State = "degraded"
	case everUp:
		s.State = "down"
	default:
		s.State = "starting"
	}
	st := &u.stats
	s.ChildrenStarted = st.children.Load()
	s.Calls, s.Errors, s.Timeouts, s.Restarts = st.calls.Load(), st.errors.Load(), st.timeouts.Load(), st.restarts.Load()
	s.Garbage, s.UnknownIDs, s.Unrouted, s.Dropped = st.garbage.Load(), st.unknownIDs.Load(), st.unrouted.Load(), st.dropped.Load()
	for i := range st.classes {
		if n := st.classes[i].Load(); n > 0 {
			if s.ErrorsByClass == nil {
				s.ErrorsByClass = map[string]uint64{}
			}
			s.ErrorsByClass[ErrorClasses[i]] = n
		}
	}
	if len(st.lat) > 0 {
		s.Latency = make([]uint64, len(st.lat))
		for i := range st.lat {
			s.Latency[i] = st.lat[i].Load()
		}
		s.LatencySum = float64(st.latSum.Load()) / 1e9
	}
	s.Tools, s.Resources, s.Prompts = u.m.counts()
	s.Speaks = eraName(u.era.Load())
	s.Held = u.g.heldOf(u)
	u.lastMu.Lock()
	if u.lastErr != nil {
		s.LastFailure, s.LastFailureAt = u.lastErr.Error(), u.lastAt.UTC().Format(time.RFC3339)
	}
	u.lastMu.Unlock()
	return s
}

// Ready reports an error naming every upstream that has no connection up
// (readiness detail): a gateway serves what it can, so an upstream down
// is reported, and /readyz decides what it means.
func (g *Gateway) Ready() error {
	var errs []error
	for _, s := range g.Status() {
		if s.Connections == 0 {
			msg := fmt.Sprintf("upstream %q %s", s.Name, s.State)
			if s.LastFailure != "" {
				msg += ": " + s.LastFailure
			}
			errs = append(errs, errors.New(msg))
		}
	}
	return errors.Join(errs...)
}

package main

import (
	"flag"
	"strconv"
	"time"

	"github.com/mcpedge/mcpedge/gateway"
)

// The budgets of the gateway's era translation (docs/gateway.md#eras):
// what a 2026-07-28 client in front of an upstream of the session
// revisions, or a session in front of one of 2026-07-28, can make the
// gateway hold.
type translateFlags struct {
	hold             time.Duration
	maxHeld          int
	maxHeldPerClient int
	maxRounds        int
	maxListenURIs    int
}

func registerTranslateFlags(fs *flag.FlagSet, t *translateFlags) {
	fs.DurationVar(&t.hold, "upstream-hold", gateway.DefaultHoldTimeout, "how long an upstream call translated for a 2026-07-28 client is held open for the client's retry with the input it asked for; then the upstream's request gets an error, the call is cancelled, and the retry gets -32602")
	fs.IntVar(&t.maxHeld, "upstream-max-held", gateway.DefaultMaxHeld, "upstream calls held open for 2026-07-28 clients' input at once; more get -32000 {\"limit\":\"upstream-held\"}")
	fs.IntVar(&t.maxHeldPerClient, "upstream-max-held-per-client", gateway.DefaultMaxHeldPerClient, "of -upstream-max-held, those of one client (its authenticated subject, else its address)")
	fs.IntVar(&t.maxRounds, "upstream-max-rounds", gateway.DefaultMaxRounds, "input rounds of one call translated between eras; more get -32000 {\"limit\":\"upstream-input-rounds\"}")
	fs.IntVar(&t.maxListenURIs, "upstream-max-listen-uris", gateway.DefaultMaxListenURIs, "resource URIs the listen stream kept open on an upstream of 2026-07-28 only names, for the sessions' resources/subscribe; the rest get no updates (logged)")
}

func (t *translateFlags) validate() error {
	if err := atLeast("upstream-hold", int64(t.hold), 1, t.hold.String()); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"upstream-max-held", t.maxHeld}, {"upstream-max-held-per-client", t.maxHeldPerClient}, {"upstream-max-rounds", t.maxRounds}, {"upstream-max-listen-uris", t.maxListenURIs}} {
		if err := atLeast(f.name, int64(f.v), 1, strconv.Itoa(f.v)); err != nil {
			return err
		}
	}
	return nil
}

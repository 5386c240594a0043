package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/mcpedge/mcpedge"
	"github.com/mcpedge/mcpedge/engine"
	mcphttp "github.com/mcpedge/mcpedge/transport/http"
	"github.com/mcpedge/mcpedge/transport/netlimit"
)

// SIGHUP reloads the configuration (one handler: signals in main.go calls
// reloader.onHUP): the -config file and the environment are read again, with the command line's flags still winning, and the
// whole new configuration is validated (a bad file is rejected whole: the
// old configuration stays and the error is logged). Then every hook
// applies its part. A changed flag no hook applies is logged as needing a
// restart (listen addresses, -loops, -workers...).

// reloadHook is one part of the configuration that a reload applies
// without a restart.
//
// This is the hook other parts of the command add themselves to: append
// one to reloader.hooks in run before reloader.watch starts (an auth
// verifier re-reading its keys, for example). Reloading is two-phase:
// every hook's prepare runs first, and any error rejects the reload whole,
// before anything is applied; then every apply runs. prepare is called on
// every reload, changed keys or not, so that files named by an unchanged
// flag (certificates, keys) are read again.
type reloadHook struct {
	// name says what the hook reloads, in the logs.
	name string
	// keys are the flags it applies: their changes are logged as applied,
	// not as needing a restart.
	keys []string
	// prepare checks the new configuration and readies its part (reads
	// files, parses values); it returns the function that applies it, or
	// nil for nothing to apply.
	prepare func(c *config) (apply func(), err error)
	// changed, when set, says what the last prepare found changed in the
	// files it reads though no flag changed (a certificate renewed), for
	// the reload's line; "" for nothing.
	changed func() string
}

// reloader re-reads the configuration on SIGHUP and applies it.
type reloader struct {
	args  []string
	log   *slog.Logger
	vals  map[string]string // the flags' values in effect
	hooks []reloadHook      // the reload hooks (see reloadHook)
}

// newReloader returns the reloader of the server run started with args
// and c: it applies the log level, the engine's limits and rates, the
// HTTP allow-lists and the TLS certificate.
func newReloader(args []string, c *config, log *slog.Logger, level *slog.LevelVar, srv *mcpedge.Server, tlsState *mcphttp.TLS) (*reloader, error) {
	_, fs, err := parseFlags(args, io.Discard)
	if err != nil {
		return nil, err
	}
	r := &reloader{args: args, log: log, vals: flagValues(fs)}
	r.hooks = append(r.hooks,
		reloadHook{name: "log level", keys: []string{"log-level"}, prepare: func(c *config) (func(), error) {
			l, err := parseLevel(c.logLevel)
			if err != nil {
				return nil, fmt.Errorf("-log-level: %w", err)
			}
			return func() { level.Set(l) }, nil
		}},
		reloadHook{name: "limits", keys: []string{"max-inflight", "max-subscriptions", "rate", "rate-ip", "rate-burst", "rate-subject", "rate-subject-burst", "queue-per-client", "queue-total"}, prepare: func(c *config) (func(), error) {
			l := engine.Limits{MaxInflight: orNone(c.maxInflight), MaxSubscriptions: orNone(c.maxSubscriptions), Rate: c.rate, RateIP: c.rateIP, RateBurst: c.rateBurst,
				RateSubject: c.rateSubject, RateSubjectBurst: c.rateSubjBurst, QueuePerClient: orNone(c.queuePerClient), QueueTotal: c.queueTotal}
			return func() { srv.Engine().SetLimits(l) }, nil
		}},
		// [tool.NAME] rate, burst, max-inflight: a tool whose limits are
		// unchanged keeps its state (engine.SetToolLimits).
		reloadHook{name: "tool limits", prepare: func(c *config) (func(), error) {
			tl := c.tables.toolLimits()
			return func() { srv.Engine().SetToolLimits(tl) }, nil
		}},
	)
	if h := srv.HTTPServer(); h != nil {
		r.hooks = append(r.hooks, reloadHook{name: "HTTP allow-lists", keys: []string{"allowed-hosts", "allowed-origins", "cors-origins"}, prepare: func(c *config) (func(), error) {
			hosts, origins, cors := splitList(c.allowHosts), splitList(c.allowOrigin), splitList(c.corsOrigins)
			return func() {
				h.SetAllowed(hosts, origins)
				h.SetCORS(cors)
			}, nil
		}})
	}
	if tlsState != nil {
		var renewed string
		r.hooks = append(r.hooks, reloadHook{name: "TLS certificate", keys: []string{"tls-cert", "tls-key", "tls-client-ca"}, prepare: func(c *config) (func(), error) {
			renewed = ""
			if c.tlsCert == "" {
				return nil, errors.New("-tls-cert: turning TLS off needs a restart")
			}
			cfg, err := tlsFiles(c).Load()
			if err != nil {
				return nil, fmt.Errorf("-tls-cert: %w", err)
			}
			if old, nw := certSerial(tlsState.Config()), certSerial(cfg); old != nw {
				renewed = "TLS certificate: serial " + old + " → " + nw
			}
			return func() { tlsState.Store(cfg) }, nil
		}, changed: func() string { return renewed }})
	}
	return r, nil
}

// budgetReloadHook applies -max-buffered and -max-outbound-total to the
// budgets the transports share: a lower limit cuts the biggest holders at
// once.
func budgetReloadHook(buffered, outbound *netlimit.Budget) reloadHook {
	return reloadHook{name: "byte budgets", keys: []string{"max-buffered", "max-outbound-total"}, prepare: func(c *config) (func(), error) {
		return func() {
			buffered.SetLimit(orNone(c.maxBuffered))
			outbound.SetLimit(orNone(c.maxOutboundTotal))
		}, nil
	}}
}

// flagValues returns every flag's value in its string form.
func flagValues(fs *flag.FlagSet) map[string]string {
	m := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) { m[f.Name] = f.Value.String() })
	return m
}

// reload re-reads and applies the configuration; on an error nothing is
// applied. It logs one line, after everything is applied: what changed
// and was applied ("applied"), what files read again changed ("renewed":
// a certificate), and what changed but needs a restart ("restart", at
// warning level then); "nothing changed" when that is all.
func (r *reloader) reload() error {
	c, fs, err := parseFlags(r.args, io.Discard)
	if err != nil {
		return err
	}
	applies := make([]func(), 0, len(r.hooks))
	for _, h := range r.hooks {
		apply, err := h.prepare(c)
		if err != nil {
			return fmt.Errorf("%s: %w", h.name, err)
		}
		if apply != nil {
			applies = append(applies, apply)
		}
	}
	for _, apply := range applies {
		apply()
	}
	vals := flagValues(fs)
	var applied, restart, renewed []string
	for name, v := range vals {
		old, ok := r.vals[name]
		if ok && old == v {
			continue
		}
		change := fmt.Sprintf("%s: %q → %q", name, old, v)
		if secretKey.MatchString(name) && !strings.HasSuffix(name, "-file") { // -auth-client-secret: never its value (logging.go)
			change = name + ": changed"
		}
		if slices.ContainsFunc(r.hooks, func(h reloadHook) bool { return slices.Contains(h.keys, name) }) {
			applied = append(applied, change)
		} else {
			restart = append(restart, change)
		}
	}
	for _, h := range r.hooks {
		if h.changed != nil {
			if what := h.changed(); what != "" {
				renewed = append(renewed, what)
			}
		}
	}
	slices.Sort(applied)
	slices.Sort(restart)
	r.vals = vals
	var args []any
	if len(applied) > 0 {
		args = append(args, "applied", strings.Join(applied, ", "))
	}
	if len(renewed) > 0 {
		args = append(args, "renewed", strings.Join(renewed, ", "))
	}
	switch {
	case len(restart) > 0:
		r.log.Warn("SIGHUP: configuration reloaded; some changes need a restart", append(args, "restart", strings.Join(restart, ", "))...)
	case len(args) == 0:
		r.log.Info("SIGHUP: configuration reloaded: nothing changed")
	default:
		r.log.Info("SIGHUP: configuration reloaded", args...)
	}
	return nil
}

// onHUP is what a SIGHUP does (signals in main.go catches it, the one
// handler of that signal): reload, and log the one line that says how it
// went.
func (r *reloader) onHUP() {
	if err := r.reload(); err != nil {
		r.log.Error("SIGHUP: configuration reload rejected; the configuration in effect is kept", "err", err)
	}
}

// certSerial returns the serial number of cfg's first certificate, "" for
// none.
func certSerial(cfg *tls.Config) string {
	if cfg == nil || len(cfg.Certificates) == 0 {
		return ""
	}
	c := cfg.Certificates[0]
	if c.Leaf == nil && len(c.Certificate) > 0 {
		leaf, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			return ""
		}
		c.Leaf = leaf
	}
	if c.Leaf == nil {
		return ""
	}
	return c.Leaf.SerialNumber.Text(16)
}

// tlsFiles are the TLS flags' files.
func tlsFiles(c *config) mcphttp.TLSFiles {
	return mcphttp.TLSFiles{Cert: c.tlsCert, Key: c.tlsKey, ClientCA: c.tlsClientCA}
}

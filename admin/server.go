package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/internal/hostcheck"
)

// DefaultAddr is where the admin listener listens by default.
const DefaultAddr = "127.0.0.1:7402"

// Readiness is what /readyz answers: 200 once SetReady(true) was called
// (the MCP listeners are up) and until SetDraining(true) (shutdown began),
// 503 otherwise. The zero value is not ready. Its methods are safe for
// concurrent use; the shutdown path calls SetDraining(true) first, so that
// a load balancer stops sending new clients while requests drain.
type Readiness struct {
	ready, draining atomic.Bool
	check           atomic.Pointer[func() error]
}

// SetCheck adds a condition to readiness: while check returns an error,
// /readyz answers 503 with its text (a cluster node that lost its peers).
// check is called on each /readyz request and must be quick.
func (r *Readiness) SetCheck(check func() error) { r.check.Store(&check) }

// Check returns the error of the SetCheck condition, nil when there is
// none or it holds.
func (r *Readiness) Check() error {
	if c := r.check.Load(); c != nil {
		return (*c)()
	}
	return nil
}

// SetReady marks the server ready (its listeners are up) or not.
func (r *Readiness) SetReady(v bool) { r.ready.Store(v) }

// SetDraining marks the server draining: /readyz answers 503 from then
// on, whatever SetReady says, until SetDraining(false).
func (r *Readiness) SetDraining(v bool) { r.draining.Store(v) }

// Draining reports whether SetDraining(true) was called.
func (r *Readiness) Draining() bool { return r.draining.Load() }

// Ready reports what /readyz answers: ready, not draining, and the
// SetCheck condition holding.
func (r *Readiness) Ready() bool {
	return r.ready.Load() && !r.draining.Load() && r.Check() == nil
}

// Handler returns the admin endpoints on a mux of their own:
//
//	/                the status page: a self-contained HTML page that polls /status.json
//	/status.json     the status page's figures (Metrics.Status)
//	/metrics         m in Prometheus text format, with Go runtime and process figures
//	/healthz         200 "ok" while the process serves
//	/readyz          200 "ready", or 503 "not ready" / "not ready: <why>" / "draining" (ready)
//	/debug/pprof/    the runtime's profiles, as net/http/pprof serves them
//
// The pprof handlers are registered on this mux only; net/http/pprof is
// not imported (its init registers on http.DefaultServeMux). There is no
// /debug/pprof/cmdline: the command line holds secrets (-auth-client-secret,
// credentials in a -cluster URL), and no profile needs it.
//
// Handler checks no Host: mount it behind a check of your own, or serve
// it with Listen, which checks Host as the MCP listener does.
func Handler(m *Metrics, ready *Readiness) http.Handler {
	if ready != nil {
		m.set.GetOrCreateGauge("mcpedge_ready", func() float64 { return b2f(ready.Ready()) })
		m.set.GetOrCreateGauge("mcpedge_draining", func() float64 { return b2f(ready.Draining()) })
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", servePage)
	mux.HandleFunc("GET /status.json", serveStatus(m, ready))
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		m.WritePrometheus(w)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		switch why := ready.Check(); {
		case ready.Draining():
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("draining\n"))
		case !ready.ready.Load():
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("not ready\n"))
		case why != nil:
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("not ready: " + why.Error() + "\n"))
		default:
			_, _ = w.Write([]byte("ready\n"))
		}
	})
	mux.HandleFunc("/debug/pprof/", pprofIndex)
	mux.HandleFunc("/debug/pprof/profile", pprofCPU)
	mux.HandleFunc("/debug/pprof/trace", pprofTrace)
	return mux
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// pprofIndex serves /debug/pprof/: the list of profiles, or the named one
// (?debug=N for text, ?gc=1 to collect garbage before a heap profile).
func pprofIndex(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/debug/pprof/")
	if name == "" {
		profiles := pprof.Profiles()
		sort.Slice(profiles, func(i, j int) bool { return profiles[i].Name() < profiles[j].Name() })
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "profiles (append ?debug=1 for text):")
		for _, p := range profiles {
			fmt.Fprintf(w, "%d\t/debug/pprof/%s\n", p.Count(), p.Name())
		}
		fmt.Fprintln(w, "\t/debug/pprof/profile?seconds=N (CPU)\n\t/debug/pprof/trace?seconds=N")
		return
	}
	p := pprof.Lookup(name)
	if p == nil {
		http.Error(w, "unknown profile "+strconv.Quote(name), http.StatusNotFound)
		return
	}
	debug, _ := strconv.Atoi(r.FormValue("debug"))
	if name == "heap" && r.FormValue("gc") != "" {
		runtime.GC()
	}
	if debug != 0 {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	} else {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	}
	_ = p.WriteTo(w, debug)
}

// seconds reads ?seconds= (default 30 for a profile, 1 for a trace).
func seconds(r *http.Request, def int) time.Duration {
	n, err := strconv.Atoi(r.FormValue("seconds"))
	if err != nil || n <= 0 {
		n = def
	}
	return time.Duration(n) * time.Second
}

func sleep(r *http.Request, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
	}
}

func pprofCPU(w http.ResponseWriter, r *http.Request) {
	d := seconds(r, 30)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="profile"`)
	if err := pprof.StartCPUProfile(w); err != nil {
		w.Header().Del("Content-Disposition")
		http.Error(w, "could not start CPU profile: "+err.Error(), http.StatusInternalServerError)
		return
	}
	sleep(r, d)
	pprof.StopCPUProfile()
}

func pprofTrace(w http.ResponseWriter, r *http.Request) {
	d := seconds(r, 1)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="trace"`)
	if err := trace.Start(w); err != nil {
		w.Header().Del("Content-Disposition")
		http.Error(w, "could not start trace: "+err.Error(), http.StatusInternalServerError)
		return
	}
	sleep(r, d)
	trace.Stop()
}

// Server is the admin listener: Handler on an address of its own, never
// an MCP port, behind the MCP listener's Host check.
type Server struct {
	ln       net.Listener
	srv      *http.Server
	loopback bool // bound to loopback only
	hosts    atomic.Pointer[hostcheck.Check]
	mux      *http.ServeMux
}

// Handle adds an endpoint of another part of the server (the gateway's
// /upstreams) to the admin listener. Call it before Serve.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// Listen binds addr at once (so that a bad address fails at start) and
// returns the Server that Serve will run. The HTTP server's own errors
// (accept back-off, bad requests) go to logger at warning level (nil:
// the standard logger).
//
// Requests are checked against DNS rebinding as the MCP listener checks
// them (package hostcheck): bound to loopback, the listener answers only
// requests whose Host is a loopback name or one SetAllowedHosts allows,
// so that a web page whose name resolves to 127.0.0.1 cannot read the
// profiles or the figures; other Hosts get 403. A Host that is an IP
// address passes too: rebinding needs a name, and a scraper that names
// the listener by its address must not depend on the MCP allow-list.
func Listen(addr string, m *Metrics, ready *Readiness, logger *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin: listen %s: %w", addr, err)
	}
	s := &Server{ln: ln}
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		s.loopback = a.IP.IsLoopback()
	}
	s.SetAllowedHosts(nil)
	mux := Handler(m, ready).(*http.ServeMux)
	s.mux = mux
	s.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !s.hosts.Load().Allowed([]byte(r.Host)) && !ipHost(r.Host) {
				http.Error(w, "Invalid Host: "+strconv.Quote(r.Host), http.StatusForbidden)
				return
			}
			mux.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       time.Minute,
	}
	if logger != nil {
		s.srv.ErrorLog = slog.NewLogLogger(logger.Handler(), slog.LevelWarn)
	}
	return s, nil
}

// ipHost reports whether a Host value is an IP address, with or without a
// port.
func ipHost(h string) bool {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	_, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))
	return err == nil
}

// SetAllowedHosts sets the Host values accepted besides loopback names,
// as -allowed-hosts does for the MCP listener ("name", "name:port", "*").
// Safe for concurrent use: a configuration reload calls it.
func (s *Server) SetAllowedHosts(hosts []string) {
	s.hosts.Store(hostcheck.New(hosts, s.loopback))
}

// Addr returns the address the admin listener listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Serve serves until Shutdown or Close; it then returns nil.
func (s *Server) Serve() error {
	if err := s.srv.Serve(s.ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Shutdown stops the listener and waits for the requests in progress
// (a CPU profile included) until ctx ends, then closes what is left.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	_ = s.ln.Close() // in case Serve never ran
	if err != nil {
		return s.srv.Close()
	}
	return nil
}

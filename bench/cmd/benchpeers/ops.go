package main

// The operations run (-ops-only, make bench-ops; also part of the full run
// unless -ops=false): what the admin listener's metrics and OAuth
// authorization cost mcpedge in server CPU per call. mcpedge -handlers
// bench is started several ways at once (admin off, metrics on, a static
// token, JWTs verified with keys from a JWKS that benchpeers serves
// itself) and measured in alternating rounds. It writes its own section
// of the report, between markers, and leaves the rest of the file as it
// was; a full run that skips it keeps the section there.

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/mcpedge/mcpedge/loadtest"
)

// The operations run's workloads and goal.
const (
	opsHTTPConns = goalConns // HTTP: closed loop, one request in flight per connection
	opsTCPConns  = 16        // TCP: pipelined, with
	opsInFlight  = 16        // requests in flight per connection
	// opsMetricsGoal bounds mcpedge's server CPU per call with metrics on,
	// and with tracing at opsSample, against admin off.
	opsMetricsGoal = 1.03
	// opsSample is the tracing server's -otel-sample.
	opsSample = "0.01"
	// opsTokens is how many distinct JWTs the uncached point sends in
	// turn: more than twice the verifier's cache (auth.DefaultCacheSize,
	// 10000), so that none is still remembered when it comes round again.
	opsTokens = 20000
	opsIssuer = "https://issuer.bench.invalid"
)

// The variants of the operations run.
const (
	opsAdminOff   = "admin off"
	opsMetricsOn  = "metrics on"
	opsTracing    = "tracing at 0.01"
	opsNoAuth     = "no auth"
	opsStatic     = "static token"
	opsJWTCached  = "JWT RS256, one token (cached)"
	opsJWTDistinc = "JWT RS256, 20000 tokens in turn (verified each time)"
)

const (
	opsBegin = "<!-- bench-ops: begin. Written by make bench-ops (or make bench-peers); make bench-peers -ops=false keeps it. -->"
	opsEnd   = "<!-- bench-ops: end -->"
)

// opsPoint is one measurement of the operations run.
type opsPoint struct {
	point
	variant string
	// refused is why the server did not serve mcpload (the probe's first
	// error), "" when it did; a refused point is not measured.
	refused string
}

type opsReport struct {
	cfg          *config
	began, ended time.Time
	points       []*opsPoint
	signing      time.Duration // signing the JWTs
	// What the tracing server exported: POSTs to the OTLP sink, and
	// their bytes.
	exports, exportBytes int64
}

// otlpSink is an OTLP/HTTP endpoint that counts what it is sent.
type otlpSink struct {
	srv          *httptest.Server
	posts, bytes atomic.Int64
}

func newOTLPSink() *otlpSink {
	k := &otlpSink{}
	k.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		k.posts.Add(1)
		k.bytes.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	return k
}

// opsTarget is a server of the operations run and what is asked of it.
type opsTarget struct {
	srv     *server
	tcp     bool
	extra   []string // mcpload's arguments for it (bearer tokens)
	reload  bool     // SIGHUP the server before each run: its verifier forgets what it cached
	measure *opsPoint
}

// jwtIssuer is an RSA key, its JWKS served on loopback, and the tokens it
// signs.
type jwtIssuer struct {
	key *rsa.PrivateKey
	srv *httptest.Server
}

func newJWTIssuer() (*jwtIssuer, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	b64 := base64.RawURLEncoding.EncodeToString
	jwks, err := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "kid": "bench", "use": "sig", "alg": "RS256",
		"n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes()),
	}}})
	if err != nil {
		return nil, err
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(jwks)
	}))
	return &jwtIssuer{key: key, srv: srv}, nil
}

func (j *jwtIssuer) jwksURL() string { return j.srv.URL + "/jwks.json" }

// sign returns n RS256 tokens for audience aud, distinct by their jti,
// valid for an hour; signed on every core.
func (j *jwtIssuer) sign(aud string, n int) ([]string, error) {
	now := time.Now()
	out := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	workers := runtime.NumCPU()
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				t := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{
					"iss": opsIssuer, "aud": aud, "sub": "bench", "client_id": "benchpeers",
					"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "jti": strconv.Itoa(i),
				})
				t.Header["kid"] = "bench"
				out[i], errs[i] = t.SignedString(j.key)
			}
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// runOps measures the operations section and returns it, markers
// included. The binaries must be built.
func runOps(ctx context.Context, c *config) (string, error) {
	rep := &opsReport{cfg: c, began: time.Now()}
	var edgePeer peer
	for _, p := range peers(c.bin) {
		if p.name == "mcpedge" {
			edgePeer = p
		}
	}
	var servers []*server
	defer func() {
		for _, s := range servers {
			s.stop()
		}
	}()
	// startEdge starts mcpedge with extra arguments, given its HTTP
	// address.
	startEdge := func(extra func(h string) ([]string, error)) (*server, error) {
		p := edgePeer
		args := p.args
		var argErr error
		p.args = func(h, t string) []string {
			more, err := extra(h)
			argErr = err
			return append(args(h, t), more...)
		}
		s, err := start(p, true, true)
		if err == nil {
			err = argErr
		}
		if err != nil {
			if s != nil {
				s.stop()
			}
			return nil, err
		}
		servers = append(servers, s)
		return s, nil
	}
	fixed := func(a ...string) func(string) ([]string, error) {
		return func(string) ([]string, error) { return a, nil }
	}
	adminOff := fixed("-admin", "")

	base, err := startEdge(adminOff)
	if err != nil {
		return "", err
	}
	metrics, err := startEdge(func(string) ([]string, error) {
		a, err := freePort()
		return []string{"-admin", a}, err
	})
	if err != nil {
		return "", err
	}
	// Tracing: spans exported over OTLP/HTTP to a sink benchpeers serves,
	// which counts them and answers 200.
	sink := newOTLPSink()
	defer sink.srv.Close()
	tracing, err := startEdge(fixed("-admin", "", "-otel-endpoint", sink.srv.URL, "-otel-sample", opsSample))
	if err != nil {
		return "", err
	}
	// A static token, in a file.
	static := "bench-static-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	tokenFile := filepath.Join(c.bin, "ops-tokens")
	if err := os.WriteFile(tokenFile, []byte(static+"\n"), 0o600); err != nil {
		return "", err
	}
	staticSrv, err := startEdge(fixed("-admin", "", "-auth-token-file", tokenFile))
	if err != nil {
		return "", err
	}
	// JWTs: benchpeers serves the JWKS.
	iss, err := newJWTIssuer()
	if err != nil {
		return "", err
	}
	defer iss.srv.Close()
	jwtSrv, err := startEdge(func(h string) ([]string, error) {
		return []string{"-admin", "", "-auth-jwks-url", iss.jwksURL(), "-auth-issuer", opsIssuer, "-auth-audience", "http://" + h + "/mcp"}, nil
	})
	if err != nil {
		return "", err
	}
	signed := time.Now()
	tokens, err := iss.sign("http://"+jwtSrv.httpAddr+"/mcp", opsTokens)
	if err != nil {
		return "", err
	}
	rep.signing = time.Since(signed)
	log.Printf("signed %d JWTs in %s", len(tokens), rep.signing.Round(time.Millisecond))
	manyFile := filepath.Join(c.bin, "ops-jwts")
	if err := os.WriteFile(manyFile, []byte(strings.Join(tokens, "\n")+"\n"), 0o600); err != nil {
		return "", err
	}

	add := func(s *server, variant string, tcp bool, extra ...string) *opsTarget {
		tr, conns := "http", opsHTTPConns
		if tcp {
			tr, conns = "tcp", opsTCPConns
		}
		t := &opsTarget{srv: s, tcp: tcp, extra: extra, measure: &opsPoint{point: point{transport: tr, name: "mcpedge", conns: conns}, variant: variant}}
		rep.points = append(rep.points, t.measure)
		return t
	}
	// The HTTP points alternate with each other, the no-auth baseline
	// (admin off) serving both comparisons; then the TCP ones.
	httpBase := add(base, opsAdminOff, false)
	groups := [][]*opsTarget{
		{
			httpBase,
			add(metrics, opsMetricsOn, false),
			add(tracing, opsTracing, false),
			add(staticSrv, opsStatic, false, "-bearer", static),
			add(jwtSrv, opsJWTCached, false, "-bearer", tokens[0]),
			add(jwtSrv, opsJWTDistinc, false, "-bearer-file", manyFile),
		},
		{add(base, opsAdminOff, true), add(metrics, opsMetricsOn, true), add(tracing, opsTracing, true)},
	}
	for _, g := range groups {
		for _, t := range g {
			t.reload = t.srv == jwtSrv
		}
	}
	mcploadBin := filepath.Join(c.bin, "mcpload")
	// A probe first: a server that refuses mcpload is noted, not measured.
	for _, g := range groups {
		for _, t := range g {
			res, err := loadPinned(ctx, nil, mcploadBin, append(append([]string{"-q", "-json", "-", "-timeout", "5s", "-n", "50", "-warmup", "0"}, t.extra...), t.target())...)
			switch {
			case err != nil:
				t.measure.refused = err.Error()
			case res.OK == 0 || res.Errors > 0:
				t.measure.refused = firstError(res)
			}
			if t.measure.refused != "" {
				log.Printf("%-40s not served: %s", t.measure.key(), t.measure.refused)
			}
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
		}
	}
	common := []string{"-duration", c.duration.String(), "-warmup", c.warmup.String(), "-timeout", "10s"}
	for round := 0; round < c.rounds; round++ {
		for _, g := range groups {
			for k := range g {
				// Alternate: each round starts from another target.
				t := g[(k+round)%len(g)]
				if t.measure.refused != "" {
					continue
				}
				if t.reload {
					// A reload clears the verifier's cache: no token of the
					// last run is remembered.
					_ = t.srv.cmd.Process.Signal(syscall.SIGHUP)
					time.Sleep(300 * time.Millisecond)
				}
				args := append([]string{"-q", "-json", "-", "-pid", strconv.Itoa(t.srv.pid())}, common...)
				if t.tcp {
					args = append(args, "-c", strconv.Itoa(opsTCPConns), "-inflight", strconv.Itoa(opsInFlight))
				} else {
					args = append(args, "-c", strconv.Itoa(opsHTTPConns))
				}
				res, err := loadPinned(ctx, nil, mcploadBin, append(append(args, t.extra...), t.target())...)
				logRound(t.measure.key(), round, res, err)
				t.measure.runs = append(t.measure.runs, res)
				if ctx.Err() != nil {
					return "", ctx.Err()
				}
			}
		}
	}
	rep.ended = time.Now()
	rep.exports, rep.exportBytes = sink.posts.Load(), sink.bytes.Load()
	return rep.markdown(), nil
}

func (t *opsTarget) target() string {
	if t.tcp {
		return "tcp://" + t.srv.tcpAddr
	}
	return "http://" + t.srv.httpAddr + "/mcp"
}

func (p *opsPoint) key() string { return p.transport + "/mcpedge(" + p.variant + ")" }

// writeOps measures the operations section and puts it into the report
// file, leaving the rest of the file as it was.
func writeOps(ctx context.Context, c *config) error {
	section, err := runOps(ctx, c)
	if err != nil {
		return err
	}
	old, err := os.ReadFile(c.out)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	doc := string(old)
	if doc == "" {
		doc = "# Benchmarks\n\n"
	}
	doc = spliceOps(doc, section)
	if err := os.MkdirAll(filepath.Dir(c.out), 0o755); err != nil {
		return err
	}
	return os.WriteFile(c.out, []byte(doc), 0o644)
}

func (r *opsReport) find(tr, variant string) *opsPoint {
	for _, p := range r.points {
		if p.transport == tr && p.variant == variant {
			return p
		}
	}
	return nil
}

// omed is p's median of f, 0 when p is missing or was not measured.
func omed(p *opsPoint, f func(*loadtest.Result) float64) float64 {
	if p == nil || p.refused != "" {
		return 0
	}
	return p.median(f)
}

func (r *opsReport) markdown() string {
	c := r.cfg
	var b strings.Builder
	b.WriteString(opsBegin + "\n")
	b.WriteString("## Operations cost: metrics, tracing and authorization\n\n")
	fmt.Fprintf(&b, "Written by `make bench-ops` (bench/cmd/benchpeers -ops-only) or `make bench-peers` on %s, in %s.\n\n",
		r.began.UTC().Format("2006-01-02 15:04 MST"), r.ended.Sub(r.began).Round(time.Second))
	fmt.Fprintf(&b, "- Machine: %s.\n", machine())
	fmt.Fprintf(&b, "- Command: `cd bench && go run ./cmd/benchpeers -ops-only -root .. -out ../docs/benchmarks.md` (flags: -duration %s -warmup %s -rounds %d).\n",
		c.duration, c.warmup, c.rounds)
	b.WriteString("- Servers, all `mcpedge -handlers bench`, up at once, idle but for the one measured: **admin off** (`-admin \"\"`: no admin listener, no metrics); **metrics on** (`-admin 127.0.0.1:PORT`: the admin listener and its Prometheus metrics, per-tool series included: every call below is a `tools/call`, so each is counted per method and per tool (`mcpedge_tool_calls_total`, `mcpedge_tool_duration_seconds`); nobody scraping); **static token** (`-admin \"\" -auth-token-file FILE`, one token; mcpload `-bearer TOKEN`); **JWT RS256** (`-admin \"\" -auth-jwks-url URL -auth-issuer ISS -auth-audience http://127.0.0.1:PORT/mcp`; benchpeers serves the JWKS on loopback with an RSA-2048 key it generated, and signs the tokens).\n")
	fmt.Fprintf(&b, "- The JWT server is measured twice: **one token** on every request (mcpload `-bearer`): verified once, then found in the verifier's cache of verified tokens (by SHA-256); and **%d tokens in turn** (mcpload `-bearer-file`, one token per request, distinct by jti): the verifier caches at most %d tokens and, when full and none has expired, forgets them all, so each token is gone before it comes round again and every request is a full RS256 verification (plus the cache's upkeep). The JWT server is reloaded (SIGHUP, which clears the cache) before each of its runs. Signing the tokens took %s, before the runs.\n",
		opsTokens, 10000, r.signing.Round(time.Millisecond))
	fmt.Fprintf(&b, "- HTTP: `mcpload -c %d` (closed loop, one request in flight per connection), the session revision; every request carries the token, initialize's included. TCP: `mcpload -c %d -inflight %d` (pipelined; no authorization on TCP). Every call is `tools/call` of `echo`. Each figure is the median of %d rounds; within a round the targets alternate, each round starting from another. The load generator shares the cores.\n",
		opsHTTPConns, opsTCPConns, opsInFlight, c.rounds)
	b.WriteString("- **Server CPU/call** is the server process's user+system time from /proc over the measured phase per call answered.\n\n")

	fmt.Fprintf(&b, "- **tracing at %s** (`-admin \"\" -otel-endpoint URL -otel-sample %s`): a span per request sampled, one in a hundred (mcpload sends no trace context), exported over OTLP/HTTP to a sink benchpeers serves on loopback, which reads each POST and answers 200 (%d POSTs, %d bytes in all).\n\n",
		opsSample, opsSample, r.exports, r.exportBytes)
	fmt.Fprintf(&b, "Metrics, per-tool series included, and tracing at -otel-sample %s should each cost at most a few per cent of server CPU per call (goal: on ÷ admin off ≤ %.2f×):\n\n", opsSample, opsMetricsGoal)
	b.WriteString("| transport | on | figure | admin off | on | on ÷ off | in each round | goal | met |\n|---|---|---|---:|---:|---:|---:|---:|:-:|\n")
	var noisy []string
	for _, pair := range [][2]string{{"http", opsMetricsOn}, {"tcp", opsMetricsOn}, {"http", opsTracing}, {"tcp", opsTracing}} {
		tr, variant := pair[0], pair[1]
		off, on := r.find(tr, opsAdminOff), r.find(tr, variant)
		if off == nil || on == nil {
			continue
		}
		row := func(fig string, fn func(*loadtest.Result) float64, fmtV func(float64) string, goal float64) {
			ov, nv := omed(off, fn), omed(on, fn)
			var per []string
			var perV []float64
			if off.refused == "" && on.refused == "" {
				for i := range min(len(off.runs), len(on.runs)) {
					if off.runs[i] != nil && on.runs[i] != nil {
						per = append(per, strings.TrimSuffix(ratio(fn(on.runs[i]), fn(off.runs[i])), "×"))
						if d := fn(off.runs[i]); d > 0 {
							perV = append(perV, fn(on.runs[i])/d)
						}
					}
				}
			}
			g, met := "-", "-"
			if goal > 0 && len(perV) > 1 {
				lo, hi := slices.Min(perV), slices.Max(perV)
				if hi-lo > 2*(goal-1) {
					noisy = append(noisy, fmt.Sprintf("- %s, %s: the rounds' ratios of server CPU per call spread from %.2f× to %.2f×, wider than the goal's margin: on this machine the run cannot tell a difference of %.0f %% there from noise.",
						strings.ToUpper(tr), variant, lo, hi, 100*(goal-1)))
				}
			}
			if goal > 0 {
				g = "≤ " + strconv.FormatFloat(goal, 'f', 2, 64) + "×"
				switch {
				case ov == 0 || nv == 0:
				case nv/ov <= goal:
					met = "yes"
				default:
					met = "no"
				}
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", tr, variant, fig, fmtV(ov), fmtV(nv), ratio(nv, ov), strings.Join(per, ", "), g, met)
		}
		row("server CPU/call", cpuPerReq, fmtOpsCPU, opsMetricsGoal)
		row("req/s", rps, fmtRPS, 0)
		row("p99", p99, fmtUS, 0)
	}
	b.WriteString("\n")
	if len(noisy) > 0 {
		b.WriteString(strings.Join(noisy, "\n") + "\n\n")
	}

	b.WriteString("Authorization over HTTP (admin off), against no authorization:\n\n")
	b.WriteString("| workload | authorization | req/s | p50 | p99 | server CPU/call | ÷ no auth | + per call | errors |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	ref := r.find("http", opsAdminOff)
	refCPU := omed(ref, cpuPerReq)
	for _, v := range []string{opsAdminOff, opsStatic, opsJWTCached, opsJWTDistinc} {
		p := r.find("http", v)
		if p == nil {
			continue
		}
		name := v
		if v == opsAdminOff {
			name = opsNoAuth
		}
		wl := fmt.Sprintf("HTTP, %d conns", p.conns)
		if p.refused != "" {
			fmt.Fprintf(&b, "| %s | %s | not served | - | - | - | - | - | - |\n", wl, name)
			continue
		}
		cpu := omed(p, cpuPerReq)
		vs, plus := "-", "-"
		if p != ref && refCPU > 0 && cpu > 0 {
			vs = ratio(cpu, refCPU)
			plus = fmt.Sprintf("%+.1f µs", cpu-refCPU)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %.0f |\n", wl, name,
			fmtRPS(omed(p, rps)), fmtUS(omed(p, p50)), fmtUS(omed(p, p99)), fmtOpsCPU(cpu), vs, plus, omed(p, errs))
	}
	b.WriteString("\n")
	var notes []string
	for _, p := range r.points {
		if p.refused != "" {
			notes = append(notes, fmt.Sprintf("- %s over %s did not serve mcpload (a 50-call probe; first error: `%s`), so it was not measured.",
				p.variant, strings.ToUpper(p.transport), strings.ReplaceAll(p.refused, "`", "'")))
		}
	}
	if len(notes) > 0 {
		b.WriteString(strings.Join(notes, "\n") + "\n\n")
	}
	b.WriteString(opsEnd + "\n")
	return b.String()
}

// fmtOpsCPU is fmtCPU with a second decimal under 10 µs, where a few per
// cent is less than 0.1 µs.
func fmtOpsCPU(v float64) string {
	if v > 0 && v < 10 {
		return strconv.FormatFloat(v, 'f', 2, 64) + " µs"
	}
	return fmtCPU(v)
}

// spliceOps puts section (markers included) into doc: in place of the one
// there, or else after the stateless section, or else before the scaling
// section, or else where the scaling section would go.
func spliceOps(doc, section string) string {
	if out, ok := replaceMarked(doc, section, opsBegin, opsEnd); ok {
		return out
	}
	if i := strings.Index(doc, statelessEnd+"\n"); i >= 0 {
		j := i + len(statelessEnd) + 1
		rest := doc[j:]
		if rest != "" && !strings.HasPrefix(rest, "\n") {
			rest = "\n" + rest
		}
		return doc[:j] + "\n" + section + rest
	}
	if i := strings.Index(doc, coresBegin); i >= 0 {
		return doc[:i] + section + "\n" + doc[i:]
	}
	return spliceCores(doc, section)
}

// opsSection returns the operations section of doc, markers included, or
// "".
func opsSection(doc string) string { return markedSection(doc, opsBegin, opsEnd) }

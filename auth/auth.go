// Package auth makes an mcpedge server an OAuth 2.1 resource server
// (MCP authorization, 2025-11-25 and 2026-07-28): it verifies bearer
// tokens (JWTs against a JWKS, static tokens from a file, opaque tokens by
// RFC 7662 introspection), serves RFC 9728 protected-resource metadata,
// and checks the scopes each request and each tool needs.
//
// A Verifier holds its configuration in one immutable state that Reload
// replaces atomically (SIGHUP: new token file contents, new JWKS URL or
// issuer), so requests never see half a configuration. Streamable HTTP
// checks the Authorization header of every request (transport/http,
// Options.Auth); TCP, stdio and 2026-07-28 requests without HTTP carry the
// token in params._meta["io.mcpedge/token"]. A Verifier is the engine's
// Authorizer (engine.Options.Authorize), which decides every request of
// every transport and revision before the engine answers it, verifying
// on a worker, never on an event loop, what a cache lookup cannot decide.
// Handlers read the verified identity with FromContext.
//
// Tokens and secrets are never logged, and no answer echoes them.
package auth

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"hash/maphash"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"github.com/puzpuzpuz/xsync/v4"

	"github.com/mcpedge/mcpedge/engine"
)

// MaxTokenLen bounds a bearer token; a longer one is refused (401) before
// any parsing.
const MaxTokenLen = 8 << 10

// MetaKey is the params._meta key that carries a bearer token where there
// is no HTTP Authorization header: in initialize over TCP and stdio, and
// in each 2026-07-28 request there.
const MetaKey = "io.mcpedge/token"

// JSON-RPC error codes of authorization failures, outside the range that
// JSON-RPC and MCP reserve (-32768 to -32000), as the 2026-07-28 revision
// asks of application-defined codes. They mirror HTTP 401 and 403; data
// carries {"error": "invalid_token" | "insufficient_scope", "scope": …}.
const (
	CodeUnauthorized = -31001 // no token, or an invalid one
	CodeForbidden    = -31003 // a valid token lacking a scope
)

// Defaults of Config.
const (
	DefaultSkew               = 30 * time.Second
	DefaultFetchTimeout       = 5 * time.Second
	DefaultRefreshInterval    = time.Hour
	DefaultUnknownKIDInterval = 30 * time.Second
	DefaultCacheTTL           = time.Minute
	DefaultCacheSize          = 10000
	DefaultRetryInterval      = time.Second
	DefaultMaxKeySetBytes     = 1 << 20
)

// DefaultAlgs are the JWT algorithms accepted by default: asymmetric ones
// only (no "none", no HMAC, so no key confusion), each also checked
// against the type of the JWK that verifies it.
var DefaultAlgs = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// Config configures a Verifier. At least one of JWKSURL, TokenFile,
// Tokens and IntrospectionURL must be set.
type Config struct {
	// Audience is this server's resource URI (RFC 8707, RFC 9728
	// "resource"): a JWT's aud must name it, and an introspected token's
	// aud, when present. Required.
	Audience string
	// Issuer, when set, must equal a JWT's iss (and an introspected
	// token's, when present).
	Issuer string
	// AuthorizationServers are the issuer URLs listed in the metadata
	// (authorization_servers); empty means Issuer.
	AuthorizationServers []string
	// Scopes are required of every request; ScopesSupported (for the
	// metadata) defaults to them.
	Scopes, ScopesSupported []string
	// ResourceMetadataURL is the URL of the metadata document that
	// challenges point to; empty derives it from Audience (RFC 9728 §3.1:
	// https://host/.well-known/oauth-protected-resource/mcp).
	ResourceMetadataURL string

	// JWKSURL is where the JWT verification keys are fetched from.
	JWKSURL string
	// Algs are the accepted JWT algorithms; empty means DefaultAlgs.
	// Symmetric algorithms and "none" are never accepted.
	Algs []string
	// Skew is the clock leeway on exp and nbf; 0 means DefaultSkew.
	Skew time.Duration
	// FetchTimeout bounds each JWKS fetch and introspection call; 0 means
	// DefaultFetchTimeout.
	FetchTimeout time.Duration
	// RefreshInterval is how often the JWKS is refetched in the
	// background; 0 means DefaultRefreshInterval.
	RefreshInterval time.Duration
	// UnknownKIDInterval is the least time between two refetches caused
	// by a token whose kid is not in the cached set; 0 means
	// DefaultUnknownKIDInterval. In between, such tokens are refused at
	// once.
	UnknownKIDInterval time.Duration
	// RetryInterval is the wait after a failed JWKS fetch before the next
	// one (in the background, or for a token with an unknown kid),
	// doubled for each failure in a row up to 8 times it; 0 means
	// DefaultRetryInterval. Keys are picked up that soon after a key
	// server recovers.
	RetryInterval time.Duration
	// MaxKeySetBytes bounds a JWKS download; a bigger one fails (the
	// cached keys stay); 0 means DefaultMaxKeySetBytes.
	MaxKeySetBytes int64

	// TokenFile holds static tokens, one per line: the token, then
	// optionally the scopes it grants, space-separated (none: every
	// scope). Blank lines and lines starting with # are skipped. Read by
	// New and Reload.
	TokenFile string
	// Tokens are static tokens given directly, in the same line format.
	Tokens []string

	// IntrospectionURL, when set, verifies tokens that are not JWTs (or
	// when there is no JWKSURL) by RFC 7662 introspection, authenticated
	// with ClientID and ClientSecret (HTTP Basic).
	IntrospectionURL, ClientID, ClientSecret string

	// CacheTTL bounds how long a verified JWT or introspected token is
	// remembered (by its SHA-256), never past its exp; 0 means
	// DefaultCacheTTL, < 0 no cache. CacheSize bounds the entries; 0
	// means DefaultCacheSize.
	CacheTTL  time.Duration
	CacheSize int

	// KeepToken puts the raw token in Info.Token, for handlers that
	// exchange it (on-behalf-of). Off by default: MCP servers must not
	// pass tokens through.
	KeepToken bool

	// Rules, when not nil, narrow what each caller sees and may use
	// (CompileRules): the Verifier is then the engine's Policy too.
	Rules *Rules
	// ToolScopes are scopes required of the callers of tools, by tool
	// name, besides the tools' own (handlers.ToolOptions.RequiredScopes):
	// the config file's [tool.NAME] scopes. The map is the Verifier's
	// once given.
	ToolScopes map[string][]string

	// HTTPClient fetches the JWKS and calls introspection; nil means a
	// client with FetchTimeout.
	HTTPClient *http.Client
	// Logger gets JWKS refresh failures (never a token); nil discards.
	Logger *slog.Logger
}

// Info is a verified caller, as handlers see it (FromContext).
type Info struct {
	// Subject is the token's sub ("static:N" for the static token on line
	// N of the token file).
	Subject string
	// ClientID is the OAuth client the token was issued to (client_id or
	// azp), when known.
	ClientID string
	// Scopes are the scopes granted.
	Scopes []string
	// Expiry is when the token expires (zero: never, for static tokens).
	Expiry time.Time
	// Token is the raw token when Config.KeepToken is set.
	Token string

	claims   []byte       // the JWT's payload, or the introspection answer: a JSON object (Claims)
	class    *Class       // its policy class under the rules of state gen (nil: no rules)
	anyScope bool         // a static token granted without a scope list
	static   *staticToken // the entry of a static token (a pointer: printing an Info shows no digest)
	gen      uint64       // the configuration (state.gen) that verified it
	vkey     uint64       // that configuration's verification settings (state.vkey)
}

// Claims returns every claim of the caller's JWT, or every member of its
// introspection answer, as encoding/json decodes them into a map: what
// authorization rules read as claims (Rule.When). It decodes them anew
// on each call (they are kept encoded); nil for a static token.
func (i *Info) Claims() map[string]any {
	if len(i.claims) == 0 {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(i.claims, &m) != nil {
		return nil
	}
	return m
}

// AuthSubject returns Subject: Info is an engine.Subject, what the engine
// binds tasks to.
func (i *Info) AuthSubject() string { return i.Subject }

// HasScope reports whether the caller was granted scope.
func (i *Info) HasScope(scope string) bool {
	return i.anyScope || slices.Contains(i.Scopes, scope)
}

// Missing returns the scopes of need the caller lacks.
func (i *Info) Missing(need []string) []string {
	var out []string
	for _, s := range need {
		if !i.HasScope(s) {
			out = append(out, s)
		}
	}
	return out
}

// expired reports whether the token has expired at now.
func (i *Info) expired(now time.Time) bool {
	return !i.Expiry.IsZero() && !now.Before(i.Expiry)
}

// NewContext returns ctx carrying info (engine.WithCaller).
func NewContext(ctx context.Context, info *Info) context.Context {
	return engine.WithCaller(ctx, info)
}

// FromContext returns the verified caller of a request, as a handler's
// context carries it when the server authorizes requests (engine.Caller).
func FromContext(ctx context.Context) (*Info, bool) {
	i, ok := engine.Caller(ctx).(*Info)
	return i, ok && i != nil
}

// Error is a refused token or request. Status is the HTTP status (401 or
// 403), Code the RFC 6750 error ("" for a request without a token,
// "invalid_token", "insufficient_scope", "invalid_request"), Scope the
// scopes needed (insufficient_scope), Description a text without any
// part of the token.
type Error struct {
	Status      int
	Code        string
	Description string
	Scope       []string
}

func (e *Error) Error() string {
	if e.Code == "" {
		return "auth: " + e.Description
	}
	return "auth: " + e.Code + ": " + e.Description
}

// ErrNoToken is the error for a request that carries no token.
var ErrNoToken = &Error{Status: http.StatusUnauthorized, Description: "authorization required"}

func invalid(desc string) *Error {
	return &Error{Status: http.StatusUnauthorized, Code: "invalid_token", Description: desc}
}

// InsufficientScope is the error for a caller lacking scopes.
func InsufficientScope(scopes []string) *Error {
	return &Error{Status: http.StatusForbidden, Code: "insufficient_scope",
		Description: "insufficient scope: requires " + strings.Join(scopes, " "), Scope: scopes}
}

// Verifier verifies tokens. Its methods are safe for concurrent use.
type Verifier struct {
	st     atomic.Pointer[state]
	cache  *xsync.Map[[sha256.Size]byte, cached]
	log    *slog.Logger
	onFail atomic.Pointer[func(Failure)]
}

// The reasons of refusals (Failure.Reason), the values of the metrics'
// reason label.
const (
	ReasonMissing           = "missing"            // no token
	ReasonInvalid           = "invalid"            // malformed, unknown, expired, revoked, of another audience, or of another subject than its session's
	ReasonInsufficientScope = "insufficient_scope" // a valid token lacking a scope
)

// A Failure is one refusal, as OnFailure is told of it.
type Failure struct {
	// Reason is ReasonMissing, ReasonInvalid or ReasonInsufficientScope.
	Reason string
	// Source is the client's address; the zero Addr where the refusal's
	// path does not know it (Verify, AuthorizeTool).
	Source netip.Addr
	// Err is what the client is answered: its Description says why, and
	// never holds the token.
	Err *Error
}

// OnFailure sets fn to be called once for each refusal: each token Verify
// refuses (missing, invalid or lacking a scope), each request Authorize or
// AuthorizeTool refuses (no token, a session's caller expired or revoked,
// a tool's scope missing), and each refusal a transport reports with
// Refused. For metrics and logs: fn must not block (rate-limit what it
// logs per Failure.Source). Safe for concurrent use.
func (v *Verifier) OnFailure(fn func(Failure)) { v.onFail.Store(&fn) }

// Refused counts (OnFailure) a refusal decided outside the Verifier's
// methods, err being what the client is answered and source its address:
// Streamable HTTP's for a request without an Authorization header, with a
// malformed one, for a session of another subject, or for a tool's scope.
func (v *Verifier) Refused(err error, source netip.Addr) { v.failed(err, source) }

func (v *Verifier) failed(err error, source netip.Addr) {
	fn := v.onFail.Load()
	if fn == nil || *fn == nil {
		return
	}
	e, ok := err.(*Error)
	if !ok {
		e = invalid("invalid token")
	}
	f := Failure{Reason: ReasonInvalid, Source: source.Unmap(), Err: e}
	switch {
	case e == ErrNoToken:
		f.Reason = ReasonMissing
	case e.Code == "insufficient_scope":
		f.Reason = ReasonInsufficientScope
	}
	(*fn)(f)
}

type cached struct {
	info *Info
	exp  time.Time
}

// gens numbers the states; vkeySeed keys the hash of their verification
// settings (state.vkey).
var (
	gens     atomic.Uint64
	vkeySeed = maphash.MakeSeed()
)

// setGen marks st's static tokens as verified under st, with their
// policy class. It runs before st is published.
func (st *state) setGen() {
	for i := range st.static {
		in := *st.static[i].info
		in.gen, in.static = st.gen, &st.static[i]
		in.class = st.cfg.Rules.classOf(&in)
		st.static[i].info = &in
	}
}

// state is one configuration, immutable once built.
type state struct {
	cfg    Config
	gen    uint64             // unique to this state: callers verified under another are rechecked
	vkey   uint64             // the settings a JWT or an introspected token is verified under, hashed
	ctx    context.Context    // ends with cancel
	cancel context.CancelFunc // stops the JWKS refresh
	keys   *keySet            // nil without JWKSURL
	kf     keyfunc.Keyfunc    // nil without JWKSURL
	parser *jwt.Parser
	algs   map[string]bool
	static []staticToken
	hc     *http.Client
	meta   []byte // the RFC 9728 document
	prm    string // its URL
}

// New returns a Verifier for cfg. A JWKS that cannot be fetched yet is no
// error: it is fetched again in the background and on unknown kids.
func New(cfg Config) (*Verifier, error) {
	v := &Verifier{cache: xsync.NewMap[[sha256.Size]byte, cached](), log: cfg.Logger}
	if v.log == nil {
		v.log = slog.New(slog.DiscardHandler)
	}
	if err := v.Reload(cfg); err != nil {
		return nil, err
	}
	return v, nil
}

// Reload replaces the configuration with cfg (re-reading its TokenFile
// and refetching its JWKS), atomically: requests verify against the old
// configuration or the new one, never a mix. On error the old one stays.
// Remembered verifications are forgotten.
func (v *Verifier) Reload(cfg Config) error {
	st, err := build(cfg, v.log)
	if err != nil {
		return err
	}
	old := v.st.Swap(st)
	v.cache.Clear()
	if old != nil {
		old.cancel()
	}
	return nil
}

// SetTokens replaces the static tokens only (lines as in
// Config.TokenFile), keeping the rest of the configuration and the
// fetched keys.
func (v *Verifier) SetTokens(lines []string) error {
	for {
		old := v.st.Load()
		toks, err := parseTokens(lines, "")
		if err != nil {
			return err
		}
		st := *old
		st.gen = gens.Add(1)
		st.static = toks
		st.setGen()
		if v.st.CompareAndSwap(old, &st) {
			v.cache.Clear()
			return nil
		}
	}
}

// Close stops the background JWKS refresh.
func (v *Verifier) Close() {
	if st := v.st.Load(); st != nil {
		st.cancel()
	}
}

// Config returns the configuration in force.
func (v *Verifier) Config() Config { return v.st.Load().cfg }

// ResourceMetadataURL is the URL of the RFC 9728 document, which 401 and
// 403 challenges name.
func (v *Verifier) ResourceMetadataURL() string { return v.st.Load().prm }

// Metadata returns the RFC 9728 protected-resource metadata document.
func (v *Verifier) Metadata() []byte { return v.st.Load().meta }

// Verify verifies token and returns its caller. It checks the scopes
// every request needs (Config.Scopes); a token lacking one is an *Error
// with Status 403, with the Info. Any other failure is an *Error with
// Status 401.
func (v *Verifier) Verify(ctx context.Context, token string) (*Info, error) {
	return v.VerifyFrom(ctx, token, netip.Addr{})
}

// VerifyFrom is Verify for a client at source, which a refusal is told
// to OnFailure with.
func (v *Verifier) VerifyFrom(ctx context.Context, token string, source netip.Addr) (*Info, error) {
	info, err := v.verifyToken(ctx, token, true)
	if err != nil {
		v.failed(err, source)
	}
	return info, err
}

// verifyToken verifies token. Unless block is set, it decides only what a
// static token's digest or the cache decides, and returns
// engine.ErrAuthWouldBlock for the rest (a JWT to verify, a key to fetch,
// an introspection call). token may alias a message: nothing keeps it
// (Info.Token is a copy).
func (v *Verifier) verifyToken(ctx context.Context, token string, block bool) (*Info, error) {
	if token == "" {
		return nil, ErrNoToken
	}
	if len(token) > MaxTokenLen {
		return nil, invalid("token too long")
	}
	st := v.st.Load()
	sum := sha256.Sum256(unsafe.Slice(unsafe.StringData(token), len(token))) // read only: no copy
	info, err := v.verify(ctx, st, token, &sum, block)
	if err != nil {
		return nil, err
	}
	if missing := info.Missing(st.cfg.Scopes); len(missing) > 0 {
		return info, InsufficientScope(missing)
	}
	return info, nil
}

func (v *Verifier) verify(ctx context.Context, st *state, token string, sum *[sha256.Size]byte, block bool) (*Info, error) {
	if info := st.matchStatic(sum); info != nil {
		if st.cfg.KeepToken {
			c := *info
			c.Token = strings.Clone(token)
			return &c, nil
		}
		return info, nil
	}
	now := time.Now()
	if c, ok := v.cache.Load(*sum); ok {
		if now.Before(c.exp) && c.info.gen == st.gen {
			return c.info, nil
		}
		v.cache.Delete(*sum)
	}
	isJWT := st.kf != nil && strings.Count(token, ".") == 2
	if !block && (isJWT || st.cfg.IntrospectionURL != "") {
		return nil, engine.ErrAuthWouldBlock
	}
	var info *Info
	var err error
	switch {
	case isJWT:
		info, err = st.verifyJWT(token)
	case st.cfg.IntrospectionURL != "":
		info, err = st.introspect(ctx, token, now)
	default:
		err = invalid("unknown token")
	}
	if err != nil {
		return nil, err
	}
	info.gen, info.vkey = st.gen, st.vkey
	info.class = st.cfg.Rules.classOf(info)
	if st.cfg.KeepToken {
		info.Token = strings.Clone(token)
	}
	if ttl := st.cfg.CacheTTL; ttl > 0 && v.cache.Size() < st.cfg.CacheSize {
		exp := now.Add(ttl)
		if !info.Expiry.IsZero() && info.Expiry.Before(exp) {
			exp = info.Expiry
		}
		v.cache.Store(*sum, cached{info, exp})
	} else if ttl > 0 {
		v.sweep(now)
	}
	return info, nil
}

// sweep drops expired entries, and all of them when none had expired, so
// that a full cache makes room.
func (v *Verifier) sweep(now time.Time) {
	n := 0
	v.cache.Range(func(k [sha256.Size]byte, c cached) bool {
		if !now.Before(c.exp) {
			v.cache.Delete(k)
			n++
		}
		return true
	})
	if n == 0 {
		v.cache.Clear()
	}
}

// build makes the state of cfg.
func build(cfg Config, log *slog.Logger) (*state, error) {
	if cfg.Audience == "" {
		return nil, errors.New("auth: an audience (this server's resource URI) is required")
	}
	if cfg.JWKSURL == "" && cfg.TokenFile == "" && len(cfg.Tokens) == 0 && cfg.IntrospectionURL == "" {
		return nil, errors.New("auth: no way to verify tokens: set a JWKS URL, a token file or an introspection URL")
	}
	if cfg.Skew == 0 {
		cfg.Skew = DefaultSkew
	}
	if cfg.FetchTimeout <= 0 {
		cfg.FetchTimeout = DefaultFetchTimeout
	}
	if cfg.RefreshInterval <= 0 {
		cfg.RefreshInterval = DefaultRefreshInterval
	}
	if cfg.UnknownKIDInterval <= 0 {
		cfg.UnknownKIDInterval = DefaultUnknownKIDInterval
	}
	if cfg.CacheTTL == 0 {
		cfg.CacheTTL = DefaultCacheTTL
	}
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = DefaultCacheSize
	}
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = DefaultRetryInterval
	}
	if cfg.MaxKeySetBytes <= 0 {
		cfg.MaxKeySetBytes = DefaultMaxKeySetBytes
	}
	if len(cfg.Algs) == 0 {
		cfg.Algs = DefaultAlgs
	}
	if len(cfg.AuthorizationServers) == 0 && cfg.Issuer != "" {
		cfg.AuthorizationServers = []string{cfg.Issuer}
	}
	if len(cfg.ScopesSupported) == 0 {
		cfg.ScopesSupported = cfg.Scopes
	}
	st := &state{cfg: cfg, hc: cfg.HTTPClient, algs: map[string]bool{}, gen: gens.Add(1)}
	st.vkey = maphash.String(vkeySeed, strings.Join([]string{cfg.JWKSURL, cfg.Audience, cfg.Issuer,
		strings.Join(cfg.Algs, " "), cfg.IntrospectionURL, cfg.ClientID, cfg.ClientSecret,
		strconv.FormatInt(int64(cfg.Skew), 10)}, "\n"))
	for _, a := range cfg.Algs {
		if !asymmetric(a) {
			return nil, errors.New("auth: algorithm " + a + " not allowed: only asymmetric JWT algorithms are")
		}
		st.algs[a] = true
	}
	if st.hc == nil {
		st.hc = &http.Client{Timeout: cfg.FetchTimeout}
	}
	prm, err := metadataURL(cfg)
	if err != nil {
		return nil, err
	}
	st.prm = prm
	st.meta = metadata(cfg)
	static, err := parseTokens(cfg.Tokens, "")
	if err != nil {
		return nil, err
	}
	st.static = static
	if cfg.TokenFile != "" {
		lines, err := readLines(cfg.TokenFile)
		if err != nil {
			return nil, err
		}
		more, err := parseTokens(lines, cfg.TokenFile)
		if err != nil {
			return nil, err
		}
		st.static = append(st.static, more...)
	}
	st.setGen()
	ctx, cancel := context.WithCancel(context.Background())
	st.ctx, st.cancel = ctx, cancel
	if cfg.JWKSURL != "" {
		if _, err := url.Parse(cfg.JWKSURL); err != nil {
			cancel()
			return nil, errors.New("auth: bad JWKS URL: " + err.Error())
		}
		if err := st.initJWT(ctx, log); err != nil {
			cancel()
			return nil, err
		}
	}
	return st, nil
}

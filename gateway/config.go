package gateway

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Transport is how an upstream is reached.
type Transport uint8

// The upstream transports.
const (
	Stdio Transport = iota + 1 // a child process, newline-delimited JSON-RPC on its stdin and stdout
	HTTP                       // Streamable HTTP, falling back to the legacy HTTP+SSE transport
	TCP                        // newline-delimited JSON-RPC over TCP, pipelined
)

// String returns the transport's name as a spec writes it.
func (t Transport) String() string {
	switch t {
	case Stdio:
		return "stdio"
	case HTTP:
		return "http"
	case TCP:
		return "tcp"
	}
	return "transport(" + strconv.Itoa(int(t)) + ")"
}

// Share says how downstream sessions share an upstream's connections.
type Share struct {
	// Session: one upstream connection (for stdio, one child process) per
	// downstream session, for servers that keep per-client state.
	Session bool
	// Pool is the number of connections every downstream session shares
	// when Session is false (for stdio, the number of children).
	Pool int
}

// String returns the share as the config writes it: "session" or
// "pool:N".
func (s Share) String() string {
	if s.Session {
		return "session"
	}
	return "pool:" + strconv.Itoa(s.Pool)
}

// ParseShare parses "session" or "pool:N" (N from 1 to 256).
func ParseShare(s string) (Share, error) {
	if s == "session" {
		return Share{Session: true}, nil
	}
	n, ok := strings.CutPrefix(s, "pool:")
	if !ok {
		return Share{}, fmt.Errorf("share %q: want \"session\" or \"pool:N\"", s)
	}
	v, err := strconv.Atoi(n)
	if err != nil || v < 1 || v > 256 {
		return Share{}, fmt.Errorf("share %q: N must be 1 to 256", s)
	}
	return Share{Pool: v}, nil
}

// OAuth are the OAuth 2.0 client credentials an upstream is reached with
// (the client credentials grant, client/oauth).
type OAuth struct {
	ClientID     string
	ClientSecret string
	Scopes       []string
}

// Upstream configures one upstream server. The zero values of its
// optional fields are the defaults (see the field comments); Normalize
// fills them in.
type Upstream struct {
	// Name names the upstream: in logs, errors, metrics and the default
	// prefix. Letters, digits, '-' and '_'.
	Name string
	// Transport, and what it needs: Command (with Args, Env as KEY=value
	// entries added to the gateway's environment, Dir) for stdio; URL for
	// HTTP (http:// or https://) and TCP (tcp://host:port).
	Transport Transport
	Command   string
	Args      []string
	Env       []string
	Dir       string
	URL       string

	// Prefix is put before the upstream's tool and prompt names. nil
	// means the default: none with a single upstream, Name+"_" with
	// several.
	Prefix *string
	// Allow, when not empty, keeps only the tools whose upstream names
	// match one of its patterns (path.Match: *, ?, [...]); Deny drops
	// those matching one of its patterns.
	Allow, Deny []string
	// Rename maps an upstream tool name to the name it is served under
	// (the prefix is not added to a renamed tool).
	Rename map[string]string

	// Share: the default is a pool of 1 connection for HTTP and TCP
	// (which multiplex), and of 1 child for stdio.
	Share Share
	// Timeout bounds each call to the upstream; 0 means 60 s.
	Timeout time.Duration
	// MaxInflight bounds the calls in flight on one upstream connection;
	// 0 means 256. A call over it is refused with -32000
	// {"limit":"upstream-inflight"}.
	MaxInflight int
	// Rate, if > 0, bounds the calls to the upstream per second, every
	// downstream caller's together, with bursts of Burst (0: the rate
	// rounded up), across the nodes of a cluster (engine.RateLimit); a
	// call over it is refused with -32000 {"limit":"upstream-rate"} and
	// retryAfterMs.
	Rate  float64
	Burst int
	// MaxSessions bounds the connections of Share.Session (one per
	// downstream session); 0 means 64.
	MaxSessions int
	// Lazy starts the connections of a pool beyond the first only when
	// the ones running are all busy.
	Lazy bool
	// Pipeline is how many requests one HTTP connection carries at once
	// (HTTP/1.1 pipelining); 0 means 1, none pipelined. Pipelined
	// requests are written together and their answers read together,
	// which saves system calls per call, but an answer waits for those
	// before it on its connection: a slow call holds up the calls
	// pipelined behind it. For upstreams whose calls are all quick.
	Pipeline int

	// Headers are sent with every HTTP request to the upstream (static
	// credentials). Never the downstream client's.
	Headers map[string]string
	// OAuth, when set, gets the upstream's bearer token by the client
	// credentials grant.
	OAuth *OAuth
}

// Defaults.
const (
	// DefaultHoldTimeout, DefaultMaxHeld, DefaultMaxHeldPerClient,
	// DefaultMaxRounds and DefaultMaxListenURIs are Options' defaults
	// (era translation).
	DefaultHoldTimeout      = 60 * time.Second
	DefaultMaxHeld          = 1024
	DefaultMaxHeldPerClient = 16
	DefaultMaxRounds        = 16
	DefaultMaxListenURIs    = 4096

	DefaultTimeout     = 60 * time.Second
	DefaultMaxInflight = 256
	DefaultMaxSessions = 64
	maxSlots           = 1 << 16 // ids carry the slot in 16 bits
	maxPipeline        = 1024
)

// headerName reports whether k is an HTTP header name (a token).
func headerName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("gateway: configuration")

func cfgErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
}

// ParseSpec parses an -upstream value: NAME=stdio:COMMAND ARGS...,
// NAME=http://host:port/path (or https://), or NAME=tcp://host:port. The
// command line is split on blanks; single and double quotes and a
// backslash group and escape as in a shell.
func ParseSpec(spec string) (Upstream, error) {
	name, rest, ok := strings.Cut(spec, "=")
	if !ok || name == "" {
		return Upstream{}, cfgErr("upstream %q: want NAME=stdio:COMMAND ARGS..., NAME=http://HOST:PORT/PATH or NAME=tcp://HOST:PORT", spec)
	}
	u := Upstream{Name: name}
	switch {
	case strings.HasPrefix(rest, "stdio:"):
		words, err := SplitCommand(strings.TrimPrefix(rest, "stdio:"))
		if err != nil {
			return Upstream{}, cfgErr("upstream %q: %v", name, err)
		}
		if len(words) == 0 {
			return Upstream{}, cfgErr("upstream %q: stdio: no command", name)
		}
		u.Transport, u.Command, u.Args = Stdio, words[0], words[1:]
	case strings.HasPrefix(rest, "http://"), strings.HasPrefix(rest, "https://"):
		u.Transport, u.URL = HTTP, rest
	case strings.HasPrefix(rest, "tcp://"):
		u.Transport, u.URL = TCP, rest
	default:
		return Upstream{}, cfgErr("upstream %q: %q: want stdio:COMMAND, http://, https:// or tcp://", name, rest)
	}
	return u, nil
}

// SplitCommand splits a command line into words as a shell would, without
// expansions: blanks separate words, quotes group, a backslash escapes
// the next character (outside single quotes).
func SplitCommand(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated single quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte(`"\$`+"`", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("unterminated double quote")
			}
			inWord = true
		case c == '\\':
			if i+1 < len(s) {
				i++
				cur.WriteByte(s[i])
			}
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// Normalize checks u and fills in its defaults. Every error names the
// upstream and the setting. A stdio command must be found (in PATH, or
// as a path); an URL must parse.
func (u *Upstream) Normalize() error {
	if !nameRE.MatchString(u.Name) {
		return cfgErr("upstream %q: a name is 1 to 64 letters, digits, '-' or '_', starting with a letter or digit", u.Name)
	}
	switch u.Transport {
	case Stdio:
		if u.Command == "" {
			return cfgErr("upstream %q: command: empty", u.Name)
		}
		if u.URL != "" {
			return cfgErr("upstream %q: command and url: give one", u.Name)
		}
		if _, err := exec.LookPath(u.Command); err != nil {
			return cfgErr("upstream %q: command %q: %v", u.Name, u.Command, err)
		}
		if u.Dir != "" {
			if fi, err := os.Stat(u.Dir); err != nil || !fi.IsDir() {
				return cfgErr("upstream %q: cwd %q: not a directory", u.Name, u.Dir)
			}
		}
		for _, e := range u.Env {
			if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
				return cfgErr("upstream %q: env %q: want KEY=value", u.Name, e)
			}
		}
	case HTTP:
		p, err := url.Parse(u.URL)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return cfgErr("upstream %q: url %q: want http://host[:port]/path or https://...", u.Name, u.URL)
		}
	case TCP:
		p, err := url.Parse(u.URL)
		if err != nil || p.Scheme != "tcp" || p.Host == "" || (p.Path != "" && p.Path != "/") {
			return cfgErr("upstream %q: url %q: want tcp://host:port", u.Name, u.URL)
		}
		if _, _, err := net.SplitHostPort(p.Host); err != nil {
			return cfgErr("upstream %q: url %q: %v", u.Name, u.URL, err)
		}
	default:
		return cfgErr("upstream %q: no command or url", u.Name)
	}
	if u.Command != "" && u.Transport != Stdio {
		return cfgErr("upstream %q: command and url: give one", u.Name)
	}
	for _, list := range [][]string{u.Allow, u.Deny} {
		for _, p := range list {
			if _, err := path.Match(p, ""); err != nil {
				return cfgErr("upstream %q: tools pattern %q: %v", u.Name, p, err)
			}
		}
	}
	seen := map[string]string{}
	for from, to := range u.Rename {
		if from == "" || to == "" {
			return cfgErr("upstream %q: tools.rename: empty name", u.Name)
		}
		if other, ok := seen[to]; ok {
			return cfgErr("upstream %q: tools.rename: %q and %q both renamed to %q", u.Name, min(other, from), max(other, from), to)
		}
		seen[to] = from
	}
	if u.Share.Pool == 0 && !u.Share.Session {
		u.Share.Pool = 1
	}
	if u.Share.Pool < 0 || u.Share.Pool > 256 {
		return cfgErr("upstream %q: share: pool of 1 to 256", u.Name)
	}
	if u.Timeout < 0 || u.MaxInflight < 0 || u.MaxSessions < 0 || u.Burst < 0 {
		return cfgErr("upstream %q: timeout, max-inflight, max-sessions and burst must not be negative", u.Name)
	}
	if u.Rate < 0 || math.IsNaN(u.Rate) || math.IsInf(u.Rate, 0) {
		return cfgErr("upstream %q: rate: %v: must be a non-negative number", u.Name, u.Rate)
	}
	if u.Timeout == 0 {
		u.Timeout = DefaultTimeout
	}
	if u.MaxInflight == 0 {
		u.MaxInflight = DefaultMaxInflight
	}
	if u.MaxInflight >= maxSlots {
		return cfgErr("upstream %q: max-inflight: at most %d", u.Name, maxSlots-1)
	}
	if u.MaxSessions == 0 {
		u.MaxSessions = DefaultMaxSessions
	}
	if u.Pipeline < 0 || u.Pipeline > maxPipeline {
		return cfgErr("upstream %q: pipeline: 1 to %d requests per connection", u.Name, maxPipeline)
	}
	if u.Pipeline == 0 {
		u.Pipeline = 1
	}
	if u.Pipeline > 1 && u.Transport != HTTP {
		return cfgErr("upstream %q: pipeline is for HTTP upstreams (TCP and stdio pipeline always)", u.Name)
	}
	for k, v := range u.Headers {
		if !headerName(k) {
			return cfgErr("upstream %q: header %q: not a header name", u.Name, k)
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return cfgErr("upstream %q: header %q: a value must not hold CR, LF or NUL", u.Name, k)
		}
	}
	if u.OAuth != nil && u.OAuth.ClientID == "" {
		return cfgErr("upstream %q: oauth: client-id is required (the token endpoint is discovered from the upstream's metadata)", u.Name)
	}
	if (len(u.Headers) > 0 || u.OAuth != nil) && u.Transport != HTTP {
		return cfgErr("upstream %q: credentials (headers, oauth) are for HTTP upstreams", u.Name)
	}
	return nil
}

// prefix returns the prefix of u's names among n upstreams.
func (u *Upstream) prefix(n int) string {
	if u.Prefix != nil {
		return *u.Prefix
	}
	if n > 1 {
		return u.Name + "_"
	}
	return ""
}

// allowed reports whether the upstream tool name passes Allow and Deny.
func (u *Upstream) allowed(name string) bool {
	match := func(ps []string) bool {
		return slices.ContainsFunc(ps, func(p string) bool { ok, _ := path.Match(p, name); return ok })
	}
	if len(u.Allow) > 0 && !match(u.Allow) {
		return false
	}
	return !match(u.Deny)
}

// ValidateAll normalizes every upstream and checks that their names are
// unique.
func ValidateAll(ups []Upstream) error {
	seen := map[string]bool{}
	for i := range ups {
		if err := ups[i].Normalize(); err != nil {
			return err
		}
		if seen[ups[i].Name] {
			return cfgErr("upstream %q: configured twice", ups[i].Name)
		}
		seen[ups[i].Name] = true
	}
	return nil
}

// equal reports whether a and b configure the same upstream (a reload
// keeps an upstream that did not change).
func (u *Upstream) equal(o *Upstream) bool {
	oa := func(o *OAuth) string {
		if o == nil {
			return ""
		}
		return o.ClientID + "\x00" + o.ClientSecret + "\x00" + strings.Join(o.Scopes, " ")
	}
	return u.Name == o.Name && u.Transport == o.Transport && u.Command == o.Command &&
		slices.Equal(u.Args, o.Args) && slices.Equal(u.Env, o.Env) && u.Dir == o.Dir && u.URL == o.URL &&
		u.Share == o.Share && u.Timeout == o.Timeout && u.MaxInflight == o.MaxInflight &&
		u.Rate == o.Rate && u.Burst == o.Burst &&
		u.MaxSessions == o.MaxSessions && u.Lazy == o.Lazy && u.Pipeline == o.Pipeline && oa(u.OAuth) == oa(o.OAuth) &&
		mapsEqual(u.Headers, o.Headers)
}

// sameNames reports whether a and b name their tools the same way.
func (u *Upstream) sameNames(o *Upstream, n, m int) bool {
	return u.prefix(n) == o.prefix(m) && slices.Equal(u.Allow, o.Allow) && slices.Equal(u.Deny, o.Deny) && mapsEqual(u.Rename, o.Rename)
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

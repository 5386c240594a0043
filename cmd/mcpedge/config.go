package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/handlers/builtin"
	"github.com/mcpedge/mcpedge/transport/proxied"
)

// Configuration sources, in order of precedence: a flag given on the
// command line, its environment twin (MCPEDGE_<FLAG>), its key in the
// -config file, its default. The loader is generic over the FlagSet: a
// flag registered anywhere in this package is a config key and has an
// environment twin, with no code of its own.

// envPrefix prefixes every flag's environment twin.
const envPrefix = "MCPEDGE_"

// envName is the environment twin of a flag: -max-message is
// MCPEDGE_MAX_MESSAGE.
func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// notInFile are flags that a config file cannot set.
var notInFile = map[string]bool{"config": true, "version": true}

// applySources parses args into fs and fills the flags not given there
// from the environment and then the config file (-config, or
// MCPEDGE_CONFIG), whose tables it parses into tables (tables.go). Every
// error names the flag, the variable or the key, and what would do
// (usage.go); an MCPEDGE_ variable that is no flag's twin is refused as an
// unknown key is.
func applySources(fs *flag.FlagSet, args []string, tables *fileTables) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return flagError(fs, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q (every setting is a flag: -name value)", fs.Args())
	}
	if err := checkEnv(fs, os.Environ()); err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })

	// The config file first, the environment over it: both only for
	// flags not given.
	path := ""
	if f := fs.Lookup("config"); f != nil {
		path = f.Value.String()
		if !given["config"] {
			path = os.Getenv(envName("config"))
			if path != "" {
				_ = f.Value.Set(path)
			}
		}
	}
	if path != "" {
		vals, err := readConfigFile(path, fs, tables)
		if err != nil {
			return err
		}
		for _, kv := range vals {
			if given[kv.name] {
				continue
			}
			if tv, ok := fs.Lookup(kv.name).Value.(tomlValue); ok {
				if err := tv.SetTOML(kv.raw); err != nil {
					return fmt.Errorf("config %s: %w", path, err)
				}
				continue
			}
			if err := fs.Set(kv.name, kv.value); err != nil {
				return valueError(fmt.Sprintf("config %s: key %q: invalid value %q", path, kv.name, kv.value), fs.Lookup(kv.name), kv.value, err)
			}
		}
	}
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || envErr != nil || f.Name == "config" {
			return
		}
		key := envName(f.Name)
		if v, ok := os.LookupEnv(key); ok {
			if err := f.Value.Set(v); err != nil {
				envErr = valueError(fmt.Sprintf("%s=%q", key, v), f, v, err)
			}
		}
	})
	return envErr
}

// unwrapFlagErr drops the strconv wrapping of a flag's parse error,
// keeping its reason ("value out of range", "invalid syntax").
func unwrapFlagErr(err error) error {
	var ne *strconv.NumError
	if errors.As(err, &ne) {
		return ne.Err
	}
	return err
}

type keyValue struct {
	name, value string
	raw         any // the TOML value, for a tomlValue flag
}

// tomlValue is a flag whose config key takes TOML values of its own
// (arrays of strings item by item, tables) rather than one string: it
// reports its errors naming the key (and the sub-keys of its tables).
type tomlValue interface {
	flag.Value
	SetTOML(v any) error
}

// readConfigFile reads a TOML file whose keys are flag names and returns
// each key with its value in the string form its flag parses, sorted by
// key; its tables (tableKeys) are parsed into tables. An unknown key, a
// table not in tableKeys, or a value of a type no flag takes is an error
// naming the key.
func readConfigFile(path string, fs *flag.FlagSet, tables *fileTables) ([]keyValue, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return parseConfig(data, path, fs, tables)
}

// parseConfig is readConfigFile of the file's contents, data.
func parseConfig(data []byte, path string, fs *flag.FlagSet, tables *fileTables) ([]keyValue, error) {
	var raw map[string]any
	if _, err := toml.Decode(string(data), &raw); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	*tables = fileTables{}
	out := make([]keyValue, 0, len(raw))
	for _, name := range sortedKeys(raw) {
		v := raw[name]
		if parse, ok := tableKeys[name]; ok {
			if err := parse(tables, v); err != nil {
				return nil, fmt.Errorf("config %s: [%s]: %w", path, name, err)
			}
			continue
		}
		if notInFile[name] {
			return nil, fmt.Errorf("config %s: unknown key %q (-%s is for the command line)", path, name, name)
		}
		if fs.Lookup(name) == nil {
			var keys []string
			fs.VisitAll(func(f *flag.Flag) {
				if !notInFile[f.Name] {
					keys = append(keys, f.Name)
				}
			})
			for k := range tableKeys {
				keys = append(keys, k)
			}
			return nil, fmt.Errorf("config %s: unknown key %q%s", path, name, didYouMean(name, keys, "", "the keys are the flags' names and the tables "+tableNames()))
		}
		if _, ok := fs.Lookup(name).Value.(tomlValue); ok {
			out = append(out, keyValue{name: name, raw: v})
			continue
		}
		s, err := tomlString(v)
		if err != nil {
			return nil, fmt.Errorf("config %s: key %q: %w", path, name, err)
		}
		out = append(out, keyValue{name: name, value: s})
	}
	return out, nil
}

// tomlString is the flag form of a TOML value: strings as they are,
// numbers and booleans as Go prints them, an array of strings joined with
// commas (the list flags).
func tomlString(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64), nil
	case bool:
		return strconv.FormatBool(v), nil
	case []any:
		parts := make([]string, len(v))
		for i, item := range v {
			s, ok := item.(string)
			if !ok {
				return "", fmt.Errorf("an array may hold only strings, got %T", item)
			}
			parts[i] = s
		}
		return strings.Join(parts, ","), nil
	case map[string]any:
		return "", errors.New("a table is not a flag's value")
	default:
		return "", fmt.Errorf("a %T is not a flag's value", v)
	}
}

// validate checks values the flag types accept but the server cannot
// use; each error names its flag. A count, size or duration whose 0 would
// only mean its default is refused at 0 (the minimums below); every other
// one's 0 means what its usage says ("0: none"), which TestZeroValues
// holds every numeric flag to.
func validate(c *config) error {
	if c.httpPath == "" || c.httpPath[0] != '/' {
		return fmt.Errorf("-http-path: %q must start with /", c.httpPath)
	}
	for _, f := range []struct {
		name string
		v    int64
		min  int64
	}{
		{"loops", int64(c.loops), 1}, {"workers", int64(c.workers), 1}, {"page-size", int64(c.pageSize), 1},
		{"max-sessions", int64(c.maxSessions), 1},
		{"max-message", int64(c.maxMessage), 1}, {"max-outbound", int64(c.maxOutbound), 1},
		{"event-store-bytes", int64(c.eventStore), 1},
		{"max-tasks", int64(c.maxTasks), 1}, {"max-task-bytes", c.maxTaskBytes, 1},
		{"auth-max-classes", int64(c.auth.maxClasses), 1},
		{"max-conns", int64(c.maxConns), 0}, {"max-conns-per-ip", int64(c.maxConnsPerIP), 0},
		{"max-inflight", int64(c.maxInflight), 0}, {"rate-burst", int64(c.rateBurst), 0},
		{"rate-subject-burst", int64(c.rateSubjBurst), 0},
		{"queue-per-client", int64(c.queuePerClient), 0}, {"queue-total", int64(c.queueTotal), 1},
		{"max-subscriptions", int64(c.maxSubscriptions), 0},
		{"max-tasks-per-client", int64(c.maxTasksPerClient), 0}, {"task-workers", int64(c.taskWorkers), 0},
		{"cluster-record-bytes", c.cluster.recordBytes, 1}, {"cluster-event-bytes", c.cluster.eventBytes, 1},
	} {
		if err := atLeast(f.name, f.v, f.min, strconv.FormatInt(f.v, 10)); err != nil {
			return err
		}
	}
	if c.maxSessionsPerIP < -1 {
		return fmt.Errorf("-max-sessions-per-ip %d: must be -1 (the default share), 0 (none) or positive", c.maxSessionsPerIP)
	}
	for _, f := range []struct {
		name string
		v    time.Duration
		min  time.Duration
	}{
		{"session-idle", c.sessionIdle, 1}, {"session-init-timeout", c.sessionInit, 1},
		{"state-ttl", c.stateTTL, 1}, {"cluster-forward-timeout", c.cluster.forwardTimeout, 1},
		{"cluster-heartbeat", c.cluster.heartbeat, 1},
		{"read-timeout", c.readTimeout, 0}, {"write-timeout", c.writeTimeout, 0},
		{"idle-timeout", c.idleTimeout, 0}, {"drain", c.drain, 0},
		{"sse-keepalive", c.sseKeep, 0}, {"lame-duck", c.lameDuck, 0},
		{"task-ttl", c.taskTTL, 1}, {"task-idle", c.taskIdle, 1},
	} {
		if err := atLeast(f.name, int64(f.v), int64(f.min), f.v.String()); err != nil {
			return err
		}
	}
	if err := validateCluster(c); err != nil {
		return err
	}
	if err := validateGateway(c); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"rate", c.rate}, {"rate-ip", c.rateIP}, {"rate-subject", c.rateSubject}} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fmt.Errorf("-%s: %v: must be a non-negative number", f.name, f.v)
		}
	}
	if _, err := parseLevel(c.logLevel); err != nil {
		return fmt.Errorf("-log-level: %w", err)
	}
	if _, ok := codec.FramerByName(c.framing, c.maxMessage); !ok {
		return fmt.Errorf("-framing: unknown framing %q (newline, content-length)", c.framing)
	}
	if !slices.Contains(builtin.Names(), c.handlers) {
		return fmt.Errorf("-handlers: unknown handler set %q (%s)", c.handlers, strings.Join(builtin.Names(), ", "))
	}
	if (c.tlsCert == "") != (c.tlsKey == "") {
		return errors.New("-tls-cert and -tls-key: give both or neither")
	}
	if c.tlsClientCA != "" && c.tlsCert == "" {
		return errors.New("-tls-client-ca: needs -tls-cert and -tls-key")
	}
	if _, err := proxied.Parse(splitList(c.trustedProxies)); err != nil {
		return fmt.Errorf("-trusted-proxies: %w", err)
	}
	if err := checkCORS(splitList(c.corsOrigins)); err != nil {
		return fmt.Errorf("-cors-origins: %w", err)
	}
	return nil
}

// checkCORS refuses a -cors-origins list mixing "*" with origins (a
// browser takes one grant: "*" without credentials, or the origin with
// them) and items that are not origins (scheme://host[:port], nothing
// after).
func checkCORS(list []string) error {
	for _, o := range list {
		switch {
		case o == "*" && len(list) > 1:
			return errors.New(`"*" grants every origin, without credentials: give it alone`)
		case o == "*":
		default:
			u, err := url.Parse(strings.TrimSuffix(o, "/"))
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil {
				return fmt.Errorf("%q: want an origin, scheme://host[:port] (https://app.example.com)", o)
			}
		}
	}
	return nil
}

// atLeast refuses v (printed as shown) below min: 0 is "must not be
// negative", 1 "must be positive", which for a zero says that 0 is not
// the default.
func atLeast(name string, v, min int64, shown string) error {
	switch {
	case v >= min:
		return nil
	case min == 0:
		return fmt.Errorf("-%s %s: must not be negative", name, shown)
	case v == 0:
		return fmt.Errorf("-%s %s: must be positive (0 is not the default: leave -%s out for that)", name, shown, name)
	}
	return fmt.Errorf("-%s %s: must be positive", name, shown)
}

// addOpsFlags registers -config and the TLS flags.
func addOpsFlags(fs *flag.FlagSet, c *config) {
	fs.StringVar(&c.configFile, "config", "", "TOML `file` of settings, keys named as the flags (max-inflight = 64); flags and MCPEDGE_* win over it; SIGHUP re-reads it")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "serve HTTP, and TCP unless -tcp-tls=false, over TLS (1.2 or later) with the PEM certificate chain in `file` (with -tls-key; SIGHUP reloads it)")
	fs.StringVar(&c.tlsKey, "tls-key", "", "the PEM private key `file` of -tls-cert")
	fs.StringVar(&c.tlsClientCA, "tls-client-ca", "", "require HTTP and TCP clients to present a certificate signed by a CA in this PEM `file` (mTLS)")
	fs.BoolVar(&c.tcpTLS, "tcp-tls", true, "with -tls-cert, serve TCP over TLS too (tcps://); false keeps TCP plain")
	fs.StringVar(&c.trustedProxies, "trusted-proxies", "", "comma-separated CIDRs (or addresses) of the load balancers and proxies whose word on the client's address is taken: a PROXY protocol v1/v2 header on TCP and HTTP, X-Forwarded-For or Forwarded on HTTP; per-address limits and logs then count the client (empty: trust none; a PROXY header from anyone else closes the connection)")
	fs.StringVar(&c.corsOrigins, "cors-origins", "", "comma-separated origins whose web pages may use the HTTP endpoint across origins (https://app.example.com; * alone for any, without credentials): preflights answered before authorization, Mcp-Session-Id exposed; a listed origin passes the -allowed-origins check too (empty: no CORS)")
}

// parseLevel parses -log-level.
func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	err := l.UnmarshalText([]byte(s))
	return l, err
}

package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/handlers/builtin"
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
// MCPEDGE_CONFIG). Every error names the flag, the variable or the key.
func applySources(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
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
		vals, err := readConfigFile(path, fs)
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
				return fmt.Errorf("config %s: key %q: invalid value %q: %w", path, kv.name, kv.value, unwrapFlagErr(err))
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
				envErr = fmt.Errorf("%s=%q: %w", key, v, err)
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
// key. An unknown key, a table, or a value of a type no flag takes is
// an error naming the key.
func readConfigFile(path string, fs *flag.FlagSet) ([]keyValue, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	var raw map[string]any
	if _, err := toml.Decode(string(data), &raw); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	out := make([]keyValue, 0, len(raw))
	for name, v := range raw {
		f := fs.Lookup(name)
		if f == nil || notInFile[name] {
			return nil, fmt.Errorf("config %s: unknown key %q", path, name)
		}
		if _, ok := f.Value.(tomlValue); ok {
			out = append(out, keyValue{name: name, raw: v})
			continue
		}
		s, err := tomlString(v)
		if err != nil {
			return nil, fmt.Errorf("config %s: key %q: %w", path, name, err)
		}
		out = append(out, keyValue{name: name, value: s})
	}
	slices.SortFunc(out, func(a, b keyValue) int { return strings.Compare(a.name, b.name) })
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
// use; each error names its flag.
func validate(c *config) error {
	if c.httpPath == "" || c.httpPath[0] != '/' {
		return fmt.Errorf("-http-path: %q must start with /", c.httpPath)
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"loops", int64(c.loops)}, {"workers", int64(c.workers)}, {"page-size", int64(c.pageSize)},
		{"max-conns", int64(c.maxConns)}, {"max-conns-per-ip", int64(c.maxConnsPerIP)},
		{"max-inflight", int64(c.maxInflight)}, {"rate-burst", int64(c.rateBurst)},
		{"max-sessions", int64(c.maxSessions)}, {"max-sessions-per-ip", int64(c.maxSessionsPerIP)},
	} {
		if f.v < 0 {
			return fmt.Errorf("-%s: %d: must not be negative", f.name, f.v)
		}
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{
		{"session-idle", c.sessionIdle}, {"session-init-timeout", c.sessionInit},
		{"read-timeout", c.readTimeout}, {"write-timeout", c.writeTimeout},
		{"idle-timeout", c.idleTimeout}, {"drain", c.drain},
	} {
		if f.v < 0 {
			return fmt.Errorf("-%s: %v: must not be negative", f.name, f.v)
		}
	}
	if c.stateTTL <= 0 {
		return fmt.Errorf("-state-ttl: %v: must be positive", c.stateTTL)
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
	}{{"rate", c.rate}, {"rate-ip", c.rateIP}} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fmt.Errorf("-%s: %v: must be a non-negative number", f.name, f.v)
		}
	}
	if c.maxMessage == 0 {
		return errors.New("-max-message: must be positive")
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
	return nil
}

// addOpsFlags registers -config and the TLS flags.
func addOpsFlags(fs *flag.FlagSet, c *config) {
	fs.StringVar(&c.configFile, "config", "", "TOML `file` of settings, keys named as the flags (max-inflight = 64); flags and MCPEDGE_* win over it; SIGHUP re-reads it")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "serve HTTP over TLS (1.2 or later) with the PEM certificate chain in `file` (with -tls-key; SIGHUP reloads it)")
	fs.StringVar(&c.tlsKey, "tls-key", "", "the PEM private key `file` of -tls-cert")
	fs.StringVar(&c.tlsClientCA, "tls-client-ca", "", "require HTTP clients to present a certificate signed by a CA in this PEM `file` (mTLS)")
}

// parseLevel parses -log-level.
func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	err := l.UnmarshalText([]byte(s))
	return l, err
}

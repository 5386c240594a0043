package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"

	"github.com/mcpedge/mcpedge/auth"
	"github.com/mcpedge/mcpedge/handlers"
)

// authFlags are the flags of authorization (docs/authorization.md).
type authFlags struct {
	jwksURL, issuer, audience, scopes, servers string
	tokenFile                                  string
	introspectionURL, clientID, secretFile     string
	secret                                     string
	maxClasses                                 int

	// From the config file's tables (tables.go, compileTables).
	rules      *auth.Rules         // [[rule]]
	toolScopes map[string][]string // [tool.NAME] scopes
}

// registerAuthFlags adds the -auth-* flags to fs.
func registerAuthFlags(fs *flag.FlagSet, a *authFlags) {
	fs.StringVar(&a.jwksURL, "auth-jwks-url", "", "verify bearer JWTs with the keys at this JWKS `url` (cached, refetched hourly and on an unknown kid at most every 30 s)")
	fs.StringVar(&a.issuer, "auth-issuer", "", "the iss a JWT must carry (empty: any)")
	fs.StringVar(&a.audience, "auth-audience", "", "this server's resource URI, which a token's aud must name (default: http://ADDR/PATH of -http and -http-path)")
	fs.StringVar(&a.scopes, "auth-scopes", "", "comma-separated scopes every request needs")
	fs.StringVar(&a.servers, "auth-server", "", "comma-separated authorization server issuer URLs for the protected-resource metadata (default: -auth-issuer)")
	fs.StringVar(&a.tokenFile, "auth-token-file", "", "`file` of static bearer tokens, one per line, optionally followed by the scopes it grants (none: all)")
	fs.StringVar(&a.introspectionURL, "auth-introspection-url", "", "verify opaque tokens at this RFC 7662 introspection `url`")
	fs.StringVar(&a.clientID, "auth-client-id", "", "client id for the introspection endpoint")
	fs.StringVar(&a.secret, "auth-client-secret", "", "client secret for the introspection endpoint (prefer MCPEDGE_AUTH_CLIENT_SECRET or -auth-client-secret-file: arguments are visible to other users)")
	fs.StringVar(&a.secretFile, "auth-client-secret-file", "", "`file` holding the client secret for the introspection endpoint")
	fs.IntVar(&a.maxClasses, "auth-max-classes", auth.DefaultMaxClasses, "policy classes of the config file's [[rule]]s (callers for whom the same rules hold) kept, and lists of each kept per class; past it the one used least recently is made again when it returns")
}

// enabled reports whether any way of verifying tokens was given.
func (a *authFlags) enabled() bool {
	return a.jwksURL != "" || a.tokenFile != "" || a.introspectionURL != ""
}

// config builds the verifier's configuration; httpAddr and httpPath give
// the default audience.
func (a *authFlags) config(httpAddr, httpPath string, log *slog.Logger) (auth.Config, error) {
	cfg := auth.Config{
		Audience:             a.audience,
		Issuer:               a.issuer,
		Scopes:               splitList(a.scopes),
		AuthorizationServers: splitList(a.servers),
		JWKSURL:              a.jwksURL,
		TokenFile:            a.tokenFile,
		IntrospectionURL:     a.introspectionURL,
		ClientID:             a.clientID,
		ClientSecret:         a.secret,
		Logger:               log,
		Rules:                a.rules,
		ToolScopes:           a.toolScopes,
	}
	if cfg.Audience == "" {
		if httpAddr == "" {
			return cfg, errors.New("-auth-audience is required without -http")
		}
		host, port, err := net.SplitHostPort(httpAddr)
		if err != nil {
			return cfg, errors.New("-auth-audience: cannot derive it from -http: " + err.Error())
		}
		if host == "" || host == "0.0.0.0" || host == "::" {
			host = "localhost"
		}
		cfg.Audience = "http://" + net.JoinHostPort(host, port) + httpPath
	}
	if a.secretFile != "" {
		b, err := os.ReadFile(a.secretFile)
		if err != nil {
			return cfg, errors.New("-auth-client-secret-file: " + err.Error())
		}
		cfg.ClientSecret = strings.TrimSpace(string(b))
	}
	return cfg, nil
}

// newVerifier returns the verifier the flags configure, or nil when they
// configure none.
func (a *authFlags) newVerifier(httpAddr, httpPath string, log *slog.Logger) (*auth.Verifier, error) {
	if !a.enabled() {
		return nil, nil
	}
	cfg, err := a.config(httpAddr, httpPath, log)
	if err != nil {
		return nil, err
	}
	return auth.New(cfg)
}

// authKeys are the flags a reload applies to a running verifier.
var authKeys = []string{"auth-jwks-url", "auth-issuer", "auth-audience", "auth-scopes", "auth-server",
	"auth-token-file", "auth-introspection-url", "auth-client-id", "auth-client-secret", "auth-client-secret-file",
	"auth-max-classes"}

// authReloadHook is the SIGHUP reload of v, with the config file's rules
// and tool scopes (compiled with the rest of the file, which a rule that
// does not compile rejects whole): the new configuration is checked
// first (its flags, its token file), then swapped in whole; a reload that
// cannot fetch the new keys keeps the old configuration. reg keeps
// -auth-max-classes views of each list.
func authReloadHook(v *auth.Verifier, reg *handlers.Registry, log *slog.Logger) reloadHook {
	return reloadHook{name: "authorization", keys: authKeys, prepare: func(c *config) (func(), error) {
		if !c.auth.enabled() {
			return nil, errors.New("-auth-*: turning authorization off needs a restart")
		}
		cfg, err := c.auth.config(c.http, c.httpPath, log)
		if err != nil {
			return nil, err
		}
		if cfg.TokenFile != "" {
			if _, err := os.Stat(cfg.TokenFile); err != nil {
				return nil, fmt.Errorf("-auth-token-file: %w", err)
			}
		}
		return func() {
			reg.SetMaxClasses(c.auth.maxClasses)
			if err := v.Reload(cfg); err != nil {
				log.Error("reload: authorization kept its previous keys", "err", err)
				return
			}
			log.Info("authorization reloaded", "rules", cfg.Rules.Len(), "tools_with_scopes", len(cfg.ToolScopes))
		}, nil
	}}
}

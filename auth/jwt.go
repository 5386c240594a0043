package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
)

// claims are the JWT claims read.
type claims struct {
	jwt.RegisteredClaims
	Scope    string  `json:"scope"`
	Scp      scpList `json:"scp"`
	ClientID string  `json:"client_id"`
	Azp      string  `json:"azp"`
}

// asymmetric reports whether alg is an asymmetric JWS algorithm this
// package verifies.
func asymmetric(alg string) bool {
	switch alg {
	case "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA":
		return true
	}
	return false
}

// initJWT sets up the JWKS (fetched now, with a bounded wait, then as
// keySet says) and the parser.
func (st *state) initJWT(ctx context.Context, log *slog.Logger) error {
	cfg := &st.cfg
	st.keys = newKeySet(cfg, st.hc, log)
	kf, err := keyfunc.New(keyfunc.Options{Ctx: ctx, Storage: st.keys.store})
	if err != nil {
		return errors.New("auth: JWKS: " + err.Error())
	}
	st.kf = kf
	st.keys.fetch(ctx) // a failure is logged and retried, not fatal
	go st.keys.run(ctx)
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(cfg.Algs),
		jwt.WithLeeway(cfg.Skew),
		jwt.WithExpirationRequired(),
		jwt.WithAudience(cfg.Audience),
	}
	if cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(cfg.Issuer))
	}
	st.parser = jwt.NewParser(opts...)
	return nil
}

// key finds the key of t in the JWKS and refuses it unless its type fits
// t's algorithm (no RSA key for an EC algorithm, no curve of another
// size; HMAC and "none" never get this far).
func (st *state) key(t *jwt.Token) (any, error) {
	alg := t.Method.Alg()
	if !st.algs[alg] {
		return nil, errors.New("algorithm not allowed")
	}
	k, err := st.kf.Keyfunc(t)
	if errors.Is(err, jwkset.ErrKeyNotFound) && st.keys.refetch(st.ctx) {
		k, err = st.kf.Keyfunc(t) // a rotated key, maybe
	}
	if err != nil {
		return nil, err
	}
	if set, ok := k.(jwt.VerificationKeySet); ok { // no kid: the keys that fit
		var fit jwt.VerificationKeySet
		for _, k := range set.Keys {
			if keyFits(alg, k) {
				fit.Keys = append(fit.Keys, k)
			}
		}
		if len(fit.Keys) == 0 {
			return nil, errors.New("no key fits the algorithm")
		}
		return fit, nil
	}
	if !keyFits(alg, k) {
		return nil, errors.New("key type does not fit the algorithm")
	}
	return k, nil
}

// keyFits reports whether k is a public key of the kind alg verifies
// with.
func keyFits(alg string, k any) bool {
	switch k := k.(type) {
	case *rsa.PublicKey:
		return strings.HasPrefix(alg, "RS") || strings.HasPrefix(alg, "PS")
	case *ecdsa.PublicKey:
		switch alg {
		case "ES256":
			return k.Curve == elliptic.P256()
		case "ES384":
			return k.Curve == elliptic.P384()
		case "ES512":
			return k.Curve == elliptic.P521()
		}
	case ed25519.PublicKey:
		return alg == "EdDSA"
	}
	return false
}

// verifyJWT verifies a JWT: signature by a fitting key of the JWKS,
// allowed algorithm, exp (required) and nbf with leeway, aud, iss.
func (st *state) verifyJWT(token string) (*Info, error) {
	var c claims
	t, err := st.parser.ParseWithClaims(token, &c, st.key)
	if err != nil || !t.Valid {
		return nil, invalid(jwtReason(err))
	}
	info := &Info{Subject: c.Subject, ClientID: c.ClientID}
	if info.ClientID == "" {
		info.ClientID = c.Azp
	}
	if c.ExpiresAt != nil {
		info.Expiry = c.ExpiresAt.Add(st.cfg.Skew)
	}
	info.Scopes = scopes(c.Scope, c.Scp)
	info.claims = payload(token)
	return info, nil
}

// payload returns the payload of token, a JWT whose signature was
// verified: its claims, a JSON object.
func payload(token string) []byte {
	_, rest, _ := strings.Cut(token, ".")
	p, _, _ := strings.Cut(rest, ".")
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(p, "="))
	if err != nil {
		return nil
	}
	return raw
}

// scpList is the scp claim: an array of scopes, or one space-separated
// string.
type scpList []string

func (l *scpList) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*l = strings.Fields(s)
		return nil
	}
	var a []string
	if err := json.Unmarshal(b, &a); err != nil {
		return err
	}
	*l = a
	return nil
}

func scopes(scope string, scp []string) []string {
	out := strings.Fields(scope)
	return append(out, scp...)
}

// jwtReason words a JWT failure for the challenge's error_description:
// the kind of failure, nothing of the token.
func jwtReason(err error) string {
	switch {
	case err == nil:
		return "invalid token"
	case errors.Is(err, jwt.ErrTokenExpired):
		return "token expired"
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return "token not valid yet"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "token not issued for this resource"
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return "token from an unexpected issuer"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return "token lacks a required claim"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return "bad signature"
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		return "token cannot be verified (unknown key or algorithm)"
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "malformed token"
	}
	return "invalid token"
}

package oauth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Grant, assertion and token types of the JWT profiles (RFC 7523) and of
// token exchange (RFC 8693) for enterprise-managed authorization.
const (
	// GrantJWTBearer is the RFC 7523 authorization grant: the client
	// presents a JWT (for enterprise-managed authorization, an ID-JAG).
	GrantJWTBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer"
	// GrantTokenExchange is the RFC 8693 grant the client uses at the
	// enterprise IdP to trade the user's identity assertion for an ID-JAG.
	GrantTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
	// ClientAssertionJWT is the client_assertion_type of private_key_jwt
	// (RFC 7523 §2.2).
	ClientAssertionJWT = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
	// TokenTypeIDToken is an OpenID Connect ID token (RFC 8693 §3).
	TokenTypeIDToken = "urn:ietf:params:oauth:token-type:id_token"
	// TokenTypeIDJAG is the Identity Assertion JWT Authorization Grant.
	TokenTypeIDJAG = "urn:ietf:params:oauth:token-type:id-jag"
)

// ErrTokenExchange is returned when the enterprise IdP does not issue an
// ID-JAG.
var ErrTokenExchange = errors.New("oauth: token exchange at the identity provider failed")

// SigningKey signs the client's JWT assertions: with it, the client
// authenticates at the token endpoint with private_key_jwt (RFC 7523
// §2.2, OpenID Connect Core §9) instead of a secret.
type SigningKey struct {
	// Key is an *ecdsa.PrivateKey, *rsa.PrivateKey or ed25519.PrivateKey.
	Key crypto.Signer
	// Algorithm is the JWS alg (ES256, ES384, ES512, RS256, RS384, RS512,
	// PS256, PS384, PS512, EdDSA); empty means the key's usual one (ES256
	// for P-256, RS256 for RSA, EdDSA for Ed25519).
	Algorithm string
	// KeyID, if set, is the kid header (the key's id in the client's
	// registered JWK Set).
	KeyID string
	// Lifetime of an assertion; zero means 5 minutes.
	Lifetime time.Duration
}

// ParseSigningKey reads a PEM private key (PKCS #8, SEC 1 "EC PRIVATE
// KEY" or PKCS #1 "RSA PRIVATE KEY") for signing with alg (empty: the
// key's usual algorithm).
func ParseSigningKey(pemData []byte, alg string) (*SigningKey, error) {
	block, _ := pem.Decode(pemData)
	if block == nil {
		return nil, errors.New("oauth: signing key: no PEM block")
	}
	var (
		key any
		err error
	)
	switch block.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	}
	if err != nil {
		return nil, fmt.Errorf("oauth: signing key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("oauth: signing key: unsupported key type %T", key)
	}
	k := &SigningKey{Key: signer, Algorithm: alg}
	if _, err := k.method(); err != nil {
		return nil, err
	}
	return k, nil
}

// method is the JWS signing method, checked against the key's type.
func (k *SigningKey) method() (jwt.SigningMethod, error) {
	alg := k.Algorithm
	if alg == "" {
		switch key := k.Key.(type) {
		case *ecdsa.PrivateKey:
			switch key.Curve {
			case elliptic.P384():
				alg = "ES384"
			case elliptic.P521():
				alg = "ES512"
			default:
				alg = "ES256"
			}
		case *rsa.PrivateKey:
			alg = "RS256"
		case ed25519.PrivateKey:
			alg = "EdDSA"
		}
	}
	m := jwt.GetSigningMethod(alg)
	if m == nil || alg == "none" {
		return nil, fmt.Errorf("oauth: signing key: unsupported algorithm %q", alg)
	}
	var fits bool
	switch k.Key.(type) {
	case *ecdsa.PrivateKey:
		fits = strings.HasPrefix(alg, "ES")
	case *rsa.PrivateKey:
		fits = strings.HasPrefix(alg, "RS") || strings.HasPrefix(alg, "PS")
	case ed25519.PrivateKey:
		fits = alg == "EdDSA"
	}
	if !fits {
		return nil, fmt.Errorf("oauth: signing key: a %T cannot sign %s", k.Key, alg)
	}
	return m, nil
}

// clientAssertion is a private_key_jwt assertion (RFC 7523 §3): iss and
// sub the client id, aud the authorization server (its issuer and token
// endpoint, both, so that a server checking either accepts it), a short
// exp and a unique jti.
func (k *SigningKey) clientAssertion(clientID string, audience []string) (string, error) {
	m, err := k.method()
	if err != nil {
		return "", err
	}
	life := k.Lifetime
	if life <= 0 {
		life = 5 * time.Minute
	}
	now := time.Now()
	claims := jwt.RegisteredClaims{
		Issuer:    clientID,
		Subject:   clientID,
		Audience:  audience,
		IssuedAt:  jwt.NewNumericDate(now),
		NotBefore: jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(life)),
		ID:        randomString(18),
	}
	t := jwt.NewWithClaims(m, claims)
	if k.KeyID != "" {
		t.Header["kid"] = k.KeyID
	}
	s, err := t.SignedString(k.Key)
	if err != nil {
		return "", fmt.Errorf("oauth: signing the client assertion: %w", err)
	}
	return s, nil
}

// assertionAudience is the aud of a client assertion: the authorization
// server's issuer and token endpoint (RFC 7523 §3 allows either; an
// array carries both).
func (a *Authorizer) assertionAudience() []string {
	var aud []string
	for _, s := range []string{a.as.Issuer, a.as.TokenEndpoint} {
		if s != "" && (len(aud) == 0 || aud[0] != s) {
			aud = append(aud, s)
		}
	}
	return aud
}

// IdentityProvider is the enterprise IdP of enterprise-managed
// authorization (the io.modelcontextprotocol/enterprise-managed-
// authorization extension, SEP-990): the client trades the user's
// identity assertion, obtained when the user signed in with the IdP, for
// an Identity Assertion JWT Authorization Grant (ID-JAG) with a token
// exchange (RFC 8693) at the IdP, then presents the ID-JAG to the MCP
// server's authorization server with the JWT bearer grant (RFC 7523).
// No browser is involved.
type IdentityProvider struct {
	// Issuer is the IdP's issuer URL; its token endpoint is discovered
	// (RFC 8414 / OpenID Connect discovery) when TokenEndpoint is empty.
	Issuer string
	// TokenEndpoint is where the token exchange is posted.
	TokenEndpoint string
	// ClientID and ClientSecret are the client's credentials at the IdP
	// (not at the MCP authorization server: those are Config's). Without
	// ClientSecret, client_id is sent in the form.
	ClientID, ClientSecret string
	// IDToken is the user's identity assertion, the subject_token.
	IDToken string
	// SubjectTokenType is IDToken's type; empty means TokenTypeIDToken.
	SubjectTokenType string
}

// jwtBearerLocked runs enterprise-managed authorization: the ID-JAG from
// the IdP, then the JWT bearer grant at the authorization server.
func (a *Authorizer) jwtBearerLocked(ctx context.Context, scopes []string) error {
	idp := a.cfg.IdentityProvider
	if idp == nil {
		return fmt.Errorf("%w: the JWT bearer grant needs an IdentityProvider", ErrTokenExchange)
	}
	jag, err := a.idJAG(ctx, idp, scopes)
	if err != nil {
		return err
	}
	form := url.Values{"grant_type": {GrantJWTBearer}, "assertion": {jag}, "resource": {a.resource()}}
	if len(scopes) > 0 {
		form.Set("scope", strings.Join(scopes, " "))
	}
	if err := a.tokenRequestLocked(ctx, form); err != nil {
		return err
	}
	a.scopes = scopes
	return nil
}

// idJAG asks the IdP for an ID-JAG whose audience is the authorization
// server (its issuer) and whose resource is the MCP server.
func (a *Authorizer) idJAG(ctx context.Context, idp *IdentityProvider, scopes []string) (string, error) {
	endpoint := idp.TokenEndpoint
	if endpoint == "" {
		if idp.Issuer == "" {
			return "", fmt.Errorf("%w: no IdP issuer or token endpoint", ErrTokenExchange)
		}
		m, err := a.serverMetadata(ctx, idp.Issuer)
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrTokenExchange, err)
		}
		if m.TokenEndpoint == "" {
			return "", fmt.Errorf("%w: the IdP's metadata names no token endpoint", ErrTokenExchange)
		}
		endpoint = m.TokenEndpoint
	}
	if idp.IDToken == "" {
		return "", fmt.Errorf("%w: no identity assertion (IDToken)", ErrTokenExchange)
	}
	stt := idp.SubjectTokenType
	if stt == "" {
		stt = TokenTypeIDToken
	}
	audience := a.as.Issuer
	if audience == "" {
		audience = a.as.TokenEndpoint
	}
	form := url.Values{
		"grant_type":           {GrantTokenExchange},
		"requested_token_type": {TokenTypeIDJAG},
		"audience":             {audience},
		"resource":             {a.resource()},
		"subject_token":        {idp.IDToken},
		"subject_token_type":   {stt},
	}
	if len(scopes) > 0 {
		form.Set("scope", strings.Join(scopes, " "))
	}
	var basicID, basicSecret string
	if idp.ClientSecret != "" {
		basicID, basicSecret = idp.ClientID, idp.ClientSecret
	} else if idp.ClientID != "" {
		form.Set("client_id", idp.ClientID)
	}
	r, err := a.postToken(ctx, endpoint, form, basicID, basicSecret)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrTokenExchange, err)
	}
	if r.IssuedTokenType != "" && r.IssuedTokenType != TokenTypeIDJAG {
		return "", fmt.Errorf("%w: the IdP issued a %s, not an ID-JAG", ErrTokenExchange, r.IssuedTokenType)
	}
	return r.AccessToken, nil
}

// Package authtest serves a JWKS for tests and signs tokens with its keys.
package authtest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

var (
	once   sync.Once
	rsaKey *rsa.PrivateKey
	rsaOld *rsa.PrivateKey
	ecKey  *ecdsa.PrivateKey
)

func keys() {
	once.Do(func() {
		rsaKey, _ = rsa.GenerateKey(rand.Reader, 2048)
		rsaOld, _ = rsa.GenerateKey(rand.Reader, 2048)
		ecKey, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	})
}

// Issuer is an authorization server's JWKS on 127.0.0.1 and its keys:
// "rsa1" (RSA) and "ec1" (P-256) are published at start; "rsa2" (RSA)
// only after Rotate.
type Issuer struct {
	Server  *httptest.Server
	Fetches atomic.Int32 // JWKS requests served
	// Mode: "" serves the JWKS, "fail" 500, "garbage" malformed JSON,
	// "slow" waits 10 s (or until the client goes).
	mode    atomic.Value
	rotated atomic.Bool
	hold    atomic.Pointer[hold]
}

// hold is what Hold set up.
type hold struct {
	entered  chan struct{}
	released chan struct{}
	once     sync.Once
}

// Hold makes every JWKS request from now on wait, until release is
// called (or its client goes), before being served as the mode says:
// entered receives once for each request that waits, so that a test
// knows a fetch is under way without sleeping.
func (is *Issuer) Hold() (entered <-chan struct{}, release func()) {
	h := &hold{entered: make(chan struct{}, 64), released: make(chan struct{})}
	is.hold.Store(h)
	return h.entered, func() {
		h.once.Do(func() { close(h.released) })
		is.hold.CompareAndSwap(h, nil)
	}
}

// NewIssuer starts an Issuer; Close its Server.
func NewIssuer() *Issuer {
	keys()
	is := &Issuer{}
	is.mode.Store("")
	is.Server = httptest.NewServer(http.HandlerFunc(is.serve))
	return is
}

// URL is the JWKS URL.
func (is *Issuer) URL() string { return is.Server.URL + "/jwks.json" }

// SetMode sets how the JWKS is served from now on.
func (is *Issuer) SetMode(m string) { is.mode.Store(m) }

// Rotate publishes "rsa2" beside the others.
func (is *Issuer) Rotate() { is.rotated.Store(true) }

func (is *Issuer) serve(w http.ResponseWriter, r *http.Request) {
	is.Fetches.Add(1)
	if h := is.hold.Load(); h != nil {
		select {
		case h.entered <- struct{}{}:
		default:
		}
		select {
		case <-h.released:
		case <-r.Context().Done():
			return
		}
	}
	switch is.mode.Load().(string) {
	case "fail":
		http.Error(w, "down", http.StatusInternalServerError)
		return
	case "garbage":
		_, _ = w.Write([]byte(`{"keys":[{"kty":`))
		return
	case "slow":
		select {
		case <-time.After(10 * time.Second):
		case <-r.Context().Done():
		}
		return
	}
	ks := []map[string]string{rsaJWK("rsa1", &rsaKey.PublicKey), ecJWK("ec1", &ecKey.PublicKey)}
	if is.rotated.Load() {
		ks = append(ks, rsaJWK("rsa2", &rsaOld.PublicKey))
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"keys": ks})
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func rsaJWK(kid string, k *rsa.PublicKey) map[string]string {
	return map[string]string{"kty": "RSA", "kid": kid, "use": "sig", "n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes())}
}

func ecJWK(kid string, k *ecdsa.PublicKey) map[string]string {
	pub, _ := k.ECDH()
	raw := pub.Bytes() // 0x04 || X || Y
	return map[string]string{"kty": "EC", "kid": kid, "use": "sig", "crv": "P-256", "x": b64(raw[1:33]), "y": b64(raw[33:])}
}

// Key returns the private key of kid.
func Key(kid string) crypto.Signer {
	keys()
	switch kid {
	case "ec1":
		return ecKey
	case "rsa2":
		return rsaOld
	}
	return rsaKey
}

// RSAPublicDER is the PKIX-less modulus bytes of rsa1's public key, what
// an HMAC key-confusion attack would use as the secret.
func RSAPublicDER() []byte { keys(); return rsaKey.N.Bytes() }

// Claims are a token's claims: sub, aud, iss, scope, exp and nbf.
type Claims = jwt.MapClaims

// Sign signs claims with kid's key under alg ("RS256", "ES256", …).
func Sign(kid, alg string, claims Claims) string {
	t := jwt.NewWithClaims(jwt.GetSigningMethod(alg), claims)
	t.Header["kid"] = kid
	s, err := t.SignedString(Key(kid))
	if err != nil {
		panic(err)
	}
	return s
}

// Good returns claims valid for an hour for aud and iss with scope.
func Good(aud, iss, scope string) Claims {
	now := time.Now()
	return Claims{"sub": "alice", "aud": aud, "iss": iss, "scope": scope, "exp": now.Add(time.Hour).Unix(), "iat": now.Unix(), "client_id": "app"}
}

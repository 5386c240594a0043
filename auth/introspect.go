package auth

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// maxClaims bounds the introspection answer an Info keeps as its claims
// (Info.Claims): a bigger one is read, and its claims are not kept.
const maxClaims = 16 << 10

// introspection is the RFC 7662 answer, the members read.
type introspection struct {
	Active   bool            `json:"active"`
	Scope    string          `json:"scope"`
	Sub      string          `json:"sub"`
	ClientID string          `json:"client_id"`
	Exp      int64           `json:"exp"`
	Nbf      int64           `json:"nbf"`
	Iss      string          `json:"iss"`
	Aud      json.RawMessage `json:"aud"`
}

// introspect asks the introspection endpoint about token (RFC 7662),
// within FetchTimeout.
func (st *state) introspect(ctx context.Context, token string, now time.Time) (*Info, error) {
	cfg := &st.cfg
	ctx, cancel := context.WithTimeout(ctx, cfg.FetchTimeout)
	defer cancel()
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.IntrospectionURL, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, invalid("introspection unavailable")
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if cfg.ClientID != "" {
		req.SetBasicAuth(url.QueryEscape(cfg.ClientID), url.QueryEscape(cfg.ClientSecret))
	}
	resp, err := st.hc.Do(req)
	if err != nil {
		return nil, invalid("introspection unavailable")
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, invalid("introspection failed")
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, invalid("introspection unavailable")
	}
	var r introspection
	if json.Unmarshal(body, &r) != nil {
		return nil, invalid("introspection failed")
	}
	switch {
	case !r.Active:
		return nil, invalid("token not active")
	case r.Exp != 0 && !now.Before(time.Unix(r.Exp, 0).Add(cfg.Skew)):
		return nil, invalid("token expired")
	case r.Nbf != 0 && now.Add(cfg.Skew).Before(time.Unix(r.Nbf, 0)):
		return nil, invalid("token not valid yet")
	case cfg.Issuer != "" && r.Iss != "" && r.Iss != cfg.Issuer:
		return nil, invalid("token from an unexpected issuer")
	case len(r.Aud) > 0 && !audHas(r.Aud, cfg.Audience):
		return nil, invalid("token not issued for this resource")
	}
	info := &Info{Subject: r.Sub, ClientID: r.ClientID, Scopes: strings.Fields(r.Scope)}
	if len(body) <= maxClaims {
		info.claims = bytes.Clone(body) // kept with the cached token: no more than it holds
	}
	if r.Exp != 0 {
		info.Expiry = time.Unix(r.Exp, 0).Add(cfg.Skew)
	}
	return info, nil
}

// audHas reports whether aud (a string or an array of them) names want.
func audHas(aud json.RawMessage, want string) bool {
	var s string
	if json.Unmarshal(aud, &s) == nil {
		return s == want
	}
	var a []string
	return json.Unmarshal(aud, &a) == nil && slices.Contains(a, want)
}

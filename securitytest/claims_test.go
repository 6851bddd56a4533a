package securitytest

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
)

// sign makes a JWT of claims signed by method with key.
func sign(t *testing.T, method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// unsigned is a JWT with algorithm "none" and no signature: what an
// attacker sends to a verifier that trusts the header.
func unsigned(claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc([]byte(claims)) + "."
}

// tokenCase is a token and how a broker judges it.
type tokenCase struct {
	why string
	tok string
	ok  bool
	// roleless: Apache Pulsar accepts the connection with no role, then
	// refuses every use (AuthorizationError); the embedded broker refuses
	// the connection.
	roleless bool
}

// checkToken connects with the token and uses it, and asks the admin API
// with it: both accepted (ok), or both refused: AuthenticationError (see
// roleless) and 401.
func (tg *target) checkToken(t *testing.T, ctx context.Context, c tokenCase) {
	t.Helper()
	cl, err := tg.client(t, ctx, c.tok)
	if err == nil {
		_, err = cl.Publish(ctx, topic("public/default", "claims"), pool.Message{Payload: []byte("x")})
	}
	code, body := tg.adminDo(t, "GET", "/admin/v2/tenants", c.tok, "")
	want := pulsarwire.ErrAuthenticationError
	if c.roleless && tg.embedded == nil {
		want = pulsarwire.ErrAuthorizationError
	}
	switch {
	case c.ok && (err != nil || code != http.StatusOK):
		t.Errorf("%s: publish: %v; admin API: %d %s; want both accepted", c.why, err, code, body)
	case !c.ok && (!errors.Is(err, want) || code != http.StatusUnauthorized):
		t.Errorf("%s: publish: %v; admin API: %d %s; want %v and 401", c.why, err, code, body, want)
	}
}

// The claims of a token, per algorithm, judged alike by both brokers: a
// role that is not a string, a "not before" still to come, an expired or
// an unsigned token are refused, and so is what an attacker could sign
// without the key: a token of another key family and, for a key pair, an
// HS256 token keyed with the public key's own bytes (algorithm
// confusion); nbf and exp that hold are accepted, as is a token without
// exp. A token with no role can do nothing on either (the embedded broker
// refuses it at once).
func TestTokenClaimsAsPulsarJudgesThem(t *testing.T) {
	forEachAlg(t, func(t *testing.T, tg *target) {
		ctx := brokertest.Context(t, 2*time.Minute)
		now := time.Now()
		k := tg.key
		other := newTokenKey(t, otherFamily(k.alg))
		cases := []tokenCase{
			{why: "no exp", tok: k.sign(t, jwt.MapClaims{"sub": tg.super}), ok: true},
			{why: "exp and nbf that hold", tok: k.sign(t, jwt.MapClaims{"sub": tg.super, "exp": now.Add(time.Hour).Unix(), "nbf": now.Add(-time.Minute).Unix()}), ok: true},
			{why: "no sub", tok: k.sign(t, jwt.MapClaims{"exp": now.Add(time.Hour).Unix()}), roleless: true},
			{why: "sub not a string", tok: k.sign(t, jwt.MapClaims{"sub": 42})},
			{why: "nbf to come", tok: k.sign(t, jwt.MapClaims{"sub": tg.super, "nbf": now.Add(time.Hour).Unix()})},
			{why: "expired", tok: k.sign(t, jwt.MapClaims{"sub": tg.super, "exp": now.Add(-time.Minute).Unix()})},
			{why: "alg none", tok: unsigned(`{"sub":"` + tg.super + `"}`)},
			{why: other.alg + ", another key family", tok: other.token(t, tg.super, time.Time{})},
		}
		if k.alg != "HS256" {
			cases = append(cases, tokenCase{why: "HS256 keyed with the public key's bytes", tok: sign(t, jwt.SigningMethodHS256, k.verify, jwt.MapClaims{"sub": tg.super})})
		}
		for _, c := range cases {
			tg.checkToken(t, ctx, c)
		}
	})
}

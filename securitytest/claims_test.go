package securitytest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/streamrun/streamrun/broker"
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

// The claims of a token signed with the secret key, judged alike by both
// brokers: a role that is not a string, a "not before" still to come, an
// expired or an unsigned token are refused; nbf and exp that hold are
// accepted, as is a token without exp. A token with no role can do
// nothing on either (the embedded broker refuses it at once).
func TestTokenClaimsAsPulsarJudgesThem(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		ctx := brokertest.Context(t, 2*time.Minute)
		now := time.Now()
		hs := func(c jwt.MapClaims) string { return sign(t, jwt.SigningMethodHS256, tg.key, c) }
		for _, c := range []tokenCase{
			{why: "no exp", tok: hs(jwt.MapClaims{"sub": tg.super}), ok: true},
			{why: "exp and nbf that hold", tok: hs(jwt.MapClaims{"sub": tg.super, "exp": now.Add(time.Hour).Unix(), "nbf": now.Add(-time.Minute).Unix()}), ok: true},
			{why: "no sub", tok: hs(jwt.MapClaims{"exp": now.Add(time.Hour).Unix()}), roleless: true},
			{why: "sub not a string", tok: hs(jwt.MapClaims{"sub": 42})},
			{why: "nbf to come", tok: hs(jwt.MapClaims{"sub": tg.super, "nbf": now.Add(time.Hour).Unix()})},
			{why: "expired", tok: hs(jwt.MapClaims{"sub": tg.super, "exp": now.Add(-time.Minute).Unix()})},
			{why: "alg none", tok: unsigned(`{"sub":"` + tg.super + `"}`)},
		} {
			tg.checkToken(t, ctx, c)
		}
	})
}

// With a public key (RS256, ES256), the embedded broker honours exp and
// refuses what an attacker could sign without the private key: an HS256
// token keyed with the public key's own bytes (algorithm confusion), a
// token of the other key family, an unsigned one. (The secured Apache
// Pulsar of CI verifies with a secret key; the tokens its tool makes with
// key pairs are checked in TestTokensMadeByPulsarTool.)
func TestPublicKeyTokens(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		method jwt.SigningMethod
		priv   any
		pub    any
		other  string // a token of the other family
	}{
		{"RS256", jwt.SigningMethodRS256, rsaKey, &rsaKey.PublicKey, sign(t, jwt.SigningMethodES256, ecKey, jwt.MapClaims{"sub": "admin"})},
		{"ES256", jwt.SigningMethodES256, ecKey, &ecKey.PublicKey, sign(t, jwt.SigningMethodRS256, rsaKey, jwt.MapClaims{"sub": "admin"})},
	} {
		t.Run(c.name, func(t *testing.T) {
			der, err := x509.MarshalPKIXPublicKey(c.pub)
			if err != nil {
				t.Fatal(err)
			}
			b := brokertest.Start(t, func(o *broker.Options) {
				o.TokenPublicKey = der
				o.Authorization, o.SuperUserRoles = true, []string{"admin"}
			})
			ctx := brokertest.Context(t, time.Minute)
			now := time.Now()
			for _, tc := range []struct {
				why string
				tok string
				ok  bool
			}{
				{"valid", sign(t, c.method, c.priv, jwt.MapClaims{"sub": "admin", "exp": now.Add(time.Hour).Unix()}), true},
				{"expired", sign(t, c.method, c.priv, jwt.MapClaims{"sub": "admin", "exp": now.Add(-time.Minute).Unix()}), false},
				{"HS256 keyed with the public key", sign(t, jwt.SigningMethodHS256, der, jwt.MapClaims{"sub": "admin"}), false},
				{"the other key family", c.other, false},
				{"alg none", unsigned(`{"sub":"admin"}`), false},
			} {
				cl, err := pool.New(ctx, pool.Options{ServiceURL: b.ServiceURL(), Token: tc.tok})
				if err == nil {
					cl.Close(ctx)
				}
				if tc.ok != (err == nil) || (!tc.ok && !errors.Is(err, pulsarwire.ErrAuthenticationError)) {
					t.Errorf("%s: %v, want accepted %v", tc.why, err, tc.ok)
				}
			}
		})
	}
}

package brokertest

import (
	"crypto/rand"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/streamrun/streamrun/broker"
)

// SecretKey returns a new random 32-byte key for HS256 tokens, as `pulsar
// tokens create-secret-key` makes.
func SecretKey(t testing.TB) []byte {
	t.Helper()
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

// Token signs a JWT for role with key (HS256), as `pulsar tokens create
// --secret-key ... --subject role` does; exp zero: it never expires.
func Token(t testing.TB, key []byte, role string, exp time.Time) string {
	t.Helper()
	claims := jwt.MapClaims{"sub": role}
	if !exp.IsZero() {
		claims["exp"] = exp.Unix()
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// WithTokenKey is an option turning token authentication on with key.
func WithTokenKey(key []byte) func(*broker.Options) {
	return func(o *broker.Options) { o.TokenSecretKey = key }
}

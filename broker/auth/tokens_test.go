package auth_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/streamrun/streamrun/broker/auth"
)

func sign(t *testing.T, key []byte, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A secret key verifies its own tokens, names the role from the claim it
// was told, and refuses expired, foreign and claimless tokens without
// quoting them.
func TestSecretKeyTokens(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	v, err := auth.NewTokenVerifier(key, nil, "")
	if err != nil || v == nil {
		t.Fatalf("NewTokenVerifier: %v, %v", v, err)
	}
	if role, err := v.Verify(sign(t, key, jwt.MapClaims{"sub": "alice"})); err != nil || role != "alice" {
		t.Fatalf("Verify = %q, %v; want alice", role, err)
	}
	if _, err := v.Verify(""); !errors.Is(err, auth.ErrNoToken) {
		t.Fatalf("empty token: %v, want ErrNoToken", err)
	}
	expired := sign(t, key, jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(-time.Minute).Unix()})
	if _, err := v.Verify(expired); err == nil || err.Error() != "token expired" {
		t.Fatalf("expired token: %v", err)
	}
	foreign := sign(t, []byte("another key of thirty-two bytes!"), jwt.MapClaims{"sub": "mallory"})
	if _, err := v.Verify(foreign); err == nil || strings.Contains(err.Error(), foreign) {
		t.Fatalf("foreign token: %v", err)
	}
	if _, err := v.Verify(sign(t, key, jwt.MapClaims{"role": "alice"})); err == nil || !strings.Contains(err.Error(), `"sub"`) {
		t.Fatalf("token without sub: %v", err)
	}

	byRole, _ := auth.NewTokenVerifier(key, nil, "role")
	if role, err := byRole.Verify(sign(t, key, jwt.MapClaims{"role": "bob"})); err != nil || role != "bob" {
		t.Fatalf("claim role: %q, %v", role, err)
	}
}

func TestKeysExcludeEachOther(t *testing.T) {
	if v, err := auth.NewTokenVerifier(nil, nil, ""); v != nil || err != nil {
		t.Fatalf("no key: %v, %v; want nil, nil", v, err)
	}
	if _, err := auth.NewTokenVerifier([]byte("k"), []byte("p"), ""); !errors.Is(err, auth.ErrTwoKeys) {
		t.Fatalf("two keys: %v, want ErrTwoKeys", err)
	}
	if _, err := auth.NewTokenVerifier(nil, []byte("not a key"), ""); err == nil || !strings.Contains(err.Error(), "token public key") {
		t.Fatalf("bad public key: %v", err)
	}
}

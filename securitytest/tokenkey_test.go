package securitytest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/auth"
)

// algs are the token algorithms the suite verifies on both brokers: one
// per key family Apache Pulsar's token provider takes.
var algs = []string{"HS256", "RS256", "ES256"}

// tokenKey is how a broker's tokens are signed and verified: a secret key
// (HS256) or a key pair (RS256, ES256).
type tokenKey struct {
	alg    string
	priv   any    // []byte, *rsa.PrivateKey or *ecdsa.PrivateKey
	verify []byte // what the broker is given: the secret, or the public key (X.509 DER)
	// tool is a superuser token made with this key by `bin/pulsar tokens
	// create`; "" when none was made.
	tool string
}

// newTokenKey makes a fresh key of alg.
func newTokenKey(t *testing.T, alg string) tokenKey {
	t.Helper()
	var priv, pub any
	var err error
	switch alg {
	case "HS256":
		secret := make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			t.Fatal(err)
		}
		return tokenKey{alg: alg, priv: secret, verify: secret}
	case "RS256":
		var k *rsa.PrivateKey
		k, err = rsa.GenerateKey(rand.Reader, 2048)
		priv, pub = k, k.Public()
	case "ES256":
		var k *ecdsa.PrivateKey
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		priv, pub = k, k.Public()
	default:
		t.Fatalf("token algorithm %q: want one of %v", alg, algs)
	}
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return tokenKey{alg: alg, priv: priv, verify: der}
}

// readTokenKey reads the key files of alg as scripts/pulsar writes them:
// HS256, the secret's raw bytes in keyFile; RS256 and ES256, the private
// key (PKCS#8, DER or PEM, as `pulsar tokens create-key-pair` writes it)
// in keyFile and the public key in pubFile.
func readTokenKey(alg, keyFile, pubFile string) (tokenKey, error) {
	key, err := os.ReadFile(keyFile)
	if err != nil {
		return tokenKey{}, fmt.Errorf("%s key: %w", alg, err)
	}
	if alg == "HS256" {
		return tokenKey{alg: alg, priv: key, verify: key}, nil
	}
	if blk, _ := pem.Decode(key); blk != nil {
		key = blk.Bytes
	}
	priv, err := x509.ParsePKCS8PrivateKey(key)
	if err != nil {
		return tokenKey{}, fmt.Errorf("%s private key %s: %w", alg, keyFile, err)
	}
	want := map[string]string{"RS256": "*rsa.PrivateKey", "ES256": "*ecdsa.PrivateKey"}[alg]
	if got := fmt.Sprintf("%T", priv); got != want {
		return tokenKey{}, fmt.Errorf("%s private key %s is a %s, want %s", alg, keyFile, got, want)
	}
	pub, err := os.ReadFile(pubFile)
	if err != nil {
		return tokenKey{}, fmt.Errorf("%s public key: %w", alg, err)
	}
	if _, err := auth.ParsePublicKey(pub); err != nil {
		return tokenKey{}, fmt.Errorf("%s public key %s: %w", alg, pubFile, err)
	}
	return tokenKey{alg: alg, priv: priv, verify: pub}, nil
}

// readToolToken reads the token file scripts/pulsar wrote.
func readToolToken(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// method is the JWT signing method of k's algorithm.
func (k tokenKey) method() jwt.SigningMethod { return jwt.GetSigningMethod(k.alg) }

// sign makes a JWT of claims signed with k.
func (k tokenKey) sign(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	return sign(t, k.method(), k.priv, claims)
}

// token is a token of role signed with k; exp zero: it never expires.
func (k tokenKey) token(t *testing.T, role string, exp time.Time) string {
	t.Helper()
	claims := jwt.MapClaims{"sub": role}
	if !exp.IsZero() {
		claims["exp"] = exp.Unix()
	}
	return k.sign(t, claims)
}

// configure gives the embedded broker k to verify tokens with.
func (k tokenKey) configure(o *broker.Options) {
	if k.alg == "HS256" {
		o.TokenSecretKey = k.verify
		return
	}
	o.TokenPublicKey = k.verify
}

// otherFamily is the algorithm of another key family than alg's.
func otherFamily(alg string) string {
	return map[string]string{"HS256": "RS256", "RS256": "ES256", "ES256": "RS256"}[alg]
}

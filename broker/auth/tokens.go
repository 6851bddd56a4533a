// Package auth verifies the credentials the embedded broker accepts: JSON
// Web Tokens checked as Apache Pulsar's AuthenticationProviderToken checks
// them. It knows nothing of connections or of the admin API: the broker
// hands it a token and gets back a role or the reason for a refusal.
package auth

import (
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/golang-jwt/jwt/v5"
)

// ErrNoToken is what a connection or request without a token gets.
var ErrNoToken = errors.New("no token given")

// ErrTwoKeys is NewTokenVerifier's answer to both a secret and a public
// key: Apache Pulsar's provider takes one.
var ErrTwoKeys = errors.New("a secret key and a public key exclude each other (Apache Pulsar's provider takes one)")

// TokenVerifier checks JWTs: signed with the secret key (HS256, HS384,
// HS512) or the private half of the public key (RS*, PS*, ES*), their exp
// and nbf honoured when present, the role read from one claim.
type TokenVerifier struct {
	key     any      // []byte, *rsa.PublicKey or *ecdsa.PublicKey
	methods []string // the algorithms the key may have signed with
	claim   string
}

// NewTokenVerifier builds the verifier of a secret key or of a public key
// (PEM or DER, see ParsePublicKey); claim names the claim holding the
// role, "" meaning "sub". It returns nil and no error when neither key is
// given, and ErrTwoKeys when both are.
func NewTokenVerifier(secret, public []byte, claim string) (*TokenVerifier, error) {
	if claim == "" {
		claim = "sub"
	}
	switch {
	case len(secret) > 0 && len(public) > 0:
		return nil, ErrTwoKeys
	case len(secret) > 0:
		return &TokenVerifier{key: secret, methods: []string{"HS256", "HS384", "HS512"}, claim: claim}, nil
	case len(public) > 0:
		pub, err := ParsePublicKey(public)
		if err != nil {
			return nil, fmt.Errorf("token public key: %w", err)
		}
		v := &TokenVerifier{key: pub, claim: claim}
		switch pub.(type) {
		case *rsa.PublicKey:
			v.methods = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}
		case *ecdsa.PublicKey:
			v.methods = []string{"ES256", "ES384", "ES512"}
		}
		return v, nil
	}
	return nil, nil
}

// ParsePublicKey reads an RSA or EC public key, PEM ("BEGIN PUBLIC KEY")
// or DER (what `pulsar tokens create-key-pair` writes).
func ParsePublicKey(b []byte) (any, error) {
	der := b
	if blk, _ := pem.Decode(b); blk != nil {
		der = blk.Bytes
	}
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("want a PEM or DER (X.509 SubjectPublicKeyInfo) RSA or EC public key: %w", err)
	}
	switch k.(type) {
	case *rsa.PublicKey, *ecdsa.PublicKey:
		return k, nil
	}
	return nil, fmt.Errorf("public key of type %T: want RSA or EC", k)
}

// Verify returns the role of a valid token. Its errors never quote the
// token: they go back to the client and into the broker's log.
func (v *TokenVerifier) Verify(tok string) (string, error) {
	if tok == "" {
		return "", ErrNoToken
	}
	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(tok, claims, func(*jwt.Token) (any, error) { return v.key, nil },
		jwt.WithValidMethods(v.methods))
	if err != nil {
		return "", tokenError(err)
	}
	role, ok := claims[v.claim].(string)
	if !ok || role == "" {
		return "", fmt.Errorf("token has no %q claim naming a role", v.claim)
	}
	return role, nil
}

// tokenError says why a token was refused in words that name no part of
// it.
func tokenError(err error) error {
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return errors.New("token expired")
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return errors.New("token not valid yet (nbf)")
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return errors.New("token signature invalid")
	case errors.Is(err, jwt.ErrTokenUnverifiable), errors.Is(err, jwt.ErrTokenInvalidClaims):
		return fmt.Errorf("token refused: %w", err)
	case errors.Is(err, jwt.ErrTokenMalformed):
		return errors.New("token malformed (not a JWT)")
	}
	return errors.New("token invalid")
}

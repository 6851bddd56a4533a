package broker

import (
	"context"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	"github.com/golang-jwt/jwt/v5"
)

// Token authentication as Apache Pulsar's AuthenticationProviderToken
// does it: a JWT signed with the secret key (HS256, HS384, HS512) or the
// private half of the public key (RS*, PS*, ES*), its exp honoured when
// present, the role read from one claim ("sub" unless TokenAuthClaim says
// otherwise). See docs/security.md.

// errNoToken is what a connection or request without a token gets.
var errNoToken = errors.New("no token given")

// tokenVerifier checks JWTs against the configured key.
type tokenVerifier struct {
	key     any      // []byte, *rsa.PublicKey or *ecdsa.PublicKey
	methods []string // the algorithms the key may have signed with
	claim   string
}

// newTokenVerifier builds the verifier of o's key; nil when no key is set.
func newTokenVerifier(o Options) (*tokenVerifier, error) {
	claim := o.TokenAuthClaim
	if claim == "" {
		claim = "sub"
	}
	switch {
	case len(o.TokenSecretKey) > 0 && len(o.TokenPublicKey) > 0:
		return nil, errors.New("broker: TokenSecretKey and TokenPublicKey exclude each other (Apache Pulsar's provider takes one)")
	case len(o.TokenSecretKey) > 0:
		return &tokenVerifier{key: o.TokenSecretKey, methods: []string{"HS256", "HS384", "HS512"}, claim: claim}, nil
	case len(o.TokenPublicKey) > 0:
		pub, err := ParsePublicKey(o.TokenPublicKey)
		if err != nil {
			return nil, fmt.Errorf("broker: token public key: %w", err)
		}
		v := &tokenVerifier{key: pub, claim: claim}
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

// verify returns the role of a valid token. Its errors never quote the
// token: they go back to the client and into the broker's log.
func (v *tokenVerifier) verify(tok string) (string, error) {
	if tok == "" {
		return "", errNoToken
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

func (c *Cluster) authRequired() bool {
	return c.verifier != nil || c.opts.Authenticate != nil
}

// authenticate checks CONNECT's credentials and returns the role:
// Authenticate when given, else the method must be "token" and the data a
// JWT the key verifies.
func (c *Cluster) authenticate(ctx context.Context, method string, data []byte) (string, error) {
	if c.opts.Authenticate != nil {
		return c.opts.Authenticate(ctx, method, data)
	}
	if method != "token" {
		return "", fmt.Errorf("auth method %q: want \"token\"", method)
	}
	return c.verifier.verify(string(data))
}

// authenticateHTTP checks an admin request's "Authorization: Bearer"
// header and returns the role.
func (c *Cluster) authenticateHTTP(ctx context.Context, header string) (string, error) {
	tok, ok := strings.CutPrefix(header, "Bearer ")
	if !ok {
		return "", errNoToken
	}
	return c.authenticate(ctx, "token", []byte(strings.TrimSpace(tok)))
}

// loadTLS builds the TLS listeners' configuration, nil without TLS.
func loadTLS(o Options) (*tls.Config, error) {
	if o.TLSConfig != nil {
		return o.TLSConfig, nil
	}
	if o.TLSCertFile == "" && o.TLSKeyFile == "" {
		return nil, nil
	}
	if o.TLSCertFile == "" || o.TLSKeyFile == "" {
		return nil, errors.New("broker: TLS needs both a certificate and a key file")
	}
	cert, err := tls.LoadX509KeyPair(o.TLSCertFile, o.TLSKeyFile)
	if err != nil {
		return nil, fmt.Errorf("broker: load TLS certificate: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// checkSecurity refuses combinations that would not do what they say.
func checkSecurity(o Options, tlsCfg *tls.Config, v *tokenVerifier) error {
	switch {
	case o.Listen == "-" && tlsCfg == nil:
		return errors.New("broker: the plain-text port is off (Listen \"-\") and no TLS certificate is given: nothing would listen")
	case o.HTTPS != "" && tlsCfg == nil:
		return errors.New("broker: the admin API over HTTPS needs the TLS certificate (TLSConfig or TLSCertFile and TLSKeyFile)")
	case o.Authorization && v == nil && o.Authenticate == nil:
		return errors.New("broker: authorization needs authentication (a token key or Authenticate): every client would be anonymous")
	}
	return nil
}

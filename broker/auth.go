package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"

	"github.com/streamrun/streamrun/broker/auth"
)

// Authentication of CONNECT and of admin requests: the Authenticate
// option when given, else token authentication (package auth, see
// docs/security.md); and the TLS configuration of the listeners.

// newTokenVerifier builds the verifier of o's token key; nil when no key
// is set.
func newTokenVerifier(o Options) (*auth.TokenVerifier, error) {
	v, err := auth.NewTokenVerifier(o.TokenSecretKey, o.TokenPublicKey, o.TokenAuthClaim)
	if errors.Is(err, auth.ErrTwoKeys) {
		return nil, errors.New("broker: TokenSecretKey and TokenPublicKey exclude each other (Apache Pulsar's provider takes one)")
	}
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	return v, nil
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
	return c.verifier.Verify(string(data))
}

// authenticateHTTP checks an admin request's "Authorization: Bearer"
// header and returns the role.
func (c *Cluster) authenticateHTTP(ctx context.Context, header string) (string, error) {
	tok, ok := strings.CutPrefix(header, "Bearer ")
	if !ok {
		return "", auth.ErrNoToken
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

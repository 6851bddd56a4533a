package broker

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
)

// errBadToken is what a wrong or missing token gets.
var errBadToken = errors.New("invalid token")

func (c *Cluster) authRequired() bool {
	return len(c.opts.Tokens) > 0 || c.opts.Authenticate != nil
}

// authenticate checks CONNECT's credentials: Authenticate when given, else
// the method must be "token" and the data one of Tokens.
func (c *Cluster) authenticate(ctx context.Context, method string, data []byte) (string, error) {
	if c.opts.Authenticate != nil {
		return c.opts.Authenticate(ctx, method, data)
	}
	if method != "token" {
		return "", fmt.Errorf("auth method %q: want \"token\"", method)
	}
	return c.checkToken(string(data))
}

func (c *Cluster) checkToken(tok string) (string, error) {
	ok := false
	for _, t := range c.opts.Tokens {
		// Compare all of them in constant time, so timing tells nothing.
		if subtle.ConstantTimeCompare([]byte(t), []byte(tok)) == 1 {
			ok = true
		}
	}
	if !ok || tok == "" {
		return "", errBadToken
	}
	return "token", nil
}

// loadTLS builds the TLS listener's configuration, nil without TLS.
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

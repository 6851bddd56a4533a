package pool

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
)

// tlsConfig builds the base TLS configuration; ServerName is set per
// dial.
func (o TLSOptions) tlsConfig() (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("TLS CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("TLS CA file %s: no PEM certificates in it", o.CAFile)
		}
		c.RootCAs = pool
	}
	if o.CertFile != "" || o.KeyFile != "" {
		if o.CertFile == "" || o.KeyFile == "" {
			return nil, errors.New("TLS client certificate: need both CertFile and KeyFile")
		}
		cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("TLS client certificate: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	switch {
	case o.InsecureSkipVerify:
		c.InsecureSkipVerify = true
	case o.SkipHostnameVerification:
		// Verify the chain ourselves, without the name.
		roots := c.RootCAs
		c.InsecureSkipVerify = true
		c.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("tls: broker sent no certificate")
			}
			opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
			for _, ic := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(ic)
			}
			_, err := cs.PeerCertificates[0].Verify(opts)
			return err
		}
	}
	return c, nil
}

// tokenSource turns Options.Token into a function giving the token now.
func tokenSource(spec string) (func() (string, error), error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, nil
	}
	spec = strings.TrimPrefix(spec, "token:")
	switch {
	case strings.HasPrefix(spec, "file:"):
		path := strings.TrimPrefix(spec, "file:")
		path = strings.TrimPrefix(path, "//")
		if path == "" {
			return nil, errors.New("token: file: without a path")
		}
		read := func() (string, error) {
			b, err := os.ReadFile(path)
			if err != nil {
				return "", fmt.Errorf("token file: %w", err)
			}
			t := strings.TrimSpace(string(b))
			if t == "" {
				return "", fmt.Errorf("token file %s is empty", path)
			}
			return t, nil
		}
		if _, err := read(); err != nil {
			return nil, err
		}
		return read, nil
	case strings.HasPrefix(spec, "env:"):
		name := strings.TrimPrefix(spec, "env:")
		t := strings.TrimSpace(os.Getenv(name))
		if t == "" {
			return nil, fmt.Errorf("token: environment variable %s is empty or unset", name)
		}
		return func() (string, error) { return t, nil }, nil
	}
	return func() (string, error) { return spec, nil }, nil
}

// finalTLSError reports whether err is a TLS failure that a retry would
// only repeat: an untrusted or misnamed certificate, a refused handshake.
func finalTLSError(err error) bool {
	var (
		verify   *tls.CertificateVerificationError
		hostname x509.HostnameError
		unknown  x509.UnknownAuthorityError
		invalid  x509.CertificateInvalidError
		alert    tls.AlertError
		record   tls.RecordHeaderError
	)
	return errors.As(err, &verify) || errors.As(err, &hostname) || errors.As(err, &unknown) ||
		errors.As(err, &invalid) || errors.As(err, &alert) || errors.As(err, &record)
}

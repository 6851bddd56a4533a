package host

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"
)

// clientTLS is the host's half of go-plugin's AutoMTLS, done here rather
// than by go-plugin: a certificate made for this start, handed to the
// plugin in PLUGIN_CLIENT_CERT (the returned "KEY=value"), and a TLS
// config that presents it. go-plugin still reads the plugin's own
// certificate from the handshake line into the config's roots. The
// protocol is go-plugin's; what differs is the key: ECDSA P-256, where
// go-plugin makes P-521. gRPC's C core (Python, Ruby, C++, C#, PHP) is
// built on BoringSSL, which does not verify P-521 signatures: a Go host
// with a P-521 certificate finds no signature algorithm such a plugin
// accepts, sends no certificate, and the plugin refuses the connection.
// Go plugins take either.
func clientTLS() (*tls.Config, string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, "", fmt.Errorf("mTLS key: %w", err)
	}
	sn, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, "", fmt.Errorf("mTLS serial number: %w", err)
	}
	const host = "localhost" // the name go-plugin's peers use
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: host, Organization: []string{"streamrun"}},
		DNSNames:              []string{host},
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageKeyAgreement | x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		SerialNumber:          sn,
		NotBefore:             time.Now().Add(-30 * time.Second),
		NotAfter:              time.Now().Add(10 * 365 * 24 * time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, "", fmt.Errorf("mTLS certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, "", fmt.Errorf("mTLS certificate: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	cfg := &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}},
		MinVersion:   tls.VersionTLS12,
		ServerName:   host,
	}
	return cfg, "PLUGIN_CLIENT_CERT=" + string(certPEM), nil
}

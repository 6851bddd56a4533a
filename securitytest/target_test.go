package securitytest

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The environment naming a secured Apache Pulsar (scripts/pulsar start
// --name secure prints it).
const (
	secureURLEnv   = "STREAMRUN_PULSAR_SECURE_URL"   // pulsar+ssl://localhost:port
	secureHTTPEnv  = "STREAMRUN_PULSAR_SECURE_HTTP"  // https://localhost:port
	secureCAEnv    = "STREAMRUN_PULSAR_SECURE_CA"    // PEM of the CA of its certificate
	secureKeyEnv   = "STREAMRUN_PULSAR_SECURE_KEY"   // its tokenSecretKey file (raw bytes)
	secureSuperEnv = "STREAMRUN_PULSAR_SECURE_SUPER" // its superuser role; default "admin"
	securePIDEnv   = "STREAMRUN_PULSAR_SECURE_PID"   // its JVM's pid, to list its sockets
)

// target is a broker secured with TLS (its certificate names "localhost"
// only), HS256 tokens and authorization.
type target struct {
	name     string
	url      string // pulsar+ssl://localhost:port
	admin    string // https://localhost:port
	ca       string // CA file
	key      []byte // the tokens' secret key
	super    string // a superuser role
	pid      int    // the process serving it; 0: unknown
	embedded *broker.Cluster
}

// forEachTarget runs f against the embedded broker, then against the
// secured Apache Pulsar, skipped with a message when it is not set.
func forEachTarget(t *testing.T, f func(t *testing.T, tg *target)) {
	t.Run("embedded", func(t *testing.T) { f(t, embeddedTarget(t)) })
	t.Run("pulsar", func(t *testing.T) { f(t, pulsarTarget(t)) })
}

// forEachTargetAtOnce is forEachTarget with both at once: for tests that
// wait on slow tools (a JVM start each) rather than on the brokers.
func forEachTargetAtOnce(t *testing.T, f func(t *testing.T, tg *target)) {
	t.Run("embedded", func(t *testing.T) { t.Parallel(); f(t, embeddedTarget(t)) })
	t.Run("pulsar", func(t *testing.T) { t.Parallel(); f(t, pulsarTarget(t)) })
}

func embeddedTarget(t *testing.T) *target {
	ca := brokertest.NewCA(t, "streamrun-test")
	cert, key := ca.Server("localhost", "localhost")
	secret := brokertest.SecretKey(t)
	c := brokertest.Start(t, func(o *broker.Options) {
		o.Listen = "-" // TLS only
		o.HTTP = "-"
		o.TLSCertFile, o.TLSKeyFile = cert, key
		o.TLSListen = "127.0.0.1:0"
		o.HTTPS = "127.0.0.1:0"
		o.AdvertisedHost = "localhost"
		o.TokenSecretKey = secret
		o.Authorization = true
		o.SuperUserRoles = []string{"admin"}
	})
	return &target{name: "embedded", url: c.ServiceURLTLS(), admin: c.AdminURLTLS(), ca: ca.File, key: secret, super: "admin", pid: os.Getpid(), embedded: c}
}

func pulsarTarget(t *testing.T) *target {
	u := os.Getenv(secureURLEnv)
	if u == "" {
		t.Skipf("needs an Apache Pulsar configured for TLS, tokens and authorization: set %s, %s, %s and %s (scripts/pulsar start --name secure prints them; .ci/run does it)",
			secureURLEnv, secureHTTPEnv, secureCAEnv, secureKeyEnv)
	}
	key, err := os.ReadFile(os.Getenv(secureKeyEnv))
	if err != nil {
		t.Fatalf("%s: %v", secureKeyEnv, err)
	}
	super := os.Getenv(secureSuperEnv)
	if super == "" {
		super = "admin"
	}
	pid, _ := strconv.Atoi(os.Getenv(securePIDEnv))
	return &target{name: "pulsar", url: u, admin: os.Getenv(secureHTTPEnv), ca: os.Getenv(secureCAEnv), key: key, super: super, pid: pid}
}

// token is a token of role that expires in an hour.
func (tg *target) token(t *testing.T, role string) string {
	return brokertest.Token(t, tg.key, role, time.Now().Add(time.Hour))
}

// byIP is u with "localhost" replaced by 127.0.0.1: the same listener,
// under a name its certificate does not hold.
func byIP(u string) string { return strings.Replace(u, "localhost", "127.0.0.1", 1) }

// httpsClient trusts the target's CA and verifies host names.
func (tg *target) httpsClient(t *testing.T) *http.Client {
	pem, err := os.ReadFile(tg.ca)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// adminDo sends an admin request with token (none when "") and returns
// the status and body.
func (tg *target) adminDo(t *testing.T, method, path, token, body string) (int, string) {
	t.Helper()
	return adminAt(t, tg.httpsClient(t), method, tg.admin+path, token, body)
}

func adminAt(t *testing.T, hc *http.Client, method, u, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, redact(u), err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "?"
	}
	return p.Redacted()
}

func uniq(prefix string) string { return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()) }

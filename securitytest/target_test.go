package securitytest

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
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
	secureURLEnv   = "STREAMRUN_PULSAR_SECURE_URL"        // pulsar+ssl://localhost:port
	secureHTTPEnv  = "STREAMRUN_PULSAR_SECURE_HTTP"       // https://localhost:port
	secureCAEnv    = "STREAMRUN_PULSAR_SECURE_CA"         // PEM of the CA of its certificate
	secureAlgEnv   = "STREAMRUN_PULSAR_SECURE_ALG"        // HS256 (when unset), RS256 or ES256
	secureKeyEnv   = "STREAMRUN_PULSAR_SECURE_KEY"        // the file tokens are signed with: secret (raw bytes) or private key
	securePubEnv   = "STREAMRUN_PULSAR_SECURE_PUBLIC_KEY" // RS256, ES256: its tokenPublicKey file
	secureToolEnv  = "STREAMRUN_PULSAR_SECURE_TOOL_TOKEN" // a superuser token file made by bin/pulsar tokens create
	secureSuperEnv = "STREAMRUN_PULSAR_SECURE_SUPER"      // its superuser role; default "admin"
	securePIDEnv   = "STREAMRUN_PULSAR_SECURE_PID"        // its JVM's pid, to list its sockets
)

// target is a broker secured with TLS (its certificate names "localhost"
// only), tokens and authorization.
type target struct {
	name     string
	url      string // pulsar+ssl://localhost:port
	admin    string // https://localhost:port
	ca       string // CA file
	key      tokenKey
	super    string // a superuser role
	pid      int    // the process serving it; 0: unknown
	embedded *broker.Cluster
}

// forEachTarget runs f against the embedded broker (HS256 tokens), then
// against the secured Apache Pulsar (whichever algorithm it runs with),
// skipped with a message when it is not set.
func forEachTarget(t *testing.T, f func(t *testing.T, tg *target)) {
	t.Run("embedded", func(t *testing.T) { f(t, embeddedTarget(t, newTokenKey(t, "HS256"))) })
	t.Run("pulsar", func(t *testing.T) { f(t, pulsarTarget(t)) })
}

// forEachAlg runs f per token algorithm (subtests ALG/embedded and
// ALG/pulsar): against the embedded broker for each, and against the
// secured Apache Pulsar for the one it runs with (the others skip, saying
// how to start it; .ci/run restarts it once per algorithm). When the
// algorithms match, the embedded broker verifies with the standalone's
// own key files, so the same tokens meet both.
func forEachAlg(t *testing.T, f func(t *testing.T, tg *target)) {
	for _, alg := range algs {
		t.Run(alg, func(t *testing.T) {
			t.Run("embedded", func(t *testing.T) {
				key, ok := pulsarKey(t)
				if !ok || key.alg != alg {
					key = newTokenKey(t, alg)
				}
				f(t, embeddedTarget(t, key))
			})
			t.Run("pulsar", func(t *testing.T) {
				tg := pulsarTarget(t)
				if tg.key.alg != alg {
					t.Skipf("the secured Apache Pulsar verifies %s tokens: this part needs it started with --token-alg %s (scripts/pulsar stop --name secure; scripts/pulsar start --name secure --token-alg %s; .ci/run does it)",
						tg.key.alg, alg, alg)
				}
				f(t, tg)
			})
		})
	}
}

// forEachTargetAtOnce is forEachTarget with both at once: for tests that
// wait on slow tools (a JVM start each) rather than on the brokers.
func forEachTargetAtOnce(t *testing.T, f func(t *testing.T, tg *target)) {
	t.Run("embedded", func(t *testing.T) { t.Parallel(); f(t, embeddedTarget(t, newTokenKey(t, "HS256"))) })
	t.Run("pulsar", func(t *testing.T) { t.Parallel(); f(t, pulsarTarget(t)) })
}

// embeddedTarget starts an embedded broker verifying tokens with tk.
func embeddedTarget(t *testing.T, tk tokenKey) *target {
	ca := brokertest.NewCA(t, "streamrun-test")
	cert, key := ca.Server("localhost", "localhost")
	c := brokertest.Start(t, func(o *broker.Options) {
		o.Listen = "-" // TLS only
		o.HTTP = "-"
		o.TLSCertFile, o.TLSKeyFile = cert, key
		o.TLSListen = "127.0.0.1:0"
		o.HTTPS = "127.0.0.1:0"
		o.AdvertisedHost = "localhost"
		tk.configure(o)
		o.Authorization = true
		o.SuperUserRoles = []string{"admin"}
	})
	return &target{name: "embedded", url: c.ServiceURLTLS(), admin: c.AdminURLTLS(), ca: ca.File, key: tk, super: "admin", pid: os.Getpid(), embedded: c}
}

// pulsarKey is the secured Apache Pulsar's token key, read from the files
// its environment names; false when that is not set.
func pulsarKey(t *testing.T) (tokenKey, bool) {
	t.Helper()
	if os.Getenv(secureURLEnv) == "" {
		return tokenKey{}, false
	}
	alg := os.Getenv(secureAlgEnv)
	if alg == "" {
		alg = "HS256" // what scripts/pulsar ran before it said
	}
	if !slices.Contains(algs, alg) {
		t.Fatalf("%s=%q: want one of %v", secureAlgEnv, alg, algs)
	}
	tk, err := readTokenKey(alg, os.Getenv(secureKeyEnv), os.Getenv(securePubEnv))
	if err != nil {
		t.Fatalf("the secured Apache Pulsar's key (%s, %s): %v", secureKeyEnv, securePubEnv, err)
	}
	// A standalone started by an older scripts/pulsar has no tool token.
	if f := os.Getenv(secureToolEnv); f != "" {
		if tk.tool, err = readToolToken(f); err != nil {
			t.Fatalf("%s: %v", secureToolEnv, err)
		}
	} else {
		t.Logf("%s not set: no token made by bin/pulsar tokens create to try", secureToolEnv)
	}
	return tk, true
}

func pulsarTarget(t *testing.T) *target {
	key, ok := pulsarKey(t)
	if !ok {
		t.Skipf("needs an Apache Pulsar configured for TLS, tokens and authorization: set %s, %s, %s, %s and %s (scripts/pulsar start --name secure prints them; .ci/run does it)",
			secureURLEnv, secureHTTPEnv, secureCAEnv, secureAlgEnv, secureKeyEnv)
	}
	super := os.Getenv(secureSuperEnv)
	if super == "" {
		super = "admin"
	}
	pid, _ := strconv.Atoi(os.Getenv(securePIDEnv))
	return &target{name: "pulsar", url: os.Getenv(secureURLEnv), admin: os.Getenv(secureHTTPEnv), ca: os.Getenv(secureCAEnv), key: key, super: super, pid: pid}
}

// token is a token of role that expires in an hour.
func (tg *target) token(t *testing.T, role string) string {
	return tg.key.token(t, role, time.Now().Add(time.Hour))
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

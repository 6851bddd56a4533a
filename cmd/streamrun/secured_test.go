package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
)

// securedTarget is a broker serving TLS only (a certificate for
// "localhost" only), the admin API over HTTPS only, HS256 tokens and
// authorization: the embedded broker, or the Apache Pulsar standalone that
// scripts/pulsar start --name secure configures the same way.
type securedTarget struct {
	name     string
	url      string // pulsar+ssl://localhost:port
	admin    string // https://localhost:port
	ca       string // CA file
	key      []byte // the tokens' secret key
	super    string // a superuser role
	tlsKey   string // the broker's TLS key file, when this process has it
	embedded bool
}

// securedTargets are the embedded broker always and the secured Apache
// Pulsar when STREAMRUN_PULSAR_SECURE_URL is set (.ci/run sets it).
func securedTargets(t *testing.T) []securedTarget {
	out := []securedTarget{securedEmbedded(t, nil)}
	if tg, ok := securedPulsar(t); ok {
		out = append(out, tg)
	}
	return out
}

// securedEmbedded starts the embedded broker secured, logging to log
// (nil: nowhere) at debug level; its TLS key file is tlsKey.
func securedEmbedded(t *testing.T, log io.Writer) securedTarget {
	ca := brokertest.NewCA(t, "cli-secured")
	cert, key := ca.Server("localhost", "localhost")
	secret := brokertest.SecretKey(t)
	c := brokertest.Start(t, func(o *broker.Options) {
		o.Listen, o.HTTP = "-", "-"
		o.TLSCertFile, o.TLSKeyFile = cert, key
		o.TLSListen, o.HTTPS = "127.0.0.1:0", "127.0.0.1:0"
		o.AdvertisedHost = "localhost"
		o.TokenSecretKey = secret
		o.Authorization = true
		o.SuperUserRoles = []string{"admin"}
		if log != nil {
			o.Logger = slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
		}
	})
	return securedTarget{name: "embedded", url: c.ServiceURLTLS(), admin: c.AdminURLTLS(), ca: ca.File, key: secret, super: "admin", tlsKey: key, embedded: true}
}

// securedPulsar is the secured Apache Pulsar of STREAMRUN_PULSAR_SECURE_*;
// false, said in the test's log, when they are not set.
func securedPulsar(t *testing.T) (securedTarget, bool) {
	u := os.Getenv("STREAMRUN_PULSAR_SECURE_URL")
	if u == "" {
		t.Log("Apache Pulsar part skipped: needs a standalone with TLS only, tokens and authorization: set STREAMRUN_PULSAR_SECURE_URL, _HTTP, _CA and _KEY (scripts/pulsar start --name secure prints them; .ci/run does it)")
		return securedTarget{}, false
	}
	// These tests sign HS256 tokens; scripts/pulsar start --name secure
	// --token-alg RS256|ES256 gives a key pair instead (securitytest runs
	// its token tests against that).
	if alg := os.Getenv("STREAMRUN_PULSAR_SECURE_ALG"); alg != "" && alg != "HS256" {
		t.Logf("Apache Pulsar part skipped: it verifies %s tokens, these tests sign HS256 ones: start it with scripts/pulsar start --name secure (--token-alg HS256, the default)", alg)
		return securedTarget{}, false
	}
	pk, err := os.ReadFile(os.Getenv("STREAMRUN_PULSAR_SECURE_KEY"))
	if err != nil {
		t.Fatalf("STREAMRUN_PULSAR_SECURE_KEY: %v", err)
	}
	super := os.Getenv("STREAMRUN_PULSAR_SECURE_SUPER")
	if super == "" {
		super = "admin"
	}
	return securedTarget{name: "pulsar", url: u, admin: os.Getenv("STREAMRUN_PULSAR_SECURE_HTTP"),
		ca: os.Getenv("STREAMRUN_PULSAR_SECURE_CA"), key: pk, super: super}, true
}

// tokenFile writes a token of role, valid for an hour, to a file of its
// own and returns "file:PATH".
func (tg securedTarget) tokenFile(t *testing.T, role string) string {
	p := filepath.Join(t.TempDir(), role+".token")
	if err := os.WriteFile(p, []byte(brokertest.Token(t, tg.key, role, time.Now().Add(time.Hour))), 0o600); err != nil {
		t.Fatal(err)
	}
	return "file:" + p
}

// Every command that calls the admin API (health, topics, bench's topic
// creation) and the client commands (produce, consume), against a broker
// with TLS only, tokens and authorization: with a token from a file or an
// environment variable and the CA, they work, verifying the host name;
// without a token the admin API answers 401 and the command says so.
func TestSecuredCommands(t *testing.T) {
	for _, tg := range securedTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			super := tg.tokenFile(t, tg.super)
			t.Setenv("STREAMRUN_TEST_SUPER_TOKEN", brokertest.Token(t, tg.key, tg.super, time.Now().Add(time.Hour)))
			health := tg.admin + "/admin/v2/brokers/health"
			ok := func(what string, args ...string) string {
				t.Helper()
				code, out, errs := runArgs(args...)
				if code != 0 {
					t.Fatalf("%s: exit %d: %s%s", what, code, out, errs)
				}
				return out
			}
			refused := func(what, want string, args ...string) {
				t.Helper()
				code, out, errs := runArgs(args...)
				if code != 1 || !strings.Contains(errs, want) {
					t.Fatalf("%s: exit %d: %s%s, want exit 1 and %q", what, code, out, errs, want)
				}
			}

			for _, tok := range []string{super, "env:STREAMRUN_TEST_SUPER_TOKEN"} {
				if out := ok("health, token "+tok[:4], "health", "--url", health, "--tls-ca", tg.ca, "--token", tok); !strings.HasPrefix(out, "healthy: ") {
					t.Fatalf("health: %q", out)
				}
			}
			refused("health without a token", "401", "health", "--url", health, "--tls-ca", tg.ca)
			refused("health by a name the certificate lacks", "127.0.0.1", "health", "--url", byIP(health), "--tls-ca", tg.ca, "--token", super)

			topic := fmt.Sprintf("persistent://public/default/cli-secured-%d", time.Now().UnixNano())
			client := []string{"--url", tg.url, "--tls-ca", tg.ca, "--token", super}
			ok("produce", append([]string{"produce", "-t", topic, "-m", "over TLS", "-q"}, client...)...)
			if out := ok("consume", append([]string{"consume", "-t", topic, "-s", "s", "--position", "earliest", "-n", "1"}, client...)...); !strings.Contains(out, "over TLS") {
				t.Fatalf("consume: %q, want the message produced", out)
			}
			refused("produce by a name the certificate lacks", "127.0.0.1", "produce", "-t", topic, "-m", "x", "--url", byIP(tg.url), "--tls-ca", tg.ca, "--token", super)

			admin := []string{"--admin-url", tg.admin, "--tls-ca", tg.ca, "--token", super}
			if out := ok("topics list", append([]string{"topics", "list", "public/default"}, admin...)...); !strings.Contains(out, topic) {
				t.Fatalf("topics list: %q, want %s", out, topic)
			}
			refused("topics list without a token", "401", "topics", "list", "public/default", "--admin-url", tg.admin, "--tls-ca", tg.ca)

			// bench creates its partitioned topic through the admin API,
			// over HTTPS with the client's CA and token.
			parted := topic + "-bench"
			ok("bench produce --partitions 2", append([]string{"bench", "produce", "-t", parted, "--partitions", "2", "-n", "20", "--progress", "0",
				"--admin-url", tg.admin}, client...)...)
			var st struct {
				Partitions map[string]json.RawMessage `json:"partitions"`
			}
			out := ok("topics stats", append([]string{"topics", "stats", parted, "-o", "json"}, admin...)...)
			if err := json.Unmarshal([]byte(out), &st); err != nil || len(st.Partitions) != 2 {
				t.Fatalf("stats of the topic bench created: %v, %d partitions in %s, want 2", err, len(st.Partitions), out)
			}
		})
	}
}

// byIP is u with "localhost" replaced by 127.0.0.1: the same listener,
// under a name its certificate does not hold.
func byIP(u string) string { return strings.Replace(u, "localhost", "127.0.0.1", 1) }

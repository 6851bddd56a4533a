package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/telemetry"
	"github.com/streamrun/streamrun/telemetry/otlptest"
)

// secretForms are the ways a secret could show: as it is, and encoded.
func secretForms(name string, b []byte) map[string]string {
	return map[string]string{
		name + " (raw)":     string(b),
		name + " (hex)":     hex.EncodeToString(b),
		name + " (base64)":  base64.StdEncoding.EncodeToString(b),
		name + " (b64 url)": base64.RawURLEncoding.EncodeToString(b),
	}
}

// pemBody is the middle of a PEM file's base64: what a leaked key shows.
func pemBody(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[1:len(lines)-1], "")[8:40]
}

// A pipeline and a broker run with a known token, token key, TLS key and
// OTLP header, at debug level, traced and scraped, with failures on the
// way (an expired token, a token signed with another key, a refused
// admin request): none of the secrets shows in any log line, span,
// metric or error message. Against the embedded broker, whose log is
// checked too, and against the secured Apache Pulsar (TLS only), where
// the server's own refusals pass through streamrun's errors.
func TestNoSecretInLogsTracesMetricsOrErrors(t *testing.T) {
	needProc(t)
	bin := buildStreamrun(t)
	var brokerLog brokertest.SyncBuffer
	targets := []securedTarget{securedEmbedded(t, &brokerLog)}
	if tg, ok := securedPulsar(t); ok {
		targets = append(targets, tg)
	}
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			key := tg.key
			token := brokertest.Token(t, key, tg.super, time.Now().Add(time.Hour))
			const header = "otlp-header-secret-5f1d3a"
			secrets := map[string]string{
				"token":           token,
				"token signature": token[strings.LastIndex(token, ".")+1:],
				"OTLP header":     header,
			}
			if tg.tlsKey != "" {
				secrets["TLS key"] = pemBody(t, tg.tlsKey)
			}
			for k, v := range secretForms("token key", key) {
				secrets[k] = v
			}
			texts := leakRun(t, bin, tg, token, header)
			if tg.embedded {
				texts["the broker's log"] = brokerLog.String()
			}
			for what, text := range texts {
				if len(text) == 0 {
					t.Errorf("%s: empty, nothing checked", what)
				}
				for name, s := range secrets {
					if s != "" && strings.Contains(text, s) {
						t.Errorf("%s holds the %s", what, name)
					}
				}
			}
			// The embedded broker says why a token is refused; Apache
			// Pulsar says only that it is.
			why := []string{"expired", "signature"}
			if !tg.embedded {
				why = []string{"AuthenticationError", "401"}
			}
			for _, w := range why {
				if errs := texts["the errors"]; !strings.Contains(errs, w) {
					t.Errorf("the errors do not say %q:\n%s", w, errs)
				}
			}
		})
	}
}

// leakRun runs a traced, scraped pipeline at debug level against tg with
// token, then commands with bad tokens, and returns what they printed,
// exported and answered, by name.
func leakRun(t *testing.T, bin string, tg securedTarget, token, header string) map[string]string {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	rcv := otlptest.Start(t, telemetry.ProtocolGRPC)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := ln.Addr().String()
	ln.Close()
	in, out := fmt.Sprintf("leak-in-%d", time.Now().UnixNano()), fmt.Sprintf("leak-out-%d", time.Now().UnixNano())
	file := writePipelineFile(t, dir, "p.yaml", fmt.Sprintf(`
service_url: %s
tls: {ca_file: %s}
auth: {token: "file:%s"}
telemetry:
  http: %q
  traces: {endpoint: %q, headers: {x-api-key: %s}}
pipelines:
  - name: tag
    source: {topics: [%s], subscription: tag, initial_position: earliest}
    handler:
      package: %s
      config: {output: %s, delay: "0s"}
    outputs: [%s]
`, tg.url, tg.ca, tokenFile, metricsAddr, rcv.URL, header, in, filepath.Join(repoRoot(t), "cmd/streamrun/testdata/tagger"), out, out))
	p := startProc(t, "streamrun run", dir, bin, nil, "run", "--log-level", "debug", file)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl, err := pool.New(ctx, pool.Options{ServiceURL: tg.url, Token: token, TLS: pool.TLSOptions{CAFile: tg.ca}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close(ctx)
	outs := collect(t, cl, out)
	publishKeyed(t, cl, in, 20, 2)
	brokertest.Eventually(t, 2*time.Minute, "20 outputs", func() bool { return outs.len() >= 20 })
	var metrics string
	brokertest.Eventually(t, time.Minute, "/metrics to count the messages", func() bool {
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		metrics = string(body)
		return strings.Contains(metrics, "streamrun_messages_settled_total")
	})
	brokertest.Eventually(t, time.Minute, "spans exported", func() bool { return len(rcv.Spans()) > 0 })
	p.signal(t, syscall.SIGINT)
	if code := p.wait(t, time.Minute); code != 0 {
		t.Fatalf("streamrun run: exit %d\n%s", code, p.stderr.String())
	}

	errs := badTokenErrors(t, ctx, tg, dir, in, token)
	var spans strings.Builder
	for _, s := range rcv.Spans() {
		fmt.Fprintf(&spans, "%v %v\n", s, s.Attributes)
	}
	if len(rcv.Spans()) == 0 {
		t.Error("no spans received: the traces were not exported")
	}
	return map[string]string{
		"streamrun run's logs": p.stderr.String() + p.stdout.String(),
		"the spans":            spans.String(),
		"the metrics":          metrics,
		"the errors":           errs,
	}
}

// badTokenErrors runs commands that must fail, with secrets at hand (an
// expired token, one signed with another key, a literal on the command
// line), and returns what they printed.
func badTokenErrors(t *testing.T, ctx context.Context, tg securedTarget, dir, topic, token string) string {
	expired := filepath.Join(dir, "expired")
	os.WriteFile(expired, []byte(brokertest.Token(t, tg.key, tg.super, time.Now().Add(-time.Minute))), 0o600)
	forged := filepath.Join(dir, "forged")
	os.WriteFile(forged, []byte(brokertest.Token(t, brokertest.SecretKey(t), tg.super, time.Time{})), 0o600)
	var errs bytes.Buffer
	for _, args := range [][]string{
		{"produce", "--url", tg.url, "--tls-ca", tg.ca, "--token", "file:" + expired, "-t", topic, "-m", "x", "--connect-timeout", "20s"},
		{"consume", "--url", tg.url, "--tls-ca", tg.ca, "--token", "file:" + forged, "-t", topic, "-s", "s", "-n", "1", "--connect-timeout", "20s"},
		{"topics", "list", "public/default", "--admin-url", tg.admin, "--tls-ca", tg.ca, "--token", "file:" + forged},
		{"health", "--url", tg.admin + "/admin/v2/brokers/health", "--tls-ca", tg.ca, "--token", "file:" + expired},
		{"produce", "-t", topic, "-m", "x", "--token", token},
	} {
		var o, e bytes.Buffer
		if code := run(ctx, args, &o, &e); code == 0 {
			t.Errorf("%s with a bad token: exit 0", args[0])
		}
		errs.WriteString(o.String() + e.String())
	}
	return errs.String()
}

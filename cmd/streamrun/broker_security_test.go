package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
)

// readyField is a field of the broker's ready line.
func readyField(line, name string) string {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, name+"="); ok {
			return v
		}
	}
	return ""
}

// `streamrun broker` secured from its flags alone: TLS only, the admin API
// over HTTPS only, tokens verified with a key read from a file (raw
// bytes) or an environment variable (base64), authorization with a
// superuser. The client commands use it with --tls-ca and --token
// file:PATH; a role without permissions is refused.
func TestBrokerSecuredFromTheCommandLine(t *testing.T) {
	for _, from := range []string{"file", "env"} {
		t.Run(from, func(t *testing.T) {
			dir := t.TempDir()
			ca := brokertest.NewCA(t, "cli")
			cert, key := ca.Server("localhost", "localhost")
			secret := brokertest.SecretKey(t)
			keySpec := "file:" + filepath.Join(dir, "secret.key")
			if err := os.WriteFile(filepath.Join(dir, "secret.key"), secret, 0o600); err != nil {
				t.Fatal(err)
			}
			if from == "env" {
				t.Setenv("STREAMRUN_TEST_TOKEN_KEY", base64.StdEncoding.EncodeToString(secret))
				keySpec = "env:STREAMRUN_TEST_TOKEN_KEY"
			}
			tokenFile := func(role string) string {
				p := filepath.Join(dir, role+".token")
				if err := os.WriteFile(p, []byte(brokertest.Token(t, secret, role, time.Now().Add(time.Hour))), 0o600); err != nil {
					t.Fatal(err)
				}
				return "file:" + p
			}
			ctx, cancel := context.WithCancel(context.Background())
			pr, pw := io.Pipe()
			var errb brokertest.SyncBuffer
			done := make(chan int, 1)
			go func() {
				done <- runBroker(ctx, []string{"--memory", "--listen", "-", "--http", "-", "--tls-cert", cert, "--tls-key", key,
					"--tls-listen", "127.0.0.1:0", "--https", "127.0.0.1:0", "--advertised-host", "localhost",
					"--token-secret-key", keySpec, "--authorization", "--superuser-role", "admin", "--log-level", "error"}, pw, &errb)
				pw.Close()
			}()
			line, err := bufio.NewReader(pr).ReadString('\n')
			if err != nil {
				cancel()
				t.Fatalf("no ready line: %v (exit %d): %s", err, <-done, errb.String())
			}
			go io.Copy(io.Discard, pr)
			defer func() {
				cancel()
				if code := <-done; code != 0 {
					t.Errorf("broker: exit %d: %s", code, errb.String())
				}
			}()
			tlsURL, adminURL := readyField(line, "service_url_tls"), readyField(line, "admin_url_tls")
			if !strings.HasPrefix(tlsURL, "pulsar+ssl://localhost:") || !strings.HasPrefix(adminURL, "https://localhost:") || readyField(line, "admin_url") != "" {
				t.Fatalf("ready line %q: want service_url_tls, admin_url_tls on localhost and no plain admin URL", line)
			}
			cli := func(args ...string) (int, string) {
				var o, e bytes.Buffer
				code := run(context.Background(), args, &o, &e)
				return code, o.String() + e.String()
			}
			topic := "persistent://public/default/cli-secured-" + from
			if code, out := cli("produce", "--url", tlsURL, "--tls-ca", ca.File, "--token", tokenFile("admin"), "-t", topic, "-m", "x", "-q"); code != 0 {
				t.Fatalf("produce as the superuser: exit %d: %s", code, out)
			}
			if code, out := cli("topics", "list", "public/default", "--admin-url", adminURL, "--tls-ca", ca.File, "--token", tokenFile("admin")); code != 0 || !strings.Contains(out, topic) {
				t.Fatalf("topics list over HTTPS: exit %d: %s", code, out)
			}
			if code, out := cli("produce", "--url", tlsURL, "--tls-ca", ca.File, "--token", tokenFile("nobody"), "-t", topic, "-m", "x", "--retries", "1"); code != 1 || !strings.Contains(out, "AuthorizationError") {
				t.Fatalf("produce as a role without permissions: exit %d: %s, want exit 1 and AuthorizationError", code, out)
			}
		})
	}
}

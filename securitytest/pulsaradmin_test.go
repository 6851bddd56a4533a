package securitytest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
)

// Apache Pulsar's own pulsar-admin grants a namespace's permissions on
// both brokers and reads them back, over HTTPS with host name
// verification and a superuser's token; the role may produce once
// granted. (Each run of the tool is a JVM start: two per broker.)
func TestPermissionsWithPulsarAdmin(t *testing.T) {
	if os.Getenv("STREAMRUN_PULSAR_HOME") == "" {
		t.Skip("needs Apache Pulsar's bin/pulsar-admin: set STREAMRUN_PULSAR_HOME (scripts/pulsar fetch; .ci/run does it)")
	}
	forEachTargetAtOnce(t, func(t *testing.T, tg *target) {
		tokenFile := filepath.Join(t.TempDir(), "super.token")
		if err := os.WriteFile(tokenFile, []byte(tg.token(t, tg.super)), 0o600); err != nil {
			t.Fatal(err)
		}
		admin := func(args ...string) string {
			t.Helper()
			out := pulsarBin(t, "pulsar-admin", append([]string{"--admin-url", tg.admin,
				"--auth-plugin", "org.apache.pulsar.client.impl.auth.AuthenticationToken", "--auth-params", "file://" + tokenFile,
				"--tls-trust-cert-path", tg.ca, "--tls-enable-hostname-verification"}, args...)...)
			if t.Failed() {
				t.FailNow()
			}
			return out
		}
		ctx := brokertest.Context(t, 5*time.Minute)
		role := uniq("admin-tool-role")
		c, err := tg.client(t, ctx, tg.token(t, role))
		if err != nil {
			t.Fatal(err)
		}
		publish := func() error {
			_, err := c.Publish(ctx, topic("public/default", "admin-tool"), pool.Message{Payload: []byte("x")})
			return err
		}
		if err := publish(); !errors.Is(err, pulsarwire.ErrAuthorizationError) {
			t.Fatalf("publish before the grant: %v, want AuthorizationError", err)
		}
		admin("namespaces", "grant-permission", "public/default", "--role", role, "--actions", "produce,consume")
		brokertest.Eventually(t, time.Minute, "produce granted by pulsar-admin", func() bool { return publish() == nil })
		// The tool parses the list: {"role": ["produce", "consume"]}.
		out := admin("namespaces", "permissions", "public/default")
		if !strings.Contains(out, role) || !strings.Contains(out, "produce") || !strings.Contains(out, "consume") {
			t.Fatalf("pulsar-admin namespaces permissions: %s, want %s with produce and consume", out, role)
		}
		if code, body := tg.adminDo(t, "DELETE", "/admin/v2/namespaces/public/default/permissions/"+role, tg.token(t, tg.super), ""); code/100 != 2 {
			t.Fatalf("revoke: %d %s", code, body)
		}
	})
}

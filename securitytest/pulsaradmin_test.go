package securitytest

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
)

// Apache Pulsar's own pulsar-admin grants and revokes a namespace's
// permissions on both brokers, over HTTPS with host name verification and
// a superuser's token; the role may produce once granted and not once
// revoked.
func TestPermissionsWithPulsarAdmin(t *testing.T) {
	if os.Getenv("STREAMRUN_PULSAR_HOME") == "" {
		t.Skip("needs Apache Pulsar's bin/pulsar-admin: set STREAMRUN_PULSAR_HOME (scripts/pulsar fetch; .ci/run does it)")
	}
	forEachTargetAtOnce(t, func(t *testing.T, tg *target) {
		tokenFile := filepath.Join(t.TempDir(), "super.token")
		if err := os.WriteFile(tokenFile, []byte(tg.token(t, tg.super)), 0o600); err != nil {
			t.Fatal(err)
		}
		admin := func(args ...string) {
			t.Helper()
			pulsarBin(t, "pulsar-admin", append([]string{"--admin-url", tg.admin,
				"--auth-plugin", "org.apache.pulsar.client.impl.auth.AuthenticationToken", "--auth-params", "file://" + tokenFile,
				"--tls-trust-cert-path", tg.ca, "--tls-enable-hostname-verification"}, args...)...)
			if t.Failed() {
				t.FailNow()
			}
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
		admin("namespaces", "revoke-permission", "public/default", "--role", role)
		brokertest.Eventually(t, time.Minute, "revoked by pulsar-admin", func() bool {
			return errors.Is(publish(), pulsarwire.ErrAuthorizationError)
		})
	})
}

package securitytest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pool"
)

// pulsarTool runs bin/pulsar of STREAMRUN_PULSAR_HOME and returns its
// stdout, trimmed.
func pulsarTool(t *testing.T, args ...string) string {
	t.Helper()
	return pulsarBin(t, "pulsar", args...)
}

// pulsarBin runs bin/NAME of STREAMRUN_PULSAR_HOME and returns its stdout,
// trimmed; a failure fails the test (not at once), with its stderr.
func pulsarBin(t *testing.T, name string, args ...string) string {
	t.Helper()
	home := os.Getenv("STREAMRUN_PULSAR_HOME")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(home, "bin", name), args...).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Errorf("bin/%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr)
	}
	return strings.TrimSpace(string(out))
}

// Tokens made by Apache Pulsar's own tool work unchanged with the
// embedded broker, with the key files the tool writes: a secret key
// (HS256), an RSA key pair (RS256) and an EC key pair (ES256).
func TestTokensMadeByPulsarTool(t *testing.T) {
	if os.Getenv("STREAMRUN_PULSAR_HOME") == "" {
		t.Skip("needs Apache Pulsar's bin/pulsar: set STREAMRUN_PULSAR_HOME (scripts/pulsar fetch; .ci/run does it)")
	}
	dir := t.TempDir()
	file := func(name string) string { return filepath.Join(dir, name) }
	// Two rounds of three JVMs at once: each start of bin/pulsar is slow.
	parallel(t,
		func() { pulsarTool(t, "tokens", "create-secret-key", "--output", file("secret.key")) },
		func() {
			pulsarTool(t, "tokens", "create-key-pair", "--output-private-key", file("rs.priv"), "--output-public-key", file("rs.pub"))
		},
		func() {
			pulsarTool(t, "tokens", "create-key-pair", "-a", "ES256", "--output-private-key", file("es.priv"), "--output-public-key", file("es.pub"))
		})
	var hs, rs, es string
	parallel(t,
		func() {
			hs = pulsarTool(t, "tokens", "create", "--secret-key", "file://"+file("secret.key"), "--subject", "alice", "--expiry-time", "1h")
		},
		func() {
			rs = pulsarTool(t, "tokens", "create", "--private-key", "file://"+file("rs.priv"), "--subject", "bob")
		},
		func() {
			es = pulsarTool(t, "tokens", "create", "-a", "ES256", "--private-key", "file://"+file("es.priv"), "--subject", "carol")
		})

	read := func(name string) []byte {
		b, err := os.ReadFile(file(name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, c := range []struct {
		name  string
		token string
		set   func(*broker.Options)
	}{
		{"HS256", hs, func(o *broker.Options) { o.TokenSecretKey = read("secret.key") }},
		{"RS256", rs, func(o *broker.Options) { o.TokenPublicKey = read("rs.pub") }},
		{"ES256", es, func(o *broker.Options) { o.TokenPublicKey = read("es.pub") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := brokertest.Start(t, c.set, func(o *broker.Options) { o.Authorization = true; o.SuperUserRoles = []string{"alice", "bob", "carol"} })
			ctx := brokertest.Context(t, time.Minute)
			cl, err := pool.New(ctx, pool.Options{ServiceURL: b.ServiceURL(), Token: c.token})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close(ctx)
			if _, err := cl.Publish(ctx, topic("public/default", "pulsar-tool"), pool.Message{Payload: []byte("x")}); err != nil {
				t.Fatal(err)
			}
			// The token signed for the other keys is refused.
			other := map[string]string{"HS256": rs, "RS256": es, "ES256": hs}[c.name]
			if _, err := pool.New(ctx, pool.Options{ServiceURL: b.ServiceURL(), Token: other}); err == nil {
				t.Fatal("a token signed with another key was accepted")
			}
		})
	}
}

// parallel runs fs at once and waits for them; a failure among them
// fails the test after all have ended.
func parallel(t *testing.T, fs ...func()) {
	t.Helper()
	var wg sync.WaitGroup
	for _, f := range fs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f()
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

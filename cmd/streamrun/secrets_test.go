package main

import (
	"strings"
	"testing"
)

// A secret on the command line is refused (ps shows it to every user):
// every flag that takes one answers a usage error saying to pass file:PATH
// or env:VAR, without quoting the secret.
func TestNoSecretOnTheCommandLine(t *testing.T) {
	const secret = "eyJhbGciOiJIUzI1NiJ9.literal-secret-on-the-command-line"
	for _, args := range [][]string{
		{"produce", "-t", "x", "-m", "a", "--token", secret},
		{"produce", "-t", "x", "-m", "a", "--token", "token:" + secret},
		{"consume", "-t", "x", "-s", "s", "--token", secret},
		{"topics", "list", "public/default", "--token", secret},
		{"health", "--token", secret},
		{"bench", "produce", "-n", "1", "--token", secret},
		{"broker", "--memory", "--token-secret-key", secret},
		{"broker", "--memory", "--token-public-key", secret},
	} {
		code, stdout, stderr := runArgs(args...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, "file:PATH") || !strings.Contains(stderr, "env:VAR") || !strings.Contains(stderr, "ps") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q: want exit 2 and how to pass it instead", args[:len(args)-1], code, stdout, stderr)
		}
		if strings.Contains(stderr, "literal-secret") {
			t.Errorf("%v: the error quotes the secret: %s", args[0], stderr)
		}
	}
	// The literal token list of the broker is gone, with a pointer to
	// what replaced it.
	for _, args := range [][]string{{"broker", "--memory", "--token", secret}, {"broker", "--memory", "--token-file", "/etc/hostname"}} {
		code, _, stderr := runArgs(args...)
		if code != 2 || !strings.Contains(stderr, "--token-secret-key") || strings.Contains(stderr, "literal-secret") {
			t.Errorf("%v: exit %d, %s", args[1:3], code, stderr)
		}
	}
}

// Flags that would make the broker insecure or listen on nothing are
// usage errors.
func TestBrokerSecurityFlagsAreChecked(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"broker", "--memory", "--listen", "-"}, "--tls-cert"},
		{[]string{"broker", "--memory", "--https", "127.0.0.1:0"}, "--https needs --tls-cert"},
		{[]string{"broker", "--memory", "--authorization"}, "--authorization needs --token-secret-key"},
		{[]string{"broker", "--memory", "--token-secret-key", "env:STREAMRUN_TEST_UNSET_VARIABLE"}, "STREAMRUN_TEST_UNSET_VARIABLE is empty or unset"},
		{[]string{"broker", "--memory", "--token-public-key", "file:/etc/hostname"}, "want a PEM or DER"},
	} {
		code, _, stderr := runArgs(c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q: want exit 2 and %q", c.args[1:], code, stderr, c.want)
		}
	}
}

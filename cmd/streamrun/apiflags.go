package main

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/streamrun/streamrun/admin"
)

// The flags of the commands that ask an HTTP API (topics, ctl, health,
// bench's topic creation): --token, --tls-ca and the admin API's URL,
// read and checked in one place so that each says its errors the same
// way.

// httpClient is what --token and --tls-ca say: the token, and a client
// trusting those CAs. The client's transport is its own: the caller
// closes what it keeps open (CloseIdleConnections), so that a command
// run inside another program (the tests do) leaves no connection.
func httpClient(token, tlsCA string) (string, *http.Client, error) {
	tok, err := readToken(token)
	if err != nil {
		return "", nil, err
	}
	hc, err := admin.HTTPClient(tlsCA)
	if err != nil {
		return "", nil, usagef("--tls-ca: %v", err)
	}
	return tok, hc, nil
}

// newAdmin is the admin client of the --admin-url, --token and --tls-ca
// flags.
func newAdmin(adminURL, token, tlsCA string, timeout time.Duration) (*admin.Client, error) {
	tok, err := readToken(token)
	if err != nil {
		return nil, err
	}
	a, err := admin.New(admin.Options{URL: adminURL, Token: tok, CAFile: tlsCA, Timeout: timeout})
	return a, adminUsage(err)
}

// adminUsage is err, or the usage error of the flag behind an
// admin.OptionError in it.
func adminUsage(err error) error {
	var oe *admin.OptionError
	switch {
	case !errors.As(err, &oe):
		return err
	case oe.Field == "CAFile":
		return usagef("--tls-ca: %v", oe.Err)
	}
	return usagef("--admin-url %v", oe.Err)
}

// readToken reads --token: "" (none), "file:PATH" or "env:VAR".
func readToken(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	b, err := readSecret("--token", strings.TrimPrefix(s, "token:"))
	return strings.TrimSpace(string(b)), err
}

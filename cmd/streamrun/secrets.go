package main

import (
	"encoding/base64"
	"os"
	"strings"
)

// Secrets (tokens, keys) come from files and environment variables only:
// a command line is visible to every user of the machine in ps. See
// docs/security.md.

// secretFlagHelp ends the help of every flag that takes a secret.
const secretFlagHelp = `"file:PATH" or "env:VAR" (never the secret itself: ps shows command lines)`

// readSecret reads the secret a flag names: "file:PATH" (the file's
// bytes) or "env:VAR" (the variable's value). Anything else is refused as
// a usage error that says how to pass it instead.
func readSecret(flag, spec string) ([]byte, error) {
	switch {
	case strings.HasPrefix(spec, "file:"):
		path := strings.TrimPrefix(strings.TrimPrefix(spec, "file:"), "//")
		if path == "" {
			return nil, usagef("%s file: without a path", flag)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, usagef("%s: %v", flag, err)
		}
		if len(b) == 0 {
			return nil, usagef("%s: %s is empty", flag, path)
		}
		return b, nil
	case strings.HasPrefix(spec, "env:"):
		name := strings.TrimPrefix(spec, "env:")
		v := os.Getenv(name)
		if v == "" {
			return nil, usagef("%s: environment variable %s is empty or unset", flag, name)
		}
		return []byte(v), nil
	}
	return nil, literalSecret(flag)
}

// literalSecret is the usage error of a secret given on the command line.
// It does not quote the value.
func literalSecret(flag string) error {
	return usagef("%s takes file:PATH or env:VAR, not the secret itself: a command line is visible to every user in ps "+
		"(write it to a file readable only by you and pass %s file:PATH, or export it and pass %s env:VAR)", flag, flag, flag)
}

// checkSecretSpec checks a flag naming a secret without reading it for
// good (the pool reads token files again when it reconnects): "" is
// allowed (no secret).
func checkSecretSpec(flag, spec string) error {
	if spec == "" {
		return nil
	}
	_, err := readSecret(flag, strings.TrimPrefix(spec, "token:"))
	return err
}

// readTokenKey reads --token-secret-key or --token-public-key: a file's
// raw bytes, as Apache Pulsar reads tokenSecretKey=file:///..., or an
// environment variable holding the key in base64 (a secret key's raw
// bytes are rarely printable), or PEM for a public key.
func readTokenKey(flag, spec string) ([]byte, error) {
	b, err := readSecret(flag, spec)
	if err != nil || !strings.HasPrefix(spec, "env:") || strings.HasPrefix(string(b), "-----BEGIN") {
		return b, err
	}
	dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, usagef("%s: environment variable %s: want the key in base64 (as `pulsar tokens create-secret-key --base64` prints) or PEM: %v",
			flag, strings.TrimPrefix(spec, "env:"), err)
	}
	return dec, nil
}

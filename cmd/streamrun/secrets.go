package main

import (
	"strings"

	"github.com/streamrun/streamrun/broker/auth"
)

// Secrets (tokens, keys) come from files and environment variables only:
// a command line is visible to every user of the machine in ps. See
// docs/security.md.

// secretFlagHelp ends the help of every flag that takes a secret.
const secretFlagHelp = `"file:PATH" or "env:VAR" (never the secret itself: ps shows command lines)`

// readSecret reads the secret a flag names (auth.ReadSecret: "file:PATH"
// or "env:VAR"). Anything else is refused as a usage error that says how
// to pass it instead.
func readSecret(flag, spec string) ([]byte, error) {
	return readWith(auth.ReadSecret, flag, spec)
}

// readWith reads a secret a flag names with read, its errors (a secret
// on the command line refused unread and unquoted) usage errors.
func readWith(read func(name, spec string, lookupEnv func(string) (string, bool)) ([]byte, error), flag, spec string) ([]byte, error) {
	b, err := read(flag, spec, nil)
	if err != nil {
		return nil, usagef("%v", err)
	}
	return b, nil
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

// readTokenKey reads --token-secret-key or --token-public-key
// (auth.ReadKey), refusing the key itself on the command line.
func readTokenKey(flag, spec string) ([]byte, error) {
	return readWith(auth.ReadKey, flag, spec)
}

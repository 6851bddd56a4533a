package auth

import (
	"encoding/base64"
	"fmt"
	"os"
	"strings"
)

// ReadSecret reads a secret a setting names: "file:PATH" (the file's
// bytes; "file:///abs" too) or "env:VAR" (the variable's value), so that
// the secret itself is never on a command line (ps shows command lines)
// nor in a file that is shared; anything else is refused, unquoted, with
// how to pass it instead. name says which setting in errors;
// lookupEnv nil means os.LookupEnv. An empty file or variable is an
// error. The commands' --token flags read their tokens with it.
func ReadSecret(name, spec string, lookupEnv func(string) (string, bool)) ([]byte, error) {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	switch {
	case strings.HasPrefix(spec, "file:"):
		path := strings.TrimPrefix(strings.TrimPrefix(spec, "file:"), "//")
		if path == "" {
			return nil, fmt.Errorf("%s: file: without a path", name)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if len(b) == 0 {
			return nil, fmt.Errorf("%s: %s is empty", name, path)
		}
		return b, nil
	case strings.HasPrefix(spec, "env:"):
		v, ok := lookupEnv(strings.TrimPrefix(spec, "env:"))
		if !ok || v == "" {
			return nil, fmt.Errorf("%s: environment variable %s is empty or unset", name, strings.TrimPrefix(spec, "env:"))
		}
		return []byte(v), nil
	}
	// Not quoted: it may be the secret itself.
	return nil, fmt.Errorf("%s: want file:PATH or env:VAR, not the secret itself: ps shows command lines to every user "+
		"(write it to a file readable only by you and give file:PATH, or export it and give env:VAR)", name)
}

// ReadKey reads a token key as Apache Pulsar's tokenSecretKey and
// tokenPublicKey settings name one (ReadSecret): a file's bytes, raw or
// PEM, or an environment variable's base64 (as `pulsar tokens
// create-secret-key --base64` prints it) or PEM as it is. The broker's
// flags and a pipeline file's control section read their keys with it.
func ReadKey(name, spec string, lookupEnv func(string) (string, bool)) ([]byte, error) {
	b, err := ReadSecret(name, spec, lookupEnv)
	if err != nil || !strings.HasPrefix(spec, "env:") || strings.HasPrefix(strings.TrimSpace(string(b)), "-----BEGIN") {
		return b, err
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("%s: environment variable %s: want the key in base64 (as `pulsar tokens create-secret-key --base64` prints) or PEM: %v",
			name, strings.TrimPrefix(spec, "env:"), err)
	}
	return key, nil
}

package auth

import (
	"encoding/base64"
	"fmt"
	"os"
	"strings"
)

// ReadKey reads a token key as Apache Pulsar's tokenSecretKey and
// tokenPublicKey settings name one: "file:PATH" (the file's bytes, raw or
// PEM; "file:///abs" too) or "env:VAR" (base64, as `pulsar tokens
// create-secret-key --base64` prints it, or PEM as it is). name says
// which setting in errors; lookupEnv nil means os.LookupEnv. The broker's
// flags and a pipeline file's control section read their keys with it.
func ReadKey(name, spec string, lookupEnv func(string) (string, bool)) ([]byte, error) {
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
		if strings.HasPrefix(strings.TrimSpace(v), "-----BEGIN") {
			return []byte(v), nil
		}
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("%s: environment variable %s: want the key in base64 (as `pulsar tokens create-secret-key --base64` prints) or PEM: %v",
				name, strings.TrimPrefix(spec, "env:"), err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("%s: want file:PATH or env:VAR", name)
}

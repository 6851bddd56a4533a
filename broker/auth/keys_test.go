package auth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ReadKey takes a file's bytes, an environment variable's base64 or PEM,
// and says what is wrong with anything else, naming the setting.
func TestReadKeyFromFilesAndTheEnvironment(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "secret.key")
	if err := os.WriteFile(key, []byte{0, 1, 2, 255}, 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"B64": "AAEC/w==", "PEM": "-----BEGIN PUBLIC KEY-----\nx\n", "BAD": "not base64!"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for _, c := range []struct{ spec, want, err string }{
		{"file:" + key, "\x00\x01\x02\xff", ""},
		{"file://" + key, "\x00\x01\x02\xff", ""},
		{"env:B64", "\x00\x01\x02\xff", ""},
		{"env:PEM", env["PEM"], ""},
		{"file:" + empty, "", "k: " + empty + " is empty"},
		{"file:", "", "k: file: without a path"},
		{"env:NONE", "", "k: environment variable NONE is empty or unset"},
		{"env:BAD", "", "k: environment variable BAD: want the key in base64"},
		{"the-key-itself", "", "k: want file:PATH or env:VAR"},
	} {
		b, err := ReadKey("k", c.spec, lookup)
		switch {
		case c.err == "" && (err != nil || string(b) != c.want):
			t.Errorf("%s: %q, %v; want %q", c.spec, b, err, c.want)
		case c.err != "" && (err == nil || !strings.HasPrefix(err.Error(), c.err)):
			t.Errorf("%s: %v, want an error starting %q", c.spec, err, c.err)
		}
	}
}

// ReadSecret takes a file's bytes and a variable's value as they are
// (no base64), and refuses an empty one and anything but file: or env:,
// naming the setting.
func TestReadSecret(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte("tok-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"TOK": "dG9r", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for spec, want := range map[string]string{"file:" + path: "tok-from-file\n", "file://" + path: "tok-from-file\n", "env:TOK": "dG9r"} {
		if b, err := ReadSecret("--token", spec, lookup); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", spec, b, err, want)
		}
	}
	for spec, want := range map[string]string{
		"env:EMPTY": "--token: environment variable EMPTY is empty or unset",
		"env:NONE":  "--token: environment variable NONE is empty or unset",
		"file:":     "--token: file: without a path",
		"tok":       "--token: want file:PATH or env:VAR, not the secret itself: ps shows command lines to every user (write it to a file readable only by you and give file:PATH, or export it and give env:VAR)",
	} {
		if _, err := ReadSecret("--token", spec, lookup); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %s", spec, err, want)
		}
	}
}

package benchrun

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A handler config is a JSON object given as is or as @FILE; "" is the
// default; anything but an object is refused saying so.
func TestParseHandlerConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(`{"delay": "1ms"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if cfg, err := ParseHandlerConfig(""); cfg != nil || err != nil {
		t.Errorf(`"": %v, %v`, cfg, err)
	}
	for _, s := range []string{`{"delay": "1ms"}`, "@" + path} {
		if cfg, err := ParseHandlerConfig(s); err != nil || cfg["delay"] != "1ms" {
			t.Errorf("%s: %v, %v", s, cfg, err)
		}
	}
	for s, want := range map[string]string{`["a"]`: "want a JSON object: ", "null": "want a JSON object, got null", "@/no/such/config.json": "open /no/such/config.json"} {
		if _, err := ParseHandlerConfig(s); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: %v, want %s...", s, err, want)
		}
	}
}

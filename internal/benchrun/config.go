package benchrun

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
)

// ParseHandlerConfig reads HandlerOptions.Config as `streamrun bench
// pipeline --config` gives it: a JSON object, or "@FILE" naming a file
// that holds one; "" is nil (the default config).
func ParseHandlerConfig(s string) (map[string]any, error) {
	if s == "" {
		return nil, nil
	}
	text := []byte(s)
	if name, ok := strings.CutPrefix(s, "@"); ok {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		text = b
	}
	var cfg map[string]any
	if err := json.Unmarshal(text, &cfg); err != nil {
		return nil, fmt.Errorf("want a JSON object: %w", err)
	}
	if cfg == nil {
		return nil, errors.New("want a JSON object, got null")
	}
	return cfg, nil
}

package pipelines

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
)

// checkPin checks handler.sha256 alone: "" when it is unset or well
// formed, else what is wrong with it.
func (h *Handler) checkPin() string {
	switch {
	case h.SHA256 == "":
		return ""
	case h.Package != "":
		return "pins a plugin binary or a script; a package's binary is built at start (pin the built binary and use plugin:)"
	case len(h.SHA256) != 64 || strings.Trim(strings.ToLower(h.SHA256), "0123456789abcdef") != "":
		return fmt.Sprintf("%q: want 64 hex digits, as sha256sum prints", h.SHA256)
	}
	return ""
}

// PinError is a handler file whose SHA-256 is not the one its pipeline
// pins.
type PinError struct {
	File     string
	Expected string // as the pipeline file pins it
	Actual   string // the file's now
}

func (e *PinError) Error() string {
	return fmt.Sprintf("handler %s: SHA-256 is %s, but handler.sha256 pins %s: refusing to run it (if the new file is trusted, put its digest in the pipeline file)",
		e.File, e.Actual, e.Expected)
}

// VerifyPin checks that the file h runs (its plugin or script) has the
// SHA-256 h pins: nil when it does or nothing is pinned, a *PinError when
// it differs, another error when the file cannot be read.
func (h *Handler) VerifyPin() error {
	file := h.Plugin
	if file == "" {
		file = h.Script
	}
	if h.SHA256 == "" || file == "" {
		return nil
	}
	got, err := FileSHA256(file)
	if err != nil {
		return fmt.Errorf("handler %s: hash it to check handler.sha256: %w", file, err)
	}
	if want := strings.ToLower(h.SHA256); got != want {
		return &PinError{File: file, Expected: want, Actual: got}
	}
	return nil
}

// FileSHA256 is the hex SHA-256 of a file's content.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sum := sha256.New()
	if _, err := io.Copy(sum, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(sum.Sum(nil)), nil
}

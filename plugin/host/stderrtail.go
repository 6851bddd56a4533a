package host

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
)

// stderrTail keeps the last things a plugin wrote to its stderr (lines,
// slog records, a Go crash trace, Python tracebacks), so that a plugin
// that ends before its handshake can be reported with what it said: a
// Python script whose interpreter lacks the SDK says why only there.
type stderrTail struct {
	mu      sync.Mutex
	entries []tailEntry // oldest first, at most tailEntries
}

type tailEntry struct {
	text string
	// traceback: a Python traceback, whose end (the exception) matters
	// most; other entries are quoted from their start (a Go panic's
	// value and first frames).
	traceback bool
}

const (
	tailEntries   = 8   // entries kept
	tailLines     = 20  // lines quoted at most
	tailLineBytes = 500 // bytes quoted of one line at most
)

// add keeps text as the newest entry. A nil tail keeps nothing.
func (t *stderrTail) add(text string, traceback bool) {
	if t == nil || text == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.entries) == tailEntries {
		copy(t.entries, t.entries[1:])
		t.entries = t.entries[:tailEntries-1]
	}
	t.entries = append(t.entries, tailEntry{text: text, traceback: traceback})
}

// quote is the newest entries, at most tailLines lines in all, each
// indented by two spaces; "" when nothing was written.
func (t *stderrTail) quote() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	entries := append([]tailEntry(nil), t.entries...)
	t.mu.Unlock()
	var parts [][]string // newest first
	budget := tailLines
	for i := len(entries) - 1; i >= 0 && budget > 0; i-- {
		lines := strings.Split(entries[i].text, "\n")
		if len(lines) > budget {
			if entries[i].traceback && budget > 2 {
				// The header, then the innermost frames and the exception.
				lines = append([]string{lines[0], "..."}, lines[len(lines)-(budget-2):]...)
			} else {
				lines = append(lines[:budget-1:budget-1], "...")
			}
		}
		budget -= len(lines)
		parts = append(parts, lines)
	}
	var b strings.Builder
	for i := len(parts) - 1; i >= 0; i-- {
		for _, line := range parts[i] {
			if len(line) > tailLineBytes {
				line = strings.ToValidUTF8(line[:tailLineBytes], "") + "..."
			}
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString("  ")
			b.WriteString(line)
		}
	}
	return b.String()
}

// recordText is a plugin's slog record as one line, for the tail:
// "LEVEL message key=value ...".
func recordText(level slog.Level, msg string, attrs []slog.Attr) string {
	var b strings.Builder
	b.WriteString(level.String())
	b.WriteByte(' ')
	b.WriteString(msg)
	for _, a := range attrs {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	return b.String()
}

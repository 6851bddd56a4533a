package main

import (
	"bytes"
	"context"
	"io/fs"
	"strings"
	"testing"
)

// Every help file renders, names only values the code fills in, and is
// the help of a command: a typo in a {{.Name}}, or a file no command
// prints, fails here rather than in front of a user.
func TestEveryHelpTextRenders(t *testing.T) {
	names, err := fs.Glob(helpFiles, "help/*.txt")
	if err != nil || len(names) < len(commands()) {
		t.Fatalf("help files %v (%v), want one per command at least (%d)", names, err, len(commands()))
	}
	for _, path := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(path, "help/"), ".txt")
		text := helpText(name)
		if strings.Contains(text, "help text is broken") || strings.Contains(text, "{{") || !strings.HasSuffix(text, "\n") {
			t.Errorf("help/%s.txt renders as %q", name, text)
		}
		if name == "waits" {
			continue // a paragraph of produce, consume and state
		}
		var out, errs bytes.Buffer
		if code := run(context.Background(), []string{name, "--help"}, &out, &errs); code != exitOK || !strings.HasPrefix(out.String(), text) {
			t.Errorf("streamrun %s --help: exit %d, does not start with help/%s.txt:\n%s%s", name, code, name, out.String(), errs.String())
		}
	}
}

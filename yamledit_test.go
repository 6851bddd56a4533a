package streamrun

import (
	"strings"
	"testing"
)

// A pause edits one line of the file and nothing else: the value where
// the field is written, or a line under the pipeline's name where it is
// not; a pipeline written in flow style, or missing, is refused.
func TestSetPipelineFieldTouchesOneLine(t *testing.T) {
	const file = `# orders
pipelines:
  - name: a   # first
    source: {topics: [a], subscription: a}
  - name: b
    paused: "false"
    source: {topics: [b], subscription: b}
  - {name: c, source: {topics: [c], subscription: c}}
`
	for _, c := range []struct {
		pipeline string
		v        bool
		want     string // the file's lines that differ, "" for a refusal
		err      string
	}{
		{"a", true, "  - name: a   # first\n    paused: true\n", ""},
		{"b", true, "    paused: true\n", ""},
		{"b", false, "    paused: false\n", ""},
		{"c", true, "", "flow style"},
		{"d", true, "", `no pipeline named "d"`},
	} {
		got, err := setPipelineField("p.yaml", []byte(file), c.pipeline, "paused", c.v)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, want %q", c.pipeline, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.pipeline, err)
		}
		if !strings.Contains(string(got), c.want) {
			t.Errorf("%s=%v:\n%s\nwant it to hold\n%s", c.pipeline, c.v, got, c.want)
		}
		// Every other line is as it was.
		gl, fl := strings.Split(string(got), "\n"), strings.Split(file, "\n")
		extra := len(gl) - len(fl)
		if extra < 0 || extra > 1 {
			t.Errorf("%s: %d lines, the file had %d", c.pipeline, len(gl), len(fl))
		}
		diff := 0
		for i, j := 0, 0; i < len(fl) && j < len(gl); i, j = i+1, j+1 {
			if fl[i] != gl[j] {
				diff++
				if extra == 1 && strings.HasPrefix(strings.TrimSpace(gl[j]), "paused:") {
					i--
				}
			}
		}
		if diff != 1 {
			t.Errorf("%s: %d lines differ, want 1:\n%s", c.pipeline, diff, got)
		}
	}
}

package control_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamrun/streamrun/control"
)

// The client's typed calls: the pipelines with their state, a pause
// written to the file, a dry run's plan, and a file that does not load
// refused with its problems.
func TestClientCallsTheAPI(t *testing.T) {
	h := startHost(t, control.Options{})
	c := &control.Client{URL: strings.TrimSuffix(h.srv.URL(), "/")}
	ps, err := c.Pipelines(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range ps {
		names = append(names, p.Name)
	}
	if strings.Join(names, ",") != "up,other" || len(ps[0].Instances) != 2 {
		t.Fatalf("pipelines %v (%d instances of up), want up and other", names, len(ps[0].Instances))
	}
	p, err := c.SetPaused(h.ctx, "up", true)
	if err != nil || !p.Paused || p.State != "paused" {
		t.Fatalf("pause: %+v, %v", p, err)
	}
	if b, _ := os.ReadFile(h.file); !strings.Contains(string(b), "\n    paused: true\n") {
		t.Fatalf("the file after the pause:\n%s", b)
	}
	orig, _ := os.ReadFile(h.file)
	next := strings.Replace(string(orig), "subscription: other", "subscription: other2", 1)
	plan, err := c.Reload(h.ctx, h.file, []byte(next), true)
	if err != nil {
		t.Fatal(err)
	}
	changed := ""
	for _, pc := range plan.Pipelines {
		if pc.Action == "changed" {
			changed = pc.Pipeline + " " + pc.Fields[0].Path + "=" + pc.Fields[0].Reload
		}
	}
	if plan.Applied || changed != "other source.subscription=source" {
		t.Fatalf("dry run: applied %v, changed %q", plan.Applied, changed)
	}
	// ReloadFile: the file as it is on disk, by a path relative to the
	// working directory, for the run's file of its absolute path.
	if err := os.WriteFile(h.file, []byte(next), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Dir(h.file))
	plan, err = c.ReloadFile(h.ctx, filepath.Base(h.file), true)
	if err != nil || plan.Applied || plan.File != h.file || len(plan.Pipelines) != 2 || plan.Pipelines[0].Pipeline != "other" || plan.Pipelines[0].Action != "changed" {
		t.Fatalf("ReloadFile dry run: %+v, %v", plan, err)
	}
	if err := os.WriteFile(h.file, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	var pe *os.PathError
	if _, err := c.ReloadFile(h.ctx, "no-such-file.yaml", true); !errors.As(err, &pe) {
		t.Fatalf("ReloadFile of a missing file: %v, want the *os.PathError", err)
	}
	_, err = c.Reload(h.ctx, h.file, []byte("pipelines: [{name: x}]\n"), true)
	var se *control.StatusError
	if !errors.As(err, &se) || len(se.Problems) == 0 {
		t.Fatalf("a file that does not load: %v, want a StatusError with its problems", err)
	}
}

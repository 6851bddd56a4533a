package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/streamrun/streamrun"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/control"
)

// streamrun ctl against a running host (a pipeline of steps alone on the
// embedded broker, its control API on loopback): the listing, a pause and
// a resume written to the file, a dry run of a bad edit with the
// loader's FILE:LINE:COL, a dry run and an apply of a good one, and the
// refusals' exit statuses.
func TestCtlActsOnARunningHost(t *testing.T) {
	ctx := brokertest.Context(t, 2*time.Minute)
	dir := t.TempDir()
	file := filepath.Join(dir, "p.yaml")
	const good = `pipelines:
  - name: p
    source: {topics: [ctl-in], subscription: p}
    steps: [{filter: 'true'}]
    outputs: [ctl-out]
`
	if err := os.WriteFile(file, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(brokertest.LogWriter(t, "run"), nil))
	r, err := streamrun.Start(ctx, streamrun.Options{Files: []string{file}, Logger: logger,
		Broker: streamrun.BrokerOptions{Memory: true, Listen: "127.0.0.1:0", HTTP: "-"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.Stop()
		if err := r.Wait(); err != nil {
			t.Errorf("the run: %v", err)
		}
	})
	brokertest.Eventually(t, time.Minute, "the pipeline to run", func() bool { return r.Host().Ready() == nil })
	srv, err := control.Serve(r, control.Options{Addr: "127.0.0.1:0", Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.CloseQuietly)

	ctl := func(want int, args ...string) (string, string) {
		t.Helper()
		var out, errs bytes.Buffer
		code := run(context.Background(), append([]string{"ctl", "--url", srv.URL()}, args...), &out, &errs)
		if code != want {
			t.Fatalf("ctl %v: exit %d, want %d\nstdout: %s\nstderr: %s", args, code, want, out.String(), errs.String())
		}
		return out.String(), errs.String()
	}
	if out, _ := ctl(0, "pipelines"); !strings.Contains(out, "PIPELINE") || !regexp.MustCompile(`(?m)^p\s+healthy\s`).MatchString(out) {
		t.Errorf("ctl pipelines:\n%s", out)
	}
	if out, _ := ctl(0, "pause", "p"); out != "p: paused\n" {
		t.Errorf("ctl pause: %q", out)
	}
	if b, _ := os.ReadFile(file); !strings.Contains(string(b), "    paused: true\n") {
		t.Errorf("the file after ctl pause:\n%s", b)
	}
	if out, _ := ctl(0, "resume", "p"); out != "p: healthy\n" {
		t.Errorf("ctl resume: %q", out)
	}
	if _, errs := ctl(1, "pause", "nope"); !strings.Contains(errs, `no pipeline named "nope"`) {
		t.Errorf("ctl pause nope: %s", errs)
	}

	// A bad edit: the dry run and the apply say where, and change nothing.
	now, _ := os.ReadFile(file)
	bad := strings.Replace(string(now), "subscription: p}", "subscription: p, type: sharred}", 1)
	if err := os.WriteFile(file, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"dry-run", "apply"} {
		if _, errs := ctl(1, sub, file); !strings.Contains(errs, file+":4:55: pipelines[0].source.type") || !strings.Contains(errs, "source.type") {
			t.Errorf("ctl %s of a bad file: %s", sub, errs)
		}
	}
	good2 := strings.Replace(string(now), "    outputs: [ctl-out]\n", "    outputs: [ctl-out]\n    tap: true\n", 1)
	if err := os.WriteFile(file, []byte(good2), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _ := ctl(0, "dry-run", file); out != "p: changed [flow]: tap (flow)\n" {
		t.Errorf("ctl dry-run: %q", out)
	}
	if out, _ := ctl(0, "apply", file); !strings.HasSuffix(out, "applied\n") {
		t.Errorf("ctl apply: %q", out)
	}
	if out, _ := ctl(0, "--output", "json", "pipelines"); !strings.Contains(out, `"tap": true`) {
		t.Errorf("ctl pipelines after apply:\n%s", out)
	}
	ctl(2)
	ctl(2, "frobnicate")
	ctl(2, "pause")
	if _, errs := ctl(1, "--url", "http://127.0.0.1:1", "pipelines"); !strings.Contains(errs, "streamrun ctl") {
		t.Errorf("ctl to nothing: %s", errs)
	}
}

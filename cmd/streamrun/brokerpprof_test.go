package main

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// broker --pprof serves Go's profiler at the URL its ready line names, and
// stops serving when the broker stops; without the flag the line has no
// pprof_url.
func TestBrokerPprof(t *testing.T) {
	r := start(t, "broker", "--memory", "--listen", "127.0.0.1:0", "--http", "-", "--pprof", "127.0.0.1:0", "--log-level", "error")
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(r.stdout.String(), "\n") {
		if time.Now().After(deadline) {
			t.Fatalf("no ready line: %s", r.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	m := regexp.MustCompile(`pprof_url=(\S+)`).FindStringSubmatch(r.stdout.String())
	if m == nil {
		t.Fatalf("ready line without pprof_url: %s", r.stdout.String())
	}
	resp, err := http.Get(m[1] + "cmdline")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(body) == 0 {
		t.Fatalf("GET %scmdline: %s %q", m[1], resp.Status, body)
	}
	if code := r.stop(); code != 0 {
		t.Fatalf("exit %d: %s", code, r.stderr.String())
	}
	if _, err := http.Get(m[1] + "cmdline"); err == nil {
		t.Fatal("the profiler still answers after the broker stopped")
	}

	plain := start(t, "broker", "--memory", "--listen", "127.0.0.1:0", "--http", "-", "--log-level", "error")
	for !strings.Contains(plain.stdout.String(), "\n") {
		if time.Now().After(deadline) {
			t.Fatalf("no ready line: %s", plain.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if strings.Contains(plain.stdout.String(), "pprof_url") {
		t.Fatalf("pprof_url without --pprof: %s", plain.stdout.String())
	}
	plain.stop()
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

func runArgs(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestDispatch(t *testing.T) {
	if code, _, errs := runArgs(); code != 2 || !strings.Contains(errs, "Usage") {
		t.Errorf("no arguments: %d %q", code, errs)
	}
	if code, out, _ := runArgs("--help"); code != 0 || !strings.Contains(out, "broker") {
		t.Errorf("--help: %d %q", code, out)
	}
	if code, _, errs := runArgs("frobnicate"); code != 2 || !strings.Contains(errs, `unknown command "frobnicate"`) {
		t.Errorf("unknown command: %d %q", code, errs)
	}
	if code, out, _ := runArgs("version"); code != 0 || !strings.HasPrefix(out, "streamrun ") {
		t.Errorf("version: %d %q", code, out)
	}
}

func TestBrokerFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--nope"},
		{"--brokers", "0"},
		{"--memory", "--data", "/tmp/x"},
		{"--tls-cert", "c.pem"},
		{"--log-format", "xml"},
		{"--log-level", "loud"},
		{"extra"},
	} {
		code, _, errs := runArgs(append([]string{"broker"}, args...)...)
		if code != 2 || !strings.Contains(errs, "streamrun broker:") {
			t.Errorf("broker %v: exit %d, stderr %q", args, code, errs)
		}
	}
	if code, out, _ := runArgs("broker", "--help"); code != 0 || !strings.Contains(out, "--data") {
		t.Errorf("broker --help: %d %q", code, out)
	}
}

func TestBrokerRunsUntilCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		code := runBroker(ctx, []string{"--memory", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--brokers", "2", "--log-level", "error"}, pw, &errb)
		pw.Close()
		done <- code
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("no ready line: %v (exit %d)", err, <-done)
	}
	for _, want := range []string{"ready", "service_url=pulsar://127.0.0.1:", "admin_url=http://127.0.0.1:", "brokers=2", "data=memory"} {
		if !strings.Contains(line, want) {
			t.Errorf("ready line %q lacks %q", line, want)
		}
	}
	cancel()
	go io.Copy(io.Discard, pr)
	if code := <-done; code != 0 {
		t.Fatalf("exit %d after cancel: %s", code, errb.String())
	}
}

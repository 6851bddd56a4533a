package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/streamrun/streamrun/pulsarwire"
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
		{"--max-connections", "-1"},
		{"--max-connections-per-ip", "-5"},
		{"--handshake-timeout", "-1s"},
	} {
		code, _, errs := runArgs(append([]string{"broker"}, args...)...)
		if code != 2 || !strings.Contains(errs, "streamrun broker:") {
			t.Errorf("broker %v: exit %d, stderr %q", args, code, errs)
		}
	}
	if code, out, _ := runArgs("broker", "--help"); code != 0 || !strings.Contains(out, "--data") || !strings.Contains(out, "--max-connections-per-ip") {
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

// The connection limit flags reach the broker: with one connection per IP
// a second is refused with an ERROR saying so, and the first, which never
// sends CONNECT, is closed after --handshake-timeout.
func TestBrokerConnectionLimitFlags(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- runBroker(ctx, []string{"--memory", "--listen", "127.0.0.1:0", "--http", "-", "--log-level", "error",
			"--max-connections-per-ip", "1", "--handshake-timeout", "300ms"}, pw, &errb)
		pw.Close()
	}()
	defer func() {
		cancel()
		go io.Copy(io.Discard, pr)
		if code := <-done; code != 0 {
			t.Errorf("exit %d after cancel: %s", code, errb.String())
		}
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no ready line: %v", err)
	}
	_, rest, _ := strings.Cut(line, "service_url=pulsar://")
	addr, _, _ := strings.Cut(rest, " ")
	first, err := net.Dial("tcp", strings.TrimSpace(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	second, err := net.Dial("tcp", strings.TrimSpace(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	second.SetReadDeadline(time.Now().Add(10 * time.Second))
	f, err := pulsarwire.NewReader(second, 1<<20).Next()
	if err != nil || f.Cmd.GetError() == nil || !strings.Contains(f.Cmd.GetError().GetMessage(), "(1 per IP)") {
		t.Fatalf("second connection: %v %v, want the per-IP refusal", f.Cmd, err)
	}
	first.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := first.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("the silent first connection: read %d, %v; want it closed by the broker", n, err)
	}
}

package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/subscribe"
)

// running is a command run in the background.
type running struct {
	stdout, stderr brokertest.SyncBuffer
	cancel         context.CancelFunc
	done           chan int
}

func start(t *testing.T, args ...string) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan int, 1)}
	go func() { r.done <- run(ctx, args, &r.stdout, &r.stderr) }()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// waitFor waits until stderr holds every one of want, or fails.
func (r *running) waitFor(t *testing.T, want ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := r.stderr.String()
		missing := ""
		for _, w := range want {
			if !strings.Contains(s, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			return
		}
		select {
		case code := <-r.done:
			r.done <- code
			t.Fatalf("exited %d before stderr held %q:\n%s", code, missing, s)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("stderr never held %q:\n%s", missing, s)
		}
	}
}

// stop interrupts the command and returns its exit status.
func (r *running) stop() int {
	r.cancel()
	code := <-r.done
	r.done <- code
	return code
}

// closedPort is a local address nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// Every bad flag value of every command: exit 2, one line saying what is
// wrong prefixed by the command, one line of hint. Nothing else.
func TestUsageErrorsHaveOneShape(t *testing.T) {
	for _, args := range [][]string{
		{"produce", "--url", "http://127.0.0.1:8080", "-t", "x", "-m", "a"},
		{"produce", "--url", "nohost", "-t", "x", "-m", "a"},
		{"produce", "--url", "pulsar://h:port", "-t", "x", "-m", "a"},
		{"produce", "-t", "x", "-m", "a", "--log-format", "xml"},
		{"produce", "-t", "x", "-m", "a", "--connect-timeout", "0s"},
		{"produce", "-t", "persistent://bad tenant/default/x", "-m", "a"},
		{"produce", "--nope"},
		{"consume", "--url", "https://127.0.0.1:8443", "-t", "x", "-s", "s"},
		{"consume", "--url", "pulsar://", "-t", "x", "-s", "s"},
		{"consume", "-t", "x", "-s", "s", "--retries", "-1"},
		{"consume", "-t", "x"},
		{"consume", "-t", "x", "-s", "s", "--token", "file:/nonexistent/token"},
		{"consume", "-t", "x", "-s", "s", "--token", "env:STREAMRUN_TEST_UNSET_VARIABLE"},
		{"produce", "-t", "x", "-m", "a", "--tls-ca", "/nonexistent/ca.pem"},
		{"broker", "--listen", "nonsense"},
		{"broker", "--http", "127.0.0.1:http-port"},
		{"broker", "--advertised-host", "host:6650"},
		{"broker", "--pprof", "nonsense"},
		{"broker", "--brokers", "0"},
		{"broker", "--tls-cert", "/nonexistent/c.pem", "--tls-key", "/nonexistent/k.pem"},
		{"broker", "--log-format", "xml"},
		{"broker", "--nope"},
		{"broker", "extra"},
		{"version", "extra"},
		{"version", "-o", "yaml"},
		{"version", "--nope"},
		{"health", "--timeout", "0s"},
		{"health", "extra"},
	} {
		code, stdout, stderr := runArgs(args...)
		lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
		want0 := "streamrun " + args[0] + ": "
		hint := "Run 'streamrun " + args[0] + " --help' for usage."
		if code != 2 || len(lines) != 2 || !strings.HasPrefix(lines[0], want0) || lines[1] != hint || stdout != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr:\n%s\nwant exit 2, %q..., and %q", args, code, stdout, stderr, want0, hint)
		}
		if strings.Count(lines[0], "streamrun") != 1 {
			t.Errorf("%v: prefix repeated: %s", args, lines[0])
		}
	}
	// An HTTP URL is explained.
	if _, _, stderr := runArgs("produce", "--url", "http://127.0.0.1:8080", "-t", "x", "-m", "a"); !strings.Contains(stderr, "this looks like HTTP; the admin API is not the service URL") {
		t.Errorf("--url http://...: %s", stderr)
	}
}

// conventionCommands are the commands that follow cli.go's conventions
// (run and validate adopt them when they move to cmdIO).
var conventionCommands = []string{"broker", "produce", "consume", "topics", "health", "version"}

// streamrun help CMD is CMD --help, on stdout, for every command;
// version --help works too.
func TestHelpForEveryCommand(t *testing.T) {
	for _, name := range conventionCommands {
		c, ok := lookup(name)
		if !ok {
			t.Fatalf("no command %s", name)
		}
		code, out, errs := runArgs("help", c.name)
		code2, out2, _ := runArgs(c.name, "--help")
		if code != 0 || code2 != 0 || out != out2 || errs != "" || !strings.Contains(out, "Usage: streamrun "+c.name) || !strings.Contains(out, "Flags:") {
			t.Errorf("help %s: exit %d/%d, stderr %q, stdout:\n%s\n--help:\n%s", c.name, code, code2, errs, out, out2)
		}
	}
	if code, _, errs := runArgs("help", "nope"); code != 2 || !strings.Contains(errs, `unknown command "nope"`) {
		t.Errorf("help nope: %d %q", code, errs)
	}
}

// The help of a client command says which flag bounds which wait.
func TestClientHelpSaysWhatBoundsEachWait(t *testing.T) {
	for _, cmd := range []string{"produce", "consume"} {
		_, out, _ := runArgs(cmd, "--help")
		for _, want := range []string{"Waits and what bounds them", "connecting to --url         --connect-timeout", `refusing "not now" --retries`, "closing at the end          --close-timeout"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s --help lacks %q:\n%s", cmd, want, out)
			}
		}
	}
}

// version prints the module version, the commit and the Go version, as
// text or JSON.
func TestVersionFromBuildInfo(t *testing.T) {
	code, out, _ := runArgs("version")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "streamrun ") || !strings.HasPrefix(lines[1], "commit ") || !strings.HasPrefix(lines[2], "go1.") {
		t.Fatalf("version: exit %d:\n%s", code, out)
	}
	code, out, _ = runArgs("version", "-o", "json")
	if code != 0 || !strings.Contains(out, `"go_version": "go1.`) || !strings.Contains(out, `"commit"`) {
		t.Fatalf("version -o json: exit %d:\n%s", code, out)
	}
}

// A pulsar:// URL at an HTTP port fails at once with the reason, not with
// a frame size and not after retries.
func TestURLAtAnHTTPPortIsExplained(t *testing.T) {
	c := brokertest.Start(t)
	url := "pulsar://" + strings.TrimPrefix(c.AdminURL(), "http://")
	code, _, stderr := runArgs("produce", "--url", url, "-t", "x", "-m", "a")
	if code != 1 || !strings.Contains(stderr, "this looks like HTTP; the admin API is not the service URL") || strings.Contains(stderr, "attempt 1 failed") {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
}

// A refused port and an unknown host are retried (the seeds' rule) but
// never in silence: the first failure prints at once what, why, when the
// next attempt is and which flag bounds it; an interrupt then ends it in
// the one wording.
func TestUnreachableBrokerIsAnnounced(t *testing.T) {
	for _, tc := range []struct{ url, why string }{
		{"pulsar://" + closedPort(t), "connection refused"},
		{"pulsar://nohost.invalid:6650", "nohost.invalid"},
	} {
		r := start(t, "produce", "--url", tc.url, "-t", "x", "-m", "a")
		r.waitFor(t, "connect to "+tc.url+": attempt 1 failed", tc.why, "next attempt in 5s", "--retries N bounds them")
		if code := r.stop(); code != 1 || !strings.HasSuffix(r.stderr.String(), "streamrun produce: interrupted\n") {
			t.Fatalf("%s: exit %d:\n%s", tc.url, code, r.stderr.String())
		}
	}
	// --retries bounds it.
	code, _, stderr := runArgs("produce", "--url", "pulsar://"+closedPort(t), "-t", "x", "-m", "a", "--retries", "1")
	if code != 1 || !strings.Contains(stderr, "gave up after 1 attempt:") {
		t.Fatalf("--retries 1: exit %d:\n%s", code, stderr)
	}
}

// A broker advertising a host this client cannot reach: produce says what
// it waits for, and why, at the default level.
func TestAdvertisedHostElsewhereIsAnnounced(t *testing.T) {
	c := brokertest.Start(t, func(o *broker.Options) { o.AdvertisedHost = "other-host.invalid" })
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(c.ServiceURL(), "pulsar://"))
	r := start(t, "produce", "--url", "pulsar://127.0.0.1:"+port, "-t", "adv", "-m", "a")
	r.waitFor(t, "create producer for persistent://public/default/adv: attempt 1 failed", "other-host.invalid:"+port, "--advertised-host", "next attempt in 5s")
	// The same wording for an interrupt here as while connecting or sending.
	if code := r.stop(); code != 1 || !strings.HasSuffix(r.stderr.String(), "streamrun produce: interrupted\n") {
		t.Fatalf("exit %d:\n%s", code, r.stderr.String())
	}
}

// A second Exclusive consumer waits, saying so; with --retries 1 it fails
// with the server's error, its operation named once.
func TestSecondExclusiveConsumerIsAnnounced(t *testing.T) {
	c := brokertest.Start(t)
	topic := fmt.Sprintf("persistent://public/default/excl-%d", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pc, err := pool.New(ctx, pool.Options{ServiceURL: c.ServiceURL()})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close(ctx)
	first, err := subscribe.New(ctx, pc, subscribe.Options{Topics: []string{topic}, Subscription: "one", Type: subscribe.Exclusive})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close(ctx)

	r := start(t, "consume", "--url", c.ServiceURL(), "-t", topic, "-s", "one", "--type", "exclusive")
	r.waitFor(t, "subscribe one to "+topic+": attempt 1 failed", "ConsumerBusy", "next attempt in 5s", "--retries N bounds them")
	if code := r.stop(); code != 0 || !strings.Contains(r.stderr.String(), "streamrun consume: interrupted\n") {
		t.Fatalf("interrupted: exit %d:\n%s", code, r.stderr.String())
	}

	code, _, stderr := runArgs("consume", "--url", c.ServiceURL(), "-t", topic, "-s", "one", "--type", "exclusive", "--retries", "1")
	if code != 1 || !strings.Contains(stderr, "ConsumerBusy") || strings.Count(stderr, "subscribe one to") != 1 {
		t.Fatalf("--retries 1: exit %d:\n%s", code, stderr)
	}
}

// consume says once it is subscribed and waiting, and ends with a summary
// (count, rate, last id), interrupted or not.
func TestConsumeSaysSubscribedAndSummarizes(t *testing.T) {
	c := brokertest.Start(t)
	topic := fmt.Sprintf("persistent://public/default/said-%d", time.Now().UnixNano())
	r := start(t, "consume", "--url", c.ServiceURL(), "-t", topic, "-s", "s1", "--type", "exclusive", "-n", "3")
	r.waitFor(t, "subscribed to "+topic+" as s1 (Exclusive), waiting for messages")
	publishFor(t, c.ServiceURL(), topic, 3)
	if code := <-r.done; code != 0 {
		t.Fatalf("exit %d:\n%s", code, r.stderr.String())
	}
	r.done <- 0
	if !strings.Contains(r.stderr.String(), "consumed 3 messages in ") || !strings.Contains(r.stderr.String(), "last message id ") {
		t.Fatalf("no summary:\n%s", r.stderr.String())
	}

	r = start(t, "consume", "--url", c.ServiceURL(), "-t", topic, "-s", "s2")
	r.waitFor(t, "subscribed to "+topic+" as s2 (Shared), waiting for messages")
	if code := r.stop(); code != 0 || !strings.Contains(r.stderr.String(), "streamrun consume: interrupted\nconsumed 0 messages in ") {
		t.Fatalf("interrupted: exit %d:\n%s", code, r.stderr.String())
	}
}

// produce -v logs the client's connection events; one message is "1
// message".
func TestProduceVerboseAndPlurals(t *testing.T) {
	c := brokertest.Start(t)
	code, stdout, stderr := runArgs("produce", "--url", c.ServiceURL(), "-t", "plural", "-m", "a", "-v")
	if code != 0 || !strings.HasPrefix(stdout, "produced 1 message to plural in ") {
		t.Fatalf("exit %d: %s%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "msg=connected") {
		t.Fatalf("-v logged no connection:\n%s", stderr)
	}
	if _, _, stderr := runArgs("produce", "--url", c.ServiceURL(), "-t", "plural", "-m", "a"); strings.Contains(stderr, "msg=connected") {
		t.Fatalf("without -v:\n%s", stderr)
	}
}

// broker --http - prints no empty admin_url=.
func TestBrokerWithoutHTTPHasNoAdminURL(t *testing.T) {
	r := start(t, "broker", "--memory", "--listen", "127.0.0.1:0", "--http", "-", "--log-level", "error")
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(r.stdout.String(), "\n") {
		if time.Now().After(deadline) {
			t.Fatalf("no ready line: %s", r.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if line := r.stdout.String(); strings.Contains(line, "admin_url") || !strings.Contains(line, "service_url=pulsar://") {
		t.Fatalf("ready line: %s", line)
	}
	if code := r.stop(); code != 0 || !strings.Contains(r.stderr.String(), "streamrun broker: interrupted") {
		t.Fatalf("exit %d: %s", code, r.stderr.String())
	}
}

// health answers 0 for a broker's health endpoint and 1 for a port
// nothing listens on, or an endpoint that says it is not ready, quoting
// why.
func TestHealth(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "the broker cannot be reached: connect to pulsar://127.0.0.1:1 has failed for 5s")
		fmt.Fprintln(w, "a second line")
	}))
	defer srv.Close()
	if code, _, errs := runArgs("health", "--url", srv.URL+"/readyz"); code != 1 ||
		errs != "streamrun health: "+srv.URL+"/readyz: 503 Service Unavailable: the broker cannot be reached: connect to pulsar://127.0.0.1:1 has failed for 5s\n" {
		t.Errorf("not ready: exit %d: %q", code, errs)
	}
	c := brokertest.Start(t)
	if code, out, errs := runArgs("health", "--url", c.AdminURL()+"/admin/v2/brokers/health"); code != 0 || !strings.HasPrefix(out, "healthy: ") {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	if code, _, errs := runArgs("health", "--url", "http://"+closedPort(t)+"/"); code != 1 || !strings.HasPrefix(errs, "streamrun health: ") {
		t.Fatalf("closed port: exit %d: %s", code, errs)
	}
}

// An interrupt while sending says "interrupted" as one while connecting
// does, and the summary still says what was produced.
func TestProduceInterruptedWhileSending(t *testing.T) {
	c := brokertest.Start(t)
	r := start(t, "produce", "--url", c.ServiceURL(), "-t", "slow", "-m", "a", "-n", "100000", "--rate", "20")
	r.waitFor(t, "sent ")
	if code := r.stop(); code != 1 || !strings.Contains(r.stderr.String(), "streamrun produce: interrupted after ") ||
		!strings.Contains(r.stdout.String(), " of 100000 messages to slow") {
		t.Fatalf("exit %d:\n%s%s", code, r.stdout.String(), r.stderr.String())
	}
}

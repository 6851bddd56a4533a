package interop

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// target is the broker every test in this package talks to.
type target struct {
	// name is "embedded" (in this process), "process" (a `streamrun
	// broker` child process) or "pulsar".
	name string
	// serviceURL is the pulsar:// URL the clients connect to.
	serviceURL string
	// adminURL is the http:// base URL of the admin REST API.
	adminURL string
}

// embedded reports whether the target is streamrun's own broker.
func (t *target) embedded() bool { return t.name != "pulsar" }

var tgt *target

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	var stop func()
	var err error
	tgt, stop, err = startTarget()
	if err != nil {
		fmt.Fprintf(os.Stderr, "interop: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "interop: target %s at %s (admin %s)\n", tgt.name, tgt.serviceURL, tgt.adminURL)
	defer removeBinary()
	defer stop()
	code := m.Run()
	if txnStop != nil {
		txnStop()
	}
	if brokerLog != nil {
		brokerLog.Close()
		if code != 0 {
			fmt.Fprintf(os.Stderr, "interop: the broker's log is kept in %s\n", brokerLog.Name())
		} else {
			os.Remove(brokerLog.Name())
		}
	}
	return code
}

// startTarget reads STREAMRUN_INTEROP_TARGET and brings up (or finds) the
// broker under test.
func startTarget() (*target, func(), error) {
	switch kind := os.Getenv("STREAMRUN_INTEROP_TARGET"); kind {
	case "", "embedded":
		brokers, err := brokerCount()
		if err != nil {
			return nil, nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		t, stop, err := startEmbedded(ctx, brokers, processLog())
		if err != nil {
			return nil, nil, fmt.Errorf("start the embedded broker: %w", err)
		}
		t.adminURL = httpURL(t.adminURL)
		return t, stop, nil
	case "process":
		brokers, err := brokerCount()
		if err != nil {
			return nil, nil, err
		}
		listen, http, err := freeBrokerAddrs(brokers)
		if err != nil {
			return nil, nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // includes go build
		defer cancel()
		b, err := startBrokerProcess(ctx, brokerArgs{listen: listen, http: http, brokers: brokers}, processLog())
		if err != nil {
			return nil, nil, err
		}
		stop := func() {
			if err := b.stop(30 * time.Second); err != nil {
				fmt.Fprintf(os.Stderr, "interop: stop the broker process: %v\n", err)
			}
		}
		return &target{name: "process", serviceURL: b.serviceURL, adminURL: b.adminURL}, stop, nil
	case "pulsar":
		t := &target{
			name:       "pulsar",
			serviceURL: envOr("STREAMRUN_PULSAR_URL", "pulsar://127.0.0.1:6650"),
			adminURL:   httpURL(envOr("STREAMRUN_PULSAR_HTTP", "http://127.0.0.1:8080")),
		}
		return t, func() {}, nil
	default:
		return nil, nil, fmt.Errorf("STREAMRUN_INTEROP_TARGET=%q: want embedded (the default), process or pulsar", kind)
	}
}

// brokerCount reads STREAMRUN_INTEROP_BROKERS: how many brokers the
// embedded or process target runs (default 1).
func brokerCount() (int, error) {
	s := os.Getenv("STREAMRUN_INTEROP_BROKERS")
	if s == "" {
		return 1, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("STREAMRUN_INTEROP_BROKERS=%q: want a positive number", s)
	}
	return n, nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// httpURL makes host:port into http://host:port and drops a trailing slash.
func httpURL(s string) string {
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	return strings.TrimRight(s, "/")
}

// embeddedOnly skips a test that needs streamrun's own broker (a process
// to kill, several brokers, fault injection).
func embeddedOnly(t *testing.T, why string) {
	t.Helper()
	if !tgt.embedded() {
		t.Skipf("embedded broker only (%s); target is %s", why, tgt.name)
	}
}

// brokerLog holds the log of the target broker (embedded or process),
// kept after a failed run and removed after a passing one.
var brokerLog *os.File

// processLog is where the target broker's log goes: stderr with
// STREAMRUN_INTEROP_LOG=1, else a temporary file.
func processLog() io.Writer {
	if os.Getenv("STREAMRUN_INTEROP_LOG") == "1" {
		return os.Stderr
	}
	f, err := os.CreateTemp("", "streamrun-interop-broker-*.log")
	if err != nil {
		return io.Discard
	}
	brokerLog = f
	return f
}

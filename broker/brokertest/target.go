package brokertest

import (
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/streamrun/streamrun/broker"
)

// The environment that points the test kit at Apache Pulsar instead of
// an embedded broker (.ci/run sets both).
const (
	// PulsarURLEnv names the service URL of an Apache Pulsar to run
	// against.
	PulsarURLEnv = "STREAMRUN_PULSAR_URL"
	// PulsarHTTPEnv names its admin API; default http://127.0.0.1:8080.
	PulsarHTTPEnv = "STREAMRUN_PULSAR_HTTP"
)

// A Peer is the broker a test talks to: an embedded cluster started for
// the test, or the Apache Pulsar that STREAMRUN_PULSAR_URL names.
type Peer struct {
	// URL is the pulsar:// service URL.
	URL string
	// TLS is the pulsar+ssl:// service URL, "" without TLS (always on
	// Apache Pulsar).
	TLS string
	// Admin is the http:// admin API.
	Admin string
	// Cluster is the embedded cluster; nil on Apache Pulsar.
	Cluster *broker.Cluster
}

// Pulsar reports whether the peer is Apache Pulsar.
func (p *Peer) Pulsar() bool { return p.Cluster == nil }

// PulsarURL is the service URL of the Apache Pulsar to run against, ""
// when none is set.
func PulsarURL() string { return os.Getenv(PulsarURLEnv) }

// Target returns the peer of a test that runs against either broker:
// Apache Pulsar when STREAMRUN_PULSAR_URL is set, else an embedded
// cluster started with Start (opts applied), logging at INFO into
// LogWriter(t, "broker").
func Target(t testing.TB, opts ...func(*broker.Options)) *Peer {
	t.Helper()
	if u := PulsarURL(); u != "" {
		admin := os.Getenv(PulsarHTTPEnv)
		if admin == "" {
			admin = "http://127.0.0.1:8080"
		}
		if !strings.Contains(admin, "://") {
			admin = "http://" + admin
		}
		return &Peer{URL: u, Admin: admin}
	}
	return startPeer(t, LogWriter(t, "broker"), opts)
}

// Embedded returns an embedded cluster's peer for a test that needs
// one (fault injection, several brokers, TLS, tokens, introspection): the
// test is skipped, saying why, when STREAMRUN_PULSAR_URL is set.
func Embedded(t testing.TB, why string, opts ...func(*broker.Options)) *Peer {
	t.Helper()
	if PulsarURL() != "" {
		t.Skipf("needs the embedded broker (%s); skipped with %s set", why, PulsarURLEnv)
	}
	return startPeer(t, LogWriter(t, "broker"), opts)
}

// TargetB is Target for a benchmark: the service URL of Apache Pulsar or
// of an embedded cluster that logs nothing.
func TargetB(b *testing.B, opts ...func(*broker.Options)) string {
	b.Helper()
	if u := PulsarURL(); u != "" {
		return u
	}
	return startPeer(b, io.Discard, opts).URL
}

func startPeer(t testing.TB, log io.Writer, opts []func(*broker.Options)) *Peer {
	t.Helper()
	logTo := func(o *broker.Options) {
		o.Logger = slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	c := Start(t, append([]func(*broker.Options){logTo}, opts...)...)
	return &Peer{URL: c.ServiceURL(), TLS: c.ServiceURLTLS(), Admin: c.AdminURL(), Cluster: c}
}

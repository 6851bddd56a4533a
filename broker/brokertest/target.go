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
	// PulsarTxnURLEnv names the service URL of an Apache Pulsar with
	// transactions on (scripts/pulsar start --name txn), which TxnTarget
	// uses beside the one of PulsarURLEnv.
	PulsarTxnURLEnv = "STREAMRUN_PULSAR_TXN_URL"
	// PulsarTxnHTTPEnv names its admin API; default http://127.0.0.1:8281.
	PulsarTxnHTTPEnv = "STREAMRUN_PULSAR_TXN_HTTP"
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
		return &Peer{URL: u, Admin: httpBase(os.Getenv(PulsarHTTPEnv), "http://127.0.0.1:8080")}
	}
	return startPeer(t, LogWriter(t, "broker"), opts)
}

// TxnTarget returns the peer of a test of transactions, a broker with
// them on: an embedded cluster started with Options.Transactions (opts
// applied), or on Apache Pulsar (STREAMRUN_PULSAR_URL set) the one
// STREAMRUN_PULSAR_TXN_URL names, the test skipped when it is unset.
func TxnTarget(t testing.TB, opts ...func(*broker.Options)) *Peer {
	t.Helper()
	if PulsarURL() == "" {
		on := func(o *broker.Options) { o.Transactions = true }
		return startPeer(t, LogWriter(t, "broker"), append([]func(*broker.Options){on}, opts...))
	}
	u := os.Getenv(PulsarTxnURLEnv)
	if u == "" {
		t.Skipf("transactions on Apache Pulsar need a standalone with them on: "+
			`eval "$(scripts/pulsar start --name txn)" sets %s and %s`, PulsarTxnURLEnv, PulsarTxnHTTPEnv)
	}
	return &Peer{URL: u, Admin: httpBase(os.Getenv(PulsarTxnHTTPEnv), "http://127.0.0.1:8281")}
}

// httpBase is admin, or def when it is empty, with http:// when it names
// no scheme.
func httpBase(admin, def string) string {
	if admin == "" {
		admin = def
	}
	if !strings.Contains(admin, "://") {
		admin = "http://" + admin
	}
	return admin
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

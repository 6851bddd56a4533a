package securitytest

import (
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/telemetry/scrape"
)

// Everything streamrun listens on is loopback unless its address names
// another host: the defaults of the broker's ports and admin API, and an
// address given without a host (":0"), for the broker and the metrics
// endpoint.
func TestListenersAreLoopbackByDefault(t *testing.T) {
	ca := brokertest.NewCA(t, "loopback")
	cert, key := ca.Server("localhost", "localhost")
	c := brokertest.Start(t, func(o *broker.Options) {
		o.Listen, o.HTTP, o.TLSListen, o.HTTPS = ":0", ":0", ":0", ":0"
		o.TLSCertFile, o.TLSKeyFile = cert, key
		o.Brokers = 2
	})
	m, err := scrape.Listen(scrape.Options{Addr: ":0"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(t.Context())
	// A client connection, so that the process holds sockets of every kind.
	ctx := brokertest.Context(t, time.Minute)
	cl, err := pool.New(ctx, pool.Options{ServiceURL: c.ServiceURL()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close(ctx)

	ips := brokertest.ListeningIPs(t, os.Getpid())
	// 2 brokers × (plain + TLS) + admin HTTP + HTTPS + metrics.
	if len(ips) < 7 {
		t.Fatalf("found %d listening sockets (%v), want at least 7: is /proc/net/tcp readable?", len(ips), ips)
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			t.Errorf("a listener on %s: not loopback", ip)
		}
	}
	for _, u := range []string{c.ServiceURL(), c.ServiceURLTLS(), c.AdminURL(), c.AdminURLTLS(), "tcp://" + m.Addr()} {
		host := u[strings.Index(u, "://")+3:]
		if h, _, _ := net.SplitHostPort(host); h != "127.0.0.1" {
			t.Errorf("%s: want 127.0.0.1", u)
		}
	}
}

// The secured Apache Pulsar standalone that CI runs the suite against
// listens on loopback only (scripts/pulsar binds it there: bindAddress,
// the bookie's listeningInterface), so the tests expose nothing either.
func TestSecuredPulsarListensOnLoopbackOnly(t *testing.T) {
	tg := pulsarTarget(t)
	if tg.pid == 0 {
		t.Skipf("needs the pid of its JVM: set %s (scripts/pulsar start --name secure prints it)", securePIDEnv)
	}
	addrs := brokertest.ListeningAddrs(t, tg.pid)
	if len(addrs) < 2 {
		t.Fatalf("process %d listens on %v: want its TLS and HTTPS ports at least", tg.pid, addrs)
	}
	for _, a := range addrs {
		if !a.IP.IsLoopback() {
			t.Errorf("Apache Pulsar listens on %s: not loopback", a)
		}
	}
}

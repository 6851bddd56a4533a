package pool

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/broker/faults"
	"github.com/streamrun/streamrun/internal/connpool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// Tests that need the embedded broker: several brokers, fault injection,
// TLS and tokens. Skipped when STREAMRUN_PULSAR_URL is set.

// fastRetries retries quickly, so that fault tests take milliseconds.
var fastRetries = OperationRetries{Delay: 10 * time.Millisecond}

func TestOneConnectionPerBrokerHoweverManyTopicsAndProducers(t *testing.T) {
	tg := embeddedTarget(t, brokers(3))
	c := newClient(t, tg, Options{})
	ctx := brokertest.Context(t, time.Minute)
	part := brokertest.TopicName(t)
	tg.CreatePartitioned(t, part, 6)
	topics := []string{part}
	for i := 0; i < 30; i++ {
		topics = append(topics, brokertest.TopicName(t))
	}
	col := newCollector(len(topics) * 20)
	for i, topic := range topics {
		for j := 0; j < 20; j++ {
			c.PublishAsync(ctx, topic, Message{Payload: []byte("x"), Key: fmt.Sprint(j)}, col.cb(i*20+j))
		}
	}
	col.wait(t, 30*time.Second)
	if len(col.errs) > 0 {
		t.Fatal(col.errs)
	}
	// Every broker owns some of them (else the test proves little).
	owners := map[int]bool{}
	for _, topic := range topics[1:] {
		owners[tg.cluster.OwnerOf(topic)] = true
	}
	if len(owners) != 3 {
		t.Fatalf("topics owned by brokers %v only", owners)
	}
	conns := c.conns().BrokerConns()
	slices.Sort(conns)
	want := tg.cluster.BrokerURLs()
	slices.Sort(want)
	if !slices.Equal(conns, want) {
		t.Fatalf("client connections %v, want one to each of %v", conns, want)
	}
	for i := 0; i < 3; i++ {
		if n := len(tg.cluster.Connections(i)); n != 1 {
			t.Errorf("broker %d has %d connections from the client", i, n)
		}
		if n := tg.cluster.AcceptedConnections(i); n != 1 {
			t.Errorf("broker %d accepted %d connections", i, n)
		}
	}
}

func TestLookupFollowsRedirectsToTheOwner(t *testing.T) {
	tg := embeddedTarget(t, brokers(3))
	c := newClient(t, tg, Options{})
	ctx := brokertest.Context(t, time.Minute)
	urls := tg.cluster.BrokerURLs()
	for owner := 1; owner < 3; owner++ {
		topic := topicOwnedBy(t, tg, owner)
		// Count the lookups the owner answers: the redirect's.
		h := brokertest.Faults(t, tg.cluster).Add(faults.Fault{Broker: owner, Command: pb.BaseCommand_LOOKUP, Topic: topic, Delay: time.Nanosecond})
		b, err := c.Lookup(ctx, topic)
		h.Remove()
		if err != nil {
			t.Fatal(err)
		}
		if b.URL != urls[owner] {
			t.Fatalf("lookup of a topic of broker %d: %s, want %s", owner, b.URL, urls[owner])
		}
		if h.Fired() != 1 {
			t.Fatalf("the owner answered %d lookups, want 1 (the redirected one)", h.Fired())
		}
		conn, err := c.conns().Conn(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		if conn.Addr() != urls[owner] {
			t.Fatalf("connection for the topic goes to %s, want %s", conn.Addr(), urls[owner])
		}
	}
}

// topicOwnedBy finds a fresh topic that broker i owns.
func topicOwnedBy(t *testing.T, tg *target, i int) string {
	for {
		topic := brokertest.TopicName(t)
		if tg.cluster.OwnerOf(topic) == i {
			return topic
		}
	}
}

func TestEachPartitionGoesToItsOwner(t *testing.T) {
	tg := embeddedTarget(t, brokers(3))
	c := newClient(t, tg, Options{})
	ctx := brokertest.Context(t, time.Minute)
	topic := brokertest.TopicName(t)
	tg.CreatePartitioned(t, topic, 8)
	p, err := c.Producer(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	urls := tg.cluster.BrokerURLs()
	owners := map[int]bool{}
	for i, pp := range p.partList() {
		if pp.topic != fmt.Sprintf("%s-partition-%d", topic, i) {
			t.Fatalf("partition producer %d is for %s", i, pp.topic)
		}
		owner := tg.cluster.OwnerOf(pp.topic)
		owners[owner] = true
		pp.mu.Lock()
		addr := pp.conn.Addr()
		pp.mu.Unlock()
		if addr != urls[owner] {
			t.Fatalf("partition %d's producer is on %s, its owner is %s", i, addr, urls[owner])
		}
		if got := tg.cluster.Producers(pp.topic); len(got) != 1 {
			t.Fatalf("partition %d: the broker sees %d producers", i, len(got))
		}
	}
	if len(owners) < 2 {
		t.Fatalf("8 partitions on brokers %v only", owners)
	}
}

func TestLookupRefusedWithServiceNotReadyIsRetriedUntilItWorks(t *testing.T) {
	tg := embeddedTarget(t)
	c := newClient(t, tg, Options{OperationRetries: fastRetries})
	topic := brokertest.TopicName(t)
	h := brokertest.Faults(t, tg.cluster).Add(faults.Fault{Broker: -1, Command: pb.BaseCommand_LOOKUP, Topic: topic, Err: pb.ServerError_ServiceNotReady, Count: 5})
	if _, err := c.Publish(brokertest.Context(t, time.Minute), topic, Message{Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if h.Fired() != 5 {
		t.Fatalf("the fault fired %d times, want 5", h.Fired())
	}
}

func TestLookupRetryLimitEndsInATypedError(t *testing.T) {
	tg := embeddedTarget(t)
	c := newClient(t, tg, Options{OperationRetries: OperationRetries{Attempts: 3, Delay: 10 * time.Millisecond}})
	topic := brokertest.TopicName(t)
	h := brokertest.Faults(t, tg.cluster).Add(faults.Fault{Broker: -1, Command: pb.BaseCommand_LOOKUP, Topic: topic, Err: pb.ServerError_ServiceNotReady})
	defer h.Remove()
	_, err := c.Publish(brokertest.Context(t, time.Minute), topic, Message{Payload: []byte("x")})
	var re *RetryError
	if !errors.As(err, &re) || re.Attempts != 3 {
		t.Fatalf("got %v, want a *RetryError after 3 attempts", err)
	}
	if !errors.Is(err, ErrRetriesExhausted) || !errors.Is(err, pulsarwire.ErrServiceNotReady) {
		t.Fatalf("%v does not match ErrRetriesExhausted and ErrServiceNotReady", err)
	}
	if code, ok := pulsarwire.ServerCode(err); !ok || code != pb.ServerError_ServiceNotReady {
		t.Fatalf("server code %v %v", code, ok)
	}
	if h.Fired() != 3 {
		t.Fatalf("%d lookups, want 3", h.Fired())
	}
	// The failure is not remembered: once the broker is ready, it works.
	h.Remove()
	if _, err := c.Publish(brokertest.Context(t, time.Minute), topic, Message{Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
}

func TestFinalErrorsAreNotRetried(t *testing.T) {
	tg := embeddedTarget(t)
	c := newClient(t, tg, Options{OperationRetries: fastRetries})
	topic := brokertest.TopicName(t)
	h := brokertest.Faults(t, tg.cluster).Add(faults.Fault{Broker: -1, Command: pb.BaseCommand_PRODUCER, Topic: topic, Err: pb.ServerError_AuthorizationError})
	defer h.Remove()
	_, err := c.Publish(brokertest.Context(t, time.Minute), topic, Message{Payload: []byte("x")})
	if !errors.Is(err, pulsarwire.ErrAuthorizationError) || h.Fired() != 1 {
		t.Fatalf("got %v after %d tries", err, h.Fired())
	}
}

func TestProducerCreationRefusedForNowIsRetried(t *testing.T) {
	tg := embeddedTarget(t)
	c := newClient(t, tg, Options{OperationRetries: fastRetries})
	topic := brokertest.TopicName(t)
	h := brokertest.Faults(t, tg.cluster).Add(faults.Fault{Broker: -1, Command: pb.BaseCommand_PRODUCER, Topic: topic, Err: pb.ServerError_ProducerBusy, Count: 3})
	if _, err := c.Publish(brokertest.Context(t, time.Minute), topic, Message{Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if h.Fired() != 3 {
		t.Fatalf("fired %d", h.Fired())
	}
}

func TestDroppedConnectionsAreReplacedAndPendingSendsCompleteInOrder(t *testing.T) {
	tg := embeddedTarget(t, brokers(2))
	c := newClient(t, tg, Options{OperationRetries: fastRetries, Producer: ProducerOptions{Batching: BatchingOptions{MaxMessages: 100}}})
	topic := brokertest.TopicName(t)
	ctx := brokertest.Context(t, time.Minute)
	p, err := c.Producer(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	const n = 30000
	col := newCollector(n)
	for i := 0; i < n; i++ {
		p.SendAsync(ctx, Message{Payload: fmt.Appendf(nil, "%d", i)}, col.cb(i))
		switch i {
		case 5000, 15000:
			tg.cluster.DropConnections(-1)
		case 25000:
			if err := tg.cluster.RestartBroker(tg.cluster.OwnerOf(topic)); err != nil {
				t.Fatal(err)
			}
		}
	}
	col.wait(t, 30*time.Second)
	if len(col.errs) > 0 {
		t.Fatalf("%d errors, e.g. %v", len(col.errs), col.errs)
	}
	checkStream(t, subscribeRaw(t, c, topic), n)
	if got := len(c.conns().BrokerConns()); got > 2 {
		t.Fatalf("%d connections for 2 brokers after reconnecting", got)
	}
}

func TestSendErrorMakesTheProducerResendOnANewConnection(t *testing.T) {
	tg := embeddedTarget(t)
	c := newClient(t, tg, Options{OperationRetries: fastRetries, Producer: ProducerOptions{Batching: BatchingOptions{MaxMessages: 10}}})
	topic := brokertest.TopicName(t)
	ctx := brokertest.Context(t, time.Minute)
	if _, err := c.Producer(ctx, topic); err != nil {
		t.Fatal(err)
	}
	h := brokertest.Faults(t, tg.cluster).Add(faults.Fault{Broker: -1, Command: pb.BaseCommand_SEND, Topic: topic, Err: pb.ServerError_PersistenceError, Count: 2})
	const n = 500
	col := newCollector(n)
	for i := 0; i < n; i++ {
		c.PublishAsync(ctx, topic, Message{Payload: fmt.Appendf(nil, "%d", i)}, col.cb(i))
	}
	col.wait(t, 30*time.Second)
	if len(col.errs) > 0 || h.Fired() != 2 {
		t.Fatalf("errors %v; fault fired %d times", col.errs, h.Fired())
	}
	// Nothing is lost. Order is not promised here: the broker refused two
	// entries but stored the ones sent after them before the connection
	// closed, as Apache Pulsar might; the client resends the refused ones
	// (the Java and Go clients do the same).
	rc := subscribeRaw(t, c, topic)
	brokertest.Eventually(t, 30*time.Second, "every message", func() bool {
		seen := map[string]bool{}
		for _, m := range rc.all() {
			seen[m.Payload] = true
		}
		for i := 0; i < n; i++ {
			if !seen[fmt.Sprint(i)] {
				return false
			}
		}
		return true
	})
}

func TestTLSVerifiesTheBroker(t *testing.T) {
	ca := brokertest.NewCA(t, "good")
	serverCert, _, _ := ca.Issue("broker", []string{"127.0.0.1", "localhost"}, false)
	clientCert, clientCertFile, clientKeyFile := ca.Issue("client", []string{"client"}, true)
	_ = clientCert
	tg := embeddedTarget(t, brokers(2), func(o *broker.Options) {
		o.TLSConfig = &tls.Config{Certificates: []tls.Certificate{serverCert}, ClientCAs: ca.Pool(), ClientAuth: tls.VerifyClientCertIfGiven}
		o.TLSListen = "127.0.0.1:0"
	})
	if tg.TLS == "" {
		t.Fatal("no TLS listener")
	}
	ctx := brokertest.Context(t, time.Minute)
	publish := func(c *Client) error {
		_, err := c.Publish(ctx, topicOwnedBy(t, tg, 1), Message{Payload: []byte("x")})
		return err
	}

	// Trusted CA, name matches: works, through the redirect to broker 1's
	// TLS listener, with a client certificate too.
	c := newClient(t, tg, Options{ServiceURL: tg.TLS, TLS: TLSOptions{CAFile: ca.File, CertFile: clientCertFile, KeyFile: clientKeyFile}})
	if err := publish(c); err != nil {
		t.Fatal(err)
	}
	for _, conn := range c.conns().BrokerConns() {
		if u, _ := connpool.ParseServiceURL(conn); !u.TLS {
			t.Fatalf("connection %s is not TLS", conn)
		}
	}
	for i := 0; i < 2; i++ {
		for _, ci := range tg.cluster.Connections(i) {
			if !ci.TLS {
				t.Fatalf("broker %d sees a plain connection", i)
			}
		}
	}

	// Another CA: refused at once, not retried (the default is to retry
	// forever, so a retry would hang here).
	other := brokertest.NewCA(t, "other")
	start := time.Now()
	_, err := New(ctx, Options{ServiceURL: tg.TLS, TLS: TLSOptions{CAFile: other.File}})
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) || Retryable(err) {
		t.Fatalf("untrusted broker: %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("refusing took %s", time.Since(start))
	}

	// A certificate for another host name: refused, unless asked not to check.
	wrongName, _, _ := ca.Issue("elsewhere", []string{"broker.example.com"}, false)
	tg2 := embeddedTarget(t, func(o *broker.Options) {
		o.TLSConfig = &tls.Config{Certificates: []tls.Certificate{wrongName}}
		o.TLSListen = "127.0.0.1:0"
	})
	_, err = New(ctx, Options{ServiceURL: tg2.TLS, TLS: TLSOptions{CAFile: ca.File}})
	var hostname x509.HostnameError
	if !errors.As(err, &hostname) {
		t.Fatalf("wrong host name: %v", err)
	}
	c2 := newClient(t, tg2, Options{ServiceURL: tg2.TLS, TLS: TLSOptions{CAFile: ca.File, SkipHostnameVerification: true}})
	if _, err := c2.Publish(ctx, brokertest.TopicName(t), Message{Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	// ... but the chain is still checked.
	if _, err := New(ctx, Options{ServiceURL: tg2.TLS, TLS: TLSOptions{CAFile: other.File, SkipHostnameVerification: true}}); err == nil {
		t.Fatal("SkipHostnameVerification accepted an untrusted certificate")
	}
	c3 := newClient(t, tg2, Options{ServiceURL: tg2.TLS, TLS: TLSOptions{InsecureSkipVerify: true}})
	if _, err := c3.Publish(ctx, brokertest.TopicName(t), Message{Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
}

func TestTokenAuthentication(t *testing.T) {
	key := brokertest.SecretKey(t)
	tg := embeddedTarget(t, brokers(2), brokertest.WithTokenKey(key))
	ctx := brokertest.Context(t, time.Minute)
	good := brokertest.Token(t, key, "alice", time.Time{})
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(good+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("STREAMRUN_POOL_TEST_TOKEN", good)
	for _, tok := range []string{good, "file:" + file, "env:STREAMRUN_POOL_TEST_TOKEN"} {
		c := newClient(t, tg, Options{Token: tok})
		if _, err := c.Publish(ctx, topicOwnedBy(t, tg, 1), Message{Payload: []byte("x")}); err != nil {
			t.Fatalf("token %q: %v", tok, err)
		}
	}
	for _, tok := range []string{"wrong", ""} {
		start := time.Now()
		_, err := New(ctx, Options{ServiceURL: tg.URL, Token: tok})
		if !errors.Is(err, pulsarwire.ErrAuthenticationError) || Retryable(err) {
			t.Fatalf("token %q: %v, want a final AuthenticationError", tok, err)
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("refusing took %s", time.Since(start))
		}
	}
}

func TestClosingTheClientWhileRetryingStopsAtOnce(t *testing.T) {
	tg := embeddedTarget(t)
	c, err := New(brokertest.Context(t, time.Minute), Options{ServiceURL: tg.URL, OperationRetries: OperationRetries{Delay: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	topic := brokertest.TopicName(t)
	h := brokertest.Faults(t, tg.cluster).Add(faults.Fault{Broker: -1, Command: pb.BaseCommand_LOOKUP, Topic: topic, Err: pb.ServerError_ServiceNotReady})
	defer h.Remove()
	errc := make(chan error, 1)
	go func() {
		_, err := c.Publish(context.Background(), topic, Message{Payload: []byte("x")})
		errc <- err
	}()
	brokertest.Eventually(t, 5*time.Second, "a refused lookup", func() bool { return h.Fired() > 0 })
	if err := c.Close(brokertest.Context(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("publish during Close: %v", err)
	}
}

// Apache Pulsar standalone answers lookups with proxy_through_service_url,
// so a TLS-terminating relay in front of it stands for a TLS listener (or
// a Pulsar proxy): the client keeps going through the service URL and
// names the broker in CONNECT (proxy_to_broker_url).
func TestTLSThroughTheServiceURLToApachePulsar(t *testing.T) {
	if brokertest.PulsarURL() == "" {
		t.Skip("Apache Pulsar only (STREAMRUN_PULSAR_URL): the embedded broker does not answer with proxy_through_service_url")
	}
	tg := newTarget(t)
	u, err := connpool.ParseServiceURL(tg.URL)
	if err != nil {
		t.Fatal(err)
	}
	ca := brokertest.NewCA(t, "good")
	cert, _, _ := ca.Issue("relay", []string{"127.0.0.1"}, false)
	relay := newTCPProxy(t, u.Hosts[0], &tls.Config{Certificates: []tls.Certificate{cert}})
	url := "pulsar+ssl://" + relay.Addr()
	ctx := brokertest.Context(t, time.Minute)

	c := newClient(t, tg, Options{ServiceURL: url, TLS: TLSOptions{CAFile: ca.File}})
	topic := brokertest.TopicName(t)
	b, err := c.Lookup(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if b.Proxy != relay.Addr() {
		t.Fatalf("lookup answered %s; want to go through %s", b, relay.Addr())
	}
	if _, err := c.Publish(ctx, topic, Message{Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if conns := c.conns().BrokerConns(); len(conns) > 2 {
		t.Fatalf("connections %v", conns)
	}

	other := brokertest.NewCA(t, "other")
	var unknown x509.UnknownAuthorityError
	if _, err := New(ctx, Options{ServiceURL: url, TLS: TLSOptions{CAFile: other.File}}); !errors.As(err, &unknown) {
		t.Fatalf("untrusted relay: %v", err)
	}
	wrong, _, _ := ca.Issue("wrong", []string{"broker.example.com"}, false)
	relay2 := newTCPProxy(t, u.Hosts[0], &tls.Config{Certificates: []tls.Certificate{wrong}})
	var hostname x509.HostnameError
	if _, err := New(ctx, Options{ServiceURL: "pulsar+ssl://" + relay2.Addr(), TLS: TLSOptions{CAFile: ca.File}}); !errors.As(err, &hostname) {
		t.Fatalf("relay with another host's certificate: %v", err)
	}
}

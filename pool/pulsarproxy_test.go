package pool

import (
	"bufio"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/internal/connpool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// pulsarProxy does what Apache Pulsar's proxy does for a client: a
// connection whose CONNECT names no broker serves lookups, relayed to a
// broker, with every lookup answer rewritten to Connect with
// proxy_through_service_url; a connection whose CONNECT names a broker
// (proxy_to_broker_url) is relayed to that broker.
type pulsarProxy struct {
	t       *testing.T
	ln      net.Listener
	service string // host:port of the broker answering lookups
	loop    bool   // answer every lookup with a redirect to the proxy itself

	mu        sync.Mutex
	connects  []string // proxy_to_broker_url of each CONNECT ("" for lookups)
	redirects int
	// authoritative is the flag of every LOOKUP on lookup connections.
	authoritative []bool
	conns         []net.Conn
	wg            sync.WaitGroup
}

func newPulsarProxy(t *testing.T, service string) *pulsarProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pulsarProxy{t: t, ln: ln, service: service}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *pulsarProxy) Addr() string { return p.ln.Addr().String() }

func (p *pulsarProxy) Connects() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.connects...)
}

func (p *pulsarProxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(in)
	}
}

func (p *pulsarProxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns = append(p.conns, c)
	p.mu.Unlock()
}

func (p *pulsarProxy) serve(in net.Conn) {
	defer p.wg.Done()
	p.track(in)
	defer in.Close()
	rd := pulsarwire.NewReader(bufio.NewReader(in), pulsarwire.MaxFrameSize(pulsarwire.DefaultMaxMessageSize))
	f, err := rd.Next()
	if err != nil || f.Cmd.GetType() != pb.BaseCommand_CONNECT {
		return
	}
	connect := f.Cmd.GetConnect()
	target := connect.GetProxyToBrokerUrl()
	p.mu.Lock()
	p.connects = append(p.connects, target)
	p.mu.Unlock()
	lookups := target == ""
	if lookups {
		target = p.service
	}
	out, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	p.track(out)
	defer out.Close()
	connect.ProxyToBrokerUrl = nil // the broker is talked to directly
	b, _ := pulsarwire.AppendCommand(nil, f.Cmd)
	if _, err := out.Write(b); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer out.Close()
		if !lookups {
			io.Copy(out, in) // the client's frames as they are
			return
		}
		for {
			f, err := rd.Next()
			if err != nil {
				return
			}
			if l := f.Cmd.GetLookupTopic(); l != nil {
				p.mu.Lock()
				p.authoritative = append(p.authoritative, l.GetAuthoritative())
				p.mu.Unlock()
			}
			b, _ := pulsarwire.AppendCommand(nil, f.Cmd)
			if _, err := out.Write(b); err != nil {
				return
			}
		}
	}()
	if !lookups {
		io.Copy(in, out)
	} else {
		brd := pulsarwire.NewReader(bufio.NewReader(out), pulsarwire.MaxFrameSize(pulsarwire.DefaultMaxMessageSize))
		for {
			f, err := brd.Next()
			if err != nil {
				break
			}
			if lr := f.Cmd.GetLookupTopicResponse(); lr != nil && p.loop {
				lr.Response = pb.CommandLookupTopicResponse_Redirect.Enum()
				lr.BrokerServiceUrl = proto.String("pulsar://" + p.Addr())
				lr.Authoritative = proto.Bool(true)
				p.mu.Lock()
				p.redirects++
				p.mu.Unlock()
			} else if lr != nil {
				// Pulsar's proxy follows redirects itself and answers
				// Connect: the embedded broker's Redirect names the owner.
				if lr.GetResponse() == pb.CommandLookupTopicResponse_Redirect {
					lr.Response = pb.CommandLookupTopicResponse_Connect.Enum()
				}
				lr.ProxyThroughServiceUrl = proto.Bool(true)
			}
			var b []byte
			if f.HasPayload() {
				b, _ = pulsarwire.AppendEntryCommand(nil, f.Cmd, f.Entry)
			} else {
				b, _ = pulsarwire.AppendCommand(nil, f.Cmd)
			}
			if _, err := in.Write(b); err != nil {
				break
			}
		}
	}
	in.Close()
	<-done
}

func TestThroughAPulsarProxyOneConnectionPerBrokerNamedInConnect(t *testing.T) {
	tg := embeddedTarget(t, brokers(3))
	urls := tg.cluster.BrokerURLs()
	u, _ := connpool.ParseServiceURL(tg.URL)
	proxy := newPulsarProxy(t, u.Hosts[0])
	c := newClient(t, tg, Options{ServiceURL: "pulsar://" + proxy.Addr()})
	ctx := brokertest.Context(t, time.Minute)
	for owner := 0; owner < 3; owner++ {
		topic := topicOwnedBy(t, tg, owner)
		b, err := c.Lookup(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		if b.URL != urls[owner] || b.Proxy != proxy.Addr() {
			t.Fatalf("lookup through the proxy: %s, want %s via %s", b, urls[owner], proxy.Addr())
		}
		for i := 0; i < 3; i++ {
			if _, err := c.Publish(ctx, topic, Message{Payload: []byte("x")}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// One connection for lookups, one per broker, all through the proxy.
	connects := proxy.Connects()
	seen := map[string]int{}
	for _, target := range connects {
		seen[target]++
	}
	if len(connects) != 4 || seen[""] != 1 {
		t.Fatalf("CONNECTs through the proxy: %q", connects)
	}
	for _, bu := range urls {
		hp, _, _ := connpool.BrokerAddr(bu)
		if seen[hp] != 1 {
			t.Fatalf("CONNECTs naming %s: %d (all: %q)", hp, seen[hp], connects)
		}
	}
	if n := len(c.conns().BrokerConns()); n != 4 {
		t.Fatalf("client connections: %v", c.conns().BrokerConns())
	}
}

func TestLookupGivesUpAfterTwentyRedirects(t *testing.T) {
	tg := embeddedTarget(t)
	u, _ := connpool.ParseServiceURL(tg.URL)
	proxy := newPulsarProxy(t, u.Hosts[0])
	proxy.loop = true
	c := newClient(t, tg, Options{ServiceURL: "pulsar://" + proxy.Addr()})
	_, err := c.Publish(brokertest.Context(t, time.Minute), brokertest.TopicName(t), Message{Payload: []byte("x")})
	if err == nil || !strings.Contains(err.Error(), "redirects") || Retryable(err) {
		t.Fatalf("endless redirects: %v", err)
	}
	proxy.mu.Lock()
	defer proxy.mu.Unlock()
	if proxy.redirects != connpool.MaxLookupRedirects {
		t.Fatalf("%d redirects followed, want %d", proxy.redirects, connpool.MaxLookupRedirects)
	}
	// The first lookup is not authoritative; each one after a redirect
	// carries the redirect's flag.
	a := proxy.authoritative
	if len(a) != connpool.MaxLookupRedirects || a[0] || slices.Contains(a[1:], false) {
		t.Fatalf("authoritative flags of the lookups: %v", a)
	}
}

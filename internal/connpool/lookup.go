package connpool

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// MaxLookupRedirects is how many times a lookup follows a redirect before
// giving up, as Apache Pulsar's clients do.
const MaxLookupRedirects = 20

// Broker is where a lookup found a topic: the owner's URL, and the
// service URL host to connect through when the answer said
// proxy_through_service_url. pool.Broker is the same, documented for
// pool's users.
type Broker struct{ URL, Proxy string }

// String is the URL, with " via <proxy>" when proxied.
func (b Broker) String() string {
	if b.Proxy != "" {
		return b.URL + " via " + b.Proxy
	}
	return b.URL
}

// Lookup asks the service URL which broker owns topic, following
// redirects (carrying `authoritative`) up to MaxLookupRedirects. It makes
// one attempt; its callers retry it.
func (p *Pool) Lookup(ctx context.Context, topic string) (Broker, error) {
	t, err := pulsarwire.ParseTopic(topic)
	if err != nil {
		return Broker{}, err
	}
	name := t.String()
	conn, err := p.ServiceConn(ctx)
	if err != nil {
		return Broker{}, fmt.Errorf("lookup %s: %w", name, err)
	}
	via := conn.key.physical
	authoritative := false
	for hop := 0; ; hop++ {
		resp, err := conn.Request(ctx, pulsarwire.Wrap(&pb.CommandLookupTopic{
			Topic:         proto.String(name),
			Authoritative: proto.Bool(authoritative),
		}))
		if err != nil {
			return Broker{}, fmt.Errorf("lookup %s on %s: %w", name, conn.key.logical, err)
		}
		lr := resp.GetLookupTopicResponse()
		if lr == nil {
			return Broker{}, fmt.Errorf("lookup %s: broker answered %s: %w", name, resp.GetType(), pulsarwire.ErrCorrupt)
		}
		b, err := p.lookupAnswer(lr, via)
		if err != nil {
			return Broker{}, fmt.Errorf("lookup %s: %w", name, err)
		}
		switch lr.GetResponse() {
		case pb.CommandLookupTopicResponse_Connect:
			return b, nil
		case pb.CommandLookupTopicResponse_Redirect:
			if hop+1 >= MaxLookupRedirects {
				return Broker{}, fmt.Errorf("lookup %s: more than %d redirects, the last to %s", name, MaxLookupRedirects, b)
			}
			authoritative = lr.GetAuthoritative()
			if conn, err = p.BrokerConn(ctx, b); err != nil {
				return Broker{}, fmt.Errorf("lookup %s: redirected to %s: %w", name, b, err)
			}
		default:
			return Broker{}, fmt.Errorf("lookup %s: answer of type %s: %w", name, lr.GetResponse(), pulsarwire.ErrCorrupt)
		}
	}
}

// lookupAnswer reads where a LOOKUP_RESPONSE points. With a pulsar+ssl://
// service URL only the broker's TLS listener will do, unless the answer
// says to go through the service URL (a proxy), whose connection is TLS.
func (p *Pool) lookupAnswer(lr *pb.CommandLookupTopicResponse, via string) (Broker, error) {
	b := Broker{URL: lr.GetBrokerServiceUrl()}
	if lr.GetProxyThroughServiceUrl() {
		b.Proxy = via
	}
	if p.cfg.Service.TLS {
		if u := lr.GetBrokerServiceUrlTls(); u != "" || b.Proxy == "" {
			b.URL = u
		}
		if b.URL == "" {
			return Broker{}, fmt.Errorf("the broker has no TLS listener (the answer has no brokerServiceUrlTls) and a pulsar+ssl:// client does not fall back to plain text")
		}
	}
	if b.URL == "" {
		return Broker{}, fmt.Errorf("answer names no broker: %w", pulsarwire.ErrCorrupt)
	}
	return b, nil
}

// BrokerConn returns the pooled connection to b, opening it if needed.
func (p *Pool) BrokerConn(ctx context.Context, b Broker) (*Conn, error) {
	hostPort, isTLS, err := BrokerAddr(b.URL)
	if err != nil {
		return nil, err
	}
	key := connKey{logical: hostPort, physical: hostPort, tls: isTLS}
	if b.Proxy != "" {
		key.physical, key.tls = b.Proxy, p.cfg.Service.TLS
	}
	return p.getConn(ctx, key)
}

// Conn looks topic up and returns the pooled connection to its owner: one
// attempt, see Lookup.
func (p *Pool) Conn(ctx context.Context, topic string) (*Conn, error) {
	b, err := p.Lookup(ctx, topic)
	if err != nil {
		return nil, err
	}
	conn, err := p.BrokerConn(ctx, b)
	if err != nil {
		return nil, fmt.Errorf("connect for %s: %w", topic, err)
	}
	return conn, nil
}

// PartitionedTopicMetadata asks for topic's number of partitions; 0 means
// the topic is not partitioned. One attempt.
func (p *Pool) PartitionedTopicMetadata(ctx context.Context, topic string) (int, error) {
	t, err := pulsarwire.ParseTopic(topic)
	if err != nil {
		return 0, err
	}
	name := t.String()
	conn, err := p.ServiceConn(ctx)
	if err != nil {
		return 0, fmt.Errorf("partitioned metadata of %s: %w", name, err)
	}
	resp, err := conn.Request(ctx, pulsarwire.Wrap(&pb.CommandPartitionedTopicMetadata{Topic: proto.String(name)}))
	if err != nil {
		return 0, fmt.Errorf("partitioned metadata of %s: %w", name, err)
	}
	r := resp.GetPartitionMetadataResponse()
	if r == nil {
		return 0, fmt.Errorf("partitioned metadata of %s: broker answered %s: %w", name, resp.GetType(), pulsarwire.ErrCorrupt)
	}
	return int(r.GetPartitions()), nil
}

// TopicsOfNamespace lists the topics of namespace ("tenant/ns") by their
// full names, partitions one by one (persistent://t/ns/x-partition-0,
// ...). One attempt.
func (p *Pool) TopicsOfNamespace(ctx context.Context, namespace string, mode pb.CommandGetTopicsOfNamespace_Mode) ([]string, error) {
	conn, err := p.ServiceConn(ctx)
	if err != nil {
		return nil, fmt.Errorf("topics of %s: %w", namespace, err)
	}
	resp, err := conn.Request(ctx, pulsarwire.Wrap(&pb.CommandGetTopicsOfNamespace{
		Namespace: proto.String(namespace),
		Mode:      mode.Enum(),
	}))
	if err != nil {
		return nil, fmt.Errorf("topics of %s: %w", namespace, err)
	}
	r := resp.GetGetTopicsOfNamespaceResponse()
	if r == nil {
		return nil, fmt.Errorf("topics of %s: broker answered %s: %w", namespace, resp.GetType(), pulsarwire.ErrCorrupt)
	}
	return r.GetTopics(), nil
}

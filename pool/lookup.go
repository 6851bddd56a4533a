package pool

import (
	"context"
	"fmt"

	"github.com/streamrun/streamrun/internal/connpool"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// Broker is where a lookup found a topic.
type Broker struct {
	// URL is the owner's service URL, pulsar://host:port or
	// pulsar+ssl://host:port.
	URL string
	// Proxy is the service URL host (host:port) to connect through, when
	// the lookup said proxy_through_service_url; "" to connect directly.
	Proxy string
}

// String is the URL, with " via <proxy>" when proxied.
func (b Broker) String() string { return connpool.Broker(b).String() }

// Lookup asks the service URL which broker owns topic, following
// redirects (carrying `authoritative`) up to 20 times, as Apache Pulsar's
// clients do. It makes one attempt; Producer and Publish retry it.
func (c *Client) Lookup(ctx context.Context, topic string) (Broker, error) {
	b, err := c.conns().Lookup(ctx, topic)
	return Broker(b), err
}

// PartitionedTopicMetadata asks for topic's number of partitions; 0 means
// the topic is not partitioned. One attempt; wrap it in RetryWith.
func (c *Client) PartitionedTopicMetadata(ctx context.Context, topic string) (int, error) {
	return c.conns().PartitionedTopicMetadata(ctx, topic)
}

// TopicMode selects the topics TopicsOfNamespace lists.
type TopicMode int

// Topic modes.
const (
	PersistentTopics TopicMode = iota
	NonPersistentTopics
	AllTopics
)

// wire is m as the protocol names it.
func (m TopicMode) wire() (pb.CommandGetTopicsOfNamespace_Mode, error) {
	switch m {
	case PersistentTopics:
		return pb.CommandGetTopicsOfNamespace_PERSISTENT, nil
	case NonPersistentTopics:
		return pb.CommandGetTopicsOfNamespace_NON_PERSISTENT, nil
	case AllTopics:
		return pb.CommandGetTopicsOfNamespace_ALL, nil
	}
	return 0, fmt.Errorf("topic mode %d is none of PersistentTopics, NonPersistentTopics, AllTopics", int(m))
}

// TopicsOfNamespace lists the topics of namespace ("tenant/ns") by their
// full names, partitions one by one (persistent://t/ns/x-partition-0,
// ...). One attempt; wrap it in RetryWith.
func (c *Client) TopicsOfNamespace(ctx context.Context, namespace string, mode TopicMode) ([]string, error) {
	wm, err := mode.wire()
	if err != nil {
		return nil, fmt.Errorf("topics of %s: %w", namespace, err)
	}
	return c.conns().TopicsOfNamespace(ctx, namespace, wm)
}

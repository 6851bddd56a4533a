package broker

import (
	"slices"
	"strings"
	"time"

	"github.com/streamrun/streamrun/pulsarwire"
)

// Introspection for tests and the admin API: what the broker sees.

// ConnInfo describes a live client connection.
type ConnInfo struct {
	ID        uint64
	Peer      string // the client's address
	Since     time.Time
	TLS       bool
	Client    string // client_version from CONNECT
	Producers int
	Consumers int
}

// AcceptedConnections counts the connections broker i has accepted since
// Start (restarts included).
func (c *Cluster) AcceptedConnections(i int) int64 { return c.broker(i).accepted.Load() }

// Connections lists broker i's live connections, oldest first.
func (c *Cluster) Connections(i int) []ConnInfo {
	var out []ConnInfo
	for _, cn := range c.broker(i).liveConns() {
		cn.mu.Lock()
		ci := ConnInfo{ID: cn.id, Peer: cn.peer, Since: cn.since, TLS: cn.isTLS, Client: cn.client, Producers: len(cn.producers), Consumers: len(cn.consumers)}
		cn.mu.Unlock()
		out = append(out, ci)
	}
	slices.SortFunc(out, func(a, b ConnInfo) int { return int(a.ID) - int(b.ID) })
	return out
}

// ConsumerInfo describes a consumer as the broker tracks it.
type ConsumerInfo struct {
	Topic        string
	Subscription string
	Type         string // Exclusive, Shared, Failover, Key_Shared
	Name         string
	ID           uint64 // consumer id on its connection
	ConnID       uint64
	Peer         string
	Permits      int64 // permits left (negative: a batch overshot them)
	Unacked      int64 // messages dispatched and not acknowledged
	Dispatched   int64 // messages dispatched in all
	Active       bool  // Exclusive/Failover: the one receiving
}

// ProducerInfo describes a producer.
type ProducerInfo struct {
	Topic    string
	Name     string
	ID       uint64
	ConnID   uint64
	Peer     string
	Messages int64
	Bytes    int64
}

func fullName(topic string) string {
	if t, err := pulsarwire.ParseTopic(topic); err == nil {
		return t.String()
	}
	return topic
}

func (c *Cluster) loaded(topic string) *topic {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.topics[fullName(topic)]
}

// Consumers lists the consumers of a subscription ("" for all of the
// topic's subscriptions).
func (c *Cluster) Consumers(topic, subscription string) []ConsumerInfo {
	t := c.loaded(topic)
	if t == nil {
		return nil
	}
	var out []ConsumerInfo
	for _, s := range t.subscriptions() {
		if subscription != "" && s.name != subscription {
			continue
		}
		out = append(out, s.consumerInfos()...)
	}
	return out
}

func (s *subscription) consumerInfos() []ConsumerInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ConsumerInfo, 0, len(s.consumers))
	for _, x := range s.consumers {
		out = append(out, ConsumerInfo{
			Topic: s.t.name, Subscription: s.name, Type: s.typ.String(), Name: x.name, ID: x.id,
			ConnID: x.conn.id, Peer: x.conn.peer, Permits: x.permits, Unacked: x.unacked.Load(),
			Dispatched: x.msgsOut.Load(), Active: x == s.active,
		})
	}
	return out
}

// Producers lists a topic's producers.
func (c *Cluster) Producers(topic string) []ProducerInfo {
	t := c.loaded(topic)
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]ProducerInfo, 0, len(t.producers))
	for p := range t.producers {
		out = append(out, ProducerInfo{Topic: t.name, Name: p.name, ID: p.id, ConnID: p.conn.id, Peer: p.conn.peer, Messages: p.msgs.Load(), Bytes: p.bytes.Load()})
	}
	slices.SortFunc(out, func(a, b ProducerInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Subscriptions lists a topic's subscriptions, sorted.
func (c *Cluster) Subscriptions(topic string) []string {
	t := c.loaded(topic)
	if t == nil {
		t2, err := c.topicByName(topic)
		if err != nil {
			return nil
		}
		t = t2
	}
	var out []string
	for _, s := range t.subscriptions() {
		out = append(out, s.name)
	}
	slices.Sort(out)
	return out
}

// Backlog is how many entries of a topic a subscription has not
// acknowledged (an entry may be a batch of messages), -1 when there is no
// such subscription.
func (c *Cluster) Backlog(topic, subscription string) int64 {
	t, err := c.topicByName(topic)
	if err != nil {
		return -1
	}
	t.mu.Lock()
	s := t.subs[subscription]
	t.mu.Unlock()
	if s == nil {
		return -1
	}
	return s.backlog()
}

// topicByName loads an existing topic without creating it.
func (c *Cluster) topicByName(topic string) (*topic, error) {
	t, err := pulsarwire.ParseTopic(topic)
	if err != nil {
		return nil, err
	}
	return c.topicFor(t, false)
}

// Rates are averages over a window of rateWindow (Apache Pulsar's are
// over its stats interval, 60 s by default); a window shorter than
// minRateWindow gives the last full window's rate instead.
const (
	rateWindow    = 5 * time.Second
	minRateWindow = time.Second
)

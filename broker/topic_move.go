package broker

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/streamrun/streamrun/pulsarwire"
)

// topicMoves holds the owners given to topics by MoveTopic, which win over
// the name's hash. They live as long as the process: a restarted broker
// process owns by hash again, as a Pulsar cluster reassigns bundles.
type topicMoves struct {
	mu sync.RWMutex
	to map[string]int // full topic name → broker index
}

func (m *topicMoves) owner(name string) (int, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	i, ok := m.to[name]
	return i, ok
}

func (m *topicMoves) set(name string, i int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.to == nil {
		m.to = make(map[string]int)
	}
	m.to[name] = i
}

// MoveTopic makes broker to the owner of a topic (each partition of a
// partitioned one) and unloads it from its current owner: its producers
// and consumers are closed, look it up again and find the new owner, as
// after Apache Pulsar's unload with a destination broker. Short names are
// accepted.
func (c *Cluster) MoveTopic(topic string, to int) error {
	t, err := pulsarwire.ParseTopic(topic)
	if err != nil {
		return fmt.Errorf("broker: move %q: %w", topic, err)
	}
	if to < 0 || to >= c.Brokers() {
		return fmt.Errorf("broker: move %s: no broker %d (there are %d)", t, to, c.Brokers())
	}
	for _, p := range c.partitionsOf(t) {
		c.moves.set(p.String(), to)
		c.unloadTopic(p.String())
	}
	return nil
}

// brokerIndex reads a broker named by its index or by its address as
// GET /admin/v2/brokers/{cluster} lists it ("127.0.0.1:6651"); -1 when it
// names none.
func (c *Cluster) brokerIndex(s string) int {
	if i, err := strconv.Atoi(s); err == nil && i >= 0 && i < c.Brokers() {
		return i
	}
	for i, u := range c.BrokerURLs() {
		if strings.TrimPrefix(u, "pulsar://") == s {
			return i
		}
	}
	return -1
}

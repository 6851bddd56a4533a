package pool

import "sync"

// Stats are a client's gauges and counts, for metrics.
type Stats struct {
	// Connections open to brokers.
	Connections int
	// Reconnects: connections dialed to a broker address the client had
	// been connected to before (after a connection was lost or closed).
	Reconnects int64
	// PendingMessages published and not yet acknowledged by the broker,
	// over every producer.
	PendingMessages int64
	// PendingBytes of those messages' payloads, as Options.MemoryLimit
	// counts them.
	PendingBytes int64
}

// connStats counts the dials by broker address.
type connStats struct {
	mu         sync.Mutex
	seen       map[connKey]struct{}
	reconnects int64
}

// dialed counts a connection dialed to key.
func (s *connStats) dialed(key connKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[connKey]struct{}{}
	}
	if _, ok := s.seen[key]; ok {
		s.reconnects++
		return
	}
	s.seen[key] = struct{}{}
}

// Stats reports the client's connections and what its producers have
// pending now.
func (c *Client) Stats() Stats {
	st := Stats{Connections: len(c.BrokerConns()), PendingBytes: c.memory.used.Load()}
	c.connStats.mu.Lock()
	st.Reconnects = c.connStats.reconnects
	c.connStats.mu.Unlock()
	for _, p := range c.allProducers() {
		st.PendingMessages += p.pending.used.Load()
	}
	return st
}

package pool

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

// Stats reports the client's connections and what its producers have
// pending now.
func (c *Client) Stats() Stats {
	s, conns := c.own(), c.conns()
	st := Stats{Connections: len(conns.BrokerConns()), Reconnects: conns.Reconnects(), PendingBytes: s.memory.used.Load()}
	for _, p := range s.allProducers() {
		st.PendingMessages += p.pending.used.Load()
	}
	return st
}

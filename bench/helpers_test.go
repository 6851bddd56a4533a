package bench

import (
	"github.com/apache/pulsar-client-go/pulsar"
	pulsarlog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/prometheus/client_golang/prometheus"
)

// officialClient is pulsar-client-go as every benchmark sets it up: no
// log noise in the figures, and a registry of its own so that a second
// client's metrics do not collide with the first's.
func officialClient(url string) (pulsar.Client, error) {
	return pulsar.NewClient(pulsar.ClientOptions{
		URL:               url,
		Logger:            pulsarlog.DefaultNopLogger(),
		MetricsRegisterer: prometheus.NewRegistry(),
	})
}

// letters is a payload of size bytes, a-z repeated: the same bytes for
// every client, and not all zeros.
func letters(size int) []byte {
	p := make([]byte, size)
	for i := range p {
		p[i] = byte('a' + i%26)
	}
	return p
}

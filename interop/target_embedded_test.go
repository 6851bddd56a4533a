package interop

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
)

// cluster is the in-process embedded broker when that is the target, for
// tests that inject faults; nil for every other target.
var cluster *broker.Cluster

// startEmbedded starts streamrun's broker in this process, in memory, on
// free loopback ports.
func startEmbedded(ctx context.Context, brokers int, log io.Writer) (*target, func(), error) {
	c, err := brokertest.StartMain(ctx, log, slog.LevelDebug, func(o *broker.Options) {
		o.Brokers = brokers
		// Apache Pulsar checks every minute; the compaction threshold test waits less here.
		o.CompactionCheck = time.Second
	})
	if err != nil {
		return nil, nil, err
	}
	cluster = c
	t := &target{name: "embedded", serviceURL: c.ServiceURL(), adminURL: c.AdminURL()}
	return t, func() { c.Close() }, nil
}

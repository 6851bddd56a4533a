package main

import (
	"context"
	"fmt"
	"time"

	"github.com/streamrun/streamrun/internal/benchrun"
)

// produce measures publishing: receipts per second, and the latency from
// each send call to its receipt.
func (b *bench) produce(ctx context.Context) (*benchrun.Result, error) {
	m := benchrun.NewMeter()
	pub, err := b.newPublisher(ctx, b.f.topicNames(), m)
	if err != nil {
		return nil, err
	}
	m.Restart()
	m.StartProgress(ctx, b.cmd.stderr, b.f.progress)
	sent, err := pub.run(ctx, func(at time.Time) {
		now := time.Now()
		m.Received(b.f.size, now.Sub(at), benchrun.LatencyFromSend)
		m.MarkEnd(now)
	})
	m.StopProgress()
	res := m.Result("produce", b.cond)
	if err != nil {
		return res, err
	}
	return res, b.sendErrors(m, sent)
}

// sendErrors is an error when a send failed.
func (b *bench) sendErrors(m *benchrun.Meter, sent int64) error {
	if n, first := m.FailedCount(); n > 0 {
		return fmt.Errorf("%d of %d sends to %s failed; the first: %w", n, sent, b.f.topic, first)
	}
	return nil
}

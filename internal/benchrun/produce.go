package benchrun

import (
	"context"
	"time"
)

// Produce measures publishing: receipts per second, and the latency from
// each send call to its receipt.
func (b *Bench) Produce(ctx context.Context) (*Result, error) {
	m := NewMeter()
	b.writes = true
	pub, err := b.newPublisher(ctx, b.o.topicNames(), m)
	if err != nil {
		return nil, err
	}
	m.Restart()
	m.StartProgress(ctx, b.o.Progress, b.o.ProgressEvery)
	sent, err := pub.run(ctx, func(at time.Time) {
		now := time.Now()
		m.Received(b.o.Size, now.Sub(at), LatencyFromSend)
		m.MarkEnd(now)
	})
	m.StopProgress()
	res := m.Result("produce", b.cond)
	if err != nil {
		return res, err
	}
	return res, b.sendErrors(m, sent)
}

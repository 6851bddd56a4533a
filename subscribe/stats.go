package subscribe

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/pulsarwire"
	pb "github.com/streamrun/streamrun/pulsarwire/pb"
)

// Permits are the flow permits granted to the brokers and not used yet,
// over every topic or partition consumed: how many more messages the
// brokers may push before the consumer grants more.
func (c *Consumer) Permits() int64 {
	var n int64
	for _, pc := range c.partList() {
		n += max(pc.permits.Load(), 0)
	}
	return n
}

// Backlog asks the brokers for the subscription's backlog on every topic
// or partition consumed, and sums it: entries not acknowledged yet, as
// Pulsar counts them (a batch of messages is one entry).
// Parts that are disconnected now are left out, and so are those whose
// broker does not answer: the error says which.
func (c *Consumer) Backlog(ctx context.Context) (int64, error) {
	var (
		n    int64
		errs []error
	)
	for _, pc := range c.partList() {
		s := pc.session()
		if s == nil {
			continue
		}
		resp, err := s.conn.Request(ctx, pulsarwire.Wrap(&pb.CommandConsumerStats{ConsumerId: proto.Uint64(pc.id)}))
		if err != nil {
			errs = append(errs, fmt.Errorf("consumer stats of %s: %w", pc.topic, err))
			continue
		}
		n += int64(resp.GetConsumerStatsResponse().GetMsgBacklog())
	}
	return n, errors.Join(errs...)
}
